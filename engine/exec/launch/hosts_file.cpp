#include "embedscope/engine/exec/launch/hosts_file.h"

#include <arpa/inet.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "embedscope/engine/workload/spec_error.h"

namespace embedscope::engine::launch {

namespace {
bool loopback(const std::string& a) {
  if (a == "localhost" || a == "::1") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, a.c_str(), &v4) != 1) return false;
  return (ntohl(v4.s_addr) >> 24) == 127;
}
}  // namespace

std::vector<HostSlots> parse_hosts(std::string_view text, const std::string& name) {
  std::vector<HostSlots> hosts;
  std::set<std::string> seen;
  std::istringstream in{std::string(text)};
  std::string line;
  for (int no = 1; std::getline(in, line); ++no) {
    if (const auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string word;
    if (!(words >> word)) continue;
    HostSlots h;
    h.address = word;
    h.line = no;
    if (!loopback(h.address))
      throw SpecError(fmt::format("{}:{}: {} is not a loopback address (127.0.0.0/8, ::1, localhost): launch runs every "
                                  "rank on this machine; for several machines use mpirun or srun",
                                  name, no, h.address));
    while (words >> word) {
      if (word.rfind("slots=", 0) != 0)
        throw SpecError(fmt::format("{}:{}: '{}': expected slots=N after the address", name, no, word));
      const std::string v = word.substr(6);
      size_t used = 0;
      int slots = 0;
      try {
        slots = std::stoi(v, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != v.size() || v.empty() || slots < 1 || slots > 1024)
        throw SpecError(fmt::format("{}:{}: slots={}: give a whole number from 1 to 1024", name, no, v));
      h.slots = slots;
    }
    if (!seen.insert(h.address).second)
      throw SpecError(fmt::format("{}:{}: {} is given twice; give each host once, with its slots", name, no, h.address));
    hosts.push_back(std::move(h));
  }
  if (hosts.empty()) throw SpecError(fmt::format("{}: no host in it (one per line: ADDRESS [slots=N])", name));
  return hosts;
}

std::vector<HostSlots> read_hosts_file(const std::string& path) {
  // said as a workload file's are (workload/reader.cpp): the folder, or why it cannot be opened
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw SpecError(fmt::format("{}: is a directory, not a hosts file", path));
  std::ifstream f(path);
  if (!f) throw SpecError(fmt::format("{}: cannot open the hosts file: {}", path, std::strerror(errno)));
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_hosts(ss.str(), path);
}

HostPlacement place_ranks(const std::vector<HostSlots>& hosts, int n, const std::string& name) {
  HostPlacement p;
  int total = 0;
  for (const auto& h : hosts) total += h.slots;
  if (total < n)
    throw SpecError(fmt::format("{}: {} slot{} on {} host{} for {} ranks; give more slots (ADDRESS slots=N)", name, total,
                                total == 1 ? "" : "s", hosts.size(), hosts.size() == 1 ? "" : "s", n));
  p.local_world_size = hosts.front().slots;
  for (const auto& h : hosts) {
    if (static_cast<int>(p.host_of_rank.size()) == n) break;
    if (h.slots != p.local_world_size)
      throw SpecError(fmt::format("{}:{}: {} has {} slots, {} has {}: the hosts a run uses are its nodes, blocks of one "
                                  "size (table_row_wise's local world size); give every host the same slots",
                                  name, h.line, h.address, h.slots, hosts.front().address, p.local_world_size));
    const int left = n - static_cast<int>(p.host_of_rank.size());
    if (left < h.slots)
      throw SpecError(fmt::format("{}:{}: {} ranks leave {} with {} of its {} slots: the nodes are blocks of one size; "
                                  "launch a multiple of {} ranks", name, h.line, n, h.address, left, h.slots, h.slots));
    for (int i = 0; i < h.slots; ++i) p.host_of_rank.push_back(h.address);
    ++p.hosts_used;
  }
  return p;
}

}  // namespace embedscope::engine::launch

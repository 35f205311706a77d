#include "nccl_setup.h"

#include <cstdlib>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "embedscope/engine/workload/spec_error.h"
#include "handshake.h"

namespace embedscope::engine::launch {

namespace {

constexpr const char* kIdErrorKey = "nccl_id_error";

// A launcher's local rank / local world size variables, in the order they are read.
struct LocalNames {
  const char* rank;
  const char* size;
};
constexpr LocalNames kLocalNames[] = {{"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
                                      {"SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
                                      {"LOCAL_RANK", "LOCAL_WORLD_SIZE"}};

// The value of `name` in env as a whole number >= min; -1 when unset or empty.
int env_number(const std::map<std::string, std::string>& env, const char* name, int min) {
  const auto it = env.find(name);
  if (it == env.end() || it->second.empty()) return -1;
  size_t used = 0;
  long long n = -1;
  try {
    n = std::stoll(it->second, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != it->second.size() || n < min || n > 1'000'000)
    throw SpecError(fmt::format("{}={}: give a whole number >= {} (the cuda backend picks this process's GPU from it)",
                                name, it->second, min));
  return static_cast<int>(n);
}

std::string to_hex(const std::string& bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

// The bytes of `hex` (2 x kNcclIdBytes lower- or upper-case digits); "" when it is not that.
std::string from_hex(const std::string& hex) {
  if (hex.size() != 2 * kNcclIdBytes) return "";
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out(kNcclIdBytes, '\0');
  for (size_t i = 0; i < kNcclIdBytes; ++i) {
    const int hi = digit(hex[2 * i]), lo = digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return "";
    out[i] = static_cast<char>(hi * 16 + lo);
  }
  return out;
}

}  // namespace

GpuChoice choose_process_gpu(const GpuChoiceInput& in) {
  const int v = in.visible_gpus;
  if (v < 1)
    throw SpecError(fmt::format("rank {}: the cuda backend needs a GPU, but this process sees none (cudaGetDeviceCount "
                                "reported 0{})",
                                in.rank, in.listed_visible == 0 ? "; CUDA_VISIBLE_DEVICES is empty" : ""));
  const std::string gpus = fmt::format("{} GPU{}", v, v == 1 ? "" : "s");
  if (in.listed_visible == 1 && v == 1)  // the launcher bound one GPU to this process
    return {0, fmt::format("the one GPU CUDA_VISIBLE_DEVICES gives this process (rank {})", in.rank)};
  if (in.local_rank < 0)
    return {in.rank % v, fmt::format("rank {} modulo the {} visible (no launcher said the local rank)", in.rank, gpus)};
  const std::string why =
      "NCCL cannot put one GPU in a communicator twice; start at most as many ranks on a node as it has GPUs (or "
      "bind one GPU to each process with CUDA_VISIBLE_DEVICES), or run the ranks as threads of one process "
      "(embedscope run --backend cuda --devices N, devices.ranks_per_gpu)";
  if (in.local_world_size > v)
    throw SpecError(fmt::format("rank {}: {} local ranks ({}) on this node, but this process sees {}: {}", in.rank,
                                in.local_world_size, in.local_world_from.empty() ? "local world size" : in.local_world_from,
                                gpus, why));
  if (in.local_rank >= v)
    throw SpecError(fmt::format("rank {} is local rank {} ({}), but this process sees {}: {} or more local ranks on a "
                                "node of {}; {}",
                                in.rank, in.local_rank, in.local_rank_from.empty() ? "local rank" : in.local_rank_from,
                                gpus, in.local_rank + 1, gpus, why));
  return {in.local_rank % v, fmt::format("local rank {} ({}) of the {} visible", in.local_rank,
                                         in.local_rank_from.empty() ? "local rank" : in.local_rank_from, gpus)};
}

GpuChoiceInput gpu_choice_from_environment(const std::map<std::string, std::string>& env, int rank, int visible_gpus) {
  GpuChoiceInput in;
  in.rank = rank;
  in.visible_gpus = visible_gpus;
  for (const LocalNames& n : kLocalNames) {
    const int local = env_number(env, n.rank, 0);
    if (local < 0) continue;
    in.local_rank = local;
    in.local_rank_from = n.rank;
    if (const int size = env_number(env, n.size, 1); size > 0) {
      in.local_world_size = size;
      in.local_world_from = n.size;
    }
    break;
  }
  if (const auto it = env.find("CUDA_VISIBLE_DEVICES"); it != env.end()) {
    int entries = 0;
    size_t start = 0;
    const std::string& s = it->second;
    while (start <= s.size() && !s.empty()) {
      const size_t comma = s.find(',', start);
      const std::string item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (!item.empty()) ++entries;
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    in.listed_visible = entries;
  }
  return in;
}

std::map<std::string, std::string> gpu_choice_environment() {
  std::map<std::string, std::string> env;
  auto take = [&env](const char* name) {
    if (const char* v = std::getenv(name)) env[name] = v;
  };
  for (const LocalNames& n : kLocalNames) take(n.rank), take(n.size);
  take("CUDA_VISIBLE_DEVICES");
  return env;
}

void check_distinct_gpus(RunStore& store, int rank, int world, const std::string& host, const std::string& gpu,
                         const std::string& how, std::chrono::milliseconds timeout, const std::atomic<bool>* cancel) {
  const std::string where = fmt::format("rendezvous {} (run id {})", store.url(), store.run_id());
  store.set(fmt::format("gpu/{}", rank), nlohmann::json{{"host", host}, {"gpu", gpu}, {"how", how}}.dump(
                                             -1, ' ', false, nlohmann::json::error_handler_t::replace));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<nlohmann::json> of(static_cast<size_t>(world));
  std::vector<int> missing;
  for (int r = 0; r < world; ++r) missing.push_back(r);
  for (int round = 0;; ++round) {
    std::vector<int> still;
    for (int r : missing) {
      if (!store.has(fmt::format("gpu/{}", r))) {
        still.push_back(r);
        continue;
      }
      auto v = nlohmann::json::parse(store.get(fmt::format("gpu/{}", r)), nullptr, false);
      if (!v.is_object() || !v.contains("host") || !v.contains("gpu") || !v["host"].is_string() || !v["gpu"].is_string())
        throw std::runtime_error(fmt::format("{}: rank {}'s GPU key (gpu/{}) is not one this version writes", where, r, r));
      of[static_cast<size_t>(r)] = std::move(v);
    }
    missing = std::move(still);
    if (missing.empty()) break;
    if (cancel && cancel->load())
      throw RendezvousCancelled(fmt::format("{}: cancelled while the ranks said their GPUs (rank {})", where, rank));
    if (round % 5 == 0)
      for (int r : missing)
        if (const std::string k = fmt::format("dead/{}", r); store.has(k))
          throw std::runtime_error(fmt::format("{}: rank {} {} before it said its GPU (this is rank {})", where, r,
                                               store.get(k), rank));
    if (std::chrono::steady_clock::now() >= deadline)
      throw std::runtime_error(fmt::format("{}: rank(s) {} did not say their GPU within {} ms (this is rank {})", where,
                                           fmt::join(missing, ", "), timeout.count(), rank));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  for (int a = 0; a < world; ++a)
    for (int b = a + 1; b < world; ++b) {
      const auto &x = of[static_cast<size_t>(a)], &y = of[static_cast<size_t>(b)];
      if (x["host"] != y["host"] || x["gpu"] != y["gpu"]) continue;
      auto how_of = [](const nlohmann::json& j) { return j.contains("how") && j["how"].is_string() ? j["how"].get<std::string>() : "?"; };
      throw SpecError(fmt::format(
          "ranks {} and {} both run on GPU {} of host {} (rank {}: {}; rank {}: {}): NCCL cannot put one GPU in a "
          "communicator twice; give each process of a node its own GPU (its local rank, or a CUDA_VISIBLE_DEVICES of "
          "its own), or run the ranks as threads of one process (embedscope run --backend cuda --devices N)",
          a, b, x["gpu"].get<std::string>(), x["host"].get<std::string>(), a, how_of(x), b, how_of(y)));
    }
}

std::map<std::string, std::string> exchange_nccl_ids(RunStore& store, int rank, const std::vector<std::string>& groups,
                                                     const std::function<std::string()>& make_id,
                                                     std::chrono::milliseconds timeout,
                                                     const std::atomic<bool>* cancel) {
  std::map<std::string, std::string> ids;
  const std::string where = fmt::format("rendezvous {} (run id {})", store.url(), store.run_id());
  if (rank == 0) {
    for (const std::string& g : groups) {
      std::string id;
      try {
        id = make_id();
      } catch (const std::exception& e) {  // the others would wait for the id: tell them why it never comes
        try {
          store.set(kIdErrorKey, e.what());
        } catch (const std::exception&) {
        }
        throw;
      }
      if (id.size() != kNcclIdBytes)
        throw std::logic_error(fmt::format("exchange_nccl_ids: an NCCL unique id of {} bytes, not {}", id.size(),
                                           kNcclIdBytes));
      store.set("nccl_id/" + g, to_hex(id));
      ids[g] = std::move(id);
    }
    return ids;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<std::string> missing = groups;
  for (int round = 0;; ++round) {
    std::vector<std::string> still;
    for (const std::string& g : missing) {
      if (!store.has("nccl_id/" + g)) {
        still.push_back(g);
        continue;
      }
      const std::string value = store.get("nccl_id/" + g);
      std::string id = from_hex(value);
      if (id.empty())
        throw std::runtime_error(fmt::format("{}: the NCCL unique id of group {} (key nccl_id/{}) is not {} hex digits "
                                             "(this is rank {})",
                                             where, g, g, 2 * kNcclIdBytes, rank));
      ids[g] = std::move(id);
    }
    missing = std::move(still);
    if (missing.empty()) return ids;
    if (cancel && cancel->load())
      throw RendezvousCancelled(fmt::format("{}: cancelled while waiting for rank 0's NCCL unique id (rank {})", where, rank));
    if (round % 5 == 0) {
      if (store.has(kIdErrorKey))
        throw std::runtime_error(fmt::format("{}: rank 0 could not create the NCCL unique id: {} (this is rank {})",
                                             where, store.get(kIdErrorKey), rank));
      if (store.has("dead/0"))
        throw std::runtime_error(fmt::format("{}: rank 0 {} before it published the NCCL unique id (this is rank {})",
                                             where, store.get("dead/0"), rank));
    }
    if (std::chrono::steady_clock::now() >= deadline)
      throw std::runtime_error(fmt::format("{}: rank 0 did not publish the NCCL unique id of group(s) {} within {} ms "
                                           "(this is rank {})",
                                           where, fmt::join(missing, ", "), timeout.count(), rank));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace embedscope::engine::launch

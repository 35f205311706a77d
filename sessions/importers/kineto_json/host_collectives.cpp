#include "importers/kineto_json/host_collectives.h"

#include <algorithm>
#include <cctype>
#include <map>

namespace embedscope::sessions::importers::kineto {

std::string collective_op(const std::string& name) {
  std::string n;
  for (char c : name)
    if (c != '_') n += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (n.find("alltoall") != std::string::npos) return "all_to_all";
  if (n.find("allreduce") != std::string::npos) return "all_reduce";
  if (n.find("allgather") != std::string::npos) return "all_gather";
  if (n.find("reducescatter") != std::string::npos) return "reduce_scatter";
  if (n.find("broadcast") != std::string::npos) return "broadcast";
  return name.empty() ? "unknown" : name;
}

std::vector<HostCollective> host_collectives(const RankTrace& tr, const Interner& names) {
  std::vector<HostCollective> out;
  if (!tr.comm_params.empty()) return out;
  static const std::string kGloo = "gloo:";
  for (size_t i = 0; i < tr.events.size(); ++i) {
    const Event& e = tr.events[i];
    if (e.kind != EventKind::cpu || e.unfinished) continue;
    const std::string& nm = names.text(e.name);
    if (nm.size() > kGloo.size() && nm.compare(0, kGloo.size(), kGloo) == 0)
      out.push_back({i, collective_op(nm.substr(kGloo.size())), 0});
  }
  std::stable_sort(out.begin(), out.end(), [&](const HostCollective& a, const HostCollective& b) {
    return tr.events[a.event].ts < tr.events[b.event].ts;
  });
  std::map<std::string, uint64_t> next;  // per op (clock_align.h matches group, op and sequence)
  for (HostCollective& c : out) c.sequence = ++next[c.op];
  return out;
}

}  // namespace embedscope::sessions::importers::kineto

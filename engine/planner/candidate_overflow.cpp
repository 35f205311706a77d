// candidate_overflow (planner/candidate_overflow.h).
#include "planner/candidate_overflow.h"

#include <algorithm>

#include <fmt/format.h>

#include "embedscope/sessions/model/units.h"

namespace embedscope::engine::planner_detail {

using sessions::format_bytes;

CandidateOverflow candidate_overflow(const PlanStats& st, int64_t memory_bytes, int64_t host_memory_bytes,
                                     const NodeExcess& node, AllocatorKind allocator) {
  CandidateOverflow o;
  int host_rank = -1;
  const RankStats* binding = nullptr;
  for (const auto& r : st.ranks) {
    o.fullest = std::max(o.fullest, r.hbm_bytes);
    // the rank's need: its bytes where they exceed the device, else its allocator's reserve where
    // the replay runs out there (reserved_bytes is set only where the bytes fit)
    const int64_t need = std::max(r.hbm_bytes, r.reserved_bytes) - memory_bytes;
    if (need > o.device) o.device = need, binding = &r;
    if (r.ddr_bytes - host_memory_bytes > o.host)
      o.host = r.ddr_bytes - host_memory_bytes, host_rank = r.rank;
  }
  std::string device_words;
  if (node.bytes > o.device) {
    o.device = node.bytes;
    o.measure = "node bytes";
    o.rank = -1;
    device_words = "in bytes " + node.where;
  } else if (binding) {
    o.rank = binding->rank;
    if (binding->hbm_bytes > memory_bytes) {
      o.measure = "bytes";
      device_words = binding->hbm_bytes == o.fullest ? fmt::format("in bytes on its fullest rank (rank {})", binding->rank)
                                                     : fmt::format("in bytes on rank {}", binding->rank);
    } else {
      o.measure = "allocator reserve";
      device_words = fmt::format("in the {} allocator's reserve on rank {} (its bytes fit: {} of {})", to_string(allocator),
                                 binding->rank, format_bytes(binding->hbm_bytes), format_bytes(memory_bytes));
    }
  }
  o.over = o.device + o.host;
  const std::string host_words =
      o.host > 0 ? fmt::format("{} of host bytes over devices.host_memory_bytes on rank {}", format_bytes(o.host), host_rank)
                 : std::string();
  if (o.device > 0 && o.host > 0)
    o.text = fmt::format("{} over: {} {}, plus {}", format_bytes(o.over), format_bytes(o.device), device_words, host_words);
  else if (o.device > 0)
    o.text = fmt::format("{} over {}", format_bytes(o.over), device_words);
  else if (o.host > 0)
    o.text = fmt::format("{} over: {}", format_bytes(o.over), host_words);
  else
    o.text = fmt::format("{} over", format_bytes(o.over));
  return o;
}

}  // namespace embedscope::engine::planner_detail

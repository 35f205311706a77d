#include "importers/common/lane_checks.h"

#include <algorithm>
#include <tuple>

#include <fmt/format.h>

namespace embedscope::sessions::importers {

namespace {
bool op_less(const OpEvent& a, const OpEvent& b) {
  return std::tie(a.lane, a.start_ns, b.end_ns) < std::tie(b.lane, b.start_ns, a.end_ns);
}

/// std::sort(ops, op_less), in O(n) where each lane's ops already come in order (a trace lists
/// most of a thread's or stream's spans by start): the ops are bucketed by lane (stable), a
/// lane out of order is sorted on its own. When no two ops compare equal the order is the only
/// sorted one, which std::sort gives too; with ties (same lane, start and end) the result is
/// std::sort's own, over the original order, so that the ops' ids never depend on this shortcut.
void sort_ops(std::vector<OpEvent>& ops) {
  constexpr size_t kLanes = 256;  // Lane is 8 bits
  size_t start[kLanes + 1] = {};
  for (const OpEvent& o : ops) ++start[static_cast<size_t>(o.lane) + 1];
  for (size_t l = 0; l < kLanes; ++l) start[l + 1] += start[l];
  std::vector<OpEvent> sorted(ops.size());
  size_t next[kLanes];
  std::copy(start, start + kLanes, next);
  for (const OpEvent& o : ops) sorted[next[static_cast<size_t>(o.lane)]++] = o;
  for (size_t l = 0; l < kLanes; ++l) {
    const auto b = sorted.begin() + static_cast<std::ptrdiff_t>(start[l]), e = sorted.begin() + static_cast<std::ptrdiff_t>(start[l + 1]);
    if (!std::is_sorted(b, e, op_less)) std::sort(b, e, op_less);
  }
  for (size_t i = 1; i < sorted.size(); ++i)
    if (!op_less(sorted[i - 1], sorted[i])) {  // a tie: std::sort decides their order
      std::sort(ops.begin(), ops.end(), op_less);
      return;
    }
  ops.swap(sorted);
}
}  // namespace

void sort_and_check_overlaps(std::vector<OpEvent>& ops, ImportProblems& problems, const std::string& source) {
  sort_ops(ops);
  std::vector<int64_t> open;
  Lane cur{};
  int64_t partial = 0;
  const OpEvent* first = nullptr;
  for (const OpEvent& o : ops) {
    if (o.lane != cur) open.clear(), cur = o.lane;
    while (!open.empty() && open.back() <= o.start_ns) open.pop_back();
    if (!open.empty() && o.end_ns > open.back()) {
      if (!partial) first = &o;
      ++partial;
    }
    open.push_back(o.end_ns);
  }
  if (partial)
    // info: nothing is lost or changed (busy time is the union), and real captures hold them (a
    // sync record across a memcpy in every Nsight capture, Kineto kernels a few ns apart): an
    // error on each real file alarmed users for nothing (tester37 #20)
    problems.add("overlapping_spans", Severity::info, {source, -1},
                 fmt::format("spans on one lane that overlap without nesting, kept (busy time counts their union); "
                             "first: rank {} lane {} '{}' at {} ns",
                             first->rank, static_cast<int>(first->lane), first->name, first->start_ns),
                 partial);
}

void count_kernel_before_launch(ImportProblems& problems, const std::string& source, int32_t rank,
                                const std::string& name, int64_t kernel_start, int64_t launch_start) {
  if (kernel_start >= launch_start) return;
  problems.add_with("kernel_before_launch", Severity::error, {source, -1}, [&] {
    return fmt::format("rank {}: GPU op '{}' starts {} ns before the host call that launched it (the trace's GPU and "
                       "host clocks disagree); kept as recorded", rank, name, launch_start - kernel_start);
  });
}

}  // namespace embedscope::sessions::importers

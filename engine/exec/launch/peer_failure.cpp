// peer_failure_text (peer_failure.h).
#include "peer_failure.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace embedscope::engine::launch {

std::string peer_failure_text(const PeerFailureFacts& f) {
  std::string out;
  std::vector<int> first, after;  // missing ranks whose own collective failed before / after this one
  for (const auto& [r, why] : f.failed) {
    if (why != "1") {
      out += fmt::format(" (rank {} failed: {})", r, why);
      continue;
    }
    if (std::find(f.missing.begin(), f.missing.end(), r) == f.missing.end()) continue;  // it arrived
    (f.failed_before.count(r) ? first : after).push_back(r);
  }
  for (const auto& [r, how] : f.died) out += fmt::format(" (rank {} {})", r, how);
  if (!first.empty())
    out += fmt::format(" (rank(s) {} did not come: a collective of their own failed first)", fmt::join(first, ", "));
  if (!after.empty())
    out += f.timed_out
               ? fmt::format(" (rank(s) {} did not arrive within the {} ms collective timeout: nothing of their own had "
                             "failed by then (a stopped, stalled or slow process); their collective failed after this one)",
                             fmt::join(after, ", "), f.timeout_ms)
               : fmt::format(" (rank(s) {} had not arrived when this collective failed: nothing of their own had failed "
                             "by then; their collective failed after this one)",
                             fmt::join(after, ", "));
  if (!f.silent.empty())
    out += fmt::format(" (rank(s) {} reported no failure within {} ms: the process did not answer: it exited, was "
                       "killed, or is stopped or stalled)",
                       fmt::join(f.silent, ", "), f.wait_ms);
  return out;
}

}  // namespace embedscope::engine::launch

#include "embedscope/sessions/analysis/did_not_end_ops.h"

#include <algorithm>
#include <tuple>

#include "embedscope/sessions/model/did_not_end.h"
#include "embedscope/sessions/store/op_stream.h"

namespace embedscope::sessions {

std::vector<DidNotEndOp> did_not_end_ops(const SessionReader& session) {
  std::vector<DidNotEndOp> out;
  const auto& strings = session.strings();
  std::vector<bool> marked(strings.size(), false);
  bool any = false;
  for (size_t i = 0; i < strings.size(); ++i)
    if (is_did_not_end_name(strings[i])) marked[i] = true, any = true;
  if (!any) return out;
  for_each_lane_ops(session, [&](std::vector<OpRecord>& lane) {
    for (const auto& o : lane)
      if (o.start_ns == o.end_ns && o.name_id >= 0 && static_cast<size_t>(o.name_id) < marked.size() &&
          marked[static_cast<size_t>(o.name_id)])
        out.push_back({o.rank, o.lane, o.start_ns, o.step, std::string(without_did_not_end(strings[static_cast<size_t>(o.name_id)]))});
  });
  std::sort(out.begin(), out.end(), [](const DidNotEndOp& a, const DidNotEndOp& b) {
    return std::tie(a.rank, a.lane, a.start_ns) < std::tie(b.rank, b.lane, b.start_ns);
  });
  return out;
}

}  // namespace embedscope::sessions

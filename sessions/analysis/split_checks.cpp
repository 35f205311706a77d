#include "embedscope/sessions/analysis/split_checks.h"

#include <algorithm>
#include <string_view>

namespace embedscope::sessions {

std::string split_check_of(const std::string& record_name) {
  constexpr std::string_view kSuffix = "/split_check";
  if (record_name.size() <= kSuffix.size() ||
      record_name.compare(record_name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0)
    return {};
  return record_name.substr(0, record_name.size() - kSuffix.size());
}

void move_split_checks(const std::vector<OpRecord>& ops, const std::vector<CollectiveRecord>& records,
                       const std::function<const std::string&(int32_t)>& name_of, std::map<int32_t, CollectiveTimes>& out) {
  std::map<int32_t, std::vector<const OpRecord*>> comm_ops;  // rank -> its comm ops with a row
  bool any_check = false;
  for (const auto& c : records) any_check = any_check || !split_check_of(c.name).empty();
  if (!any_check) return;
  for (const auto& o : ops)
    if (o.category == OpCategory::comm && out.count(o.name_id)) comm_ops[o.rank].push_back(&o);
  for (const auto& c : records) {
    const std::string checked = split_check_of(c.name);
    if (checked.empty()) continue;
    const auto rank_ops = comm_ops.find(c.rank);
    if (rank_ops == comm_ops.end()) continue;
    for (const OpRecord* o : rank_ops->second) {
      if (o->start_ns > c.start_ns || c.end_ns > o->end_ns) continue;
      const std::string& op = name_of(o->name_id);
      const bool holds = checked == op || (checked.size() > op.size() && checked.compare(0, op.size(), op) == 0 &&
                                           checked[op.size()] == '/');
      if (!holds) continue;
      CollectiveTimes& t = out.at(o->name_id);
      ++t.check_count;
      t.check_bytes_sent += c.bytes_sent;
      t.check_bytes_received += c.bytes_received;
      t.bytes_sent = std::max<int64_t>(0, t.bytes_sent - c.bytes_sent);
      t.bytes_received = std::max<int64_t>(0, t.bytes_received - c.bytes_received);
      break;
    }
  }
}

}  // namespace embedscope::sessions

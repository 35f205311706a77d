// What `embedscope rebalance` says a proposal gains (rebalance_gain.h).
#include "rebalance_gain.h"

#include <algorithm>

#include <fmt/format.h>

#include "embedscope/engine/rebalance/shard_work.h"
#include "embedscope/engine/workload/spec_error.h"
#include "embedscope/sessions/model/hot_row_replica.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::cli {

namespace es = embedscope::engine;
namespace rb = embedscope::engine::rebalance;
namespace ss = embedscope::sessions;

RebalanceWork rebalance_work(const ss::SessionReader& session, const std::string& file, const es::ShardingPlan& plan,
                             const rb::Proposal& p, const std::vector<ss::LoadCounter>& counters, int64_t first,
                             int64_t last, const std::vector<std::vector<rb::RowCount>>& row_counts) {
  const auto W = static_cast<size_t>(std::max(plan.world_size, 0));
  RebalanceWork w;
  w.lookup_ns.assign(W, 0);
  w.update_ns.assign(W, 0);
  std::vector<std::vector<int64_t>> ids(plan.tables.size()), lookup(plan.tables.size());
  for (size_t t = 0; t < plan.tables.size(); ++t) {
    ids[t].assign(plan.tables[t].shards.size(), 0);
    lookup[t].assign(plan.tables[t].shards.size(), 0);
  }
  std::vector<int64_t> replica_ns(W, 0);  // a hot-row replica's lookups: on every rank, no move changes them
  for (const ss::LoadCounter& c : counters) {
    if (c.step < first || c.step > last) continue;
    if (c.rank < 0 || static_cast<size_t>(c.rank) >= W)
      throw es::SpecError(fmt::format("{}: load_counters: rank {} of a plan of {} ranks", file, c.rank, W));
    w.lookup_ns[static_cast<size_t>(c.rank)] += c.lookup_ns;
    if (c.shard == ss::kHotRowReplicaShard) {
      replica_ns[static_cast<size_t>(c.rank)] += c.lookup_ns;
      continue;
    }
    if (c.table < 0 || static_cast<size_t>(c.table) >= ids.size() || c.shard < 0 ||
        static_cast<size_t>(c.shard) >= ids[static_cast<size_t>(c.table)].size())
      throw es::SpecError(fmt::format("{}: load_counters: table {} shard {} is not in the session's plan", file, c.table, c.shard));
    ids[static_cast<size_t>(c.table)][static_cast<size_t>(c.shard)] += c.ids;
    lookup[static_cast<size_t>(c.table)][static_cast<size_t>(c.shard)] += c.lookup_ns;
  }
  // the update: one backward_fused_optimizer op a rank a step updates every shard the rank holds
  const std::vector<std::string>& names = session.strings();
  const auto it = std::find(names.begin(), names.end(), std::string("backward_fused_optimizer"));
  if (it != names.end()) {
    const auto id = static_cast<int32_t>(it - names.begin());
    for (const ss::OpRecord& op : session.all_ops())
      if (op.name_id == id && op.step >= first && op.step <= last && op.rank >= 0 && static_cast<size_t>(op.rank) < W &&
          op.end_ns > op.start_ns) {
        w.update_ns[static_cast<size_t>(op.rank)] += op.end_ns - op.start_ns;
        w.update_recorded = true;
      }
  }
  const auto work = rb::shard_work_ns(plan, ids, lookup, w.update_ns);
  w.before = rb::work_per_rank(plan, plan, work, row_counts);
  w.after = rb::work_per_rank(plan, p.plan, work, row_counts);
  for (size_t r = 0; r < W; ++r) {
    w.before[r] += replica_ns[r];
    w.after[r] += replica_ns[r];
  }
  if (W == 0) return w;
  w.slowest = static_cast<int>(std::max_element(w.before.begin(), w.before.end()) - w.before.begin());
  const int64_t steps = std::max<int64_t>(1, last - first + 1);
  w.saved_ns_per_step = static_cast<double>(*std::max_element(w.before.begin(), w.before.end()) -
                                            *std::max_element(w.after.begin(), w.after.end())) /
                        static_cast<double>(steps);
  return w;
}

std::string why_not_text(const es::WorkloadSpec& spec, const es::ShardingPlan& plan, const rb::ObservedLoad& load,
                         const rb::Proposal& p, const std::function<std::optional<double>()>& split_reach,
                         const std::string& unit) {
  int64_t total = 0;
  for (int64_t v : p.load_before) total += v;
  const int64_t W = plan.world_size;
  if (W < 2 || total <= 0) return "";
  int hot = -1;
  int64_t hot_load = 0;
  for (size_t t = 0; t < plan.tables.size(); ++t) {
    const es::TablePlan& tp = plan.tables[t];
    if (tp.type != es::ShardingType::table_wise || tp.shards.size() != 1) continue;
    const es::TablePlan& next = p.plan.tables[t];
    if (next.type != es::ShardingType::table_wise || next.shards.size() != 1) continue;  // the proposal splits it
    const int64_t v = load.ids[t][0];
    if (v * W > total && v > hot_load) hot = static_cast<int>(t), hot_load = v;
  }
  if (hot < 0) return "";
  const std::string& name = spec.tables[static_cast<size_t>(hot)].name;
  const bool worth = p.worth_it();
  std::string text = fmt::format("table \"{}\" alone has {} of the load, more than the mean rank load {}: ", name,
                                 hot_load, total / W);
  text += worth ? fmt::format("no whole-table move brings the maximum below it ({} max/mean {:.2f} at best here)", unit,
                              p.imbalance_after)
                : fmt::format("moved whole it only moves the straggler (rank {} now)",
                              plan.tables[static_cast<size_t>(hot)].shards[0].rank);
  const bool rw = spec.rebalance.row_wise_hot_tables, cw = spec.rebalance.column_wise_hot_tables;
  bool refused = false;
  for (const rb::RefusedMove& r : p.refused) refused = refused || (r.table == hot && r.to < 0);
  if (refused) return text + "; splitting it was refused (above)";
  if (rw && cw) return text + "; neither splitting it by rows nor by columns lowers the maximum";
  text += "; splitting it can: ";
  if (!rw && !cw) text += "--split-hot-tables row_wise|column_wise|both here, or \"rebalance\": {\"row_wise_hot_tables\": true} "
                          "or {\"column_wise_hot_tables\": true} in the workload for the live policy";
  else text += rw ? "--split-hot-tables column_wise (column blocks)" : "--split-hot-tables row_wise (row ranges)";
  text += fmt::format("; or a row_wise sharding override for \"{}\" with \"hot_rows\" (its hot rows replicated)", name);
  if (const std::optional<double> reach = split_reach ? split_reach() : std::nullopt;
      reach && *reach < p.imbalance_after)
    text += fmt::format(". With --split-hot-tables {} the proposal predicts {} max/mean {:.2f} instead of {:.2f}",
                        !rw && !cw ? "both" : rw ? "column_wise" : "row_wise", unit, *reach, p.imbalance_after);
  return text;
}

RebalanceComm rebalance_comm(const es::WorkloadSpec& spec, const es::ShardingPlan& plan, const rb::Proposal& p,
                             double saved_ns_per_step) {
  RebalanceComm c;
  if (p.moves.empty() && p.changes.empty()) return c;
  c.timed = rb::comm_time_applies(spec);
  try {
    c.change = rb::comm_change(spec, plan, p.plan);
  } catch (const std::exception& e) {
    c.note = fmt::format("the planner's cost model could not time the plans ({}): the communication the moves add is "
                         "not predicted",
                         e.what());
    c.timed = false;
  }
  if (c.change && !c.timed)
    c.note = "no emulated network and no hardware profile in the workload: the time of the added communication on "
             "these cpu ranks' links is not predicted (the model's default profile is h100_sxm's NVLink); compare "
             "two runs to measure it";
  c.step_change_ns = (c.timed && c.change ? static_cast<double>(c.change->added_ns()) : 0.0) - saved_ns_per_step;
  c.slower = c.step_change_ns >= 0;
  return c;
}

std::string comm_text(const es::WorkloadSpec& spec, const RebalanceComm& c) {
  if (!c.change) return c.note;
  const auto& ch = *c.change;
  const int64_t db = ch.added_bytes();
  std::string text = fmt::format("bytes sent a step (every rank) {} -> {} ({}{})", es::format_bytes(ch.before.bytes_sent),
                                 es::format_bytes(ch.after.bytes_sent), db < 0 ? "-" : "+",
                                 es::format_bytes(db < 0 ? -db : db));
  if (!c.timed) return text + "; " + c.note;
  std::string link;
  if (spec.network.limited()) {
    const auto one = [](const char* what, const es::LinkSpec& l) {
      return !l.limited() ? std::string()
                          : fmt::format("{} {}{}", what,
                                        l.bandwidth_bytes_per_s > 0
                                            ? fmt::format("{:g} B/s", static_cast<double>(l.bandwidth_bytes_per_s))
                                            : std::string("unlimited"),
                                        l.latency_ns > 0 ? fmt::format(", {:g} ms", 1e-6 * static_cast<double>(l.latency_ns))
                                                         : std::string());
    };
    const std::string a = one("intra-node", spec.network.intra_node), b = one("inter-node", spec.network.inter_node);
    link = fmt::format(", the session's network: {}{}{}", a, !a.empty() && !b.empty() ? "; " : "", b);
  }
  return text + fmt::format("; communication a step (the planner's cost model, profile {}{}: the sum over ranks' maxima "
                            "of forward and backward comms, as plan --auto ranks plans) {:.2f} -> {:.2f} ms ({:+.2f} ms)",
                            ch.profile, link, 1e-6 * static_cast<double>(ch.before.comm_ns),
                            1e-6 * static_cast<double>(ch.after.comm_ns), 1e-6 * static_cast<double>(ch.added_ns()));
}

}  // namespace embedscope::cli

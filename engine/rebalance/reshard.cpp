// Live resharding's pure pieces (rebalance/reshard.h): the policy's window, the load over it from
// the all-gathered counters, and the per-peer counts of the all-to-all of rows.
#include "embedscope/engine/rebalance/reshard.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "embedscope/engine/kernels/kernels.h"
#include "embedscope/engine/rebalance/policy.h"
#include "embedscope/engine/rebalance/type_change.h"
#include "embedscope/engine/workload/enums.h"

namespace embedscope::engine::rebalance {

std::string live_rebalance_unsupported(const WorkloadSpec& spec, const std::string& where) {
  if (!spec.rebalance.enabled()) return "";
  if (where != "cpu")
    return fmt::format("/devices/backend: live rebalancing runs on the cpu backend (threads or one rank per process), "
                       "not {}", where);
  for (size_t i = 0; i < spec.tables.size(); ++i) {
    const TableSpec& t = spec.tables[i];
    if (t.data_type != TableDataType::fp32)
      return fmt::format("/tables/{}/data_type: live rebalancing moves fp32 rows, not {} (table \"{}\"): drop the "
                         "data_type or the rebalance policy",
                         i, enum_name(t.data_type), t.name);
    if (t.optimizer_state_type != OptimizerStateType::fp32)
      return fmt::format("/tables/{}/optimizer_state_type: live rebalancing moves fp32 optimizer state, not {} (table "
                         "\"{}\"): drop the optimizer_state_type or the rebalance policy",
                         i, enum_name(t.optimizer_state_type), t.name);
    if (t.low_rank_dim > 0)
      return fmt::format("/tables/{}/low_rank_dim: live rebalancing moves full rows, not factorized tables (A x B) "
                         "(table \"{}\"): drop low_rank_dim or the rebalance policy",
                         i, t.name);
  }
  return "";
}

int64_t policy_window(const RebalanceSpec& policy, int64_t step, int64_t last_rebalance) {
  if (!policy.enabled() || step < 0) return 0;
  if (last_rebalance >= 0 && step - last_rebalance <= policy.cooldown_steps) return 0;
  if (policy.trigger == RebalanceTrigger::every) {
    if ((step + 1) % policy.every != 0) return 0;
    return std::min(policy.every, step - last_rebalance);
  }
  if (step - last_rebalance < policy.window) return 0;
  return policy.window;
}

int64_t flat_shard_count(const ShardingPlan& plan) {
  int64_t n = 0;
  for (const TablePlan& tp : plan.tables) n += static_cast<int64_t>(tp.shards.size());
  return n;
}

WindowLoad window_load(const ShardingPlan& plan, const std::vector<int64_t>& gathered, int world, int64_t steps,
                       int64_t step) {
  const int64_t S = flat_shard_count(plan);
  if (steps < 1 || steps > step + 1 || static_cast<int64_t>(gathered.size()) != world * steps * S)
    throw std::invalid_argument(fmt::format("rebalance: {} counters for {} ranks x {} steps x {} shards (step {})",
                                            gathered.size(), world, steps, S, step));
  WindowLoad w;
  w.load = ObservedLoad::zeros(plan);
  w.ids_per_step_rank.assign(static_cast<size_t>(step + 1), std::vector<int64_t>(static_cast<size_t>(world), 0));
  for (int r = 0; r < world; ++r)
    for (int64_t i = 0; i < steps; ++i) {
      const int64_t* row = gathered.data() + (r * steps + i) * S;
      auto& per_rank = w.ids_per_step_rank[static_cast<size_t>(step - steps + 1 + i)];
      int64_t k = 0;
      for (size_t t = 0; t < plan.tables.size(); ++t)
        for (size_t s = 0; s < plan.tables[t].shards.size(); ++s, ++k) {
          w.load.ids[t][s] += row[k];
          per_rank[static_cast<size_t>(r)] += row[k];
        }
    }
  return w;
}

double load_shift(const std::vector<std::vector<int64_t>>& a, const std::vector<std::vector<int64_t>>& b) {
  if (a.size() != b.size()) return 1.0;
  double sa = 0, sb = 0;
  for (size_t t = 0; t < a.size(); ++t) {
    if (a[t].size() != b[t].size()) return 1.0;
    for (size_t s = 0; s < a[t].size(); ++s) {
      sa += static_cast<double>(a[t][s]);
      sb += static_cast<double>(b[t][s]);
    }
  }
  if (sa <= 0 || sb <= 0) return sa <= 0 && sb <= 0 ? 0.0 : 1.0;
  double d = 0;
  for (size_t t = 0; t < a.size(); ++t)
    for (size_t s = 0; s < a[t].size(); ++s)
      d += std::abs(static_cast<double>(a[t][s]) / sa - static_cast<double>(b[t][s]) / sb);
  return d / 2;
}

MoveFloats move_floats(const WorkloadSpec& spec, int table) {
  const TableSpec& ts = spec.tables.at(static_cast<size_t>(table));
  const auto [m1, m2] = optimizer_state_floats(spec.optimizer.type, ts.rows(), ts.embedding_dim);
  return {ts.rows() * ts.embedding_dim, m1, m2};
}

MoveFloats row_floats(const WorkloadSpec& spec, int table) {
  return block_floats(spec, table, spec.tables.at(static_cast<size_t>(table)).embedding_dim);
}

MoveFloats block_floats(const WorkloadSpec& spec, int table, int64_t cols) {
  (void)spec.tables.at(static_cast<size_t>(table));
  const auto [m1, m2] = optimizer_state_floats(spec.optimizer.type, 1, cols);
  return {cols, m1, m2};
}

namespace {

bool same_shards(const TablePlan& a, const TablePlan& b) {
  if (a.type != b.type || a.shards.size() != b.shards.size()) return false;
  for (size_t i = 0; i < a.shards.size(); ++i) {
    const Shard &x = a.shards[i], &y = b.shards[i];
    if (std::tie(x.rank, x.row_offset, x.num_rows, x.col_offset, x.num_cols) !=
        std::tie(y.rank, y.row_offset, y.num_rows, y.col_offset, y.num_cols))
      return false;
  }
  return true;
}

}  // namespace

std::vector<RowTransfer> row_transfers(const ShardingPlan& from, const ShardingPlan& to) {
  if (from.tables.size() != to.tables.size() || from.world_size != to.world_size)
    throw std::invalid_argument(fmt::format("reshard: a plan of {} tables on {} ranks into one of {} on {}",
                                            from.tables.size(), from.world_size, to.tables.size(), to.world_size));
  std::vector<RowTransfer> out;
  for (size_t t = 0; t < from.tables.size(); ++t) {
    const TablePlan &a = from.tables[t], &b = to.tables[t];
    if (same_shards(a, b)) continue;
    for (const TablePlan* tp : {&a, &b})
      if (tp->type != ShardingType::table_wise && tp->type != ShardingType::row_wise &&
          tp->type != ShardingType::column_wise)
        throw std::invalid_argument(fmt::format("reshard: table {} changes as {}; live resharding moves table_wise, "
                                                "row_wise and column_wise tables",
                                                t, to_string(tp->type)));
    for (size_t j = 0; j < b.shards.size(); ++j) {
      const Shard& n = b.shards[j];
      for (size_t i = 0; i < a.shards.size(); ++i) {
        const Shard& o = a.shards[i];
        const int64_t lo = std::max(n.row_offset, o.row_offset);
        const int64_t hi = std::min(n.row_offset + n.num_rows, o.row_offset + o.num_rows);
        const int64_t clo = std::max(n.col_offset, o.col_offset);
        const int64_t chi = std::min(n.col_offset + n.num_cols, o.col_offset + o.num_cols);
        if (hi <= lo || chi <= clo) continue;
        out.push_back({static_cast<int>(t), o.rank, n.rank, static_cast<int>(i), static_cast<int>(j), lo - o.row_offset,
                       lo - n.row_offset, hi - lo, clo - o.col_offset, clo - n.col_offset, chi - clo});
      }
    }
  }
  return out;
}

ReshardCounts reshard_counts(const WorkloadSpec& spec, const std::vector<RowTransfer>& transfers, int me, int world) {
  ReshardCounts c{std::vector<int64_t>(static_cast<size_t>(world), 0), std::vector<int64_t>(static_cast<size_t>(world), 0)};
  for (const RowTransfer& x : transfers) {
    if (x.from == x.to) continue;
    const int64_t n = x.rows * block_floats(spec, x.table, x.cols).total();
    if (x.from == me) c.send[static_cast<size_t>(x.to)] += n;
    if (x.to == me) c.recv[static_cast<size_t>(x.from)] += n;
  }
  return c;
}

std::vector<MoveBytes> move_transient_bytes(const WorkloadSpec& spec, const ShardingPlan& from, const ShardingPlan& to) {
  std::vector<MoveBytes> out(static_cast<size_t>(from.world_size));
  const std::vector<RowTransfer> transfers = row_transfers(from, to);
  int last_table = -1;
  for (const RowTransfer& x : transfers) {
    if (x.table != last_table) {  // a changed table (transfers come in table order): its new shards
      last_table = x.table;
      for (const Shard& s : to.tables[static_cast<size_t>(x.table)].shards)
        out[static_cast<size_t>(s.rank)].new_shards += s.num_rows * block_floats(spec, x.table, s.num_cols).total() * 4;
    }
    if (x.from == x.to) continue;
    const int64_t bytes = x.rows * block_floats(spec, x.table, x.cols).total() * 4;
    out[static_cast<size_t>(x.from)].send += bytes;
    out[static_cast<size_t>(x.to)].recv += bytes;
  }
  return out;
}

std::vector<sessions::RebalanceRecord> merge_rebalances(const std::vector<std::vector<sessions::RebalanceRecord>>& per_rank,
                                                        const std::vector<std::vector<int64_t>>& ids_per_rank_step,
                                                        bool median) {
  if (per_rank.empty()) return {};
  std::vector<sessions::RebalanceRecord> out = per_rank.front();
  for (const auto& recs : per_rank) {
    if (recs.size() != out.size())
      throw std::invalid_argument(fmt::format("rebalance: ranks recorded {} and {} rebalances", out.size(), recs.size()));
    for (size_t i = 0; i < recs.size(); ++i) {
      out[i].start_ns = std::min(out[i].start_ns, recs[i].start_ns);
      out[i].duration_ns = std::max(out[i].duration_ns, recs[i].duration_ns);
    }
  }
  int64_t steps = 0;
  for (const auto& r : ids_per_rank_step) steps = std::max(steps, static_cast<int64_t>(r.size()));
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t first = out[i].step + 1;
    int64_t last = std::min(out[i].step + out[i].window_steps, steps - 1);
    if (i + 1 < out.size()) last = std::min(last, out[i + 1].step);
    std::vector<std::vector<int64_t>> window;  // [step][rank]
    for (int64_t s = first; s <= last; ++s) {
      std::vector<int64_t> row(ids_per_rank_step.size(), 0);
      for (size_t r = 0; r < ids_per_rank_step.size(); ++r)
        if (s < static_cast<int64_t>(ids_per_rank_step[r].size())) row[r] = ids_per_rank_step[r][static_cast<size_t>(s)];
      window.push_back(std::move(row));
    }
    const std::vector<int64_t> per =
        window.empty() ? std::vector<int64_t>(ids_per_rank_step.size(), 0) : window_rank_load(window, median);
    out[i].after_steps = std::max<int64_t>(0, last - first + 1);
    out[i].imbalance_after = out[i].after_steps > 0 ? imbalance(per) : -1.0;
  }
  return out;
}

std::string failed_move_outcome(const std::vector<MovePhase>& phases) {
  if (phases.empty()) throw std::invalid_argument("rebalance: a failed move without ranks");
  std::vector<MovePhase> sorted = phases;
  std::sort(sorted.begin(), sorted.end(), [](const MovePhase& a, const MovePhase& b) { return a.rank < b.rank; });
  std::vector<std::pair<std::string, std::vector<int>>> groups;  // phase, its ranks (first-rank order)
  for (const MovePhase& p : sorted) {
    const std::string phase = p.phase.empty() ? "done" : p.phase;
    auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& x) { return x.first == phase; });
    if (g == groups.end()) groups.push_back({phase, {p.rank}});
    else g->second.push_back(p.rank);
  }
  std::string where;
  for (const auto& [phase, ranks] : groups)
    where += fmt::format("{}{} {}: {}", where.empty() ? "" : "; ", ranks.size() == 1 ? "rank" : "ranks",
                         fmt::join(ranks, ", "), phase);
  return fmt::format("failed: the run ended during the move ({}); no shard of it is kept: the tables stay where they "
                     "were before it",
                     where);
}

std::vector<sessions::PlanChangeRecord> plan_change_records(const WorkloadSpec& spec, const Proposal& p, int64_t step) {
  std::vector<sessions::PlanChangeRecord> out;
  for (const TableMove& m : p.moves) {
    const TableSpec& ts = spec.tables[static_cast<size_t>(m.table)];
    out.push_back({step + 1, m.table, ts.name, 0, m.from, m.to, m.bytes, to_string(ShardingType::table_wise),
                   to_string(ShardingType::table_wise), 0, ts.rows(), 0, ts.embedding_dim});
  }
  for (const TypeChange& c : p.changes) {
    const TableSpec& ts = spec.tables[static_cast<size_t>(c.table)];
    const auto& shards = p.plan.tables[static_cast<size_t>(c.table)].shards;
    for (size_t i = 0; i < shards.size(); ++i) {
      const Shard& sd = shards[i];
      // a change back to table_wise (from -1): its one shard gets every block not already there
      const int64_t bytes = c.to_type == ShardingType::table_wise ? c.bytes
                            : sd.rank == c.from                     ? 0
                                                                    : block_move_bytes(spec, c.table, sd.num_rows, sd.num_cols);
      out.push_back({step + 1, c.table, ts.name, static_cast<int32_t>(i), c.from, sd.rank, bytes, to_string(c.from_type),
                     to_string(c.to_type), sd.row_offset, sd.num_rows, sd.col_offset, sd.num_cols});
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return std::tie(a.table, a.shard_index) < std::tie(b.table, b.shard_index); });
  return out;
}

}  // namespace embedscope::engine::rebalance

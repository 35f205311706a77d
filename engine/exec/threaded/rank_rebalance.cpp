// Live rebalancing on a rank (rank.h): after each measured step the rank keeps its ids per shard;
// where the policy may fire (rebalance/reshard.h policy_window) the ranks all-gather them, each
// computes the same trigger and proposal (rebalance/policy.h), and the changed tables' rows and
// optimizer state go to their new shards in one all-to-all (`reshard` on the comm lane): whole
// table_wise tables to another rank, a hot table_wise table split row_wise over every rank or
// column_wise into blocks of columns, or a cooled row_wise / column_wise table joined back to
// table_wise on one rank. The old
// shards go back to the allocator, the new ones are allocated, and the layout, the sharding
// modules and the step programs are rebuilt for the new plan before the next step. Under a
// pipeline (sparse_dist, semi_sync) the batches started ahead finish their dists under the old
// plan first (settle_inflight) and are bucketized and sent again under the new one after the
// move (replan_inflight), so every step after the move trains as a run on the new plan would.
#include "rank.h"

#include <algorithm>
#include <array>
#include <numeric>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

#include "embedscope/engine/rebalance/comm_cost.h"
#include "embedscope/engine/rebalance/noise.h"
#include "embedscope/engine/rebalance/reshard.h"
#include "embedscope/engine/rebalance/type_change.h"

namespace embedscope::engine::threaded {

namespace rb = rebalance;

void Rank::after_step_rebalance(int64_t step, bool last) {
  const WorkloadSpec& spec = sh_.spec;
  const int W = L_.world;
  // this step's load per (table, shard), in plan order: ids, or lookup ns (rebalance.balance)
  const bool by_time = spec.rebalance.balance == RebalanceBalance::lookup_time;
  std::vector<int64_t> row(static_cast<size_t>(rb::flat_shard_count(plan_)), 0);
  int64_t total = 0;
  {
    size_t k = 0;
    for (const TablePlan& tp : plan_.tables)
      for (size_t s = 0; s < tp.shards.size(); ++s, ++k)
        if (auto f = load_.find({tp.table, static_cast<int>(s)}); f != load_.end()) {
          row[k] = rb::balanced_load(tp, s, spec.tables[static_cast<size_t>(tp.table)].embedding_dim,
                                     by_time ? f->second.lookup_ns : f->second.ids, by_time);
          total += row[k];
        }
  }
  shard_ids_per_step_.push_back(std::move(row));
  ids_per_step.push_back(total);
  const int64_t n = last ? 0 : rb::policy_window(spec.rebalance, step, last_rebalance_);
  if (n == 0) return;

  // The ranks' load over the window. The all-gather is the first collective after the step, so
  // a rank that finished its step early waits in it for the straggler - the wait the next step's
  // input dist would otherwise have. That wait is the imbalance itself, not the rebalance's
  // cost: it shows as the all-gather's exposed time (comm lane, collectives table), and the
  // rebalance's span and time spent start once every rank has arrived (t0). Before, they began
  // before the all-gather, and a refused firing on hot_table_straggler read 195-330 ms "spent"
  // where the proposal took under 10 ms on the straggler.
  const int64_t S = rb::flat_shard_count(plan_);
  std::vector<int64_t> send(static_cast<size_t>(n * S)), recv(static_cast<size_t>(W * n * S));
  for (int64_t i = 0; i < n; ++i) {
    const auto& r = shard_ids_per_step_[shard_ids_per_step_.size() - static_cast<size_t>(n - i)];
    std::copy(r.begin(), r.end(), send.begin() + i * S);
  }
  const std::vector<int64_t> counts(static_cast<size_t>(W), n * S);
  comm(*world_, "rebalance_load_all_gather", step, [&] {
    world_->all_gather_v("rebalance_load_all_gather", send.data(), recv.data(), counts, sizeof(int64_t));
  });
  const int64_t t0 = sh_.tracer.now_ns();
  sessions::RebalanceRecord rec;
  {
    ScopedSpan span(sh_.tracer, me_, Lane::compute, OpCategory::other, "rebalance", step);
    const rb::WindowLoad wl = rb::window_load(plan_, recv, W, n, step);
    const auto reason = rb::should_rebalance(spec.rebalance, step, last_rebalance_, wl.ids_per_step_rank);
    if (!reason) return;  // `when` below its threshold: asked again after the next step
    last_rebalance_ = step;
    // balance lookup_time: the robust load (the median step of each shard, noise.h), so one
    // preempted step of a window of 3 or more does not decide where tables go
    rb::ObservedLoad load = by_time ? rb::median_window_load(plan_, recv, W, n) : wl.load;
    // After a firing that moved nothing (every move refused, or no gain) the plan is the same,
    // and the proposal is a function of the plan and the load's shares. So:
    //  - while the load stays within kReproposeShift of the one the last proposal saw, it is not
    //    proposed again: it would say the same thing (the search and a memory estimate per
    //    candidate: 2 ms on the straggler of hot_table_straggler, more with many tables);
    //  - when the load moved more (small batches and measured ns are noisy) it is proposed, and
    //    recorded only if it refuses something not yet recorded under this plan: each refusal
    //    once per (table, from rank, cause) - not its target or numbers, which noise changes -
    //    and "nothing worth moving" once. The record lists only the new refusals.
    // The session keeps each refusal, with its reason, once - not one row after every cooldown
    // (a tester saw one refusal recorded 6 times in 12 steps with lookup_time). Chosen over
    // backing off (doubling the cooldown), which would still repeat the row, and would answer
    // late to a load that did change. Every rank sees the same gathered load and computes the
    // same proposal, so all skip (or record) together.
    if (unmoved_load_ && rb::load_shift(*unmoved_load_, load.ids) <= rb::kReproposeShift) return;
    // balance lookup_time, the noise rule (noise.h): a gain within the noise is no gain - neither
    // a single move's or exchange's (propose's noise) nor the whole proposal's (apply_noise_rule)
    const std::vector<std::vector<int64_t>> window(wl.ids_per_step_rank.end() - n, wl.ids_per_step_rank.end());
    // row_wise_hot_tables: a table_wise table changed to row_wise has its shards' ids predicted
    // from how its ids fell over its rows (tester48 F1: an even spread predicted 1.02 for a Zipf
    // table that gave 1.79). Each rank counted its own batches (id_histogram_, measured steps so
    // far); the ranks all-gather the buckets of the plan's table_wise tables and sum them, so
    // every rank proposes from the same counts. Every rank reaches this point together (the
    // trigger and the repropose check above are functions of the gathered load).
    if (spec.rebalance.row_wise_hot_tables) {
      std::vector<int> tables;
      std::vector<int64_t> hist_send;
      for (const TablePlan& tp : plan_.tables) {
        if (tp.type != ShardingType::table_wise || tp.shards.size() != 1) continue;
        tables.push_back(tp.table);
        const int64_t rows = spec.tables[static_cast<size_t>(tp.table)].rows();
        for (int64_t b = 0; b < IdHistogram::buckets_of(rows); ++b) hist_send.push_back(id_histogram_.count(tp.table, b));
      }
      if (!hist_send.empty()) {
        std::vector<int64_t> got(static_cast<size_t>(W) * hist_send.size());
        const std::vector<int64_t> sizes(static_cast<size_t>(W), static_cast<int64_t>(hist_send.size()));
        comm(*world_, "rebalance_rows_all_gather", step, [&] {
          world_->all_gather_v("rebalance_rows_all_gather", hist_send.data(), got.data(), sizes, sizeof(int64_t));
        });
        load.row_counts.assign(spec.tables.size(), {});
        size_t k = 0;
        for (int t : tables) {
          const int64_t rows = spec.tables[static_cast<size_t>(t)].rows();
          for (int64_t b = 0; b < IdHistogram::buckets_of(rows); ++b, ++k) {
            int64_t sum = 0;
            for (int r = 0; r < W; ++r) sum += got[static_cast<size_t>(r) * hist_send.size() + k];
            if (sum > 0)
              load.row_counts[static_cast<size_t>(t)].push_back(
                  {IdHistogram::bucket_begin(rows, b), IdHistogram::bucket_begin(rows, b + 1), sum});
          }
        }
      }
    }
    rb::Proposal p = rb::propose(spec, plan_, load, spec.rebalance.max_bytes_per_move,
                                 by_time ? rb::imbalance_noise(window) : 0.0);
    if (by_time) rb::apply_noise_rule(p, spec, plan_, window);
    // the communication the proposal adds (a split's reduce-scatter and all-gather, a move across
    // a slow link), by the planner's cost model on the session's network, against the work its
    // balance saves: a proposal predicted to make the step slower is not made (comm_cost.h)
    rb::apply_comm_rule(p, spec, plan_, n, by_time);
    std::string refused;
    auto add = [&](const rb::RefusedMove& r) { refused += (refused.empty() ? "" : "; ") + r.reason; };
    if (p.worth_it()) {
      unmoved_load_.reset();
      said_refusals_.clear();  // a new plan: its refusals are news
      for (const rb::RefusedMove& r : p.refused) add(r);
    } else {
      unmoved_load_ = load.ids;
      bool news = p.refused.empty() && said_refusals_.insert("nothing worth moving").second;
      for (const rb::RefusedMove& r : p.refused)
        if (said_refusals_.insert(fmt::format("{}|{}|{}", r.table, r.from, r.cause)).second) news = true, add(r);
      if (!news) return;
    }
    rec.step = step;
    rec.reason = *reason;
    rec.window_steps = n;
    rec.imbalance_before = p.imbalance_before;
    rec.imbalance_predicted = p.worth_it() ? p.imbalance_after : p.imbalance_before;
    rec.refused = std::move(refused);
    if (p.worth_it()) {
      rec.start_ns = t0;
      rec.moves = static_cast<int32_t>(p.moves.size() + p.changes.size());
      rec.bytes_moved = p.bytes_moved;
      moving = MoveInProgress{rec, "allocating the new shards", plan_};
      reshard(p.plan, step);
      moving.reset();
      // after the earlier rebalances' rows (their steps are lower), in (table, shard) order
      for (auto& change : rb::plan_change_records(spec, p, step)) plan_changes.push_back(std::move(change));
    }
  }
  rec.start_ns = t0;
  rec.duration_ns = sh_.tracer.now_ns() - t0;
  rebalances.push_back(std::move(rec));
}

void Rank::world_load_all_gather(int64_t step) {
  const int W = L_.world;
  const auto n = static_cast<int64_t>(ids_per_step.size());  // the same on every rank: they stop together
  std::vector<int64_t> recv(static_cast<size_t>(W * n));
  const std::vector<int64_t> counts(static_cast<size_t>(W), n);
  comm(*world_, "rebalance_load_all_gather", step, [&] {
    world_->all_gather_v("rebalance_load_all_gather", ids_per_step.data(), recv.data(), counts, sizeof(int64_t));
  });
  world_ids_per_step.assign(static_cast<size_t>(W), {});
  for (int r = 0; r < W; ++r)
    world_ids_per_step[static_cast<size_t>(r)].assign(recv.begin() + r * n, recv.begin() + (r + 1) * n);
}

namespace {

/// One of a shard's three parts (fp32 weights, state1, state2: live_rebalance_unsupported refuses
/// the rest): `stride` floats a row (0: the optimizer keeps none), `per_row` when it is one value
/// a row (rowwise_adagrad's accumulator) rather than one a column.
struct ShardPart {
  float* data;
  int64_t stride;
  bool per_row;
};

std::array<ShardPart, 3> parts_of(LocalShard& ls, OptimizerType opt) {
  const auto [m1, m2] = optimizer_state_floats(opt, 1, ls.s.num_cols);
  return {{{ls.weights.data(), ls.s.num_cols, false},
           {ls.momentum1.data(), m1, opt == OptimizerType::rowwise_adagrad},
           {ls.momentum2.data(), m2, false}}};
}

/// Writes block x of old shard `ls` to `out` in RowTransfer's wire order (each part's rows, the
/// block's columns of each); returns the floats written.
size_t pack_block(LocalShard& ls, OptimizerType opt, const rb::RowTransfer& x, float* out) {
  size_t o = 0;
  for (const ShardPart& p : parts_of(ls, opt)) {
    if (p.stride == 0) continue;
    for (int64_t r = 0; r < x.rows; ++r) {
      const float* row = p.data + (x.from_row + r) * p.stride;
      if (p.per_row) {
        out[o++] = row[0];
      } else {
        std::copy(row + x.from_col, row + x.from_col + x.cols, out + o);
        o += static_cast<size_t>(x.cols);
      }
    }
  }
  return o;
}

/// Reads block x (pack_block's order) into new shard `ls`: per-column parts are copied, a
/// per-row value adds cols / (the shard's width) of itself (the new shards start at 0, so the
/// shard's accumulator is the column-weighted mean of the blocks it got; x 1.0 for a whole-width
/// block: an exact copy). Returns the floats read.
size_t unpack_block(LocalShard& ls, OptimizerType opt, const rb::RowTransfer& x, const float* in) {
  size_t i = 0;
  const float share = static_cast<float>(x.cols) / static_cast<float>(ls.s.num_cols);
  for (const ShardPart& p : parts_of(ls, opt)) {
    if (p.stride == 0) continue;
    for (int64_t r = 0; r < x.rows; ++r) {
      float* row = p.data + (x.to_row + r) * p.stride;
      if (p.per_row) {
        row[0] += x.cols == ls.s.num_cols ? in[i++] : in[i++] * share;
      } else {
        std::copy(in + i, in + i + x.cols, row + x.to_col);
        i += static_cast<size_t>(x.cols);
      }
    }
  }
  return i;
}

}  // namespace

void Rank::settle_inflight() {
  for (auto& [it, bp] : inflight_) settle(*bp);  // its input dist awaited; if looked up, its output dist finished
}

void Rank::replan_inflight() {
  // in iteration order on every rank, so the ranks' collectives pair up
  for (auto& [it, bp] : inflight_) {
    Inflight& b = *bp;
    input_dist_again(b);
    if (!b.looked_up) continue;  // its lookup (next step) runs finish_input on the new layout
    finish_input(b);
    mean_scales(b);
    b.slot_out.clear();  // the old shards' rows, sent and no longer needed
  }
}

void Rank::reshard(const ShardingPlan& next, int64_t step) {
  const WorkloadSpec& spec = sh_.spec;
  const int W = L_.world;
  settle_inflight();  // the batches ahead (pipelines) finish what they began under the old plan
  const std::vector<rb::RowTransfer> transfers = rb::row_transfers(plan_, next);
  const rb::ReshardCounts counts = rb::reshard_counts(spec, transfers, me_, W);
  const int64_t n_send = std::accumulate(counts.send.begin(), counts.send.end(), int64_t{0});
  const int64_t n_recv = std::accumulate(counts.recv.begin(), counts.recv.end(), int64_t{0});
  auto send = buf<float>("comm_buffer", static_cast<size_t>(n_send));
  auto recv = buf<float>("comm_buffer", static_cast<size_t>(n_recv));
  // pack: per destination rank in rank order, its blocks in the order of `transfers`
  const OptimizerType opt = spec.optimizer.type;
  size_t o = 0;
  for (int r = 0; r < W; ++r)
    for (const rb::RowTransfer& x : transfers) {
      if (x.from != me_ || x.to != r || r == me_) continue;
      o += pack_block(shard_of(x.table, x.from_shard), opt, x, send.data() + o);
    }
  // the new shards of the changed tables on this rank, allocated before the old ones are freed
  // (both are live during the move)
  std::vector<int> changed;
  for (const rb::RowTransfer& x : transfers)
    if (changed.empty() || changed.back() != x.table) changed.push_back(x.table);
  std::vector<LocalShard> arriving;
  for (int t : changed) {
    const auto& shards_of_t = next.tables[static_cast<size_t>(t)].shards;
    for (size_t i = 0; i < shards_of_t.size(); ++i) {
      if (shards_of_t[i].rank != me_) continue;
      LocalShard ls;
      ls.table = t;
      ls.shard_index = static_cast<int>(i);
      ls.s = shards_of_t[i];
      ls.data_type = spec.tables[static_cast<size_t>(t)].data_type;
      ls.state_type = spec.tables[static_cast<size_t>(t)].optimizer_state_type;
      const rb::MoveFloats f = rb::block_floats(spec, t, ls.s.num_cols);
      ls.weights = DeviceBuffer<float>(&arena_, "weights");
      ls.weights.assign(static_cast<size_t>(ls.s.num_rows * f.weights));
      ls.momentum1 = DeviceBuffer<float>(&arena_, "optimizer_state");
      ls.momentum2 = DeviceBuffer<float>(&arena_, "optimizer_state");
      ls.momentum1.assign(static_cast<size_t>(ls.s.num_rows * f.state1));
      ls.momentum2.assign(static_cast<size_t>(ls.s.num_rows * f.state2));
      ls.packed_state1 = DeviceBuffer<uint8_t>(&arena_, "optimizer_state");
      ls.packed_state2 = DeviceBuffer<uint8_t>(&arena_, "optimizer_state");
      arriving.push_back(std::move(ls));
    }
  }
  auto arrived = [&](int table, int shard_index) -> LocalShard& {
    for (LocalShard& ls : arriving)
      if (ls.table == table && ls.shard_index == shard_index) return ls;
    throw std::logic_error(fmt::format("reshard: rank {} has no new shard {} of table {}", me_, shard_index, table));
  };
  // the blocks that stay on this rank (table_wise -> row_wise: the rows of its own shard;
  // -> column_wise: its own columns), through the wire format
  std::vector<float> local;
  for (const rb::RowTransfer& x : transfers) {
    if (x.from != me_ || x.to != me_) continue;
    local.resize(static_cast<size_t>(x.rows * rb::block_floats(spec, x.table, x.cols).total()));
    pack_block(shard_of(x.table, x.from_shard), opt, x, local.data());
    unpack_block(arrived(x.table, x.to_shard), opt, x, local.data());
  }
  if (moving) moving->phase = "in the reshard all-to-all";
  comm(*world_, "reshard", step, [&] {
    world_->all_to_all_v("reshard", send.data(), counts.send, recv.data(), counts.recv, sizeof(float));
  });
  if (moving) moving->phase = "unpacking the rows it received";
  {
    ScopedSpan span(sh_.tracer, me_, Lane::compute, OpCategory::memcpy, "reshard_unpack", step);
    span.set_bytes(n_recv * static_cast<int64_t>(sizeof(float)));
    size_t i = 0;
    for (int r = 0; r < W; ++r)
      for (const rb::RowTransfer& x : transfers) {
        if (x.to != me_ || x.from != r || r == me_) continue;
        i += unpack_block(arrived(x.table, x.to_shard), opt, x, recv.data() + i);
      }
  }
  // the shards of the changed tables go back to the allocator
  std::erase_if(shards, [&](const LocalShard& ls) { return std::find(changed.begin(), changed.end(), ls.table) != changed.end(); });
  for (LocalShard& ls : arriving) shards.push_back(std::move(ls));
  std::stable_sort(shards.begin(), shards.end(), [](const LocalShard& a, const LocalShard& b) {
    return std::tie(a.table, a.shard_index) < std::tie(b.table, b.shard_index);
  });
  send = DeviceBuffer<float>();
  recv = DeviceBuffer<float>();
  // the new plan: its layout, sharding modules and step programs (built now, not in the next step)
  if (moving) moving->phase = "sending the batches ahead to the new shards";
  plan_ = next;
  layout_ = Layout(spec, plan_);
  shardings_ = sharding::embedding_shardings(L_);
  programs_.clear();
  const int64_t total = spec.warmup_steps + spec.steps, it = spec.warmup_steps + step + 1;
  for (int64_t i : {it, it + 1, total - 2, total - 1})
    if (i >= it && i < total) program_of(i);
  replan_inflight();  // the batches ahead go to the new shards
  record_memory(step, "rebalance", true);  // the layout after the move (the memory view's snapshot)
}

}  // namespace embedscope::engine::threaded

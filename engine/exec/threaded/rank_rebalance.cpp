// Live rebalancing on a rank (rank.h): after each measured step the rank keeps its ids per shard;
// where the policy may fire (rebalance/reshard.h policy_window) the ranks all-gather them, each
// computes the same trigger and proposal (rebalance/policy.h), and the moved tables' rows and
// optimizer state go to their new ranks in one all-to-all (`reshard` on the comm lane). The old
// shards go back to the allocator, the new ones are allocated, and the layout, the sharding
// modules and the step programs are rebuilt for the new plan before the next step.
#include "rank.h"

#include "embedscope/engine/rebalance/reshard.h"

namespace embedscope::engine::threaded {

namespace rb = rebalance;

void Rank::after_step_rebalance(int64_t step, bool last) {
  const WorkloadSpec& spec = sh_.spec;
  const int W = L_.world;
  // this step's ids per (table, shard), in plan order
  std::vector<int64_t> row(static_cast<size_t>(rb::flat_shard_count(plan_)), 0);
  int64_t total = 0;
  {
    size_t k = 0;
    for (const TablePlan& tp : plan_.tables)
      for (size_t s = 0; s < tp.shards.size(); ++s, ++k)
        if (auto f = load_.find({tp.table, static_cast<int>(s)}); f != load_.end()) {
          row[k] = f->second.ids;
          total += f->second.ids;
        }
  }
  shard_ids_per_step_.push_back(std::move(row));
  ids_per_step.push_back(total);
  const int64_t n = last ? 0 : rb::policy_window(spec.rebalance, step, last_rebalance_);
  if (n == 0) return;

  const int64_t t0 = sh_.tracer.now_ns();
  sessions::RebalanceRecord rec;
  {
    ScopedSpan span(sh_.tracer, me_, Lane::compute, OpCategory::other, "rebalance", step);
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
    const rb::WindowLoad wl = rb::window_load(plan_, recv, W, n, step);
    const auto reason = rb::should_rebalance(spec.rebalance, step, last_rebalance_, wl.ids_per_step_rank);
    if (!reason) return;  // `when` below its threshold: asked again after the next step
    last_rebalance_ = step;
    const rb::Proposal p = rb::propose(spec, plan_, wl.load, spec.rebalance.max_bytes_per_move);
    rec.step = step;
    rec.reason = *reason;
    rec.window_steps = n;
    rec.imbalance_before = p.imbalance_before;
    rec.imbalance_predicted = p.worth_it() ? p.imbalance_after : p.imbalance_before;
    for (const rb::RefusedMove& r : p.refused) rec.refused += (rec.refused.empty() ? "" : "; ") + r.reason;
    if (p.worth_it()) {
      reshard(p.moves, p.plan, step);
      rec.moves = static_cast<int32_t>(p.moves.size());
      rec.bytes_moved = p.bytes_moved;
      for (const rb::TableMove& m : p.moves)
        plan_changes.push_back({step + 1, m.table, spec.tables[static_cast<size_t>(m.table)].name, 0, m.from, m.to, m.bytes});
    }
  }
  rec.start_ns = t0;
  rec.duration_ns = sh_.tracer.now_ns() - t0;
  rebalances.push_back(std::move(rec));
}

void Rank::reshard(const std::vector<rb::TableMove>& moves, const ShardingPlan& next, int64_t step) {
  const WorkloadSpec& spec = sh_.spec;
  const int W = L_.world;
  const rb::ReshardCounts counts = rb::reshard_counts(spec, moves, me_, W);
  const int64_t n_send = std::accumulate(counts.send.begin(), counts.send.end(), int64_t{0});
  const int64_t n_recv = std::accumulate(counts.recv.begin(), counts.recv.end(), int64_t{0});
  auto send = buf<float>("comm_buffer", static_cast<size_t>(n_send));
  auto recv = buf<float>("comm_buffer", static_cast<size_t>(n_recv));
  // pack: per destination rank in rank order, its tables in the order of `moves`
  size_t o = 0;
  for (int r = 0; r < W; ++r)
    for (const rb::TableMove& m : moves) {
      if (m.from != me_ || m.to != r) continue;
      LocalShard& ls = shard_of(m.table, 0);
      for (const DeviceBuffer<float>* b : {&ls.weights, &ls.momentum1, &ls.momentum2}) {
        std::copy(b->data(), b->data() + b->size(), send.data() + o);
        o += b->size();
      }
    }
  // the new shards, allocated before the old ones are freed (both are live during the move)
  std::vector<LocalShard> arriving;
  for (int r = 0; r < W; ++r)
    for (const rb::TableMove& m : moves) {
      if (m.to != me_ || m.from != r) continue;
      const rb::MoveFloats f = rb::move_floats(spec, m.table);
      LocalShard ls;
      ls.table = m.table;
      ls.shard_index = 0;
      ls.s = next.tables[static_cast<size_t>(m.table)].shards[0];
      ls.weights = DeviceBuffer<float>(&arena_, "weights");
      ls.weights.assign(static_cast<size_t>(f.weights));
      ls.momentum1 = DeviceBuffer<float>(&arena_, "optimizer_state");
      ls.momentum2 = DeviceBuffer<float>(&arena_, "optimizer_state");
      ls.momentum1.assign(static_cast<size_t>(f.state1));
      ls.momentum2.assign(static_cast<size_t>(f.state2));
      ls.packed_state1 = DeviceBuffer<uint8_t>(&arena_, "optimizer_state");
      ls.packed_state2 = DeviceBuffer<uint8_t>(&arena_, "optimizer_state");
      arriving.push_back(std::move(ls));
    }
  comm(*world_, "reshard", step, [&] {
    world_->all_to_all_v("reshard", send.data(), counts.send, recv.data(), counts.recv, sizeof(float));
  });
  {
    ScopedSpan span(sh_.tracer, me_, Lane::compute, OpCategory::memcpy, "reshard_unpack", step);
    span.set_bytes(n_recv * static_cast<int64_t>(sizeof(float)));
    size_t i = 0;
    for (LocalShard& ls : arriving)
      for (DeviceBuffer<float>* b : {&ls.weights, &ls.momentum1, &ls.momentum2}) {
        std::copy(recv.data() + i, recv.data() + i + b->size(), b->data());
        i += b->size();
      }
  }
  // the shards that left go back to the allocator
  std::erase_if(shards, [&](const LocalShard& ls) {
    return std::any_of(moves.begin(), moves.end(), [&](const rb::TableMove& m) { return m.table == ls.table && m.from == me_; });
  });
  for (LocalShard& ls : arriving) shards.push_back(std::move(ls));
  std::stable_sort(shards.begin(), shards.end(), [](const LocalShard& a, const LocalShard& b) {
    return std::tie(a.table, a.shard_index) < std::tie(b.table, b.shard_index);
  });
  send = DeviceBuffer<float>();
  recv = DeviceBuffer<float>();
  // the new plan: its layout, sharding modules and step programs (built now, not in the next step)
  plan_ = next;
  layout_ = Layout(spec, plan_);
  shardings_ = sharding::embedding_shardings(L_);
  schedules_.clear();
  const int64_t total = spec.warmup_steps + spec.steps, it = spec.warmup_steps + step + 1;
  for (int64_t i : {it, it + 1, total - 2, total - 1})
    if (i >= it && i < total) schedule_of(i);
  record_memory(step, "rebalance", true);  // the layout after the move (the memory view's snapshot)
}

}  // namespace embedscope::engine::threaded

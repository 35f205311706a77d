// The threaded executor: builds the ranks, runs each on its own thread, records how each ended,
// and gathers the run's result.
#include "executor.h"

#include "flight_dump_watcher.h"
#include "exec/device/fault_injection.h"

#include <algorithm>
#include <memory>
#include <numeric>

#include <nlohmann/json.hpp>

#include "embedscope/engine/exec/gpu_placement.h"
#include "embedscope/engine/exec/table_storage_json.h"
#include "embedscope/engine/rebalance/reshard.h"
#include "embedscope/sessions/model/held_out_key.h"
#include "embedscope/sessions/model/metadata_keys.h"

namespace embedscope::engine::threaded {

namespace {
std::vector<int> all_ranks(int world) {
  std::vector<int> v(static_cast<size_t>(world));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

// The held-out evaluation's view of the trained tables (model/held_out.h TableRowReader): row
// `row` of table t gathered from the shards that hold its columns (one replica of a
// data_parallel table; the hot-row replica where the row is hot), decoded as LocalShard::row
// decodes it. Every rank must be local and its rows in host memory.
TableRowReader trained_rows(const WorkloadSpec& spec, const detail::Layout& layout,
                            const std::vector<std::unique_ptr<Rank>>& ranks) {
  struct Tables {
    std::vector<std::vector<const LocalShard*>> shards;  // per table: one per (row, column) block
    std::vector<const LocalShard*> hot;                  // per table: the hot-row replica, or null
    std::vector<float> scratch;
  };
  auto t = std::make_shared<Tables>();
  t->shards.resize(spec.tables.size());
  t->hot.assign(spec.tables.size(), nullptr);
  int64_t widest = 0;
  for (const auto& ts : spec.tables) widest = std::max(widest, ts.embedding_dim);
  t->scratch.resize(static_cast<size_t>(widest));
  for (const auto& rk : ranks) {
    for (const LocalShard& ls : rk->shards) {
      auto& list = t->shards[static_cast<size_t>(ls.table)];
      const bool seen = std::any_of(list.begin(), list.end(), [&](const LocalShard* o) {
        return o->s.row_offset == ls.s.row_offset && o->s.col_offset == ls.s.col_offset;
      });
      if (!seen) list.push_back(&ls);
    }
    for (const auto& [table, rep] : rk->hot_replicas)
      if (!t->hot[static_cast<size_t>(table)]) t->hot[static_cast<size_t>(table)] = &rep;
  }
  return [t, &layout](int table, int64_t row, float* out) {
    if (const LocalShard* rep = t->hot[static_cast<size_t>(table)]) {
      if (const int64_t h = layout.hot_index(table, row); h >= 0) {
        rep->row(h, out);
        return;
      }
    }
    for (const LocalShard* ls : t->shards[static_cast<size_t>(table)]) {
      if (row < ls->s.row_offset || row >= ls->s.row_offset + ls->s.num_rows) continue;
      ls->row(row - ls->s.row_offset, t->scratch.data());
      std::copy_n(t->scratch.data(), ls->s.num_cols, out + ls->s.col_offset);
    }
  };
}
}  // namespace

ThreadedExecutor::ThreadedExecutor(const WorkloadSpec& spec, const ShardingPlan& plan, const TrainerOptions& options)
    : ThreadedExecutor(spec, plan, options, all_ranks(spec.devices.count)) {}

ThreadedExecutor::ThreadedExecutor(const WorkloadSpec& spec, const ShardingPlan& plan, const TrainerOptions& options,
                                   std::vector<int> local_ranks)
    : sh_(spec, plan, options), local_ranks_(std::move(local_ranks)) {
  if (local_ranks_.empty()) throw std::logic_error("ThreadedExecutor: no local rank");
  sh_.progress_rank = local_ranks_.front();
  if (options.emulate_device) {  // placed as run_training checked (TrainerOptions::emulated_devices)
    const int devices = options.emulated_devices > 0 ? options.emulated_devices : spec.devices.count;
    const GpuPlacement placement = place_ranks(spec.devices.count, 0, devices, "emulated device");
    for (int r = 0; r < spec.devices.count; ++r)
      sh_.gpus.push_back(detail::host_rank_device(placement.gpu_of_rank[static_cast<size_t>(r)]));
    sh_.device_of_rank = placement.gpu_of_rank;
  }
  if (!sh_.gpus.empty() || spec.devices.backend != Backend::cuda) apply_device_fault_hook();  // cuda: in prepare()
}

void ThreadedExecutor::apply_device_fault_hook() {
  const auto fault = detail::device_fault_from_env(sh_.spec.devices.count);
  if (!fault) return;
  if (sh_.gpus.empty())
    throw std::invalid_argument(
        "EMBEDSCOPE_INJECT_DEVICE_FAULT is set, but this run has no device (the cpu backend): it injects faults on "
        "the cuda backend or the emulated device");
  detail::inject_device_fault(sh_.gpus, *fault);
}

ThreadedExecutor::~ThreadedExecutor() = default;

void ThreadedExecutor::run(sessions::SessionWriter* session, RunResult& result) {
  Shared& sh = sh_;
  const WorkloadSpec& spec = sh.spec;
  const int W = spec.devices.count;
  const int n_local = static_cast<int>(local_ranks_.size());
  sh.session = session;
  for (int r : local_ranks_) ranks_.push_back(std::make_unique<Rank>(sh, r));
  FlightDumpWatcher watcher(session ? sh.opt.flight_dump : nullptr, [this](const std::string& reason) {
    for (const auto& r : ranks_) r->dump_flight_recorder(reason);
  });
  std::vector<std::thread> threads;
  for (int i = 0; i < n_local; ++i) {
    const int r = local_ranks_[static_cast<size_t>(i)];
    threads.emplace_back([&, r, i] {
      Rank& rank = *ranks_[static_cast<size_t>(i)];
      if (!sh.gpus.empty()) sh.gpus[static_cast<size_t>(r)]->bind_thread();
      if (sh.on_thread_start) sh.on_thread_start(r);
      bool rank_failed = false, vanished = false;
      try {
        rank.main();
      } catch (const RankVanished&) {
        vanished = true;
      } catch (...) {
        rank_failed = true;
        on_rank_failed(r);  // before waiting for the peers' word (explain_peer_failure)
        // peers blocked on this rank (and its own comm worker, inside a collective) fail at once
        // instead of at the collective timeout: a device error on one of two ranks sharing a GPU
        // took the full 30 s before
        rank.close_connections();
        RankError err = rank_error_of(r, sh.tracer.now_ns(), std::current_exception(),
                                      [&](const CollectiveError& e) { return explain_peer_failure(r, e); });
        err.time_ns = sh.tracer.now_ns();  // after the peers' word
        std::lock_guard<std::mutex> lock(sh.mu);
        sh.errors.push_back(std::move(err));
      }
      if (!vanished && rank_failed) {
        rank.write_held_records_at_failure();  // the steps whose records waited for their distinct-row counts
        rank.record_memory_at_failure();       // what the rank held when the run ended
      }
      std::unique_lock<std::mutex> lock(sh.mu);
      ++sh.finished;
      sh.cv.notify_all();
      // A vanished rank keeps its connections open (as a hung process would) until the others end.
      if (vanished) sh.cv.wait(lock, [&] { return sh.finished == n_local; });
      lock.unlock();
      rank.teardown();  // closing the sockets makes peers still waiting on this rank fail fast
    });
  }
  for (auto& t : threads) t.join();
  watcher.stop();

  result.samples_per_step = spec.batch_size * W;
  if (!sh.errors.empty()) {  // the first failure that is not a consequence of another's
    const RankError first = first_failure(sh.errors);
    result.ended = first.kind;
    result.bad_input = first.bad_input;
    result.error = first.message;
    // a failure during a live rebalance's move names the move
    for (size_t i = 0; i < ranks_.size(); ++i)
      if (local_ranks_[i] == first.rank && ranks_[i]->moving)
        result.error += fmt::format(" - during the live rebalance after step {} (rank {} {})", ranks_[i]->moving->record.step,
                                    first.rank, ranks_[i]->moving->phase);
    // every local rank's last collectives: where each stood when the run failed
    // a collective that failed because a peer failed first (its connection broke before the
    // timeout) is no timeout: "a peer failed"
    const std::string reason = first.kind == RunEnd::hang ? std::string("collective timeout")
                               : first.consequence        ? std::string("a peer failed")
                                                          : fmt::format("run ended {}", to_string(first.kind));
    for (auto& r : ranks_) r->dump_flight_recorder(reason);
  }
  for (auto& r : ranks_) {
    result.ranks.push_back(r->summary);
    // every iteration's skips, warmup included (the summary's other counters are measured steps)
    result.ranks.back().skipped_lines = std::accumulate(r->skipped_per_iteration.begin(), r->skipped_per_iteration.end(), int64_t{0});
    auto& per = result.skipped_lines_per_step;
    if (per.size() < r->skipped_per_iteration.size()) per.resize(r->skipped_per_iteration.size(), 0);
    for (size_t i = 0; i < r->skipped_per_iteration.size(); ++i) per[i] += r->skipped_per_iteration[i];
  }
  QuantError fwd, bwd;
  for (auto& r : ranks_) {
    fwd.merge(r->fwd_error_);
    bwd.merge(r->bwd_error_);
  }
  result.qcomms_error = {fwd.max_abs_error, fwd.relative(), bwd.max_abs_error, bwd.relative()};
  // per table: the bytes each rank's shards allocated, and the error of the rows they stored
  for (size_t t = 0; t < spec.tables.size(); ++t) {
    RunResult::TableStorage ts;
    ts.name = spec.tables[t].name;
    ts.data_type = spec.tables[t].data_type;
    ts.stochastic_rounding = spec.tables[t].uses_stochastic_rounding() && ts.data_type != TableDataType::fp32;
    ts.optimizer_state_type = spec.tables[t].optimizer_state_type;
    ts.weight_bytes.assign(static_cast<size_t>(W), 0);
    ts.optimizer_state_bytes.assign(static_cast<size_t>(W), 0);
    ts.placement = spec.tables[t].placement;
    if (ts.placement == TablePlacement::host_cached) {
      ts.cache_policy = spec.tables[t].cache_policy;
      ts.cache_load_factor = spec.tables[t].cache_load_factor;
      ts.prefetch_pipeline = spec.tables[t].prefetch_pipeline;
    }
    ts.host_bytes.assign(static_cast<size_t>(W), 0);
    ts.cache_bytes.assign(static_cast<size_t>(W), 0);
    QuantError err;
    for (size_t i = 0; i < ranks_.size(); ++i)  // the ranks run here (one process: its own; others stay 0)
      for (const auto& ls : ranks_[i]->shards) {
        const auto r = static_cast<size_t>(local_ranks_[i]);
        if (ls.table != static_cast<int>(t)) continue;
        const auto wb =
            static_cast<int64_t>((ls.weights.size() + ls.factor_b.size()) * sizeof(float) + ls.packed.size());
        const auto sb = static_cast<int64_t>(
            (ls.momentum1.size() + ls.momentum2.size() + ls.b_momentum1.size() + ls.b_momentum2.size()) * sizeof(float) +
            ls.packed_state1.size() + ls.packed_state2.size() + ls.b_packed_state1.size() + ls.b_packed_state2.size());
        ts.weight_bytes[r] += wb;
        ts.optimizer_state_bytes[r] += sb;
        err.merge(ls.storage_error);
        if (ls.host) {
          ts.host_bytes[r] += wb + sb + ls.host->host_side_bytes();
          ts.cache_bytes[r] += ls.host->cache_bytes();
        }
      }
    for (auto& rk : ranks_)
      if (auto f = rk->table_transfers.find(static_cast<int>(t)); f != rk->table_transfers.end()) {
        ts.cache_hits += f->second.cache_hits;
        ts.cache_misses += f->second.cache_misses;
        ts.rows_fetched += f->second.rows_fetched;
        ts.bytes_h2d += f->second.bytes_h2d;
        ts.bytes_d2h += f->second.bytes_d2h;
        ts.prefetched_rows += f->second.prefetched_rows;
        ts.prefetch_bytes_h2d += f->second.prefetch_bytes_h2d;
      }
    if (!sh.layout.hot_rows[t].empty()) {  // the hot-row replicas (sharding/hot_rows.cpp)
      ts.hot_rows = static_cast<int64_t>(sh.layout.hot_rows[t].size());
      ts.hot_all_reduce_bytes = ts.hot_rows * (spec.tables[t].embedding_dim + 1) * 4;
      for (size_t i = 0; i < ranks_.size(); ++i) {
        const auto r = static_cast<size_t>(local_ranks_[i]);
        const LocalShard& rep = ranks_[i]->hot_replicas.at(static_cast<int>(t));
        ts.weight_bytes[r] += static_cast<int64_t>(rep.weights.size() * sizeof(float));
        ts.optimizer_state_bytes[r] += static_cast<int64_t>((rep.momentum1.size() + rep.momentum2.size()) * sizeof(float));
        if (t < ranks_[i]->hot_ids.size()) ts.hot_ids += ranks_[i]->hot_ids[t];
      }
    }
    ts.hash_size = spec.tables[t].hash_size;
    ts.low_rank_dim = spec.tables[t].low_rank_dim;
    ts.hash_collisions_per_rank.assign(static_cast<size_t>(W), 0);
    for (size_t i = 0; i < ranks_.size(); ++i)
      if (t < ranks_[i]->hash_collisions.size()) {
        ts.hash_collisions += ranks_[i]->hash_collisions[t];
        ts.hash_collisions_per_rank[static_cast<size_t>(local_ranks_[i])] += ranks_[i]->hash_collisions[t];
      }
    ts.max_abs_error = err.max_abs_error;
    ts.relative_error = err.relative();
    result.table_storage.push_back(std::move(ts));
  }
  if (result.ended == RunEnd::complete) {  // also cancelled runs: the steps that ran
    const size_t n = ranks_.front()->step_ns.size();
    for (size_t i = 0; i < n; ++i) {
      int64_t m = 0;
      for (auto& r : ranks_) m = std::max(m, r->step_ns[i]);
      result.step_time_ns.push_back(m);
    }
    result.loss = ranks_.front()->losses;
  }
  for (auto& r : ranks_) result.events.insert(result.events.end(), r->events.begin(), r->events.end());
  std::sort(result.events.begin(), result.events.end(), [](const auto& a, const auto& b) {
    return std::tie(a.start_ns, a.rank, a.lane) < std::tie(b.start_ns, b.rank, b.lane);
  });
  if (result.ended == RunEnd::complete && ranks_.front()->cancelled) result.ended = RunEnd::cancelled;
  // the trained model on held-out generated batches (model/held_out.h); a complete run only
  if (sh.opt.held_out_batches > 0 && result.ended == RunEnd::complete) {
    if (static_cast<int>(local_ranks_.size()) != W)
      result.held_out_skipped = "one rank per process: this process holds its own rank's rows only";
    else if (!sh.gpus.empty() && !sh.opt.keep_tables)
      result.held_out_skipped = "the rows stay on the devices (the host copies are released)";
    else if (sh.opt.batch_source)
      result.held_out_skipped = "the batches were given (a test's batch_source), not generated";
    else
      result.held_out_skipped = held_out_unsupported(spec);
    if (result.held_out_skipped.empty()) try {
        result.held_out = evaluate_held_out(spec, ranks_.front()->dense().params(), trained_rows(spec, sh.layout, ranks_),
                                            sh.opt.held_out_batches, sh.opt.cancel, sh.opt.held_out_progress);
      } catch (const HeldOutCancelled& e) {  // Ctrl-C / SIGTERM during it: the training is complete (tester46 F14)
        result.held_out_skipped = std::string("cancelled (Ctrl-C or SIGTERM) during the evaluation, ") + e.what();
      } catch (const std::exception& e) {  // the run itself completed: the session says why there is no figure
        result.held_out_skipped = std::string("the evaluation failed: ") + e.what();
      }
  }
  // live rebalances: every rank took part in each (the same decisions); their times merged
  result.final_plan = ranks_.front()->plan();
  if (spec.rebalance.enabled()) {
    // the rebalances every rank finished (a run that failed: those before the failure; every
    // rank took part in each, with the same decisions), their times merged
    size_t done = ranks_.front()->rebalances.size();
    for (auto& r : ranks_) done = std::min(done, r->rebalances.size());
    std::vector<std::vector<sessions::RebalanceRecord>> per_rank;
    std::vector<std::vector<int64_t>> ids;
    for (auto& r : ranks_) {
      per_rank.emplace_back(r->rebalances.begin(), r->rebalances.begin() + static_cast<std::ptrdiff_t>(done));
      ids.push_back(r->ids_per_step);
    }
    // one rank per process: the imbalance after each rebalance over every rank's load, gathered at the end
    if (!ranks_.front()->world_ids_per_step.empty()) ids = ranks_.front()->world_ids_per_step;
    result.rebalances =
        rebalance::merge_rebalances(per_rank, ids, spec.rebalance.balance == RebalanceBalance::lookup_time);
    result.plan_changes = ranks_.front()->plan_changes;
    // a move the run ended in: recorded as failed with how far each rank got; its shards are
    // not reported (no plan_changes, the plan before it is the final one)
    const auto mover = std::find_if(ranks_.begin(), ranks_.end(), [](const auto& r) { return r->moving.has_value(); });
    if (mover != ranks_.end()) {
      const Rank::MoveInProgress& m = *(*mover)->moving;
      std::vector<rebalance::MovePhase> phases;
      for (size_t i = 0; i < ranks_.size(); ++i)
        phases.push_back({local_ranks_[i], ranks_[i]->moving ? ranks_[i]->moving->phase : std::string()});
      sessions::RebalanceRecord failed = m.record;
      failed.outcome = rebalance::failed_move_outcome(phases);
      failed.duration_ns = sh.tracer.now_ns() - failed.start_ns;
      result.rebalances.push_back(std::move(failed));
      std::erase_if(result.plan_changes, [&](const sessions::PlanChangeRecord& c) { return c.step > m.record.step; });
      result.final_plan = m.before;
    }
    if (session) session->add_rebalances(result.rebalances, result.plan_changes);
  }
  result.tracer_overhead_ns = sh.tracer.overhead_ns();
  result.dropped_records = sh.tracer.dropped();
  after_ranks(session);
  if (session) {
    for (int r : local_ranks_) session->add_ops(sh.tracer.take(r));  // spans of a step that failed midway
    session->set_metadata(sessions::meta::kTracerOverheadNs, std::to_string(result.tracer_overhead_ns));
    session->set_metadata(sessions::meta::kDroppedRecords, std::to_string(result.dropped_records));
    session->set_metadata(sessions::meta::kSpansRecorded, std::to_string(sh.tracer.recorded()));
    if (spec.input.kind != InputKind::synthetic) {
      int64_t skipped = 0, invalid = 0;
      for (const auto& r : result.ranks) skipped += r.skipped_lines, invalid += r.invalid_ids;
      session->set_metadata(sessions::meta::kInputSkippedLines, std::to_string(skipped));
      session->set_metadata(sessions::meta::kInputSkippedLinesPerStepJson, nlohmann::json(result.skipped_lines_per_step).dump());
      session->set_metadata(sessions::meta::kInvalidIds, std::to_string(invalid));
    }
    const auto& q = result.qcomms_error;
    session->set_metadata(sessions::meta::kQcommsErrorJson, nlohmann::json{{"forward_max_abs_error", q.forward_max_abs},
                                                                           {"forward_relative_error", q.forward_relative},
                                                                           {"backward_max_abs_error", q.backward_max_abs},
                                                                           {"backward_relative_error", q.backward_relative}}
                                                                .dump());
    session->set_metadata(sessions::meta::kTableStorageJson, table_storage_json(result.table_storage).dump());
    if (result.held_out || !result.held_out_skipped.empty())
      session->set_metadata(sessions::meta::kHeldOutJson, held_out_json(result).dump());
  }
  if (sh.opt.keep_tables && result.ended == RunEnd::complete) {
    for (size_t t = 0; t < spec.tables.size(); ++t) {
      const TableSpec& ts = spec.tables[t];
      std::vector<float> full(static_cast<size_t>(ts.rows() * ts.embedding_dim));
      const TablePlan& tp = result.final_plan.tables[t];  // where the shards ended (live rebalancing)
      for (const Shard& s : tp.shards) {
        if (sh.layout.replicated(static_cast<int>(t)) && s.rank != 0) continue;  // one replica
        const auto local = std::find(local_ranks_.begin(), local_ranks_.end(), s.rank);
        if (local == local_ranks_.end()) continue;  // another process's shard: zeros here
        for (auto& ls : ranks_[static_cast<size_t>(local - local_ranks_.begin())]->shards) {
          if (ls.table != static_cast<int>(t) || ls.s.row_offset != s.row_offset || ls.s.col_offset != s.col_offset) continue;
          for (int64_t r = 0; r < s.num_rows; ++r) ls.row(r, full.data() + (s.row_offset + r) * ts.embedding_dim + s.col_offset);
        }
      }
      // hot rows (sharding/hot_rows.cpp): the replica holds them, the shards' copies are stale
      const auto& hot = sh.layout.hot_rows[t];
      if (!hot.empty()) {
        const LocalShard& rep = ranks_.front()->hot_replicas.at(static_cast<int>(t));
        for (size_t h = 0; h < hot.size(); ++h)
          rep.row(static_cast<int64_t>(h), full.data() + hot[h] * ts.embedding_dim);
      }
      result.tables.push_back(std::move(full));
    }
    result.dense_params = ranks_.front()->dense().params();
  }
}

}  // namespace embedscope::engine::threaded

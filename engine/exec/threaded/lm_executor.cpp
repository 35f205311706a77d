// The threaded executor of an lm_embedding workload (lm_executor.h): the rank threads, their
// step programs op by op, what each rank records, and how the run ended.
#include "lm_executor.h"

#include "flight_dump_watcher.h"

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <optional>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "comm_worker.h"
#include "embedscope/engine/comm/gloo_process_group.h"
#include "embedscope/engine/exec/setup_note.h"  // kSetupTimeoutMs
#include "embedscope/engine/input/input.h"
#include "embedscope/engine/memory/memory.h"
#include "embedscope/engine/program/lm_program.h"
#include "embedscope/sessions/model/id_buckets.h"
#include "exec/executor.h"
#include "exec/threaded/memory_records.h"

namespace embedscope::engine::threaded {

std::string host_name();  // exec/run.cpp

namespace {
using sessions::Lane;
using sessions::OpCategory;

/// A CPU rank's device: the host's physical memory (bytes), shared by the ranks' threads.
int64_t host_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : int64_t{1} << 40;
}
}  // namespace

/// Every rank's decision to go on after a step, taken together (an in-process barrier): the
/// last rank to arrive reads the cancel flag once for all. A failed rank drops out, so the others
/// are not kept waiting for it (they fail in their next collective with it instead).
struct LmExecutor::StepVote {
  std::mutex mu;
  std::condition_variable cv;
  int members = 0, arrived = 0;
  int64_t generation = 0;
  bool stop = false;
  const std::atomic<bool>* cancel = nullptr;

  void complete() {
    stop = cancel && cancel->load();
    arrived = 0;
    ++generation;
    cv.notify_all();
  }
  /// true: go on with the next step.
  bool arrive() {
    std::unique_lock<std::mutex> lock(mu);
    const int64_t gen = generation;
    if (++arrived == members)
      complete();
    else
      cv.wait(lock, [&] { return generation != gen; });
    return !stop;
  }
  /// Rank `rank` votes no more (once; later calls change nothing).
  void drop(int rank) {
    std::lock_guard<std::mutex> lock(mu);
    if (dropped.size() <= static_cast<size_t>(rank)) dropped.resize(static_cast<size_t>(rank) + 1, false);
    if (dropped[static_cast<size_t>(rank)]) return;
    dropped[static_cast<size_t>(rank)] = true;
    --members;
    if (arrived > 0 && arrived == members) complete();
  }
  std::vector<bool> dropped;
};

LmExecutor::LmExecutor(const LmWorkloadSpec& spec, const LmRunOptions& options)
    : spec_(spec), opt_(options), tracer_(spec.world_size, true), vote_(std::make_unique<StepVote>()) {
  vote_->members = spec.world_size;
  vote_->cancel = options.cancel;
}

LmExecutor::~LmExecutor() = default;

/// What one rank records besides its spans: the memory history since the last flush and a
/// hash of the last block layout recorded.
struct LmExecutor::RankRun {
  int rank = 0;
  std::atomic<int64_t> step{-1};  // the step being run; the model's set-up belongs to step -1
  std::vector<sessions::MemoryEvent> mem_events;
  int64_t requested = 0, peak_requested = 0;  // bytes asked for by live blocks (before rounding)
  uint64_t last_layout = 0;
  int64_t counters_step = INT64_MIN;  // the step of the last counters written
  /// The token histogram's bucket totals in the session so far (empty: none yet).
  std::vector<int64_t> histogram_written;

  /// The buckets of `h` (LmRank::token_histogram: the rank's cumulative counts over the
  /// id_buckets_of(V') buckets of `vp` rows) whose totals changed since the last call, as
  /// session records of this rank holding the new totals; they become the written totals. What
  /// each step hands to SessionWriter::add_step_records with its step row and load counter, so
  /// that a killed run keeps the tokens of exactly the steps it kept (as the DLRM ranks since
  /// fixe49; before, the histogram was written at the run's end only and a SIGKILLed LM run kept
  /// none).
  std::vector<sessions::IdHistogramBucket> histogram_changed(const std::vector<int64_t>& h, int64_t vp) {
    std::vector<sessions::IdHistogramBucket> out;
    histogram_written.resize(h.size(), 0);
    for (size_t k = 0; k < h.size(); ++k) {
      if (h[k] == histogram_written[k]) continue;
      histogram_written[k] = h[k];
      const auto b = static_cast<int64_t>(k);
      out.push_back({rank, 0, static_cast<int32_t>(b), sessions::id_bucket_begin(vp, b),
                     sessions::id_bucket_begin(vp, b + 1), h[k]});
    }
    return out;
  }

  void record_counters(sessions::SessionWriter& w, const DeviceArena& arena, int64_t st) {
    w.add_memory_events(mem_events);
    mem_events.clear();
    w.add_memory(arena_counter(arena, rank, st));
    counters_step = st;
  }
  /// A snapshot of the arena's segments and blocks, unless the layout is the last one recorded
  /// (the steady state) and not `force`d (an OOM).
  void record_snapshot(sessions::SessionWriter& w, const DeviceArena& arena, int64_t st, int64_t time_ns,
                       const char* reason, bool force) {
    uint64_t h = 0;
    sessions::MemorySnapshot sn = arena_snapshot(arena, rank, st, time_ns, reason, h);
    if (!force && h == last_layout) return;
    last_layout = h;
    w.add_snapshot(std::move(sn));
  }
};

void LmExecutor::run_rank(int r, LmRunResult& result) {
  sessions::SessionWriter* w = session_;
  RankRun rr;
  rr.rank = r;
  std::vector<int> members(static_cast<size_t>(spec_.world_size));
  for (int k = 0; k < spec_.world_size; ++k) members[static_cast<size_t>(k)] = k;
  ProcessGroup pg(rendezvous_, "world", members, r, std::chrono::milliseconds(opt_.collective_timeout_ms));
  pg.set_flight_recorder(flight_[static_cast<size_t>(r)].get());
  // the setup wait's group (exec/threaded/rank.h wait_for_every_rank_set_up, as a DLRM rank's):
  // connected now, while every rank is here; recorded nowhere; its timeout kSetupTimeoutMs, not
  // the workload's collective timeout
  std::optional<ProcessGroup> setup;
  if (spec_.world_size > 1) setup.emplace(rendezvous_, "setup", members, r, std::chrono::milliseconds(kSetupTimeoutMs));
  pg.set_observer(&tracer_.clock(), [&](sessions::CollectiveRecord&& c) {
    c.step = rr.step.load();
    // the comm lane: a span per collective (called on the comm worker, which owns the lane),
    // with its bytes and sequence number
    sessions::OpEvent e;
    e.rank = r;
    e.lane = Lane::comm;
    e.category = OpCategory::comm;
    e.name = exec::intern_op_name(c.name);
    e.step = c.step;
    e.start_ns = c.start_ns;
    e.end_ns = c.end_ns;
    e.bytes = c.bytes_sent + c.bytes_received;
    e.correlation = c.sequence;
    tracer_.record(e);
    std::lock_guard<std::mutex> lock(mu_);
    if (w) w->add_collective(c);
    result.collectives.push_back(std::move(c));
  });
  // the rank's device memory: PyTorch's caching allocator over host memory
  AllocatorConfig ac;
  ac.kind = AllocatorKind::caching;
  ac.capacity_bytes = opt_.device_memory_bytes > 0 ? opt_.device_memory_bytes : host_memory_bytes();
  DeviceArena arena(r, ac);
  arena.allocator().set_listener([&](const AllocatorEvent& e) {
    if (e.kind == AllocatorEvent::Kind::alloc) rr.peak_requested = std::max(rr.peak_requested, rr.requested += e.requested);
    if (e.kind == AllocatorEvent::Kind::free) rr.requested -= e.requested;
    if (w) rr.mem_events.push_back({r, tracer_.now_ns(), rr.step.load(), to_string(e.kind), e.address, e.size, e.requested, e.tag});
  });
  // the layout that could not hold the request, while every buffer is still alive
  if (w)
    arena.set_oom_handler([&] {
      std::lock_guard<std::mutex> lock(mu_);
      rr.record_snapshot(*w, arena, rr.step.load(), tracer_.now_ns(), "oom", true);
    });
  if (w) {
    std::lock_guard<std::mutex> lock(mu_);
    w->add_rank({r, threaded::host_name(), "cpu (thread)", ac.capacity_bytes});
    w->add_lane({r, static_cast<int32_t>(Lane::compute), "compute", "thread"});
    w->add_lane({r, static_cast<int32_t>(Lane::comm), "comm", "thread"});
  }
  auto keep_spans = [&] {
    std::vector<sessions::OpEvent> spans = tracer_.take(r);
    std::lock_guard<std::mutex> lock(mu_);
    if (w) w->add_ops(spans);
    result.ops.insert(result.ops.end(), spans.begin(), spans.end());
  };
  CommWorker comm;
  LmRankResult& out = result.ranks[static_cast<size_t>(r)];
  std::optional<LmRank> holder;  // outlives a failure: the session records what it held
  try {
    LmRank& model = holder.emplace(spec_, pg, &arena);
    // One program for every step (the lm_embedding step does not depend on its number), its op
    // names interned for the spans, built before the first step so that no step's time includes it.
    const StepProgram program = build_lm_step_program(spec_, r, 0);
    std::vector<const char*> names;
    for (const ProgramOp& op : program.ops) names.push_back(exec::intern_op_name(op.name));
    // every rank waits for the others' setup (their shards' initial values) before step 0: a
    // rank initialising a large vocabulary shard no longer makes its peers' first collective
    // time out as a hang, nor shows up as step 0's communication. A rank that fails closes this
    // group's connections too (below), releasing the others at once.
    if (setup) {
      float ready = 1.0f;
      setup->all_reduce_sum("setup/every_rank_set_up", &ready, 1);
    }
    int64_t steps_ns = 0;  // rank 0's steps so far, for LmRunOptions::on_step
    for (int64_t st = 0; st < spec_.steps; ++st) {
      rr.step = st;
      flight_[static_cast<size_t>(r)]->set_step(st);
      const int64_t t0 = tracer_.now_ns();
      int64_t lookup_ns = 0;  // the forward "lookup" op's time: the load counter's lookup_ns, as the DLRM rank's
      model.begin_step(st);
      for (const ProgramOp& op : program.ops) {
        const char* name = names[static_cast<size_t>(op.id)];
        if (op.lane == Lane::compute) {
          const int64_t o0 = tracer_.now_ns();
          {
            profiler::ScopedSpan span(tracer_, r, Lane::compute, op.category, name, st);
            model.run(op);
          }
          if (is_lm_lookup_op(op)) lookup_ns += tracer_.now_ns() - o0;
          continue;
        }
        // the comm worker runs the op's collectives (each a span, above); the compute thread waits
        comm.run([&] { model.run(op); });
      }
      LmRank::StepResult sr = model.end_step();
      // a diverged loss ends the run crashed as a DLRM run's does, before the step is recorded
      // (steps.loss is NOT NULL: tester47 F7); the rank's spans of the step are kept below
      throw_if_diverged(sr.loss, st);
      const int64_t t1 = tracer_.now_ns();
      if (opt_.keep_outputs) out.embedding_out.push_back(std::move(sr.embedding_out));
      keep_spans();
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (r == 0) result.losses.push_back(sr.loss);
        // the slowest rank's time of the step, as `stats` and the DLRM run give it (tester33 D6)
        const auto i = static_cast<size_t>(st);
        if (result.step_ns.size() <= i) result.step_ns.resize(i + 1, 0);
        result.step_ns[i] = std::max(result.step_ns[i], t1 - t0);
        if (w) {
          sessions::LoadCounter lc;
          lc.step = st;
          lc.rank = r;
          lc.table = 0;
          lc.shard = r;
          lc.ids = sr.ids_looked_up;
          lc.unique_ids = sr.unique_rows;
          const LmLookupBytes lb = lm_lookup_bytes(spec_, lc.ids);
          lc.bytes_in = lb.bytes_in;
          lc.bytes_out = lb.bytes_out;
          lc.lookup_ns = lookup_ns;  // one shard a rank (tester47 F16: was 0, shown as balanced)
          // the step row, its load counter and the histogram buckets its batch changed, in one
          // transaction (a SIGKILLed run keeps the tokens of the steps it kept). vocab_parallel:
          // every rank's batch is the group's one batch, so rank 0 alone counts it (tester43 F5)
          std::vector<sessions::IdHistogramBucket> hist;
          if (spec_.sharding != LmSharding::vocab_parallel || r == 0)
            hist = rr.histogram_changed(model.token_histogram(), spec_.padded_vocab_size());
          w->add_step_records({st, r, t0, t1, sr.loss, arena.in_use(), arena.peak()}, {lc}, hist);
          rr.record_counters(*w, arena, st);
          rr.record_snapshot(*w, arena, st, t1, "step", false);
        }
      }
      // a session that can no longer be written (a full disk): the rank stops here, the steps
      // committed kept, and the run ends write_failed (rank_failure.h), as a DLRM rank does
      // (rank.cpp; tester49 F3). Before, an LM run went on to its last step and failed at close.
      if (w && w->write_failed())
        if (auto f = w->write_failure()) throw sessions::SessionWriteError(f->error);
      if (r == 0 && opt_.on_step) {
        steps_ns += t1 - t0;
        StepProgress p;
        p.step = st + 1;
        p.total_steps = spec_.steps;
        p.loss = sr.loss;
        const int64_t samples = spec_.micro_batch_size * (spec_.sharding == LmSharding::vocab_parallel ? 1 : spec_.world_size);
        if (steps_ns > 0) {
          const double seconds = static_cast<double>(steps_ns) * 1e-9;
          p.samples_per_s = static_cast<double>(samples * p.step) / seconds;
          p.eta_s = seconds / static_cast<double>(p.step) * static_cast<double>(p.total_steps - p.step);
        }
        opt_.on_step(p);
      }
      if (st + 1 < spec_.steps && !vote_->arrive()) {
        std::lock_guard<std::mutex> lock(mu_);
        result.ended = RunEnd::cancelled;  // every rank writes the same
        break;
      }
    }
    out.rows = model.rows();
    out.table = model.table();
    out.output_projection = model.output_projection();
    out.body_weights = model.body_weights();
    for (int64_t i = 0; i < model.local_tokens(); ++i) out.token_of.push_back(model.token_of(i));
    out.bytes_sent = pg.counters().bytes_sent;
    out.bytes_received = pg.counters().bytes_received;
    out.peak_allocated = arena.allocator().stats().peak_allocated;
    out.peak_requested = rr.peak_requested;
    arena.allocator().set_listener(nullptr);  // buffers freed after the run are not history
    // The run's end (complete, or cancelled after a whole step): the rank's every bucket once
    // more, the empty ones with 0, as LM sessions have always held them (the buckets with ids
    // are the totals written with the last step: unchanged). vocab_parallel: every rank's
    // histogram is the group's one batch: rank 0 writes it, so the session's id_histogram
    // counts each token once (tester43 F5: 4 ranks gave 4x the tokens)
    if (w && (spec_.sharding != LmSharding::vocab_parallel || r == 0)) {
      std::vector<sessions::IdHistogramBucket> hist;
      const auto& h = model.token_histogram();
      const int64_t vp = spec_.padded_vocab_size();
      for (int64_t k = 0; k < static_cast<int64_t>(h.size()); ++k)
        hist.push_back({r, 0, static_cast<int32_t>(k), sessions::id_bucket_begin(vp, k),
                        sessions::id_bucket_begin(vp, k + 1), h[static_cast<size_t>(k)]});
      std::lock_guard<std::mutex> lock(mu_);
      w->add_id_histogram(hist);
    }
  } catch (...) {
    RankError err = rank_error_of(r, tracer_.now_ns(), std::current_exception());
    vote_->drop(r);
    pg.close_connections();  // peers blocked on this rank fail now, not at their timeout
    if (setup) setup->close_connections();  // and those still waiting for its setup
    arena.allocator().set_listener(nullptr);
    keep_spans();  // the spans of the step that failed midway
    std::lock_guard<std::mutex> lock(mu_);
    // what the rank held when the run ended: the counters and history of the failed step
    if (w && rr.counters_step != rr.step.load()) rr.record_counters(*w, arena, rr.step.load());
    errors_.push_back(std::move(err));
  }
}

void LmExecutor::run(sessions::SessionWriter* session, LmRunResult& result) {
  session_ = session;
  const int p = spec_.world_size;
  result.ranks.assign(static_cast<size_t>(p), {});
  result.losses.clear();
  result.step_ns.clear();
  const int64_t start = tracer_.now_ns();
  flight_.clear();
  for (int r = 0; r < p; ++r)
    flight_.push_back(std::make_unique<FlightRecorder>(r, flight_recorder_default_capacity(), &tracer_.clock()));
  int32_t dumps = 0;
  FlightDumpWatcher watcher(session ? opt_.flight_dump : nullptr,
                            [&](const std::string& reason) { dump_flight_recorders(dumps++, reason); });
  std::vector<std::thread> threads;
  for (int r = 0; r < p; ++r)
    threads.emplace_back([this, r, &result] {
      try {
        run_rank(r, result);
      } catch (...) {  // before the rank's model existed (its group's rendezvous) or while recording a failure
        RankError err = rank_error_of(r, tracer_.now_ns(), std::current_exception());
        vote_->drop(r);
        std::lock_guard<std::mutex> lock(mu_);
        errors_.push_back(std::move(err));
      }
    });
  for (auto& t : threads) t.join();
  watcher.stop();
  result.wall_ns = tracer_.now_ns() - start;
  std::sort(result.ops.begin(), result.ops.end(), [](const auto& a, const auto& b) {
    return std::tie(a.start_ns, a.rank, a.lane) < std::tie(b.start_ns, b.rank, b.lane);
  });
  if (!errors_.empty()) {
    const RankError first = first_failure(errors_);
    result.ended = first.kind;
    result.error = first.message;
    dump_flight_recorders(dumps++, first.kind == RunEnd::hang ? std::string("collective timeout")
                                                              : fmt::format("run ended {}", to_string(first.kind)));
  }
}

void LmExecutor::dump_flight_recorders(int32_t dump, const std::string& reason) {
  if (!session_) return;
  for (const auto& f : flight_)
    if (f->recorded() > 0) session_->add_flight_records(f->dump(dump, reason));
}

}  // namespace embedscope::engine::threaded

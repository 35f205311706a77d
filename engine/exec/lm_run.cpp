// run_lm (exec/lm_run.h): the ranks of an lm_embedding workload on threads, and its session.

#include "embedscope/engine/exec/lm_run.h"
#include "exec/executor.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embedscope/engine/comm/gloo_process_group.h"
#include "embedscope/engine/input/input.h"
#include "embedscope/engine/memory/memory.h"
#include "embedscope/profiler/tracer.h"
#include "embedscope/sessions/model/id_buckets.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::engine {

namespace {
/// A CPU rank's device: the host's physical memory (bytes), shared by the ranks' threads.
int64_t host_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : int64_t{1} << 40;
}

/// A snapshot of the arena's segments and blocks; `last` the hash of the previous one
/// recorded: an unchanged layout (the steady state) is not recorded again.
void record_snapshot(sessions::SessionWriter& w, const DeviceArena& arena, int rank, int64_t step, int64_t time_ns,
                     uint64_t& last) {
  sessions::MemorySnapshot sn;
  sn.rank = rank;
  sn.step = step;
  sn.time_ns = time_ns;
  sn.reason = "step";
  uint64_t h = 0x9e3779b97f4a7c15ULL;
  for (const auto& seg : arena.allocator().snapshot())
    for (const auto& b : seg.blocks) {
      sn.blocks.push_back({seg.address, seg.size, b.address, b.size, b.requested, b.allocated, b.tag});
      h = mix64(h ^ static_cast<uint64_t>(b.address)) ^ mix64(static_cast<uint64_t>(b.size) * 2 + (b.allocated ? 1 : 0));
    }
  if (h == last) return;
  last = h;
  w.add_snapshot(std::move(sn));
}
}  // namespace

sessions::OpCategory lm_op_category(const char* name, bool comm) {
  using sessions::OpCategory;
  if (comm) return OpCategory::comm;
  const std::string_view n(name);
  if (n == "input" || n == "bucketize") return OpCategory::input;
  if (n == "lookup" || n == "embedding_backward") return OpCategory::lookup;
  if (n == "optimizer") return OpCategory::optimizer;
  return OpCategory::dense;
}

void write_lm_session_plan(sessions::SessionWriter& writer, const LmWorkloadSpec& spec, int64_t wall_anchor_ns) {
  const int p = spec.world_size;
  namespace meta = sessions::meta;
  writer.set_metadata(meta::kWorkloadName, spec.name);
  writer.set_metadata(meta::kWorkloadJson, to_json(spec).dump());
  writer.set_metadata(meta::kWorldSize, std::to_string(p));
  writer.set_metadata(meta::kBatchSize, std::to_string(spec.micro_batch_size));
  // a sample is a sequence of S tokens: B per step (vocab_parallel), B p (the others)
  writer.set_metadata(meta::kSamplesPerStep,
                      std::to_string(spec.micro_batch_size * (spec.sharding == LmSharding::vocab_parallel ? 1 : p)));
  writer.set_metadata(meta::kSteps, std::to_string(spec.steps));
  writer.set_metadata(meta::kWarmupSteps, "0");
  writer.set_metadata(meta::kWallAnchorUnixNs, std::to_string(wall_anchor_ns));
  // the plan: one table, a shard per rank (data_parallel: every rank all rows)
  std::vector<sessions::ShardRecord> shards;
  for (int r = 0; r < p; ++r) {
    const VocabRange rows = spec.sharding == LmSharding::data_parallel ? VocabRange{0, spec.padded_vocab_size()}
                                                                       : vocab_range(spec.padded_vocab_size(), p, r);
    shards.push_back({0, kLmTableName, to_string(spec.sharding), -1, r, r, rows.begin, rows.size(), 0,
                      spec.hidden_size, rows.size() * spec.hidden_size * 4 * (spec.tie_word_embeddings ? 1 : 2)});
  }
  writer.add_shards(shards);
}

LmRunResult run_lm(const LmWorkloadSpec& spec, const LmRunOptions& options) {
  validate(spec, "workload");
  const int p = spec.world_size;
  std::unique_ptr<sessions::SessionWriter> writer;
  profiler::RunClock clock;
  if (!options.session_path.empty()) {
    writer = std::make_unique<sessions::SessionWriter>(options.session_path, options.overwrite);
    write_lm_session_plan(*writer, spec, clock.wall_anchor_ns());
    namespace meta = sessions::meta;
    writer->set_metadata(meta::kBackend, "cpu");
    writer->set_metadata(meta::kSimulated, "0");
    writer->set_metadata(meta::kGlooVersion, gloo_version());
    writer->set_metadata(meta::kClock, "steady_clock ns since the run's start");
    for (int r = 0; r < p; ++r) {
      writer->add_rank({r, "localhost", "cpu (thread)", host_memory_bytes()});
      writer->add_lane({r, static_cast<int32_t>(sessions::Lane::compute), "compute", "thread"});
      writer->add_lane({r, static_cast<int32_t>(sessions::Lane::comm), "comm", "thread"});
    }
  }
  LmRunResult result;
  result.ranks.resize(static_cast<size_t>(p));
  result.losses.assign(static_cast<size_t>(spec.steps), 0.0);
  result.step_ns.assign(static_cast<size_t>(spec.steps), 0);
  std::mutex mu;  // guards result.collectives / ops and the writer's steps
  std::vector<std::string> errors(static_cast<size_t>(p));
  auto rv = Rendezvous::in_process();
  std::vector<int> members(static_cast<size_t>(p));
  for (int r = 0; r < p; ++r) members[static_cast<size_t>(r)] = r;
  const int64_t start = clock.now_ns();
  std::vector<std::thread> threads;
  for (int r = 0; r < p; ++r) {
    threads.emplace_back([&, r] {
      try {
        ProcessGroup pg(rv, "world", members, r, std::chrono::milliseconds(options.collective_timeout_ms));
        int64_t cur_step = 0;
        std::vector<sessions::OpEvent> ops;
        pg.set_observer(&clock, [&](sessions::CollectiveRecord&& c) {
          c.step = cur_step;
          // the comm lane: one span per collective, with its bytes and sequence number
          sessions::OpEvent e;
          e.rank = r;
          e.lane = sessions::Lane::comm;
          e.category = sessions::OpCategory::comm;
          e.name = exec::intern_op_name(c.name);
          e.step = c.step;
          e.start_ns = c.start_ns;
          e.end_ns = c.end_ns;
          e.bytes = c.bytes_sent + c.bytes_received;
          e.correlation = c.sequence;
          ops.push_back(e);
          std::lock_guard<std::mutex> lock(mu);
          if (writer) writer->add_collective(c);
          result.collectives.push_back(std::move(c));
        });
        // the rank's device memory: PyTorch's caching allocator over host memory
        AllocatorConfig ac;
        ac.kind = AllocatorKind::caching;
        ac.capacity_bytes = host_memory_bytes();
        DeviceArena arena(r, ac);
        std::vector<sessions::MemoryEvent> mem_events;
        int64_t requested = 0, peak_requested = 0;  // bytes asked for by live blocks (before rounding)
        arena.allocator().set_listener([&](const AllocatorEvent& e) {
          if (e.kind == AllocatorEvent::Kind::alloc) peak_requested = std::max(peak_requested, requested += e.requested);
          if (e.kind == AllocatorEvent::Kind::free) requested -= e.requested;
          if (writer)
            mem_events.push_back({r, clock.now_ns(), cur_step, to_string(e.kind), e.address, e.size, e.requested, e.tag});
        });
        uint64_t last_layout = 0;
        LmRank rank(spec, pg, [&clock] { return clock.now_ns(); }, [&](const LmOpSpan& s) {
          if (s.comm) return;  // the collectives' own spans are recorded (above)
          sessions::OpEvent e;
          e.rank = r;
          e.lane = s.comm ? sessions::Lane::comm : sessions::Lane::compute;
          e.category = lm_op_category(s.name, s.comm);
          e.name = s.name;
          e.step = s.step;
          e.start_ns = s.start_ns;
          e.end_ns = s.end_ns;
          ops.push_back(e);
        }, &arena);
        LmRankResult& out = result.ranks[static_cast<size_t>(r)];
        for (int64_t st = 0; st < spec.steps; ++st) {
          cur_step = st;
          const int64_t t0 = clock.now_ns();
          LmRank::StepResult sr = rank.step(st);
          const int64_t t1 = clock.now_ns();
          if (options.keep_outputs) out.embedding_out.push_back(std::move(sr.embedding_out));
          std::lock_guard<std::mutex> lock(mu);
          if (r == 0) {
            result.losses[static_cast<size_t>(st)] = sr.loss;
            result.step_ns[static_cast<size_t>(st)] = t1 - t0;
          }
          if (writer) {
            writer->add_step({st, r, t0, t1, sr.loss, arena.in_use(), arena.peak()});
            sessions::LoadCounter lc;
            lc.step = st;
            lc.rank = r;
            lc.table = 0;
            lc.shard = r;
            lc.ids = sr.ids_looked_up;
            lc.unique_ids = sr.unique_rows;
            writer->add_load(lc);
            writer->add_memory_events(mem_events);
            mem_events.clear();
            const MemoryStats ms = arena.allocator().stats();
            writer->add_memory({st, r, ms.allocated, ms.reserved, ms.peak_allocated, ms.peak_reserved,
                                ms.largest_free_block, ms.rounding_loss, ms.segments, ms.external_fragmentation,
                                ms.memviz_fragmentation});
            record_snapshot(*writer, arena, r, st, t1, last_layout);
          }
        }
        out.rows = rank.rows();
        out.table = rank.table();
        out.output_projection = rank.output_projection();
        out.body_weights = rank.body_weights();
        for (int64_t i = 0; i < rank.local_tokens(); ++i) out.token_of.push_back(rank.token_of(i));
        out.bytes_sent = pg.counters().bytes_sent;
        out.bytes_received = pg.counters().bytes_received;
        out.peak_allocated = arena.allocator().stats().peak_allocated;
        out.peak_requested = peak_requested;
        arena.allocator().set_listener(nullptr);  // buffers freed after the run are not history
        std::lock_guard<std::mutex> lock(mu);
        if (writer) {
          writer->add_ops(ops);
          std::vector<sessions::IdHistogramBucket> hist;
          const auto& h = rank.token_histogram();
          const int64_t vp = spec.padded_vocab_size();
          for (int64_t k = 0; k < static_cast<int64_t>(h.size()); ++k)
            hist.push_back({r, 0, static_cast<int32_t>(k), sessions::id_bucket_begin(vp, k),
                            sessions::id_bucket_begin(vp, k + 1), h[static_cast<size_t>(k)]});
          writer->add_id_histogram(hist);
        }
        result.ops.insert(result.ops.end(), ops.begin(), ops.end());
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = fmt::format("rank {}: {}", r, e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  result.wall_ns = clock.now_ns() - start;
  for (const std::string& e : errors) {
    if (e.empty()) continue;
    if (writer) writer->close("crashed", e);
    throw std::runtime_error(e);
  }
  if (writer) writer->close("complete");
  return result;
}

}  // namespace embedscope::engine

// run_training: the facade the apps call. Sets up the devices (cuda: GPUs, NCCL communicators,
// CUPTI), the session and one threaded-executor rank per device, runs them, and gathers the
// result, the session's metadata and how the run ended.
#include <unistd.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "embedscope/engine/backend.h"
#include "embedscope/engine/kernels.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/engine/sharding/plan_json.h"
#include "threaded/rank.h"
#if EMBEDSCOPE_WITH_CUDA
#include <cuda_runtime_api.h>

#include "exec/device/cuda_rank_device.h"
#include "embedscope/profiler/cupti_tracer.h"
#endif

namespace embedscope::engine {

const char* to_string(RunEnd e) {
  switch (e) {
    case RunEnd::complete: return "complete";
    case RunEnd::cancelled: return "cancelled";
    case RunEnd::crashed: return "crashed";
    case RunEnd::oom: return "oom";
    case RunEnd::hang: return "hang";
  }
  return "crashed";
}


namespace threaded {
std::string host_name() {
  char buf[256] = {};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}
}  // namespace threaded

namespace {

using threaded::Rank;
using threaded::RankError;
using threaded::Shared;
using threaded::host_name;
using detail::Layout;
using sessions::Lane;

std::string cpu_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(colon + 2);
    }
  return "unknown";
}


void write_run_metadata(sessions::SessionWriter& w, const WorkloadSpec& spec, const ShardingPlan& plan,
                        const profiler::RunClock& clock) {
  w.set_metadata(sessions::meta::kToolVersion, EMBEDSCOPE_VERSION);
  w.set_metadata(sessions::meta::kCreatedUnixNs, std::to_string(clock.wall_anchor_ns()));
  w.set_metadata(sessions::meta::kWallAnchorUnixNs, std::to_string(clock.wall_anchor_ns()));
  w.set_metadata(sessions::meta::kClock, "steady_clock ns since the run's start");
  w.set_metadata(sessions::meta::kHost, host_name());
  w.set_metadata(sessions::meta::kCpuName, cpu_name());
  w.set_metadata(sessions::meta::kGpuNames, "");
  w.set_metadata(sessions::meta::kGlooVersion, gloo_version());
  w.set_metadata(sessions::meta::kCudaVersion, "not used (cpu backend)");
  w.set_metadata(sessions::meta::kNcclVersion, "not used (cpu backend)");
  w.set_metadata(sessions::meta::kSimulated, "0");
  w.set_metadata(sessions::meta::kBackend, to_string(spec.devices.backend));
  w.set_metadata(sessions::meta::kWorkloadName, spec.name);
  constexpr auto replace = nlohmann::json::error_handler_t::replace;  // names may not be UTF-8
  w.set_metadata(sessions::meta::kWorkloadJson, to_json(spec).dump(-1, ' ', false, replace));
  w.set_metadata(sessions::meta::kShardingPlanJson, to_json(spec, plan).dump(-1, ' ', false, replace));
  // the plan as rows (table `shards`), with each shard's planned weights and optimizer state
  std::vector<sessions::ShardRecord> shards;
  for (const TablePlan& tp : plan.tables)
    for (size_t k = 0; k < tp.shards.size(); ++k) {
      const Shard& sh = tp.shards[k];
      const auto [m1, m2] = optimizer_state_floats(spec.optimizer.type, sh.num_rows, sh.num_cols);
      shards.push_back({tp.table, spec.tables[static_cast<size_t>(tp.table)].name, to_string(tp.type), tp.node,
                        static_cast<int32_t>(k), sh.rank, sh.row_offset, sh.num_rows, sh.col_offset, sh.num_cols,
                        (sh.num_rows * sh.num_cols + m1 + m2) * static_cast<int64_t>(sizeof(float))});
    }
  w.add_shards(std::move(shards));
  w.set_metadata(sessions::meta::kWorldSize, std::to_string(spec.devices.count));
  w.set_metadata(sessions::meta::kBatchSize, std::to_string(spec.batch_size));
  w.set_metadata(sessions::meta::kSamplesPerStep, std::to_string(spec.batch_size * spec.devices.count));
  w.set_metadata(sessions::meta::kSteps, std::to_string(spec.steps));
  w.set_metadata(sessions::meta::kWarmupSteps, std::to_string(spec.warmup_steps));
  w.set_metadata(sessions::meta::kPipeline, to_string(spec.pipeline));
  w.set_metadata(sessions::meta::kQcommsForwardPrecision, to_string(spec.qcomms.forward_precision));
  w.set_metadata(sessions::meta::kQcommsBackwardPrecision, to_string(spec.qcomms.backward_precision));
  w.set_metadata(sessions::meta::kNetworkJson, to_json(spec)["network"].dump());
}

// The step of work before the first step (setup): as Rank::setup counts it.
[[maybe_unused]] int64_t step_of_setup(const WorkloadSpec& spec) { return -spec.warmup_steps - 1; }

int64_t host_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
}

}  // namespace

RunResult run_training(const WorkloadSpec& requested, const ShardingPlan& plan, const TrainerOptions& options) {
  // auto becomes cpu or cuda; a cuda run without (enough) GPUs is refused here
  const std::string origin = requested.name.empty() ? "workload" : requested.name;
  const WorkloadSpec spec = with_resolved_backend(requested, origin);
  validate_plan(spec, plan, "sharding plan");
  const bool on_cuda = spec.devices.backend == Backend::cuda;
  RunResult result;
  result.plan = plan;
  const auto est = estimate_memory(spec, result.plan);
  check_memory_fits(spec, est);
  int64_t need = 0;
  for (const auto& e : est) need += e.total();
  if (const int64_t host = host_memory_bytes(); !on_cuda && host > 0 && need > host * 9 / 10)
    throw SpecError(fmt::format(
        "/devices: the cpu backend runs all {} ranks in this process and they need {} in all, but this machine "
        "has {}; use fewer devices, a smaller batch or a scaled preset",
        spec.devices.count, format_bytes(need), format_bytes(host)));

  Shared sh(spec, result.plan, options);
  const int W = spec.devices.count;
#if EMBEDSCOPE_WITH_CUDA
  // cuda backend: rank r on GPU r, one NCCL communicator per rank and group (ncclCommInitAll),
  // and CUPTI for the whole run, set up before the session file exists (an NCCL error throws).
  // Declared before the ranks, which use them, so they outlive them.
  std::vector<std::unique_ptr<NcclComm>> comms;
  std::unique_ptr<profiler::CuptiTracer> cupti;
  std::string cupti_error;
  if (on_cuda) {
    const auto timeout = std::chrono::milliseconds(spec.collective_timeout_ms);
    for (int r = 0; r < W; ++r) sh.gpus.push_back(std::make_unique<detail::CudaRankDevice>(r));
    auto adopt = [&](std::vector<std::unique_ptr<NcclComm>> group, std::vector<NcclComm*>& of_rank,
                     const std::vector<int>& members) {
      of_rank.resize(static_cast<size_t>(W));
      for (size_t i = 0; i < group.size(); ++i) {
        of_rank[static_cast<size_t>(members[i])] = group[i].get();
        comms.push_back(std::move(group[i]));
      }
    };
    std::vector<int> all(static_cast<size_t>(W));
    std::iota(all.begin(), all.end(), 0);
    adopt(NcclComm::init_all(all, "world", timeout, all), sh.nccl_world, all);
    if (sh.layout.hierarchical) {  // the node and cross groups, as the cpu backend's (Rank::setup)
      const Layout& L = sh.layout;
      for (int n = 0; n < L.nodes; ++n) {
        std::vector<int> m;
        for (int i = 0; i < L.local; ++i) m.push_back(n * L.local + i);
        adopt(NcclComm::init_all(m, fmt::format("node{}", n), timeout, m), sh.nccl_node, m);
      }
      for (int l = 0; l < L.local; ++l) {
        std::vector<int> m;
        for (int n = 0; n < L.nodes; ++n) m.push_back(n * L.local + l);
        adopt(NcclComm::init_all(m, fmt::format("cross{}", l), timeout, m), sh.nccl_cross, m);
      }
    }
    if (options.trace && !options.session_path.empty()) {
      try {
        cupti = std::make_unique<profiler::CuptiTracer>(sh.tracer.clock());
        for (int r = 0; r < W; ++r) cupti->map_device(r, r);
        for (const auto& c : comms) {
          sh.gpus[static_cast<size_t>(c->device())]->bind_thread();
          try {  // NCCL's kernels are recognised by their names too: a stream CUPTI does not know yet is no loss
            cupti->map_stream(c->device(), c->stream(), Lane::gpu_comm);
          } catch (const std::runtime_error&) {
          }
        }
      } catch (const std::exception& e) {  // the run goes on; the session says why it has no GPU ops
        cupti.reset();
        cupti_error = e.what();
      }
    }
  }
#endif
  if (options.emulate_device && !on_cuda)
    for (int r = 0; r < W; ++r) sh.gpus.push_back(detail::host_rank_device());
  std::unique_ptr<sessions::SessionWriter> session;
  if (!options.session_path.empty()) {
    session = std::make_unique<sessions::SessionWriter>(options.session_path, options.session_overwrite);
    sh.session = session.get();
    result.session_path = options.session_path;
    write_run_metadata(*session, spec, result.plan, sh.tracer.clock());
  }
  std::vector<std::unique_ptr<Rank>> ranks;
  try {
    for (int r = 0; r < W; ++r) ranks.push_back(std::make_unique<Rank>(sh, r));
  } catch (const std::exception& e) {  // e.g. a GPU allocator that cannot be set up: the session says so
    if (session) session->close(to_string(RunEnd::crashed), e.what());
    throw;
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < W; ++r) {
    threads.emplace_back([&, r] {
      Rank& rank = *ranks[static_cast<size_t>(r)];
      if (!sh.gpus.empty()) sh.gpus[static_cast<size_t>(r)]->bind_thread();
      auto record = [&](RunEnd kind, bool bad_input, bool consequence, const std::string& msg) {
        std::lock_guard<std::mutex> lock(sh.mu);
        sh.errors.push_back({r, sh.tracer.now_ns(), kind, bad_input, consequence, msg});
      };
      bool vanished = false;
      try {
        rank.main();
      } catch (const RankVanished&) {
        vanished = true;
      } catch (const InvalidIdsError& e) {
        record(RunEnd::crashed, true, false, e.what());
      } catch (const OomError& e) {
        record(RunEnd::oom, false, false, e.what());
      } catch (const SplitMismatchError& e) {
        record(RunEnd::crashed, false, false, e.what());
      } catch (const CollectiveError& e) {
        record(e.timed_out ? RunEnd::hang : RunEnd::crashed, false, !e.timed_out,
               fmt::format("rank {}: {}", r, e.what()));
      } catch (const std::exception& e) {
        record(RunEnd::crashed, false, false, fmt::format("rank {}: {}", r, e.what()));
      }
      std::unique_lock<std::mutex> lock(sh.mu);
      ++sh.finished;
      sh.cv.notify_all();
      // A vanished rank keeps its connections open (as a hung process would) until the others end.
      if (vanished) sh.cv.wait(lock, [&] { return sh.finished == W; });
      lock.unlock();
      rank.teardown();  // closing the sockets makes peers still waiting on this rank fail fast
    });
  }
  for (auto& t : threads) t.join();

  result.samples_per_step = spec.batch_size * W;
  if (!sh.errors.empty()) {
    auto errs = sh.errors;
    std::stable_sort(errs.begin(), errs.end(), [](const RankError& a, const RankError& b) {
      if (a.consequence != b.consequence) return !a.consequence;
      return a.time_ns < b.time_ns;
    });
    result.ended = errs.front().kind;
    result.bad_input = errs.front().bad_input;
    result.error = errs.front().message;
  }
  for (auto& r : ranks) result.ranks.push_back(r->summary);
  QuantError fwd, bwd;
  for (auto& r : ranks) {
    fwd.merge(r->fwd_error_);
    bwd.merge(r->bwd_error_);
  }
  result.qcomms_error = {fwd.max_abs_error, fwd.relative(), bwd.max_abs_error, bwd.relative()};
  if (result.ended == RunEnd::complete) {  // also cancelled runs: the steps that ran
    const size_t n = ranks[0]->step_ns.size();
    for (size_t i = 0; i < n; ++i) {
      int64_t m = 0;
      for (auto& r : ranks) m = std::max(m, r->step_ns[i]);
      result.step_time_ns.push_back(m);
    }
    result.loss = ranks[0]->losses;
  }
  for (auto& r : ranks) result.events.insert(result.events.end(), r->events.begin(), r->events.end());
  std::sort(result.events.begin(), result.events.end(), [](const auto& a, const auto& b) {
    return std::tie(a.start_ns, a.rank, a.lane) < std::tie(b.start_ns, b.rank, b.lane);
  });
  if (result.ended == RunEnd::complete && ranks[0]->cancelled) result.ended = RunEnd::cancelled;
  result.tracer_overhead_ns = sh.tracer.overhead_ns();
  result.dropped_records = sh.tracer.dropped();
#if EMBEDSCOPE_WITH_CUDA
  if (on_cuda) {
    // a failed rank may have left its peers' kernels waiting: abort every communicator before
    // they are destroyed (ncclCommDestroy would wait for them)
    if (!sh.errors.empty())
      for (auto& c : comms) c->abort();
    for (auto& g : sh.gpus) {
      g->bind_thread();
      cudaDeviceSynchronize();
    }
    if (cupti) {
      std::vector<profiler::GpuOp> gpu_ops = cupti->stop();
      cupti->join_collectives(gpu_ops, sh.records);
      std::vector<sessions::OpEvent> ops;
      for (auto& g : gpu_ops) {
        // the step whose host time window holds the op's start (before the first: setup)
        const auto& win = ranks[static_cast<size_t>(std::clamp(g.op.rank, 0, W - 1))]->windows;
        g.op.step = win.empty() ? step_of_setup(spec) : win.front().step - 1;
        for (const auto& w : win)
          if (g.op.start_ns >= w.start_ns) g.op.step = w.step;
        ops.push_back(g.op);
      }
      if (session) {
        session->add_ops(ops);
        cupti->write_metadata(*session);
      }
    }
    if (session) {
      int runtime = 0;
      cudaRuntimeGetVersion(&runtime);
      session->set_metadata(sessions::meta::kCudaVersion, fmt::format("{}.{}", runtime / 1000, runtime % 1000 / 10));
      session->set_metadata(sessions::meta::kNcclVersion, nccl_version());
      std::string names;
      for (int r = 0; r < W; ++r) {
        const auto& n = profiler::cuda_devices().names;
        names += (r ? "," : "") + (static_cast<size_t>(r) < n.size() ? n[static_cast<size_t>(r)] : std::string("GPU"));
      }
      session->set_metadata(sessions::meta::kGpuNames, names);
      if (!cupti_error.empty()) session->set_metadata(sessions::meta::kGpuTraceError, cupti_error);
    }
  }
#endif
  if (session) {
    for (int r = 0; r < W; ++r) session->add_ops(sh.tracer.take(r));  // spans of a step that failed midway
    session->set_metadata(sessions::meta::kTracerOverheadNs, std::to_string(result.tracer_overhead_ns));
    session->set_metadata(sessions::meta::kDroppedRecords, std::to_string(result.dropped_records));
    session->set_metadata(sessions::meta::kSpansRecorded, std::to_string(sh.tracer.recorded()));
    const auto& q = result.qcomms_error;
    session->set_metadata(sessions::meta::kQcommsErrorJson, nlohmann::json{{"forward_max_abs_error", q.forward_max_abs},
                                                              {"forward_relative_error", q.forward_relative},
                                                              {"backward_max_abs_error", q.backward_max_abs},
                                                              {"backward_relative_error", q.backward_relative}}
                                                   .dump());
    session->close(to_string(result.ended), result.error);
  }
  if (options.keep_tables && result.ended == RunEnd::complete) {
    for (size_t t = 0; t < spec.tables.size(); ++t) {
      const TableSpec& ts = spec.tables[t];
      std::vector<float> full(static_cast<size_t>(ts.num_embeddings * ts.embedding_dim));
      const TablePlan& tp = result.plan.tables[t];
      for (const Shard& s : tp.shards) {
        if (sh.layout.replicated(static_cast<int>(t)) && s.rank != 0) continue;  // one replica
        for (auto& ls : ranks[static_cast<size_t>(s.rank)]->shards) {
          if (ls.table != static_cast<int>(t) || ls.s.row_offset != s.row_offset || ls.s.col_offset != s.col_offset) continue;
          for (int64_t r = 0; r < s.num_rows; ++r)
            std::memcpy(full.data() + (s.row_offset + r) * ts.embedding_dim + s.col_offset,
                        ls.weights.data() + r * s.num_cols, sizeof(float) * static_cast<size_t>(s.num_cols));
        }
      }
      result.tables.push_back(std::move(full));
    }
    result.dense_params = ranks[0]->dense().params();
  }
  return result;
}


}  // namespace embedscope::engine

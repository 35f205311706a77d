// run_training: the facade the apps call. Checks the plan and the memory it needs, has the
// backend's executor (exec/executor.h) set up its devices, opens the session with the run's
// metadata, runs the executor and closes the session with how the run ended.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>

#include <fstream>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embedscope/engine/comm/flight_recorder.h"
#include "embedscope/engine/exec/backend.h"
#include "embedscope/engine/exec/gpu_placement.h"
#include "embedscope/engine/exec/runnable_sampler.h"
#include "embedscope/engine/exec/table_storage_json.h"
#include "embedscope/engine/input/criteo.h"
#include "embedscope/engine/kernels/kernels.h"
#include "embedscope/engine/quant/row_codec.h"
#include "embedscope/engine/rebalance/hot_rows.h"
#include "embedscope/engine/rebalance/reshard.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "embedscope/engine/sharding/plan_json.h"
#include "embedscope/engine/model/low_rank.h"
#include "embedscope/engine/planner/search.h"
#include "embedscope/engine/planner/stats.h"
#include "exec/executor.h"
#include "embedscope/engine/exec/host_memory_check.h"
#include "exec/launch/handshake.h"
#include "threaded/rank.h"

namespace embedscope::engine {

nlohmann::json table_storage_json(const std::vector<RunResult::TableStorage>& tables, bool measured) {
  nlohmann::json out = nlohmann::json::array();
  const auto figure = [measured](auto v) { return measured ? nlohmann::json(v) : nlohmann::json(); };
  for (const auto& ts : tables)
    out.push_back({{"table", ts.name},
                   {"data_type", to_string(ts.data_type)},
                   {"stochastic_rounding", ts.stochastic_rounding},
                   {"optimizer_state_type", enum_name(ts.optimizer_state_type)},
                   {"weight_bytes", ts.weight_bytes},
                   {"optimizer_state_bytes", ts.optimizer_state_bytes},
                   {"master_copy_bytes", ts.master_copy_bytes},
                   {"max_abs_error", figure(ts.max_abs_error)},
                   {"relative_error", figure(ts.relative_error)},
                   {"hash_size", ts.hash_size},
                   {"low_rank_dim", ts.low_rank_dim},
                   {"hash_collisions", figure(ts.hash_collisions)},
                   {"hash_collisions_per_rank", figure(ts.hash_collisions_per_rank)},
                   {"hot_rows", ts.hot_rows},
                   {"hot_ids", figure(ts.hot_ids)},
                   {"hot_all_reduce_bytes", ts.hot_all_reduce_bytes},

                   {"placement", enum_name(ts.placement)},
                   {"cache_policy", ts.placement == TablePlacement::host_cached ? nlohmann::json(enum_name(ts.cache_policy))
                                                                                 : nlohmann::json()},
                   {"cache_load_factor", ts.cache_load_factor},
                   {"host_bytes", ts.host_bytes},
                   {"cache_bytes", ts.cache_bytes},
                   {"cache_hits", ts.cache_hits},
                   {"cache_misses", ts.cache_misses},
                   {"rows_fetched", ts.rows_fetched},
                   {"bytes_h2d", ts.bytes_h2d},
                   {"bytes_d2h", ts.bytes_d2h},
                   {"prefetch_pipeline", ts.prefetch_pipeline},
                   {"prefetched_rows", ts.prefetched_rows},
                   {"prefetch_bytes_h2d", ts.prefetch_bytes_h2d}});
  return out;
}

nlohmann::json held_out_json(const RunResult& result) {
  if (!result.held_out)
    return result.held_out_skipped.empty() ? nlohmann::json() : nlohmann::json{{"skipped", result.held_out_skipped}};
  const HeldOutEval& e = *result.held_out;
  return {{"batches", e.batches},
          {"samples", e.samples},
          {"positives", e.positives},
          {"first_iteration", e.first_iteration},
          {"loss", e.loss},
          {"auc", e.auc ? nlohmann::json(*e.auc) : nlohmann::json()}};
}

int64_t RunResult::TableStorage::total_weight_bytes() const {
  int64_t s = 0;
  for (int64_t b : weight_bytes) s += b;
  return s;
}
int64_t RunResult::TableStorage::total_optimizer_state_bytes() const {
  int64_t s = 0;
  for (int64_t b : optimizer_state_bytes) s += b;
  return s;
}

const char* to_string(RunEnd e) {
  switch (e) {
    case RunEnd::complete: return "complete";
    case RunEnd::cancelled: return "cancelled";
    case RunEnd::crashed: return "crashed";
    case RunEnd::oom: return "oom";
    case RunEnd::hang: return "hang";
    case RunEnd::bad_input: return "bad_input";
    case RunEnd::write_failed: return "write_failed";
  }
  return "crashed";
}

const char* flight_dump_reason(int signal) {
  switch (signal) {
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGQUIT: return "SIGQUIT";
    default: return "request";
  }
}


namespace threaded {
std::string host_name() {
  char buf[256] = {};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}
}  // namespace threaded

namespace {

// Gloo's TCP pairs write with writev, which raises SIGPIPE on a socket that a failed peer has
// closed (a failed rank closes its connections at once, exec/threaded/executor.cpp); the default
// action kills the whole process before the peer's failure is reported (a SIGPIPE exit of an
// OOM run under ASan; tester36's one-off SIGPIPE). Ignored, only where nobody installed a
// handler, so the write fails with EPIPE and the collective ends naming the peer.
void ignore_sigpipe_unless_handled() {
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) std::signal(SIGPIPE, SIG_IGN);
}

using threaded::host_name;

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


// The first field of /proc/loadavg ("" when unreadable).
std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string first;
  f >> first;
  return first;
}

// CPU time so far: of the whole machine (busy, all cores, /proc/stat) and of this process
// (getrusage), seconds, with the steady clock; ok false when /proc/stat is unreadable.
struct CpuUse {
  double machine_busy_s = 0, self_s = 0, wall_s = 0;
  bool ok = false;
};

CpuUse cpu_use_now() {
  CpuUse u;
  u.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  rusage ru{};
  if (getrusage(RUSAGE_SELF, &ru) == 0)
    u.self_s = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
               static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
  std::ifstream f("/proc/stat");
  std::string cpu;
  // user nice system idle iowait irq softirq steal (guest time is inside user)
  long long v[8] = {};
  if (f >> cpu >> v[0] >> v[1] >> v[2] >> v[3] >> v[4] >> v[5] >> v[6] >> v[7] && cpu == "cpu") {
    const long tick = sysconf(_SC_CLK_TCK);
    u.machine_busy_s = static_cast<double>(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / static_cast<double>(tick > 0 ? tick : 100);
    u.ok = true;
  }
  return u;
}

// kCpuSelfCores and kCpuOtherCores over [a, b].
void write_cpu_use(sessions::SessionWriter& w, const CpuUse& a, const CpuUse& b) {
  const double wall = b.wall_s - a.wall_s;
  if (!a.ok || !b.ok || !(wall > 0)) return;
  const double self = (b.self_s - a.self_s) / wall;
  const double other = std::max(0.0, (b.machine_busy_s - a.machine_busy_s) / wall - self);
  w.set_metadata(sessions::meta::kCpuSelfCores, fmt::format("{:.3f}", self));
  w.set_metadata(sessions::meta::kCpuOtherCores, fmt::format("{:.3f}", other));
}

void write_run_metadata(sessions::SessionWriter& w, const WorkloadSpec& spec, const ShardingPlan& plan,
                        const profiler::RunClock& clock) {
  w.set_metadata(sessions::meta::kToolVersion, EMBEDSCOPE_VERSION);
  w.set_metadata(sessions::meta::kCreatedUnixNs, std::to_string(clock.wall_anchor_ns()));
  w.set_metadata(sessions::meta::kWallAnchorUnixNs, std::to_string(clock.wall_anchor_ns()));
  w.set_metadata(sessions::meta::kClock, "steady_clock ns since the run's start");
  w.set_metadata(sessions::meta::kHost, host_name());
  w.set_metadata(sessions::meta::kCpuName, cpu_name());
  if (spec.devices.backend != Backend::simulated) {  // the machine the ranks ran on
    w.set_metadata(sessions::meta::kCpuCores, std::to_string(host_cores()));
    if (const std::string load = load_average(); !load.empty()) w.set_metadata(sessions::meta::kLoadAverage, load);
  }
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
      const TableSpec& ts = spec.tables[static_cast<size_t>(tp.table)];
      // the stored rows (row_bytes of the table's data_type) and the optimizer state (its optimizer_state_type)
      const int64_t planned = shard_weight_bytes(ts, sh.num_rows, sh.num_cols) +
                              shard_optimizer_state_bytes(spec.optimizer.type, ts, sh.num_rows, sh.num_cols);
      shards.push_back({tp.table, ts.name, to_string(tp.type), tp.node, static_cast<int32_t>(k), sh.rank, sh.row_offset,
                        sh.num_rows, sh.col_offset, sh.num_cols, planned});
    }
  w.add_shards(std::move(shards));
  w.set_metadata(sessions::meta::kWorldSize, std::to_string(spec.devices.count));
  w.set_metadata(sessions::meta::kBatchSize, std::to_string(spec.batch_size));
  w.set_metadata(sessions::meta::kSamplesPerStep, std::to_string(spec.batch_size * spec.devices.count));
  w.set_metadata(sessions::meta::kSteps, std::to_string(spec.steps));
  w.set_metadata(sessions::meta::kWarmupSteps, std::to_string(spec.warmup_steps));
  w.set_metadata(sessions::meta::kPipeline, to_string(spec.pipeline));
  // the threaded executor's id histogram: the batches its counted steps looked up (rank_input.cpp)
  if (spec.devices.backend != Backend::simulated) w.set_metadata(sessions::meta::kIdHistogramCounts, "counted_lookups");
  w.set_metadata(sessions::meta::kQcommsForwardPrecision, to_string(spec.qcomms.forward_precision));
  w.set_metadata(sessions::meta::kQcommsBackwardPrecision, to_string(spec.qcomms.backward_precision));
  w.set_metadata(sessions::meta::kNetworkJson, to_json(spec)["network"].dump());
}

}  // namespace

RunResult run_training(const WorkloadSpec& requested, const ShardingPlan& plan, const TrainerOptions& options) {
  ignore_sigpipe_unless_handled();
  // auto becomes cpu or cuda; a cuda run without (enough) GPUs is refused here
  const std::string origin = requested.name.empty() ? "workload" : requested.name;
  (void)flight_recorder_default_capacity();  // a bad EMBEDSCOPE_FR_BUFFER_SIZE is refused before anything runs
  // hot rows chosen from the first iterations' ids (TableSharding::hot_rows_sample_steps) become a
  // list here, so that the executors and the session's workload see the rows
#if !EMBEDSCOPE_WITH_CUDA
  if (options.process.rank >= 0 && requested.devices.backend == Backend::cuda)
    throw SpecError("/devices/backend: cuda with one rank per process: this embedscope was built without CUDA "
                    "(EMBEDSCOPE_WITH_CUDA=OFF); run the ranks on the cpu backend");
#endif
  const WorkloadSpec spec = rebalance::resolve_hot_rows(
      with_resolved_backend(requested, origin, options.process.rank >= 0), plan, options.batch_source);
  validate_plan(spec, plan, "sharding plan");
  if (options.emulate_device) {  // the host stand-in's devices: the ranks placed as the cuda backend places them on GPUs
    if (options.emulated_devices < 0 || options.emulated_device_bytes < 0)
      throw std::invalid_argument("TrainerOptions: emulated_devices and emulated_device_bytes must be >= 0");
    const int devices = options.emulated_devices > 0 ? options.emulated_devices : spec.devices.count;
    const GpuPlacement placement = place_ranks(spec.devices.count, 0, devices, "emulated device");
    check_placement_memory(placement, spec.devices.memory_bytes,
                           std::vector<int64_t>(static_cast<size_t>(devices), options.emulated_device_bytes), {},
                           "emulated device");
  }
  // Live rebalancing (engine/rebalance/reshard.h): any pipeline, fp32 tables, cpu ranks (threads
  // of one process, or one rank per process); anything else is refused before the run (exit 2)
  // rather than ignored.
  if (spec.rebalance.enabled()) {
    const std::string where =
        options.emulate_device ? "an emulated device" : std::string(to_string(spec.devices.backend));
    if (const std::string why = rebalance::live_rebalance_unsupported(spec, where); !why.empty())
      throw SpecError(origin + ": " + why);
  }
  RunResult result;
  result.plan = plan;
  const auto est = estimate_memory(spec, result.plan);
  // a plan whose shards the allocator cannot even place is refused here (exit 2), not run into
  // an OOM at the weights (tester48 F9); a step's shortfall is left to the run (ShortfallScope)
  check_memory_fits(spec, est, ShortfallScope::setup);
  // simulated cpu ranks (a calibrated this_machine) share their node's memory (tester44 F12)
  if (spec.devices.backend == Backend::simulated)
    check_node_memory_fits(est, result.plan.local_world_size, planning_profile(spec));
  const int process_rank = options.process.rank;
  if (process_rank >= 0 && spec.devices.backend == Backend::simulated)  // a simulation runs no process
    throw SpecError("/devices/backend: one rank per process runs on the cpu or cuda backend, not simulated");
  if (process_rank >= spec.devices.count)
    throw SpecError(fmt::format("--rank {}: not below the world size {} (ranks are 0..{})", process_rank,
                                spec.devices.count, spec.devices.count - 1));
  // what the ranks of this process keep in host memory (the cuda backend's host copies too)
  if (const std::string why = detail::host_memory_refusal(spec, est, process_rank, this_host_memory()); !why.empty())
    throw SpecError(why);

  // a Criteo TSV's malformed line or short files found here, before anything runs (exit 2, no
  // session), not after steps of work (tester49 F11)
  if (spec.input.kind == InputKind::criteo_tsv && !options.batch_source)
    CriteoBatchSource::check_before_run(spec);
  auto executor = exec::make_executor(spec, result.plan, options);
  try {
    executor->prepare();  // devices and communicators, before the session file exists
  } catch (const launch::RendezvousCancelled& e) {  // Ctrl-C / SIGTERM while waiting for the other ranks
    result.ended = RunEnd::cancelled;
    result.error = e.what();
    return result;  // no session: nothing ran
  }
  // Ctrl-C / SIGTERM before anything ran (fixc49). Not for one rank of several processes: the
  // ranks agree on a cancel at a step's end (their cancel vote), a rank leaving alone here would
  // leave the others waiting in their first collective.
  if (options.cancel && options.cancel->load() && options.process.rank < 0) {
    result.ended = RunEnd::cancelled;
    result.error = "cancelled before the run started";
    return result;  // no session: nothing ran
  }
  std::unique_ptr<sessions::SessionWriter> session;
  if (!options.session_path.empty()) {
    try {
      session = std::make_unique<sessions::SessionWriter>(options.session_path, options.session_overwrite);
    } catch (const sessions::SessionWriteError& e) {
      // no room for the session (a full disk): reported as a write failure with nothing
      // recorded (exit 1), not as bad input (retest49 R7)
      result.ended = RunEnd::write_failed;
      result.bad_input = false;
      result.error = std::string(e.what()) + "; nothing was recorded, and the half-created file was removed";
      return result;
    }
    result.session_path = options.session_path;
    write_run_metadata(*session, spec, result.plan, executor->clock());
  }
  const CpuUse cpu_before = cpu_use_now();
  std::optional<RunnableSampler> runnable;  // the other load in runnable threads, measured runs only
  if (session && spec.devices.backend != Backend::simulated) runnable.emplace();
  try {
    executor->run(session.get(), result);
  } catch (const std::exception& e) {  // e.g. a GPU allocator that cannot be set up: the session says so
    try {
      if (session) session->close(to_string(RunEnd::crashed), e.what());
    } catch (const sessions::SessionError&) {  // a full disk too: the run's own error is the one to report
    }
    throw;
  }
  if (result.final_plan.tables.empty()) result.final_plan = result.plan;  // executors that keep one plan
  if (session && spec.devices.backend != Backend::simulated) write_cpu_use(*session, cpu_before, cpu_use_now());
  if (runnable) {
    runnable->stop();
    if (runnable->samples() > 0) {
      session->set_metadata(sessions::meta::kCpuOtherRunnable, fmt::format("{:.3f}", runnable->other_runnable()));
      session->set_metadata(sessions::meta::kCpuOwnRunnable, fmt::format("{:.3f}", runnable->own_runnable()));
    }
  }
  if (session) {
    // a write that failed (a full disk): the run stopped at the end of the step that learnt of
    // it (or the last commit failed); the result says what the session kept (tester49 F3)
    if (!exec::close_run_session(*session, result.ended, result.error)) result.session_path.clear();
    if (result.ended == RunEnd::write_failed) result.bad_input = false;
  }
  return result;
}


namespace exec {

bool close_run_session(sessions::SessionWriter& session, RunEnd& ended, std::string& error) {
  try {
    session.close(to_string(ended), error);
  } catch (const sessions::SessionError&) {
    const auto f = session.write_failure();
    if (!f) throw;
    ended = RunEnd::write_failed;
    if (f->commits == 0) {
      error = f->error + "; nothing was recorded, and the half-created file was removed";
      return false;
    }
    error = f->steps_kept > 0 ? fmt::format("{}; the session keeps {} step{} (through step {}), every commit before the "
                                            "failure, whole, and ends write_failed",
                                            f->error, f->steps_kept, f->steps_kept == 1 ? "" : "s", f->last_step_kept)
                              : f->error + "; the session keeps no step, and ends write_failed";
  }
  return true;
}

}  // namespace exec

}  // namespace embedscope::engine

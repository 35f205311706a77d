#pragma once
// The keys of the session's `metadata` table (key TEXT, value TEXT; schema/FORMAT.md). Every
// value is text; numbers are decimal integers, JSON values are compact JSON. Writers and readers
// spell a key only through these constants.
//
//   w.set_metadata(meta::kWorldSize, std::to_string(4));
//   const auto ws = reader.meta(meta::kWorldSize, "0");

#include <cstdint>

namespace embedscope::sessions::meta {

// --- the file itself (written by SessionWriter) -------------------------------------------
/// Always "embedscope-session"; a reader refuses a file without it.
inline constexpr const char* kFormat = "format";
/// How the run ended: "running" (until close), "complete", "cancelled", "crashed", "oom", "hang"
/// (SessionReader::status() reads a dead writer's "running" as "crashed").
inline constexpr const char* kEnded = "ended";
/// The root cause when not complete (e.g. "rank 1: all_to_all ... did not finish"); "" otherwise.
inline constexpr const char* kEndMessage = "end_message";
/// Decimal pid of the writing process (with kWriterHost: is a "running" writer still alive).
inline constexpr const char* kWriterPid = "writer_pid";
/// Host name of the writing process.
inline constexpr const char* kWriterHost = "writer_host";
/// SQLite library version that wrote the file, e.g. "3.46.1".
inline constexpr const char* kSqliteVersion = "sqlite_version";

// --- versions and clock (engine) ------------------------------------------------------------
/// Embedscope version that ran, e.g. "0.1.0".
inline constexpr const char* kToolVersion = "tool_version";
/// Gloo version, or "not used (...)".
inline constexpr const char* kGlooVersion = "gloo_version";
/// CUDA runtime version "12.4", or "not used (cpu backend)".
inline constexpr const char* kCudaVersion = "cuda_version";
/// NCCL version, or "not used (cpu backend)".
inline constexpr const char* kNcclVersion = "nccl_version";
/// Unix time (ns, system clock) when the run started, decimal.
inline constexpr const char* kCreatedUnixNs = "created_unix_ns";
/// Unix time (ns) of the steady clock's zero: wall = wall_anchor_unix_ns + t.
inline constexpr const char* kWallAnchorUnixNs = "wall_anchor_unix_ns";
/// The clock of every timestamp, in words ("steady_clock ns since the run's start").
inline constexpr const char* kClock = "clock";

// --- where it ran ----------------------------------------------------------------------------
/// Host name of the run.
inline constexpr const char* kHost = "host";
/// CPU model name.
inline constexpr const char* kCpuName = "cpu_name";
/// Cores the run could use (the process's CPU affinity set at the run's start), decimal; the
/// cpu ranks' threads share them (engine cost/calibration.h reads it). Absent before 2026-12.
inline constexpr const char* kCpuCores = "cpu_cores";
/// The host's 1-minute load average at the run's start (/proc/loadavg), e.g. "4.73": how busy
/// the machine already was. Absent before 2026-12 and where /proc/loadavg is unreadable.
inline constexpr const char* kLoadAverage = "load_average_1m";
/// Cores this process kept busy on average during the run ((user + system CPU time) / wall
/// time, getrusage), e.g. "1.62", and cores the host's other processes kept busy meanwhile
/// (/proc/stat's busy time of all cores less this process's, over the wall time): the load the
/// run shared the machine with (engine cost/calibration.h). Absent before 2026-12.
inline constexpr const char* kCpuSelfCores = "cpu_self_cores";
inline constexpr const char* kCpuOtherCores = "cpu_other_cores";
/// The other processes' runnable threads during the run, e.g. "1.35": the mean over samples
/// every 20 ms of /proc/stat's procs_running less this process's threads in state R
/// (engine exec/runnable_sampler.h). Calibration's background load when present (a rank waiting
/// at a collective is not runnable, which ranks x other / self cores cannot tell). Absent
/// before 2026-12-04.
inline constexpr const char* kCpuOtherRunnable = "cpu_other_runnable";
/// This process's own runnable threads during the run, sampled with cpu_other_runnable (its
/// threads in state R, the sampler included), e.g. "7.80": how many threads the ranks kept
/// runnable (compute and Gloo). Absent before 2026-12-04.
inline constexpr const char* kCpuOwnRunnable = "cpu_own_runnable";
/// A merged session of several processes' rank sessions (merge/merged_load.h): how its load keys
/// (cpu_self_cores, cpu_other_cores, cpu_own_runnable, cpu_other_runnable) were made from the
/// processes' - the run's own cores summed over its processes, the sibling processes taken out of
/// each one's other load - as JSON {"processes": 4, "hosts": 1, "rule": "..."}. Absent in a
/// one-process session, and in merged sessions written before 2026-12-07, whose load keys are the
/// first process's (the siblings counted as other load: calibrate refuses those).
inline constexpr const char* kCpuLoadMerged = "cpu_load_merged";
/// GPU names, comma separated ("" without GPUs).
inline constexpr const char* kGpuNames = "gpu_names";
/// "0" measured, "1" timed by a cost model (shown as SIMULATED everywhere).
inline constexpr const char* kSimulated = "simulated";
/// Simulated sessions: the hardware profile the cluster was modelled on, as JSON: {"name",
/// "description", "gpu", "gpus_per_node", "nodes", "intra_node", "inter_node"} (engine
/// cost/hardware_profile.h).
inline constexpr const char* kSimulatedHardwareJson = "simulated_hardware_json";
/// The executor that ran: "cpu" or "cuda" ("auto" is resolved before the run).
inline constexpr const char* kBackend = "backend";

// --- the workload and plan -------------------------------------------------------------------
/// The workload's name.
inline constexpr const char* kWorkloadName = "workload_name";
/// The workload as run (after command-line overrides), JSON (engine to_json(spec)).
inline constexpr const char* kWorkloadJson = "workload_json";
/// The sharding plan as JSON: {"world_size", "local_world_size", "tables": [{"name",
/// "sharding_type", "node"?, "shards": [{"rank", "row_offset", "num_rows", "col_offset",
/// "num_cols"}]}]}. Schema 4 also stores it as rows (table `shards`).
inline constexpr const char* kShardingPlanJson = "sharding_plan_json";
/// Ranks of the run, decimal, in [0, kMaxWorldSize]: SessionReader refuses a session whose value
/// is not such a number (a per-rank list is sized by it: tester54 F3).
inline constexpr const char* kWorldSize = "world_size";
/// The largest world size a session may hold (2^20): a lane is keyed by rank x 256 + lane in 32
/// bits. The importers' bound on a trace's distributedInfo.world_size too.
inline constexpr int64_t kMaxWorldSize = int64_t{1} << 20;
/// Samples per rank per step, decimal.
inline constexpr const char* kBatchSize = "batch_size";
/// Samples per step over all ranks (batch_size * world_size), decimal.
inline constexpr const char* kSamplesPerStep = "samples_per_step";
/// Measured steps, decimal.
inline constexpr const char* kSteps = "steps";
/// Warmup steps (negative step numbers), decimal.
inline constexpr const char* kWarmupSteps = "warmup_steps";
/// The training pipeline: "base", "sparse_dist" or "semi_sync" (absent in older files = base). An
/// import of an Embedscope export: the exported run's (kExportedRunEnded); other imports: absent.
inline constexpr const char* kPipeline = "pipeline";
/// What the `id_histogram` table counts. "counted_lookups" (runs of the threaded executor from
/// 2026-12 on): the ids of the batches looked up in the measured steps `stats` counts (a
/// pipeline's fill, looked up in the warm-up, and its drain steps left out: counted_steps.h), each
/// with the step that looked it up, so that its ids per table are those steps' load counters'.
/// Absent (older sessions, lm_embedding runs): the ids of every measured step's input batch,
/// whichever step looked it up (a semi_sync run of 10 steps: 10 batches, where stats counts 8).
inline constexpr const char* kIdHistogramCounts = "id_histogram_counts";
/// Precision of the output dist: "fp32", "fp16" or "bf16" (absent = fp32).
inline constexpr const char* kQcommsForwardPrecision = "qcomms_forward_precision";
/// Precision of the gradient dist: "fp32", "fp16" or "bf16" (absent = fp32).
inline constexpr const char* kQcommsBackwardPrecision = "qcomms_backward_precision";
/// Quantization error of the values sent, JSON {"forward_max_abs_error",
/// "forward_relative_error", "backward_max_abs_error", "backward_relative_error"}; at close.
inline constexpr const char* kQcommsErrorJson = "qcomms_error_json";
/// Per table, how its rows are stored and what that costs, JSON array of {"table", "data_type",
/// "stochastic_rounding" (bool; absent before int4: false),
/// "weight_bytes": [per rank], "optimizer_state_bytes": [per rank], "master_copy_bytes",
/// "max_abs_error", "relative_error", "hash_size", "hash_collisions", "hash_collisions_per_rank": [per
/// rank], ...} (engine RunResult::TableStorage; sessions/schema/FORMAT.md lists every key); at close. Absent in
/// files written before reduced-precision tables (all fp32).
inline constexpr const char* kTableStorageJson = "table_storage_json";
/// The emulated network, JSON {"intra_node": {"bandwidth_bytes_per_s", "latency_ns"},
/// "inter_node": {...}}; an absent class is unlimited.
inline constexpr const char* kNetworkJson = "network_json";

/// File input (workload "input" other than synthetic): malformed lines skipped (input.malformed_lines
/// skip) over the run, decimal; per iteration (warmup included) as a JSON array of integers
/// ([] when none); and the ids clamped or dropped by the invalid_ids policy, decimal.
inline constexpr const char* kInputSkippedLines = "input_skipped_lines";
inline constexpr const char* kInputSkippedLinesPerStepJson = "input_skipped_lines_per_step_json";
inline constexpr const char* kInvalidIds = "invalid_ids";

// --- the collectors --------------------------------------------------------------------------
/// The tracer's estimated own cost over all lanes, ns, decimal.
inline constexpr const char* kTracerOverheadNs = "tracer_overhead_ns";
/// Spans the tracer wrote, decimal.
inline constexpr const char* kSpansRecorded = "spans_recorded";
/// Spans dropped by a full tracer buffer, decimal.
inline constexpr const char* kDroppedRecords = "dropped_records";
/// GPU runs: CUPTI activity records dropped for lack of buffer space, decimal.
inline constexpr const char* kCuptiDroppedRecords = "cupti_dropped_records";
/// GPU runs: CUPTI records decoded, decimal.
inline constexpr const char* kCuptiRecords = "cupti_records";
/// GPU runs: CUPTI records of kinds not decoded, decimal.
inline constexpr const char* kCuptiUnknownRecords = "cupti_unknown_records";
/// GPU runs: CUPTI runtime calls dropped from the full launch table before their kernel came
/// (those kernels have no launch), decimal.
inline constexpr const char* kCuptiLaunchesDropped = "cupti_launches_dropped";
/// GPU runs: GPU ops and MEMORY2 events whose rank neither their stream nor the thread of their
/// runtime call gave, charged to their device's last rank (a guess when ranks share a GPU), decimal.
inline constexpr const char* kCuptiDeviceRankFallbacks = "cupti_device_rank_fallbacks";
/// GPU runs: host ns minus CUPTI ns at the start, decimal.
inline constexpr const char* kGpuClockOffsetNs = "gpu_clock_offset_ns";
/// GPU runs: how much that offset changed by the end, ns, decimal.
inline constexpr const char* kGpuClockDriftNs = "gpu_clock_drift_ns";
/// cuda runs whose CUPTI tracer could not start: why; absent otherwise.
inline constexpr const char* kGpuTraceError = "gpu_trace_error";

// --- one rank per process (embedscope run --rank R --world-size N, embedscope launch) ----------
/// The rank this process ran (of world_size), decimal; absent when every rank was a thread.
inline constexpr const char* kProcessRank = "process_rank";
/// The rendezvous store's URL, e.g. "file:///shared/dir".
inline constexpr const char* kRendezvous = "rendezvous";
/// The run id under which the run's keys sit in that store.
inline constexpr const char* kRunId = "run_id";
/// FNV-1a 64 (16 hex digits) of the workload and plan JSON every rank checked was equal.
inline constexpr const char* kRunDigest = "run_digest";
/// Rank 0's wall clock minus this process's at the start (a store round trip), ns, decimal.
inline constexpr const char* kClockOffsetToRank0Ns = "clock_offset_to_rank0_ns";
/// Half that round trip: the offset's uncertainty, ns, decimal.
inline constexpr const char* kClockOffsetUncertaintyNs = "clock_offset_uncertainty_ns";
/// From this rank's claim in the store until every rank had arrived, ns, decimal.
inline constexpr const char* kRendezvousNs = "rendezvous_ns";
/// This rank's Gloo TCP device as Gloo describes it, with the address it listened on:
/// "tcp, pci=, iface=lo, speed=-1, addr=[127.0.0.2]".
inline constexpr const char* kGlooDevice = "gloo_device";
/// The node this rank ran on and its rank within it, "NODE/LOCAL_RANK" from the launcher
/// (mpirun: MPI's shared-memory node; srun: SLURM_NODEID/SLURM_LOCALID; torchrun:
/// GROUP_RANK/LOCAL_RANK); absent when the launcher said nothing.
inline constexpr const char* kLaunchNode = "launch_node";
// --- imported sessions (embedscope import; absent in sessions Embedscope ran) -----------------
/// "1" when the session was imported from another tool's trace (shown as IMPORTED).
inline constexpr const char* kImported = "imported";
/// The format read: "kineto_json" (PyTorch profiler / Kineto Chrome-trace JSON), "nsys_sqlite"
/// (an Nsight Systems SQLite export) or "torch_memory_snapshot" (a PyTorch CUDA memory snapshot
/// pickle).
inline constexpr const char* kImportFormat = "import_format";
/// What produced the trace, in words, e.g. "PyTorch profiler (Kineto) schemaVersion 1; NCCL 2.17.1".
inline constexpr const char* kImportProducer = "import_producer";
/// Kineto imports: the process groups' backend the traces name (distributedInfo.backend: "nccl",
/// "gloo"), else "gloo" when their collectives are gloo:* calls (the legacy profiler writes no
/// distributedInfo); absent when unknown. `export --format kineto` writes it as
/// distributedInfo.backend (and none when absent).
inline constexpr const char* kImportBackend = "import_backend";
/// The files read, JSON [{"file", "bytes", "uncompressed_bytes", "rank"}] (bytes as on disk;
/// Nsight exports, which may hold several processes, have "ranks": [...] instead of "rank").
inline constexpr const char* kImportSources = "import_sources_json";
/// Kineto imports: JSON array of the names of the host spans of cat `user_annotation`
/// (record_function ranges, "## forward ##"), sorted; they enclose the ops they name and stay off
/// the critical path (tester37 #16). Absent: none (or a session imported before).
inline constexpr const char* kImportAnnotationNames = "import_annotation_names_json";
/// How the ranks' clocks were put on one axis: "none" (each rank as recorded, shifted by one
/// global minimum, as Holistic Trace Analysis does) or "collectives" (one offset per rank from
/// the ends of matching collectives; kImportAlignJson holds them).
inline constexpr const char* kImportAlign = "import_align";
/// The trace timestamp (ns, the trace's own clock: Kineto `ts` x 1000) of session time 0, decimal:
/// trace ts = import_origin_ns + t. A multiple of 1000 for Kineto, so whole trace microseconds
/// stay whole; for Nsight exports the Unix ns of the earliest event (utcEpochNs + export ns).
inline constexpr const char* kImportOriginNs = "import_origin_ns";
/// import_align "collectives": JSON {"method", "reference_rank", "offsets_ns": {"1": 400000},
/// "matches", "matched_collectives", "max_skew_ns", "median_skew_ns", "unaligned_ranks"}. The
/// recorded time of rank r's event at session time t is t + offsets_ns[r] (trace ts = that +
/// import_origin_ns): the raw times stay in the session.
inline constexpr const char* kImportAlignJson = "import_align_json";
/// Sessions `embedscope merge` wrote: JSON [{"file", "ranks": [...], "shift_ns"}], the inputs,
/// their ranks and the ns added to each input's times (its time base minus the merged origin).
inline constexpr const char* kMergedFromJson = "merged_from_json";
/// Imports of an Embedscope export (`embedscope export --format chrome` or `--format kineto`, whose
/// top-level "embedscope" object carries them; sessions/importers/kineto_json/exported_run.h): the
/// exported run's planned measured steps (decimal, its workload's "steps"), how it ended (one of
/// kEnded's values as SessionReader::status() read it at the export, e.g. "crashed") and its end
/// message (absent when it had none). With kPipeline (the exported run's pipeline) they let
/// `stats` of the import leave out the same drain steps as the original's (tester53 F3). The
/// import's own kEnded stays "complete": these say how the exported run ended, not the import.
/// Absent in every other import (a foreign trace, an export written before 2026-12-06).
inline constexpr const char* kExportedRunPlannedSteps = "exported_run_planned_steps";
inline constexpr const char* kExportedRunEnded = "exported_run_ended";
inline constexpr const char* kExportedRunEndMessage = "exported_run_end_message";
// --- imported memory snapshots ----------------------------------------------------------------
/// PyTorch's allocator_settings of an imported memory snapshot, JSON.
inline constexpr const char* kAllocatorSettingsJson = "allocator_settings_json";
/// "process_start" or "mid_way": whether every device's trace starts with an empty allocator.
inline constexpr const char* kMemoryTraceStart = "memory_trace_start";

}  // namespace embedscope::sessions::meta

#pragma once
// Runs an lm_embedding workload (workload/lm_spec.h) on spec.world_size CPU ranks in this
// process and optionally records it as a session. The threaded executor runs it
// (exec/threaded/lm_executor.h): each rank a compute thread and a comm worker, joined by a Gloo
// world group (comm/gloo_process_group.h), interpreting the rank's step program
// (program/lm_program.h) op by op; every compute op is a span on the rank's compute lane and
// every collective of a comm op one on its comm lane, with its bytes (the compute thread waits),
// every collective a row of `collectives` with its bytes, every step's loss in `steps`. Each
// rank's buffers live in its own DeviceArena (caching allocator), whose counters
// (`memory_counters`, per step), allocator history (`memory_events`) and block layout
// (`memory_snapshots`, when it changed, and at an OOM) the session holds, as for DLRM runs.

#include <atomic>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/model/lm_embedding.h"
#include "embedscope/engine/workload/lm_spec.h"
#include "embedscope/sessions/model/events.h"

namespace embedscope::sessions {
class SessionWriter;
}

namespace embedscope::engine {

struct LmRunOptions {
  std::string session_path;       ///< "" = no session
  bool overwrite = false;         ///< replace an existing session file
  bool keep_outputs = false;      ///< keep every rank's embedding output of every step
  int64_t collective_timeout_ms = 60000;
  /// Each rank's device memory (bytes; 0 = the host's physical memory): the capacity of its
  /// caching allocator, past which a buffer ends the run "oom".
  int64_t device_memory_bytes = 0;
  /// Set (e.g. from a SIGINT handler) to stop every rank after the same step; the run ends
  /// "cancelled" with the steps that ran.
  const std::atomic<bool>* cancel = nullptr;
  /// Dump requests for the ranks' collective flight recorders, as TrainerOptions::flight_dump
  /// (null: a ring is dumped only when the run ends by a failure).
  const FlightDumpRequest* flight_dump = nullptr;
  /// Called from rank 0's thread after every step, once the step's records are in the session:
  /// `step` the steps done (1-based; there is no warmup), `total_steps` spec.steps, `loss` the
  /// step's loss, `samples_per_s` sequences per second over the steps so far (B a step under
  /// vocab_parallel, B x world size otherwise; wall time of rank 0's steps), `eta_s` seconds left
  /// at that pace. The step after it starts when it returns.
  std::function<void(const StepProgress&)> on_step;
};

/// What one rank ended with.
struct LmRankResult {
  VocabRange rows;
  std::vector<float> table, output_projection;    ///< [rows x H]; output_projection empty when tied
  std::vector<std::vector<float>> body_weights;
  std::vector<std::vector<float>> embedding_out;   ///< per step (keep_outputs), [local tokens x H]
  std::vector<std::pair<int64_t, int64_t>> token_of;  ///< local token -> (global sequence, position)
  int64_t bytes_sent = 0, bytes_received = 0;      ///< over the run, to / from other ranks
  /// The rank's device memory over the run (its DeviceArena, caching allocator; LmRank's
  /// buffers by tag, model/lm_embedding.h): the most bytes allocated at once (blocks rounded to
  /// 512 B) and the most bytes requested at once (the buffers' own sizes, what
  /// estimate_lm_memory counts).
  int64_t peak_allocated = 0, peak_requested = 0;
};

struct LmRunResult {
  RunEnd ended = RunEnd::complete;         ///< complete or cancelled (run_lm throws for the others)
  std::string error;                       ///< how a failed run failed ("" when it did not)
  std::vector<double> losses;              ///< per step run (rank 0's; every rank has the same)
  std::vector<LmRankResult> ranks;
  std::vector<sessions::CollectiveRecord> collectives;  ///< every rank's, in completion order
  std::vector<sessions::OpEvent> ops;      ///< every span, names static
  std::vector<int64_t> step_ns;            ///< per step run: the slowest rank's wall time of the step (as `stats`)
  int64_t wall_ns = 0;
};

/// What run_lm and simulate_lm throw for a run that failed after it started (a rank's error,
/// oom, hang, a session that could not be written): what() the failure's text, as the session's
/// end message says it; `ended` how the run ended (the session's `ended`); `session_path` the
/// session that holds the run up to its failure, "" when there is none (no session asked for, or
/// a write failed before anything was committed and the half-created file was removed).
class LmRunError : public std::runtime_error {
 public:
  LmRunError(RunEnd ended, const std::string& what, std::string session_path)
      : std::runtime_error(what), ended(ended), session_path(std::move(session_path)) {}
  RunEnd ended;
  std::string session_path;
};

/// The name of the vocabulary table in the session (shards, load_counters and id_histogram table 0).
inline constexpr const char* kLmTableName = "token_embedding";

/// Runs spec.steps steps (fewer when cancelled). Throws SpecError for an invalid spec or one
/// of more than kMaxLmCpuRanks ranks (simulate_lm models more),
/// sessions::SessionError when the session cannot be created, LmRunError with the
/// failure's text when a rank failed ("rank R: <what>" for a collective's error: the others fail
/// at once or time out after collective_timeout_ms; OomError's text for a buffer that did not
/// fit); a run that fails after the session was created leaves it with ended = "oom", "hang"
/// (a collective timed out) or "crashed" and the message, its spans, collectives and memory
/// records up to the failure. A session that cannot be written while the run goes on (a full
/// disk) stops every rank at the end of the step in which it learns of it, as a DLRM run
/// (tester49 F3): LmRunError ended write_failed, its text the failure and the steps the session
/// keeps (exec/executor.h close_run_session), the session ended write_failed with every commit
/// before the failure (no session at all when nothing was committed). The session also holds the plan (table `shards`: one table, one
/// shard per rank, planned_bytes its master weights), every rank's load (ids its shard served
/// per step) and token histogram.
LmRunResult run_lm(const LmWorkloadSpec& spec, const LmRunOptions& options = {});

/// The session metadata and plan both runs of an lm_embedding workload write (workload name and
/// JSON, world size, batch and samples per step, steps, wall anchor; table `shards`).
void write_lm_session_plan(sessions::SessionWriter& writer, const LmWorkloadSpec& spec, int64_t wall_anchor_ns);

struct LmSimulateOptions {
  std::string session_path;       ///< "" = no session
  bool overwrite = false;
  std::string hardware;           ///< a hardware profile name or file (cost/hardware_profile.h)
  int gpus_per_node = 0;          ///< 0: min(world size, the profile's gpus_per_node)
  /// Set (by a signal handler) to stop after the current step: the steps simulated so far are
  /// kept, the session ends "cancelled" and LmRunResult::ended is cancelled. Null: never.
  const std::atomic<bool>* cancel = nullptr;
  /// Called after each simulated step: StepProgress::step (1-based), total_steps, and
  /// samples_per_s the sequences a step over the simulated step time (eta_s 0: the simulation's
  /// own time is not the run's), as the simulated DLRM run reports. May be empty.
  std::function<void(const StepProgress&)> on_step;
};

/// The workload's step program (program/lm_program.h) on every rank of a modelled cluster,
/// timed by the cost model (simulate_lm_step), spec.steps equal steps back to back, recorded as a
/// session marked simulated (metadata simulated 1, the hardware JSON; ranks "node<n>
/// (simulated)"): every op on its lane, every collective with bytes and per-peer elements,
/// the planner's memory estimate per rank at every step (lm45: its allocator replay's peak
/// allocated and peak reserved, planner/lm_memory_estimate.h), the
/// expected ids per shard; each step's row and load counter of a rank in one
/// SessionWriter::add_step_records call (one transaction). Nothing is trained: losses are empty,
/// the session's step losses 0, and there is no token histogram (no token is drawn; the
/// simulated DLRM run writes no id histogram either). Throws SpecError for an invalid spec or
/// an unknown profile, sessions::SessionError when the session cannot be created, LmRunError
/// ended write_failed when it cannot be written while the run goes on (the run stops after the
/// step in which it learnt of it, as run_lm). The simulation outruns the session's writer (many
/// steps a millisecond): every 500 ms it waits for the writer to commit what it was handed
/// (SessionWriter::sync), so that a SIGKILLed simulation keeps its steps up to about its last
/// half second, as the simulated DLRM run does.
LmRunResult simulate_lm(const LmWorkloadSpec& spec, const LmSimulateOptions& options);

}  // namespace embedscope::engine

#pragma once
// Runs an lm_embedding workload (workload/lm_spec.h) on spec.world_size CPU ranks, one thread
// each, joined by a Gloo world group (comm/gloo_process_group.h), and optionally records it as
// a session: every op as a span on the rank's compute or comm lane (the collectives are run
// inline by the rank's one thread, so the compute lane waits while the comm lane is busy), every
// collective as a row of `collectives` with its bytes, every step's loss in `steps`. Each rank's
// buffers live in its own DeviceArena (caching allocator, capacity the host's memory), whose
// counters (`memory_counters`, per step), allocator history (`memory_events`) and block layout
// (`memory_snapshots`, when it changed) the session holds, as the threaded executor records them.

#include <cstdint>
#include <string>
#include <vector>

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
  std::vector<double> losses;              ///< per step (rank 0's; every rank has the same)
  std::vector<LmRankResult> ranks;
  std::vector<sessions::CollectiveRecord> collectives;  ///< every rank's, in completion order
  std::vector<sessions::OpEvent> ops;      ///< every span, names static
  std::vector<int64_t> step_ns;            ///< per step: rank 0's wall time of the step
  int64_t wall_ns = 0;
};

/// The name of the vocabulary table in the session (shards, load_counters and id_histogram table 0).
inline constexpr const char* kLmTableName = "token_embedding";

/// Runs spec.steps steps. Throws SpecError for an invalid spec, sessions::SessionError when the
/// session cannot be written, std::runtime_error "rank R: <what>" when a rank failed (a
/// CollectiveError's text: the others time out after collective_timeout_ms); a run that fails
/// after the session was created leaves it with ended = "crashed" and the message. The session
/// also holds the plan (table `shards`: one table, one shard per rank, planned_bytes its master
/// weights), every rank's load (ids its shard served per step) and token histogram.
LmRunResult run_lm(const LmWorkloadSpec& spec, const LmRunOptions& options = {});

/// The session metadata and plan both runs of an lm_embedding workload write (workload name and
/// JSON, world size, batch and samples per step, steps, wall anchor; table `shards`).
void write_lm_session_plan(sessions::SessionWriter& writer, const LmWorkloadSpec& spec, int64_t wall_anchor_ns);

struct LmSimulateOptions {
  std::string session_path;       ///< "" = no session
  bool overwrite = false;
  std::string hardware;           ///< a hardware profile name or file (cost/hardware_profile.h)
  int gpus_per_node = 0;          ///< 0: min(world size, the profile's gpus_per_node)
};

/// The workload's step program (program/lm_program.h) on every rank of a modelled cluster,
/// timed by the cost model (simulate_lm_step), spec.steps equal steps back to back, recorded as a
/// session marked simulated (metadata simulated 1, the hardware JSON; ranks "node<n>
/// (simulated)"): every op on its lane, every collective with bytes and per-peer elements,
/// the planner's memory estimate per rank as allocated and reserved at every step, the
/// expected ids per shard. Nothing is trained: losses are empty, the session's step losses 0.
/// Throws SpecError for an invalid spec or an unknown profile, sessions::SessionError.
LmRunResult simulate_lm(const LmWorkloadSpec& spec, const LmSimulateOptions& options);

/// The session op category of an lm_embedding span name (lookup, comm, dense, optimizer, input).
sessions::OpCategory lm_op_category(const char* name, bool comm);

}  // namespace embedscope::engine

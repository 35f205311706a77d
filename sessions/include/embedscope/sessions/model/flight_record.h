#pragma once
// One entry of a rank's collective flight recorder (table `flight_recorder`, schema 8). Its own
// header, beside events.h: only the recorder, the session store and the analysis need it.

#include <cstdint>
#include <string>

namespace embedscope::sessions {

/// One entry of a rank's collective flight recorder as dumped (table `flight_recorder`, schema 8;
/// engine/comm/flight_recorder.h). PyTorch's NCCL flight recorder is the model: each rank keeps
/// its last N collectives in a ring and writes them out on a collective timeout, a failed run or
/// a signal (SIGUSR1, SIGTERM, SIGINT); sessions/analysis/flight_recorder.h reads the dumps of
/// every rank to say which rank did not reach which collective. Times on the session clock, ns.
struct FlightRecord {
  int32_t rank = 0;            ///< global rank whose recorder it is
  int32_t dump = 0;            ///< the rank's dump it belongs to: 0, 1, ... in the order dumped
  std::string reason;          ///< why that dump was written: "collective timeout", "SIGUSR1", "run ended crashed", ...
  int64_t dump_time_ns = 0;    ///< when the dump was written
  int64_t ring_dropped = 0;    ///< entries the ring had overwritten by then (older than the first kept)
  int64_t record_id = 0;       ///< the rank's running number of the entry (0 = its first collective)
  std::string group;           ///< process group name ("world", "node0", "cross1")
  std::string members;         ///< its global ranks, comma-joined in group order ("0,1,2,3")
  uint64_t sequence = 0;       ///< the collective's sequence number within the group (1-based, the same on every member)
  std::string op;              ///< "all_to_all", "all_gather", "all_reduce", "reduce_scatter"
  std::string name;            ///< the profiling name, e.g. "output_dist/all_to_all"
  std::string dtype;           ///< element type on the wire ("float32", "int64", "float16", ...)
  int64_t input_elements = 0;  ///< elements this rank contributes (all-to-all: the sum of its sends)
  int64_t output_elements = 0; ///< elements it receives (all-to-all: the sum of its receives; all-reduce: = input)
  int64_t step = 0;            ///< the rank's training step when it entered the collective (warmup negative, as `ops.step`)
  std::string state;           ///< "scheduled", "started" or "completed"
  int64_t time_created_ns = 0;     ///< the rank entered the collective
  int64_t time_started_ns = -1;    ///< it marked its arrival and the transfer began; -1 not yet
  /// the collective returned on this rank (state completed), or threw there (state scheduled or
  /// started: it failed at this time; files written before this was recorded keep -1); -1 not yet
  int64_t time_completed_ns = -1;
  int64_t timeout_ms = 0;      ///< the group's collective timeout
};

}  // namespace embedscope::sessions

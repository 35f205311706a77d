#pragma once
// Exporters: Chrome Trace Event Format (opens in Perfetto and chrome://tracing) and CSV.

#include <map>
#include <ostream>
#include <utility>
#include <string>
#include <vector>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::sessions {

/// Writes the session as a Trace Event Format JSON object: one process per rank (pid = rank,
/// "rank N"), one thread per lane (tid = lane, named), an `X` event per op (ts and dur in
/// microseconds with three decimals, so the integer nanoseconds are kept exactly; an imported op
/// that did not end (model/did_not_end.h) is a `B` without its `E`, under its own name, with
/// args.did_not_end true: Perfetto shows it "Did not end"), each step of each rank as Kineto's
/// `ProfilerStep#N` span (cat user_annotation) on a row "steps" of its own (tid 256), which
/// `embedscope import` reads back as the ranks and steps, `C` counter events per rank and step
/// (ids looked up, loss), `C` "device memory" events (allocated, reserved, active bytes) after
/// every allocator trace entry of an imported memory snapshot (memory_timeline), each collective
/// record as PyTorch's `record_param_comms` span (cat comm) with its Kineto args
/// (record_param_comms_args, plus "embedscope collective" and "step"; an all-reduce's element
/// counts from its group's every member's bytes, all_reduce_counts) inside the comm op of its
/// rank that holds it, which `import` reads back as the collective records, and flow events
/// (`s` / `f`) joining the ranks of each collective (from the first rank to enter it to every
/// other member). The session's
/// metadata goes into "metadata". Spec: "Trace Event Format", Google (chromium catapult docs).
/// An imported trace's GPU stream lane (kind `stream`: a Kineto or Nsight trace's) keeps its tid
/// and name, and each of its ops is written as Kineto writes a GPU event:
/// cat "kernel", "gpu_memcpy" or "gpu_memset" (chrome_gpu_cat), args "device" and "stream"
/// (chrome_stream_ids) and "embedscope category" (the session's category), and "correlation"
/// (an imported trace's launch id, on the launch too) where the session has one; a rank with a
/// GPU has a `process_labels` event naming it (args "labels": RankInfo::device, "embedscope
/// device memory": its bytes). `import` reads such lanes back as GPU streams, so `stats` of the
/// re-import equals the original's (stream-level overlap, HTA's kernel figures). An Embedscope
/// run's stream lanes (a cuda or simulated run's) are written as threads, their thread_name with
/// args "embedscope lane kind": "stream" (`import` says they come back as threads): their comm
/// ops carry their collective's sequence, not a launch, which the kernel figures of an import
/// would take for a launch that is missing.
void export_chrome_trace(const SessionReader& session, std::ostream& out);

/// A GPU stream lane's ids in the Chrome export: its CUDA stream (the N of a lane named "stream N
/// (...)", as imported traces name them, else lane + 1; made unique within the rank by counting up)
/// and its device (the D of "cuda:D" in the lane's name, else in the rank's device, else 0).
struct ChromeStreamId {
  int64_t device = 0, stream = 0;
};

/// The ChromeStreamId of each lane of kind `stream`, by (rank, lane). Example: an imported
/// Kineto trace's lanes "stream 7 (cuda:0 A100)", "stream 20 (cuda:0 A100)" -> {0, 7}, {0, 20};
/// a simulated run's "compute" (lane 2) and "comm" (lane 1) on "H100 (cuda:1)" -> {1, 3}, {1, 2}.
std::map<std::pair<int32_t, int32_t>, ChromeStreamId> chrome_stream_ids(const SessionReader& session);

/// Kineto's cat of a GPU op: "gpu_memset" for a memcpy-category op named Memset* / memset*,
/// "gpu_memcpy" for the other memcpy-category ops, "kernel" for every other category.
std::string chrome_gpu_cat(OpCategory category, const std::string& name);

/// Kineto's top-level distributedInfo for a Chrome export of `session`, as compact JSON:
/// {"world_size": N} (metadata world_size), and for an imported trace its "backend"
/// (import_backend) and "nccl_version" (from import_producer's "; NCCL X"); "" when the session
/// has no world size.
std::string chrome_distributed_info(const SessionReader& session);

/// Nanoseconds as microseconds with exactly three decimals ("1234.567").
std::string ns_to_us(int64_t ns);

/// Writes CSV files into `dir` (created if missing): events.csv (every op), steps.csv (per step
/// and rank: the RunStats times), ranks.csv (per rank totals), load.csv (load counters),
/// collectives.csv (the collective records: one per rank and instance, with group, sequence,
/// bytes and per-peer elements; none for a trace whose collectives carry no arguments),
/// collective_times.csv (the per-collective table `stats` prints, RunStats::collectives: per
/// name the counted steps, count, bytes sent / received - empty where collective_bytes_unknown -,
/// time, exposed and waiting ns summed over ranks and counted steps; a NAME/split_check row
/// after a collective with split checks), session.csv (key,value: workload_name, backend, world_size, ended, simulated
/// 0/1, imported 0/1) and, for a session with a memory timeline (an imported memory snapshot),
/// memory.csv (per rank and trace entry: action, time_ns, allocated / reserved / active bytes,
/// largest free block, both fragmentation measures). Returns the paths written. Throws
/// SessionError naming a file it cannot write.
std::vector<std::string> export_csv(const SessionReader& session, const RunStats& stats, const std::string& dir);

/// The names of the files export_csv writes into its folder ("events.csv", ...), in the order
/// it writes them: for a command to refuse a folder that already holds one of them.
const std::vector<std::string>& csv_export_files();

}  // namespace embedscope::sessions

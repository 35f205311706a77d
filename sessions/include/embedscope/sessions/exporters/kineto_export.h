#pragma once
// Exporter: one PyTorch profiler (Kineto) JSON trace per rank, the directory that Holistic Trace
// Analysis reads (`TraceAnalysis(trace_dir=DIR)`, github.com/facebookresearch/HolisticTraceAnalysis:
// hta/common/trace_file.py, trace_parser.py, trace.py, hta/common/types.py) and that
// `embedscope import DIR` reads back (importers/kineto_json).
//
// What each file holds (times: ts and dur in microseconds with three decimals, the session's
// integer nanoseconds exactly; HTA itself rounds ns-precision traces to whole us, ts up and ends down):
// - header, before "traceEvents" (HTA reads it with ijson up to that key): "distributedInfo"
//   {"backend": gloo | nccl | "nccl (simulated)", "rank": N, "world_size": W} on the second line,
//   written `"rank": N` with a space (HTA finds a file's rank with the regex "rank":\s+(\d+));
//   "schemaVersion" 1; "baseTimeNanoseconds" (the run's wall anchor: unix ns = ts x 1000 + it;
//   absent for imported sessions); "deviceProperties" (the rank's device, when it has GPU streams);
//   "embedscope" {exporter, tool_version, workload, backend, simulated, imported, clock, note}: flat
//   values only (HTA's metadata reader skips nested maps). A simulated session says so there, in
//   distributedInfo.backend and in the process names.
// - host lanes (thread kind): each op an `X` event, cat "cpu_op", pid kKinetoHostPidBase + rank,
//   tid = lane, under its own name, args "embedscope category" / "embedscope step" (and
//   "embedscope bytes", "embedscope sequence" for collectives' ops). An op that did not end
//   (model/did_not_end.h) gets Kineto's dur -1 under its own name.
// - collectives: PyTorch's `record_param_comms` span (cat cpu_op) timed by the collective
//   record, inside the host comm op that holds it (else on the launch thread), with PyTorch's
//   args: "Collective name" (allreduce, all_to_allv, _allgather_base, _reduce_scatter_base),
//   "dtype" (Float, Long, ...), "In/Out msg nelems", "Group size", "In/Out split size" (the
//   record's elements per peer, whatever the collective; PyTorch fills them for all_to_allv only),
//   "Process Group Name", "Process Group Ranks", "Seq", "Rank", plus "embedscope collective"
//   (the session's name, which `import` names the record by) and "embedscope step". A comm kernel
//   carries its collective's args too.
// - GPU stream lanes (kind stream / sync; a cuda run's CUPTI lanes, a simulated run's streams):
//   pid = device (= rank), tid = stream = lane + 1 (> 0: HTA gives stream-0 kernels no
//   iteration), args device / stream / correlation (1, 2, ... per rank); cat "kernel",
//   "gpu_memcpy" / "gpu_memset" (ops of category memcpy), "cuda_sync" (sync lanes). HTA classes
//   a kernel by its name only, so a comm op whose name HTA would not call communication is
//   written "nccl:NAME" and a copy not named Memcpy/Memset "Memcpy (NAME)", the session's name in
//   args "embedscope name". Each gets a `cuda_runtime` event of the same correlation on the host
//   (cudaLaunchKernel, cudaMemcpyAsync, cudaMemsetAsync, cudaStreamSynchronize; dur 0, args
//   synthesized true): sessions keep no launch times, and HTA drops kernels without a launch
//   inside the profiled steps. It sits at the kernel's start on the thread kKinetoLaunchTid, or,
//   for a comm kernel, inside its collective's record_param_comms span (as PyTorch launches NCCL
//   kernels), at no later than the kernel's start.
//   An engine session's (not imported) comm op on a stream that holds collective records named
//   after it ("NAME", "NAME/split_check") is written as one kernel per record instead (tester50
//   F4), as NCCL launches one kernel per collective: timed by the record, named "nccl:" + the
//   record's name, args "bytes" (its bytes sent + received) and the record's own PyTorch args, the
//   launch at the record's start inside its record_param_comms span (so an all-to-all's kernel
//   says all_to_allv with its splits, its check's kernel _allgather_base). A record of no duration
//   (a split check on a GPU profile's simulation, cost_model.h split_check_timed) gets no kernel:
//   `import` of the export then has no record of it (a trace's collective is its kernels').
// - an imported session (a Kineto or Nsight trace): its host calls with a correlation are its
//   launches, written as `cuda_runtime` with that correlation; its kernels keep theirs and get no
//   launch placed by the exporter - a GPU event the trace had no launch for gets none (HTA leaves
//   it out on the export as on the original: tester45 F11); a collective's args go on the trace's own record_param_comms
//   span that launched its first kernel (a CPU rank's: the span with the record's times).
// - steps: `ProfilerStep#N` (cat user_annotation) on the first host thread, N >= 0 only: HTA's
//   pattern ProfilerStep#(\d+) takes no sign, so warm-up steps (N < 0) are left out.
// - set-up and warm-up: an Embedscope session's (not imported) ops and collective records of step
//   < 0 (the set-up before the first step, the warm-up steps) are not written at all, as a
//   torch.profiler schedule(wait, warmup, active) trace holds the active steps only: HTA on the
//   export then counts the GPU events `stats` counts (tester51 F11: the warm-up kernels, written
//   with launches before ProfilerStep#0, gave 4.40% where `stats` gave 5.56%). The "embedscope"
//   block's "left_out" says how many events that was. An imported trace keeps all its events.
// Not written: load counters, memory (no Kineto memory events), flow arrows.

#include <cstdint>
#include <ostream>
#include <map>
#include <string>
#include <vector>

#include "embedscope/sessions/store/session.h"

namespace embedscope::sessions {

/// pid of rank N's host events: kKinetoHostPidBase + N (device events use pid = device = rank).
inline constexpr int64_t kKinetoHostPidBase = 100000;
/// tid of the host thread that holds the launch events placed by the exporter (lanes are 0..255).
inline constexpr int32_t kKinetoLaunchTid = 1000;

/// Writes rank `rank`'s trace (the layout above) to `out`.
void export_kineto_rank(const SessionReader& session, int32_t rank, std::ostream& out);

/// Throws SessionError when `session` has nothing a Kineto trace holds for HTA: no lanes and no
/// steps (an imported PyTorch memory snapshot: its allocator events only, tester45 F15, an empty
/// folder was written). The message names the session's file and says to use --format chrome
/// or csv (they carry the memory timeline).
void check_kineto_exportable(const SessionReader& session);

/// Writes one trace per rank of the session (its lanes' and steps' ranks) into `dir` (created
/// if missing) as kineto_trace_file_name(rank), each written beside as NAME.partial and renamed
/// when complete. Returns the paths written, by rank. Throws SessionError naming the directory or
/// file it cannot create or write, or check_kineto_exportable's (before creating `dir`). Does not check for existing files (the CLI does).
std::vector<std::string> export_kineto_traces(const SessionReader& session, const std::string& dir);

/// "rank_N.json".
std::string kineto_trace_file_name(int32_t rank);

/// The file names export_kineto_traces writes for `session`, by rank.
std::vector<std::string> kineto_export_files(const SessionReader& session);

/// PyTorch's dtype name (c10::ScalarType) for the session's: float32 -> Float, int64 -> Long,
/// bfloat16 -> BFloat16, uint8 / bytes -> Byte; others unchanged.
std::string kineto_dtype(const std::string& dtype);

/// The GPU's name for deviceProperties from a session's RankInfo::device: an imported trace's
/// device ("NVIDIA A100-PG509-200 (cuda:0)", "... (cuda:0 of rank 1's host)") without the suffix
/// the importer adds (it adds it again from the id: else "(cuda:0) (cuda:0)" after a round
/// trip); any other name as it is.
std::string kineto_device_name(const std::string& device);

/// A collective record's record_param_comms args in PyTorch's convention: element counts such
/// that the Kineto importer's byte rule gives back the record's bytes (all_to_all: the splits;
/// all_reduce: in = out = the count whose ring bytes on this group rank are bytes_sent
/// (model/ring_all_reduce.h ring_all_reduce_count; a session of the rule of before, bytes_sent n /
/// (2 (n - 1) elem)); all_gather: out = the elements
/// received from all n peers, in = out / n; reduce_scatter: in = the elements sent, out = in / n;
/// others: bytes sent / received over the element size; each division rounded up, which gives
/// back the buffer's elements from bytes rounded down). n = the record's peers.
struct KinetoCommArgs {
  std::string name;   ///< "Collective name"
  std::string dtype;  ///< "dtype"
  int64_t in_nelems = 0, out_nelems = 0;
  std::vector<int64_t> in_split, out_split;
};
/// `all_reduce_count` >= 0 (an all-reduce's element count known from its group,
/// all_reduce_counts): in = out = it. One rank's bytes cannot always tell the count: its ring
/// bytes 2 (count - its chunk) elem are the same for count and count + 1 when the extra element
/// lands in its own chunk, so ring_all_reduce_count's pick is one short on the rank whose chunk
/// takes count's last extra element (1,024 floats on 3 ranks: rank 0's 5,456 B also fit 1,023,
/// the multiple of 3 it picks).
KinetoCommArgs kineto_comm_args(const CollectiveRecord& c, int64_t all_reduce_count = -1);

/// The element count of every all-reduce in `records` whose group's every member has one record
/// of it, keyed by (group, sequence): the members' bytes_sent summed over 2 (n - 1) x the
/// element size (a ring all-reduce's members send exactly 2 (n - 1) x count elements together,
/// model/ring_all_reduce.h), kept only when each member's bytes_sent is ring_all_reduce_bytes of
/// that count on its group rank (a session of the rule of before, or a member missing, is not in
/// the map). Example: 1,024 float32 on 3 ranks, 5,456 + 5,464 + 5,464 B = 16,384 = 2 x 2 x 4 x
/// 1,024. O(records log records).
std::map<std::pair<std::string, uint64_t>, int64_t> all_reduce_counts(const std::vector<CollectiveRecord>& records);

}  // namespace embedscope::sessions

#pragma once
// The timeline's row labels, without Qt: short enough for the label gutter and unique within a
// session (tester34 D23: on an imported Kineto trace two rows read "rank 0 annotatio...", three
// "rank 0 thread ...", and an overflow row repeated its lane's label). The widget elides a label
// in the middle, keeping its distinguishing end, and shows the lane's whole name on hover.

#include <cstdint>
#include <string>
#include <vector>

namespace embedscope::ui {

/// A timeline row to label: its rank, the lane's name as the session stores it, whether it is
/// the overflow row of the lane's partially overlapping spans, and whether the rank shares its
/// GPU with other ranks of the session (sessions::rank_gpus: several ranks on one GPU).
struct LaneLabelInput {
  int32_t rank = 0;
  std::string lane;
  bool overlapping = false;
  bool shares_gpu = false;
};


/// The short name of a lane (no rank), the part that tells lanes apart:
///   "stream 7 (cuda:0 NVIDIA A100-PG509-200)"            -> "stream 7"
///   "annotations of stream 40 (device 0)"                -> "annot. stream 40"
///   "thread 2910249 (thread 2910249 (pt_main_thread))"   -> "pt_main_thread" (the thread's name)
///   "thread 30156 (test_matmul)"                         -> "test_matmul"
///   "thread 30156 (test_matmul) NVTX" (its NVTX ranges)  -> "test_matmul NVTX"
///   "thread -549452224 (pid 2910249)"                    -> "pid 2910249"
///   "compute" (an engine run's lane)                     -> "compute"
///   "gpu_compute" / "gpu_comm" / "gpu_copy" (a GPU rank's CUDA streams, CUPTI)
///                                   -> "GPU compute stream" / "GPU comm stream" / "GPU copy stream"
///   "gpu_sync" (the host's waits for the GPU: cudaStreamSynchronize etc.) -> "GPU sync waits"
/// Anything else loses its first " (...)" and what follows it.
std::string short_lane_name(const std::string& lane);

/// True for the lanes an engine GPU rank records besides its host threads: "gpu_compute",
/// "gpu_comm", "gpu_copy" (streams) and "gpu_sync" (host waits for the GPU).
bool is_gpu_lane(const std::string& lane);

/// One label per row, in order: "rank R <short_lane_name>", plus " (overlap)" on an overflow
/// row. On a rank that has GPU lanes (is_gpu_lane) its host threads "compute" / "comm" read
/// "host compute" / "host comm", so that host threads and GPU streams are told apart (tester38
/// #13): "rank 0 host compute", "rank 0 GPU compute stream", "rank 0 GPU sync waits".
/// The "gpu_comm" row of a rank that shares its GPU reads "GPU comm stream (shared GPU)": its
/// collectives with the ranks on the same GPU are device-to-device copies and reduction kernels
/// of the intra-device communicator, not NCCL (shared_gpu_comm_note says so on hover).
/// Where two rows' labels would be the same, each of them says more: a thread lane its id after
/// its name ("rank 1 python3.8 2568503"), any other lane its whole name; rows still alike (two
/// lanes of the same name) end in " #L", L counting them from 1 in row order. Cost:
/// O(rows log rows).
std::vector<std::string> lane_labels(const std::vector<LaneLabelInput>& rows);

/// What the "gpu_comm" lane of a rank on a GPU it shares with `ranks` (all ranks on that GPU,
/// rank_list's form, e.g. "0-3") named `device` holds, for the row's hover text: "ranks 0-3
/// share NVIDIA H200 (cuda:0): their collectives among themselves ran on this stream as
/// device-to-device copies (memcpy_dtod, copy-engine speed) and add_f32_cuda reduction kernels
/// of the intra-device communicator, not NCCL kernels", and where the session has `other_gpus`
/// "; ranks on other GPUs are reached through NCCL by each GPU's first rank" (the hierarchical
/// communicator's leaders).
std::string shared_gpu_comm_note(const std::string& ranks, const std::string& device, bool other_gpus);

}  // namespace embedscope::ui

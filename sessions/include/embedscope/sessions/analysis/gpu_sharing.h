#pragma once
// Which GPU each rank of a session ran on, and which ranks shared one (tester38 #11: a 4-rank
// cuda run on ONE H200 read as 4 GPUs everywhere but in `stats`). From the ranks table's device
// names ("NVIDIA H200 (cuda:0)", RankInfo::device); `stats` (text and --json), the workbench's
// Summary page and the Compare view (and its --report) all say it with these two functions.

#include <cstdint>
#include <string>
#include <vector>

#include "embedscope/sessions/model/events.h"

namespace embedscope::sessions {

/// One GPU of a session: its name as the ranks table has it and the ranks that ran on it
/// (ascending).
struct RankGpu {
  std::string device;          ///< "NVIDIA H200 (cuda:0)"
  std::vector<int32_t> ranks;  ///< e.g. {0, 1, 2, 3}
};

/// The GPUs of `ranks` in the order of their first rank: a rank is on a GPU when its device
/// name holds "(cuda:" (the cuda backend's "<name> (cuda:<ordinal>)"); ranks on a CPU or an
/// emulated device are left out, so a cpu session gives {}. Two ranks share a GPU when their
/// device names are equal. Cost: O(ranks x GPUs). Never throws.
std::vector<RankGpu> rank_gpus(const std::vector<RankInfo>& ranks);

/// The phrase `stats` puts after "on N cuda ranks" (leading space), "" without GPUs:
///   all ranks on one GPU, several ranks  " sharing 1 GPU (NVIDIA H200 (cuda:0))"
///   one rank                             " on 1 GPU (NVIDIA H200 (cuda:0))"
///   a GPU per rank                       " on 2 GPUs (NVIDIA H200 (cuda:0), NVIDIA H200 (cuda:1))"
///   several GPUs, some shared            " on 2 GPUs (ranks 0-2 sharing NVIDIA H200 (cuda:0); rank 3
///                                          on NVIDIA H200 (cuda:1))"
/// (rank lists as rank_list writes them). Never throws.
std::string gpus_text(const std::vector<RankInfo>& ranks);

/// A rank's GPU as one input file of an import or merge gives it: the rank, the file it came
/// from, its host ("" unknown: a Kineto trace names none) and its device name (RankInfo::device).
struct RankDeviceSource {
  int32_t rank = 0;
  std::string file;
  std::string host;
  std::string device;
};

/// The one rule of `import` (several trace files) and `merge` (several sessions) for ranks of
/// different files on one device name: they share that GPU only when every one of them names the
/// same host (evidence of one machine); otherwise each file's ranks are on a GPU of their own, as
/// HTA assumes one GPU per rank's trace and NCCL refuses two ranks of a communicator on one GPU.
/// Such a device name gets the lowest rank of its file among them: "NVIDIA A100 (cuda:0)" -> "NVIDIA
/// A100 (cuda:0 of rank 1's host)". Ranks of one file on one device keep sharing it (a one-process
/// run of 4 ranks on one GPU). Devices without "(cuda:" ending in ')' (a CPU, an emulated device)
/// and names already "... of rank N's host)" are left as they are. Cost: O(ranks^2). Never throws.
void separate_gpus_of_files(std::vector<RankDeviceSource>& ranks);

}  // namespace embedscope::sessions

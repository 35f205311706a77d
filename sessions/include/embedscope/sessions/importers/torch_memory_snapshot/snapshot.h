#pragma once
// The PyTorch CUDA memory snapshot as typed structs: what torch.cuda.memory._snapshot()
// returns and _dump_snapshot pickles (torch/cuda/memory.py `_snapshot` docstring,
// torch/csrc/cuda/memory_snapshot.cpp):
//
//   {"segments": [{"device", "address", "total_size", "allocated_size", "active_size",
//                  "requested_size", "stream", "segment_type": "large"|"small",
//                  "segment_pool_id": (a, b), "is_expandable", "frames",
//                  "blocks": [{"address", "size", "requested_size", "state", "frames"}]}],
//    "device_traces": [[{"action", "addr" (oom: "device_free"), "size", "stream", "time_us",
//                        "frames", "user_metadata"?}, ...] per device],
//    "allocator_settings": {"max_split_size", "expandable_segments",
//                           "garbage_collection_threshold", "roundup_power2_divisions", ...},
//    "external_annotations": [...]}
//
// Frames are {"filename", "line", "name"}. Block states: active_allocated, active_pending_free
// (the docstring's spelling active_awaiting_free too), inactive. The older form of blocks with
// "history": [{"addr", "real_size", "frames"}] instead of "frames" is read (the frames of its
// last entry). Only segments[i].address/total_size and blocks[j].size/state are required;
// missing optional keys take the defaults below; keys not named here are kept in `extra`.
// Frames and stacks are interned: every distinct frame once in `frames`, every distinct stack
// (a list of frame ids, innermost first as PyTorch lists them) once in `stacks`; stack 0 is the
// empty stack.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "embedscope/sessions/importers/torch_memory_snapshot/pickle.h"

namespace embedscope::sessions::torch_snapshot {

/// A snapshot whose structure is not a memory snapshot's. what() names the source and the key
/// path, e.g. "x.pickle: segments[3].blocks[2].size: must be an int, got str".
class SnapshotError : public SessionError {
 public:
  using SessionError::SessionError;
};

/// Keys a struct does not know, with their values, in file order.
using Extra = std::vector<std::pair<std::string, pickle::Value>>;

struct Frame {
  std::string filename;
  int64_t line = 0;
  std::string name;
};

enum class BlockState { active_allocated, active_pending_free, inactive };
/// "active_allocated", "active_pending_free", "inactive".
const char* to_string(BlockState s);

struct Block {
  uint64_t address = 0;         ///< bytes (addresses above 2^63 are exact)
  int64_t size = 0;             ///< bytes
  int64_t requested_size = 0;   ///< bytes asked for (0 when absent)
  BlockState state = BlockState::inactive;
  int32_t stack = 0;            ///< MemorySnapshotFile::stacks index
  Extra extra;
};

/// Device indices a snapshot may name: [0, kMaxDevices). PyTorch's c10::DeviceIndex is an int8_t
/// (c10/core/Device.h), so a real file names fewer than 128; a larger index is refused (it would
/// make the import and replay-memory walk that many devices).
constexpr int64_t kMaxDevices = 1024;

/// The most bytes a segment, a block or an entry that holds memory (alloc, free_*, segment_*)
/// may name: 1 PiB, the most device memory this project models (engine kMaxMemoryBytes). A
/// larger size is refused naming the file and the field (snap54, tester54 F4: a total_size of
/// 2^62 read as "4194304.0 TiB reserved", 2^63 - 1 overflowed the 512-byte rounding); an oom
/// entry's size, the request that failed, may be any size >= 0.
constexpr int64_t kMaxSnapshotBytes = int64_t{1} << 50;

struct Segment {
  int64_t device = 0;           ///< [0, kMaxDevices)
  uint64_t address = 0;
  int64_t total_size = 0, allocated_size = 0, active_size = 0, requested_size = 0;  ///< bytes
  int64_t stream = 0;           ///< the cudaStream_t value (0: the default stream)
  bool small = false;           ///< segment_type "small" (the small pool)
  std::pair<int64_t, int64_t> pool_id{0, 0};
  bool is_expandable = false;
  int32_t stack = 0;
  std::vector<Block> blocks;    ///< address order, covering the segment
  Extra extra;
};

enum class TraceAction {
  alloc, free_requested, free_completed, segment_alloc, segment_free, segment_map, segment_unmap, oom, snapshot,
  annotate
};
const char* to_string(TraceAction a);

struct TraceEntry {
  TraceAction action = TraceAction::alloc;
  uint64_t addr = 0;        ///< block or segment address; for oom the device's free bytes (device_free)
  int64_t size = 0;         ///< bytes: requested for alloc/free_*, segment bytes for segment_*, the request for oom
  int64_t stream = 0;
  int64_t time_us = 0;      ///< microseconds, PyTorch's clock (0 when absent)
  int32_t stack = 0;
  Extra extra;              ///< user_metadata, compile_context, ...
};

struct AllocatorSettings {
  bool present = false;                 ///< the file had "allocator_settings"
  int64_t max_split_size = 0;           ///< bytes; 0 = unlimited (PyTorch writes SIZE_MAX as -1)
  bool expandable_segments = false;
  double garbage_collection_threshold = 0;
  std::string conf;                     ///< PYTORCH_CUDA_ALLOC_CONF as last set
  std::vector<std::pair<std::string, int64_t>> roundup_power2_divisions;
  Extra extra;
};

struct MemorySnapshotFile {
  std::vector<Segment> segments;
  std::vector<std::vector<TraceEntry>> device_traces;  ///< index = device
  AllocatorSettings settings;
  std::vector<Frame> frames;
  std::vector<std::vector<int32_t>> stacks;  ///< stacks[0] = {}
  std::vector<pickle::Value> external_annotations;
  Extra extra;

  /// Devices named by segments or traces: max(device) + 1 (0 for an empty snapshot).
  int64_t device_count() const;
  /// The devices that hold anything (a segment, or a trace entry), ascending; {0} when none
  /// does. PyTorch's snapshot() writes one device_traces list per visible GPU, so a one-GPU
  /// process on an 8-GPU node dumps 7 empty lists: those GPUs were unused, not unrecorded.
  std::vector<int64_t> used_devices() const;
};

/// Parses an unpickled snapshot. Throws SnapshotError "SOURCE: KEY.PATH: why" (the dotted key path
/// the other importers use, segments[1].blocks[0].size; "SOURCE: why" for the whole snapshot), also
/// for more than kMaxDevices device_traces lists and for sizes above kMaxSnapshotBytes.
MemorySnapshotFile parse_snapshot(const pickle::Value& root, const std::string& source);

/// pickle::load_file + parse_snapshot. Throws PickleError or SnapshotError.
MemorySnapshotFile load_snapshot(const std::string& path, const pickle::PickleLimits& limits = {});

}  // namespace embedscope::sessions::torch_snapshot

#pragma once
// The hierarchical communicator: collectives of a group whose members are spread over several
// devices with more than one member on some device (issue 14: ranks on several GPUs, several per
// GPU, e.g. 4 ranks at 2 per GPU). NCCL cannot put one GPU in a communicator twice, so a group
// like that is composed of
//   - within each device: the members on it (the intra-device communicator, comm/local/), and
//   - across devices: one communicator of one leader per device (the device's first member in
//     group order; NCCL on the cuda backend, a Gloo ProcessGroup on the host stand-in) - the
//     cross-device transport is an injected Collectives, so the whole composition runs on the
//     host stand-in with emulated devices.
// One leader communicator per group, not one per "rail" (the members of equal local index on
// each device): the rails would need the same number of members on every device (5 ranks at 2
// per GPU leave 1 on the last) and an all-to-all between members of different local indices
// would still need an intra-device hop; a leader carries its whole device's share instead.
//
// Same contract as the flat communicators (the Gloo ProcessGroup, NcclComm, LocalComm): one
// sequence number per collective of the group (the split check of an all-to-all or a
// reduce-scatter is its own, "<name>/split_check", an all-gather of every member's 2n counts),
// the same SplitMismatchError text, byte counters and CollectiveRecords counted as the flat
// collective would (collective_math.h: the group's traffic, not the parts'), flight recorder
// entries of the group's collectives, CollectiveError naming the group, its sequence number and
// the global ranks that did not arrive (the message also names the part - intra-device or
// cross-device - and the part's own error), close_connections closing both parts. The parts
// record nothing of their own: the session shows the group's collective on the rank's comm lane;
// on a GPU the parts' device work is on the rank's comm stream (LocalComm's copies, lane
// gpu_comm of that rank) and on the leader's NCCL stream (lane gpu_comm of the GPU's ranks).
//
// How each collective is composed (member m of n, on device d of k; every step blocks):
//   all_gather_v:  (1) intra all-gather of the device's members' blocks; (2) leaders: cross
//                  all-gather of the device blocks (device-major order); (3) intra broadcast of
//                  that from the leader (an all-gather in which only the leader sends); (4) each
//                  member reorders device-major to group order on the host.
//   all_to_all_v:  the split check (an all_gather_v as above of every member's send and receive
//                  counts: every member then knows the whole count matrix S[i][j]); (1) intra
//                  all-to-all of every member's whole send buffer to its leader; (2) leaders:
//                  cross all-to-all, leader d sending leader e the blocks S[i][j] of i on d and j
//                  on e (i, then j, in group order); (3) intra all-to-all from the leader of each
//                  member's receive buffer (blocks in group order of the sender).
//   reduce_scatter: as the Gloo ProcessGroup: an all-to-all of the blocks (above), then on the
//                  host recv[x] = ((0 + b_0[x]) + b_1[x]) + ... in group order - bit-equal to
//                  the ProcessGroup's and LocalComm's reduce-scatter (fp32, fp16 and bf16).
//   all_reduce_sum: a reduce-scatter of the buffer cut into n chunks (chunk j: count / n
//                  elements, one more for j < count % n; the sum in group order from zero) and an
//                  all-gather of the chunks: bit-equal to LocalComm's all-reduce (member order,
//                  ((b_0 + b_1) + b_2) ..., up to the sign of a zero sum) and within fp32
//                  rounding of Gloo's and NCCL's rings (whose order depends on the chunk).
// Internal to the engine.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "comm/collectives.h"
#include "comm/local/local_comm.h"
#include "embedscope/engine/comm/collective_math.h"

namespace embedscope::engine::detail {

/// Which members of a group are on which device: the devices in order of their first member in
/// group order, and each device's members (group ranks, in group order; the first is the
/// device's leader).
struct HierShape {
  std::vector<int> device_of;          ///< per group rank: its device's index in [0, devices())
  std::vector<int> device_id;          ///< per device index: the device id given (GPU index)
  std::vector<std::vector<int>> on;    ///< per device index: its members' group ranks, in order
  int devices() const { return static_cast<int>(on.size()); }
  int leader(int device) const { return on[static_cast<size_t>(device)].front(); }
  bool is_leader(int group_rank) const { return leader(device_of[static_cast<size_t>(group_rank)]) == group_rank; }
  /// The member's index among its device's members (its rank in the device's communicator).
  int local_rank(int group_rank) const;
  /// Whether a group of this shape needs the hierarchical communicator: more than one device
  /// and more than one member on some device (one device: LocalComm; one member per device:
  /// a flat NCCL / Gloo communicator).
  bool needs_hierarchy() const;
};

/// The shape of a group whose member i is on device `device_of_member[i]` (any ids: GPU index,
/// emulated device index). Throws std::invalid_argument for an empty group.
HierShape hier_shape(std::span<const int> device_of_member);

/// How far each member of a hierarchical group has come: the sequence number of the last
/// collective of the group it entered. Shared by the group's members (one process, one per
/// group), so that a member that times out in a part - waiting on the peer it meets there -
/// names the members that never entered the group's collective, as a flat communicator does
/// (Gloo: the arrival keys in the store), not the leader that waits for them elsewhere.
/// Thread-safe.
class HierArrivals {
 public:
  explicit HierArrivals(int members) : last_(static_cast<size_t>(members), 0) {}
  /// Member `group_rank` entered collective `seq` (sequence numbers grow by member).
  void arrive(int group_rank, uint64_t seq);
  /// The group ranks that have not entered collective `seq`, in group order.
  std::vector<int> missing(uint64_t seq) const;

 private:
  mutable std::mutex mu_;
  std::vector<uint64_t> last_;
};

/// One member's hierarchical communicator (see above). Collectives are blocking and run on the
/// calling thread (the rank's comm worker).
class HierComm final : public Collectives {
 public:
  /// Group `name` of global ranks `members` (group order); this rank is member `group_rank`;
  /// `shape` = hier_shape of the members' devices. `local`: the Collectives of this member's
  /// device's members (in shape.on order; required when the device has more than one member,
  /// else ignored); `cross`: the Collectives of the leaders, one per device in device order
  /// (required on a leader when there is more than one device, else ignored). `timeout` is
  /// the group's collective timeout (flight recorder entries). Throws std::invalid_argument for
  /// a part that is missing or a group rank outside the group. `arrivals` (shared by the
  /// group's members; null: none) names, on a timeout in a part, the members that never entered
  /// the group's collective instead of the part's missing peer. `device` (the rank's device,
  /// outliving the communicator; null: all_to_all_v_device throws std::logic_error) holds the
  /// device variant's intermediate buffers.
  HierComm(std::string name, std::vector<int> members, int group_rank, HierShape shape,
           std::unique_ptr<Collectives> local, std::unique_ptr<Collectives> cross, std::chrono::milliseconds timeout,
           std::shared_ptr<HierArrivals> arrivals = nullptr, const IntraDeviceOps* device = nullptr);

  uint64_t next_sequence() const override { return seq_ + 1; }
  const CommCounters& counters() const override { return counters_; }
  void set_observer(const profiler::RunClock* clock, ProcessGroup::Observer observer) override {
    clock_ = clock;
    observer_ = std::move(observer);
  }
  void set_flight_recorder(FlightRecorder* recorder) override { flight_ = recorder; }
  /// As ProcessGroup::all_to_all_v: the split check (its own sequence number), then the blocks;
  /// recv holds the blocks of members 0..n-1 in group order.
  void all_to_all_v(const char* op_name, const void* send, std::span<const int64_t> send_counts, void* recv,
                    std::span<const int64_t> recv_counts, size_t elem_size) override;
  /// As all_to_all_v on the rank's device memory (Collectives::all_to_all_v_device): the same
  /// composition with the parts' all_to_all_v_device, the leader's intermediate buffers in the
  /// device's memory (IntraDeviceOps::comm_alloc) and its reordering as comm_copy; the split
  /// check stays on the host (counts).
  void all_to_all_v_device(const char* op_name, const void* send, std::span<const int64_t> send_counts, void* recv,
                           std::span<const int64_t> recv_counts, size_t elem_size) override;
  /// counts: n elements per member; recv: sum(counts) elements in group order.
  void all_gather_v(const char* op_name, const void* send, void* recv, std::span<const int64_t> counts,
                    size_t elem_size) override;
  /// As all_gather_v on the rank's device memory: the same composition with the parts'
  /// all_gather_v_device, intermediate buffers in the device's memory, reordering as comm_copy.
  void all_gather_v_device(const char* op_name, const void* send, void* recv, std::span<const int64_t> counts,
                           size_t elem_size) override;
  /// As reduce_scatter_q at fp32 on the rank's device memory: the all-to-all of the blocks on
  /// the device (all_to_all_v_device's composition, recorded as the reduce-scatter), then recv
  /// zeroed and the blocks added in group order on the comm stream (comm_zero, comm_add):
  /// bit-equal to the host variant.
  void reduce_scatter_device(const char* op_name, const float* send, std::span<const int64_t> counts,
                             float* recv) override;
  /// In place, `count` floats; the sum in group order from zero (see above).
  void all_reduce_sum(const char* op_name, float* data, int64_t count) override;
  void all_to_all_q(const char* op_name, const float* send, std::span<const int64_t> send_counts, float* recv,
                    std::span<const int64_t> recv_counts, CommPrecision p, QuantError* err) override;
  /// The split check, then block group_rank of every member summed on the host in group order
  /// from zero (the ProcessGroup's code); fp16 / bf16 blocks quantized as the ProcessGroup's.
  void reduce_scatter_q(const char* op_name, const float* send, std::span<const int64_t> counts, float* recv,
                        CommPrecision p, QuantError* err) override;
  void all_gather_q(const char* op_name, const float* send, float* recv, std::span<const int64_t> counts,
                    CommPrecision p, QuantError* err) override;
  /// Closes both parts (peers waiting on this rank in either fail at once); this rank's later
  /// collectives are not started. Throws nothing.
  void close_connections() noexcept override;
  /// Test hook (TrainerOptions::vanish): from group sequence `seq` on this rank throws
  /// RankVanished instead of joining, so its peers time out on it (in the part they wait in).
  void vanish_at(uint64_t seq) { vanish_at_ = seq; }

 private:
  struct Meta {
    std::vector<int64_t> send, recv;  // the record's per-peer elements (empty: none)
    size_t elem_size = 4;
    const char* dtype = nullptr;
    int64_t elements = 0;   // flight recorder sizes where send / recv are empty
    CollectiveBytes bytes;  // counted on success
  };
  /// One collective of the group: sequence number, flight recorder, the parts (body), a
  /// CollectiveError of a part rethrown under the group's name and sequence, counters, record.
  void run(const char* kind, const char* op_name, Meta meta, const std::function<void()>& body);
  /// The composition of an all-gather (bytes; counts in elements of `es` bytes). Mem: host
  /// vectors (all_gather_v) or the device's memory (all_gather_v_device), as exchange_all's.
  template <class Mem>
  void gather_all(Mem& mem, const char* op_name, const void* send, std::span<const int64_t> counts, void* recv, int64_t es);
  /// The composition of an all-to-all; S: n x n row-major, S[i * n + j] elements from i to j.
  /// Mem: host vectors (all_to_all_v) or the device's memory (all_to_all_v_device).
  template <class Mem>
  void exchange_all(Mem& mem, const char* op_name, const void* send, std::span<const int64_t> S, void* recv, int64_t es);
  void all_gather_impl(const char* op_name, const void* send, void* recv, std::span<const int64_t> counts,
                       size_t elem_size, const char* dtype, bool on_device = false);
  /// The split check: returns the n x 2n matrix of every member's send and receive counts;
  /// throws SplitMismatchError (the flat text) on every member.
  std::vector<int64_t> split_check(const char* op_name, std::span<const int64_t> send_counts,
                                   std::span<const int64_t> recv_counts);
  void all_to_all_impl(const char* kind, const char* op_name, const void* send, std::span<const int64_t> send_counts,
                       void* recv, std::span<const int64_t> recv_counts, size_t elem_size, const char* dtype,
                       bool on_device = false);
  int size() const { return static_cast<int>(members_.size()); }

  std::string name_;
  std::vector<int> members_;
  int group_rank_;
  HierShape shape_;
  std::unique_ptr<Collectives> local_, cross_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<HierArrivals> arrivals_;
  const IntraDeviceOps* device_ = nullptr;
  uint64_t seq_ = 0;
  uint64_t vanish_at_ = 0;
  std::atomic<bool> closed_{false};
  CommCounters counters_;
  const profiler::RunClock* clock_ = nullptr;
  ProcessGroup::Observer observer_;
  FlightRecorder* flight_ = nullptr;
};

}  // namespace embedscope::engine::detail

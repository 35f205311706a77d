#pragma once
// Collectives between CPU ranks over Gloo (TCP on 127.0.0.1).
//
// A ProcessGroup is one rank's handle on a group of ranks (the world, one node, or the ranks
// with the same local index across nodes). Collectives are blocking and run on the calling
// thread (the rank's comm worker). Every collective:
//  - gets a sequence number within its group (the same on every member),
//  - marks the caller's arrival in the rendezvous store, so that a timeout can name the ranks
//    that never arrived,
//  - counts bytes sent to and received from other ranks (a rank's own slice is not counted),
//  - fails after the group's timeout with a CollectiveError, never hangs,
//  - with a network limit (set_network), takes at least the emulated time of its transfers
//    (a transfer whose emulated time exceeds the timeout fails at the timeout),
//  - float collectives can travel as fp16 / bf16 (TorchRec qcomms): quantized before the
//    collective, dequantized after it, half the bytes on the wire.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "embedscope/engine/comm/flight_recorder.h"
#include "embedscope/engine/quant/quant.h"
#include "embedscope/engine/workload/spec.h"
#include "embedscope/profiler/cpu/tracer.h"
#include "embedscope/sessions/model/events.h"

namespace gloo::rendezvous {
class Store;
}

namespace embedscope::engine {

/// A collective that did not finish: timeout (ranks missing) or a peer failure.
/// what(): "<op> '<name>' (group <g>, sequence <n>) did not finish within <t> ms: rank(s) 3 did
/// not arrive" or "... failed: <transport message>".
class CollectiveError : public std::runtime_error {
 public:
  CollectiveError(const std::string& msg, std::string group, uint64_t seq, std::vector<int> missing,
                  bool timed_out = false)
      : std::runtime_error(msg), group(std::move(group)), sequence(seq), missing_ranks(std::move(missing)),
        timed_out(timed_out) {}
  std::string group;
  uint64_t sequence;
  std::vector<int> missing_ranks;  ///< global ranks that had not arrived
  bool timed_out;                  ///< the timeout expired (else a peer failed: a consequence)
};

/// all-to-all split sizes that do not agree: send[i][j] != recv[j][i]. Thrown on every rank.
class SplitMismatchError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Thrown inside the rank that a test asked to vanish (FaultInjection); not an error of the run.
class RankVanished : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The linked Gloo's version, "0.5.0".
std::string gloo_version();

/// Emulated duration of moving `bytes` over `link`, in ns:
/// latency_ns + ceil(bytes * 1e9 / bandwidth_bytes_per_s) (no bandwidth term when unlimited).
int64_t emulated_transfer_ns(const LinkSpec& link, int64_t bytes);

/// The link model of the slow-network emulation (ProcessGroup::set_network): the emulated
/// minimum duration, in ns, of one collective for the group member at index `group_rank`, i.e.
///   max over the link classes c of that member's peers of emulated_transfer_ns(link(c), n_c),
/// where a peer j is of class intra_node when members[j] / local_world_size ==
/// members[group_rank] / local_world_size (global ranks; local_world_size < 1 counts as 1), else
/// inter_node, and n_c = max(sum of sent_bytes[j], sum of received_bytes[j]) over the peers j
/// of class c (one full-duplex port per link class). The member's own entry is ignored; a class
/// with no peers adds nothing, a class with peers but no bytes still pays its latency.
/// `sent_bytes` and `received_bytes` are bytes per member, in group order (size members.size()).
/// 0 when `net` is unlimited. Pure: no clock, no sleep.
/// Example: members {0,1,2,3}, local_world_size 2, member 0 sends 1 MiB to each peer;
/// intra_node 1 GiB/s, inter_node 100 MiB/s + 1 ms: intra 1 MiB -> 976563 ns, inter 2 MiB ->
/// 1 ms + 20 ms; the result is 21'000'000.
int64_t emulated_collective_ns(const NetworkSpec& net, int local_world_size, std::span<const int> members,
                               int group_rank, std::span<const int64_t> sent_bytes,
                               std::span<const int64_t> received_bytes);

/// Delivery time, in ns, of member `group_rank`'s bytes to member `to` in an all-to-all-like
/// collective (all_to_all, reduce_scatter, all_gather), counted from the collective's effective
/// start: the sender's port of the link class of `to` (intra_node when members[to] /
/// local_world_size == members[group_rank] / local_world_size) is shared max-min fairly among
/// its flows of that class, so the flow to `to` ends when the port has pushed
/// S = sum over the sender's peers k of that class of min(sent_bytes[k], sent_bytes[to]):
/// emulated_transfer_ns(link, S). 0 when nothing goes to `to`, `to` is the sender, or `net` is
/// unlimited. `sent_bytes`: bytes per member, group order. Pure.
/// Example: a sender with 3 peers on one 1000 B/s class, sending 100, 300 and 600 B: the 100 B
/// flow ends at 300 B pushed (0.3 s), the 300 B one at 700 B (0.7 s), the 600 B one at 1 s.
int64_t emulated_delivery_ns(const NetworkSpec& net, int local_world_size, std::span<const int> members,
                             int group_rank, std::size_t to, std::span<const int64_t> sent_bytes);
/// emulated_delivery_ns to every member, in group order (its own entry 0).
std::vector<int64_t> emulated_delivery_ns(const NetworkSpec& net, int local_world_size, std::span<const int> members,
                                          int group_rank, std::span<const int64_t> sent_bytes);

/// One member's figures of one paced collective, as it publishes them on arrival (steady-clock ns).
struct EmulatedMember {
  int64_t arrival_ns = 0;            // when the member entered the collective (steady clock)
  int64_t port_ns = 0;               // emulated_collective_ns of its own bytes
  std::vector<int64_t> deliver_ns;   // emulated_delivery_ns to each member (empty: none)
};

/// The steady-clock time (ns) at which the slow-network emulation releases member `group_rank`
/// from one collective: the effective start S = the last member's arrival, plus
///   ring (all-reduce):  max over every member j of port_ns[j] (every member's data goes round
///                       the ring, so the slowest port bounds every rank);
///   otherwise:          max(own port_ns, max over the other members j of deliver_ns[j][group_rank])
///                       (a receiver cannot finish before each sender's port delivered its share).
/// With every member arriving at the same time t and equal ports this is t + port_ns, the
/// per-rank rule before tester48 F5. Pure. Example: a ring of 3 arriving at 0, 5 and 13 ms with
/// ports of 22.8 ms: every member is released at 35.8 ms.
int64_t emulated_release_ns(bool ring, int group_rank, std::span<const EmulatedMember> members);

/// The key-value store through which ranks find each other (Gloo rendezvous), and the address
/// this process's Gloo TCP device listens on (one device per Rendezvous, made on first use).
class Rendezvous {
 public:
  /// For ranks that are threads of one process: a gloo HashStore, the device on 127.0.0.1.
  static std::shared_ptr<Rendezvous> in_process();
  /// Over a store that other processes share (exec/launch/: a FileStore under a PrefixStore of
  /// the run id). `has(key)` tells, without blocking, whether a key of `store` is set (for
  /// naming the ranks that did not arrive at a collective); `hostname` is the address the
  /// device binds to and advertises, e.g. "127.0.0.1".
  static std::shared_ptr<Rendezvous> over_store(std::shared_ptr<gloo::rendezvous::Store> store,
                                                std::function<bool(const std::string&)> has, std::string hostname);
  /// This process's Gloo TCP device as Gloo describes it, with the address it listens on
  /// (e.g. "tcp, pci=, iface=lo, speed=-1, addr=[127.0.0.2]"), making the device
  /// on first use. Throws what Gloo throws (gloo::EnforceNotMet, a std::exception) when the
  /// address cannot be resolved or bound.
  std::string device_address();
  virtual ~Rendezvous() = default;
  struct Impl;
  virtual Impl& impl() = 0;
};

/// Bytes moved by one rank (to and from other ranks), per group.
struct CommCounters {
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
  int64_t collectives = 0;
};

class ProcessGroup {
 public:
  /// Connects this rank to the group `name` of global ranks `members` (this rank is
  /// members[group_rank]) through `rv`. Blocks until every member has connected;
  /// throws CollectiveError naming the group after `timeout`.
  ProcessGroup(std::shared_ptr<Rendezvous> rv, std::string name, std::vector<int> members,
               int group_rank, std::chrono::milliseconds timeout);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return group_rank_; }
  int size() const { return static_cast<int>(members_.size()); }
  const std::string& name() const { return name_; }
  const std::vector<int>& members() const { return members_; }
  /// Sequence number the next collective will get (starts at 1).
  uint64_t next_sequence() const { return seq_ + 1; }
  const CommCounters& counters() const { return counters_; }

  /// all-to-all(v): sends send_counts[j] elements (elem_size bytes each, packed in rank order)
  /// to group rank j and receives recv_counts[j] from j into `recv` (packed in rank order).
  /// The split sizes of all ranks are first all-gathered and cross-checked
  /// (send[i][j] == recv[j][i]); a mismatch throws SplitMismatchError naming the pair.
  void all_to_all_v(const char* op_name, const void* send, std::span<const int64_t> send_counts,
                    void* recv, std::span<const int64_t> recv_counts, size_t elem_size);
  /// reduce-scatter (sum, fp32): `send` holds size() blocks, block j of counts[j] floats;
  /// recv receives the sum over ranks of block rank() (counts[rank()] floats). Pairwise
  /// exchange (each block goes straight to its owner, then is summed in rank order, so the
  /// result is deterministic).
  void reduce_scatter(const char* op_name, const float* send, std::span<const int64_t> counts,
                      float* recv);
  /// all-gather(v): every rank contributes counts[rank()] elements; recv gets all blocks in
  /// rank order.
  void all_gather_v(const char* op_name, const void* send, void* recv,
                    std::span<const int64_t> counts, size_t elem_size);
  /// all-reduce (sum, fp32), in place.
  void all_reduce_sum(const char* op_name, float* data, int64_t count);
  /// all-reduce (max, fp32), in place: the elementwise maximum over the ranks (Megatron's
  /// vocab-parallel cross-entropy reduces its logits' maxima so). Bytes as all_reduce_sum.
  void all_reduce_max(const char* op_name, float* data, int64_t count);

  /// all_to_all_v of floats sent in precision `p`: every value (the rank's own slice too) is
  /// rounded to `p` before the collective, which moves 2-byte elements for fp16 / bf16, and
  /// widened to fp32 after it. `err` (may be null) accumulates the error of the values sent.
  void all_to_all_q(const char* op_name, const float* send, std::span<const int64_t> send_counts, float* recv,
                    std::span<const int64_t> recv_counts, CommPrecision p, QuantError* err);
  /// reduce_scatter with blocks sent in precision `p`, summed in fp32 after dequantization.
  void reduce_scatter_q(const char* op_name, const float* send, std::span<const int64_t> counts, float* recv,
                        CommPrecision p, QuantError* err);
  /// all_gather_v of floats sent in precision `p`.
  void all_gather_q(const char* op_name, const float* send, float* recv, std::span<const int64_t> counts,
                    CommPrecision p, QuantError* err);

  /// all_reduce_sum (in place) of floats sent in precision `p` (Megatron's bf16 / fp16 activation
  /// all-reduce): every rank's `count` values (its own too, whatever the group's size) are
  /// rounded to `p`; a reduce-scatter phase sends chunk j (count / n elements, the first count % n
  /// one more) of those 2-byte codes to rank j, which sums the n terms of its chunk in fp32 in
  /// rank order and rounds the sum to `p`; an all-gather phase sends the rounded chunks to every
  /// rank. So data[i] = round_p(sum over ranks r in order of round_p(x_r[i])), the same on every
  /// rank; a sum whose terms are all zero but one is that term rounded, exactly. Recorded as one
  /// all_reduce of dtype precision_dtype(p), bytes a ring all-reduce of 2-byte elements moves
  /// (all_reduce_bytes(count, n, rank, 2): 2 (count - this rank's ring chunk) x 2 B each way).
  /// fp32: all_reduce_sum.
  /// `err` (may be null) accumulates the error of the terms rounded.
  void all_reduce_q(const char* op_name, float* data, int64_t count, CommPrecision p, QuantError* err);

  /// Slow-network emulation. Members r and s of this group are on the same node when
  /// r / local_world_size == s / local_world_size (global ranks), and their link is then of
  /// class `net.intra_node`, else `net.inter_node`. From then on every collective (except the
  /// split-size check of an all-to-all, which TorchRec does not make) returns no earlier than
  /// emulated_release_ns: the last member's arrival plus this rank's port time
  ///   max over the link classes c of this rank's peers of
  ///           latency_ns(c) + n_c * 1e9 / bandwidth_bytes_per_s(c),
  /// where n_c is the larger of the bytes this rank sent to and received from the peers of
  /// class c (all-to-all and all-gather: the per-peer splits; all-reduce: the ring's
  /// 2 (n-1)/n of the buffer to the next rank and from the previous one), i.e. each rank has
  /// one full-duplex port per link class - or, if later, every member's port time (all-reduce)
  /// or each sender's delivery to this rank (emulated_delivery_ns). Members publish their
  /// arrival (steady clock) and figures in their arrival key of the rendezvous store. The bytes
  /// still move over Gloo; the collective is held until the emulated time has passed. An
  /// unlimited class adds nothing.
  void set_network(const NetworkSpec& net, int local_world_size) {
    network_ = net;
    local_world_size_ = local_world_size;
  }
  /// The emulated minimum duration of one collective for this rank, given the bytes sent to
  /// and received from each group rank (group order; its own entry is ignored). 0 without a
  /// network limit.
  int64_t emulated_min_ns(std::span<const int64_t> sent_bytes, std::span<const int64_t> received_bytes) const;
  /// The emulated duration (ns) of the last collective this rank completed, from its effective
  /// start (the last member's arrival) to this rank's release (emulated_release_ns); with every
  /// member arriving together and equal ports, emulated_min_ns of its bytes. 0 when it was not paced (no network limit,
  /// one rank, or the split-size check of an all-to-all).
  int64_t last_emulated_ns() const { return last_emulated_ns_; }

  /// Receives a record of every collective this rank completes (on the calling thread), with
  /// times on `clock`. `step` is filled in by the observer.
  using Observer = std::function<void(sessions::CollectiveRecord&&)>;
  void set_observer(const profiler::RunClock* clock, Observer observer) {
    clock_ = clock;
    observer_ = std::move(observer);
  }

  /// Records every collective of this group, as it is entered, arrives and completes, in
  /// `recorder` (the rank's flight recorder, which must outlive the group's collectives; null:
  /// none). The split-size check of an all-to-all is a collective of its own there (it has its
  /// own sequence number), as in the collectives table.
  void set_flight_recorder(FlightRecorder* recorder) { flight_ = recorder; }

  /// Test hook: this rank stops arriving from group sequence `seq` on (throws RankVanished
  /// instead of joining), so that its peers time out as they would with a hung rank.
  void vanish_at(uint64_t seq) { vanish_at_ = seq; }

  /// Closes this rank's TCP connections to every peer of the group (each pair's close(), as
  /// gloo::Context::closeConnections): a peer blocked on a transfer from this rank fails at
  /// once (its pair sees the connection closed) instead of at its collective timeout. Called
  /// by a rank whose collective failed before it waits for its peers' word (exec/launch/), so
  /// that no live peer waits out its timeout on it. Later collectives of the group throw
  /// CollectiveError (named as not started) without touching the transport; counters() is
  /// kept. Safe while another thread runs a collective of the group: that one fails at once
  /// too, even when it is blocked inside Gloo (each pair's waiters in this process are woken
  /// through tcp::Pair::signalExceptionExternal, process_group.cpp), with a CollectiveError
  /// "<collective> failed: this rank closed its connections after an earlier failure while the
  /// collective was in flight" that names no missing rank and is not a timeout. Throws nothing.
  void close_connections() noexcept;

  /// Sequence number of the last collective started (0 before any).
  uint64_t sequence() const { return seq_; }

 private:
  struct Splits {
    std::vector<int64_t> send, recv;  // elements per peer (empty: no per-peer split)
    size_t elem_size = 4;
    const char* dtype = nullptr;      // record's dtype; null: from elem_size
    int64_t ring_bytes = 0;           // all-reduce: bytes to the next rank (and from the previous)
    bool paced = true;                // false: exempt from the network emulation
    int64_t elements = 0;             // all-reduce: elements reduced (the flight recorder's sizes)
  };
  template <class F>
  void run(const char* kind, const char* op_name, Splits splits, F&& body);
  void all_to_all_impl(const char* kind, const char* op_name, const void* send, std::span<const int64_t> send_counts,
                       void* recv, std::span<const int64_t> recv_counts, size_t elem_size,
                       const char* dtype = nullptr);
  void all_gather_impl(const char* op_name, const void* send, void* recv, std::span<const int64_t> counts,
                       size_t elem_size, Splits splits);
  /// In-place float all-reduce with Gloo's reduce function `reduce` (gloo::sum / gloo::max).
  void all_reduce_impl(const char* op_name, float* data, int64_t count,
                       void (*reduce)(void*, const void*, const void*, size_t));

  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::shared_ptr<Rendezvous> rv_;
  std::string name_;
  std::vector<int> members_;
  int group_rank_;
  std::chrono::milliseconds timeout_;
  uint64_t seq_ = 0;
  uint64_t vanish_at_ = 0;
  std::atomic<bool> closed_{false};  // close_connections() was called
  CommCounters counters_;
  const profiler::RunClock* clock_ = nullptr;
  Observer observer_;
  FlightRecorder* flight_ = nullptr;
  NetworkSpec network_;
  int local_world_size_ = 1;
  int64_t last_emulated_ns_ = 0;
};

}  // namespace embedscope::engine

#include "comm/hier/hier_comm.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace embedscope::engine::detail {

namespace {

int64_t sum(std::span<const int64_t> v) { return std::accumulate(v.begin(), v.end(), int64_t{0}); }

void copy_bytes(void* dst, const void* src, int64_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, static_cast<size_t>(bytes));
}

/// A CollectiveError of one part, rethrown as the group's (its name and sequence number; the
/// global ranks that did not arrive kept).
struct PartError {
  const char* part;
  CollectiveError error;
};

/// Runs one part's collective; its CollectiveError becomes a PartError naming the part.
template <class F>
void in_part(const char* part, F&& f) {
  try {
    f();
  } catch (const CollectiveError& e) {
    throw PartError{part, e};
  }
}

constexpr const char* kIntra = "intra-device";
constexpr const char* kCross = "cross-device";

}  // namespace

int HierShape::local_rank(int group_rank) const {
  const auto& m = on[static_cast<size_t>(device_of[static_cast<size_t>(group_rank)])];
  return static_cast<int>(std::find(m.begin(), m.end(), group_rank) - m.begin());
}

bool HierShape::needs_hierarchy() const {
  if (devices() < 2) return false;
  for (const auto& m : on)
    if (m.size() > 1) return true;
  return false;
}

HierShape hier_shape(std::span<const int> device_of_member) {
  if (device_of_member.empty()) throw std::invalid_argument("hier_shape: a group without members");
  HierShape s;
  for (size_t i = 0; i < device_of_member.size(); ++i) {
    const int id = device_of_member[i];
    auto it = std::find(s.device_id.begin(), s.device_id.end(), id);
    const auto d = static_cast<size_t>(it - s.device_id.begin());
    if (it == s.device_id.end()) {
      s.device_id.push_back(id);
      s.on.emplace_back();
    }
    s.device_of.push_back(static_cast<int>(d));
    s.on[d].push_back(static_cast<int>(i));
  }
  return s;
}

void HierArrivals::arrive(int group_rank, uint64_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& l = last_.at(static_cast<size_t>(group_rank));
  l = std::max(l, seq);
}

std::vector<int> HierArrivals::missing(uint64_t seq) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int> out;
  for (size_t m = 0; m < last_.size(); ++m)
    if (last_[m] < seq) out.push_back(static_cast<int>(m));
  return out;
}

HierComm::HierComm(std::string name, std::vector<int> members, int group_rank, HierShape shape,
                   std::unique_ptr<Collectives> local, std::unique_ptr<Collectives> cross,
                   std::chrono::milliseconds timeout, std::shared_ptr<HierArrivals> arrivals,
                   const IntraDeviceOps* device)
    : name_(std::move(name)), members_(std::move(members)), group_rank_(group_rank), shape_(std::move(shape)),
      local_(std::move(local)), cross_(std::move(cross)), timeout_(timeout), arrivals_(std::move(arrivals)),
      device_(device) {
  if (group_rank_ < 0 || group_rank_ >= size() || shape_.device_of.size() != members_.size())
    throw std::invalid_argument(fmt::format("HierComm '{}': group rank {} outside a group of {} members (shape of {})",
                                            name_, group_rank_, size(), shape_.device_of.size()));
  const int d = shape_.device_of[static_cast<size_t>(group_rank_)];
  if (shape_.on[static_cast<size_t>(d)].size() > 1 && !local_)
    throw std::invalid_argument(fmt::format("HierComm '{}': rank {} shares device {} but has no intra-device part",
                                            name_, members_[static_cast<size_t>(group_rank_)],
                                            shape_.device_id[static_cast<size_t>(d)]));
  if (shape_.devices() > 1 && shape_.is_leader(group_rank_) && !cross_)
    throw std::invalid_argument(fmt::format("HierComm '{}': rank {} leads device {} but has no cross-device part",
                                            name_, members_[static_cast<size_t>(group_rank_)],
                                            shape_.device_id[static_cast<size_t>(d)]));
}

void HierComm::close_connections() noexcept {
  closed_ = true;
  if (local_) local_->close_connections();
  if (cross_) cross_->close_connections();
}

void HierComm::run(const char* kind, const char* op_name, Meta meta, const std::function<void()>& body) {
  const uint64_t seq = ++seq_;
  const auto me = static_cast<size_t>(group_rank_);
  const int64_t start = clock_ ? clock_->now_ns() : 0;
  if (vanish_at_ != 0 && seq >= vanish_at_)
    throw RankVanished(fmt::format("rank {} vanished before {} '{}' (group {}, sequence {})", members_[me], kind,
                                   op_name, name_, seq));
  const char* dtype = meta.dtype ? meta.dtype : dtype_name(meta.elem_size);
  FlightRecorder::Id flight = -1;
  if (flight_) {
    const int64_t in = meta.send.empty() ? meta.elements : sum(meta.send);
    const int64_t out = meta.recv.empty() ? meta.elements : sum(meta.recv);
    flight = flight_->scheduled(name_, members_, seq, kind, op_name, dtype, in, out, timeout_.count());
  }
  const FlightFailMark flight_failed(flight_, flight);  // any throw below records when it failed
  const std::string head = collective_head(kind, op_name, name_, seq);
  if (closed_)
    throw CollectiveError(fmt::format("{} not started: this rank closed its connections after an earlier failure", head),
                          name_, seq, {});
  if (arrivals_) arrivals_->arrive(group_rank_, seq);
  if (flight_) flight_->started(flight);
  ++counters_.collectives;
  try {
    body();
  } catch (const PartError& p) {
    const CollectiveError& e = p.error;
    std::vector<int> never;  // the group's: who never entered this collective
    if (arrivals_)
      for (int m : arrivals_->missing(seq)) never.push_back(members_[static_cast<size_t>(m)]);
    // else the part's: the peer this rank met there
    const std::vector<int>& missing = never.empty() ? e.missing_ranks : never;
    if (e.timed_out && !missing.empty())
      throw CollectiveError(fmt::format("{} did not finish within {} ms: rank(s) {} did not arrive (in its {} part: {})",
                                        head, timeout_.count(), fmt::join(missing, ", "), p.part, e.what()),
                            name_, seq, missing, true);
    // a consequence of another rank's failure (a peer closed its connections), which can reach
    // this rank just before its own timeout would have: still name who never entered the
    // collective, the cause, not only the peer whose connection broke
    if (!never.empty())
      throw CollectiveError(fmt::format("{} failed in its {} part: {}; rank(s) {} never entered it", head, p.part,
                                        e.what(), fmt::join(never, ", ")),
                            name_, seq, never, false);
    throw CollectiveError(fmt::format("{} failed in its {} part: {}", head, p.part, e.what()), name_, seq,
                          e.missing_ranks, e.timed_out);
  }
  counters_.bytes_sent += meta.bytes.sent;
  counters_.bytes_received += meta.bytes.received;
  if (flight_) flight_->completed(flight);
  if (observer_) {
    sessions::CollectiveRecord rec;
    rec.rank = members_[me];
    rec.op = kind;
    rec.name = op_name;
    rec.group = name_;
    rec.sequence = seq;
    rec.dtype = dtype;
    rec.start_ns = start;
    rec.end_ns = clock_ ? clock_->now_ns() : 0;
    rec.bytes_sent = meta.bytes.sent;
    rec.bytes_received = meta.bytes.received;
    rec.peers = members_;
    rec.send_elements = std::move(meta.send);
    rec.recv_elements = std::move(meta.recv);
    observer_(std::move(rec));
  }
}

namespace {

// exchange_all's memory: host vectors and memcpy, the parts' all_to_all_v.
struct HostMem {
  struct Buffer {
    std::vector<char> v;
    char* data() { return v.data(); }
    int64_t size() const { return static_cast<int64_t>(v.size()); }
  };
  Buffer make(int64_t bytes) { return Buffer{std::vector<char>(static_cast<size_t>(bytes))}; }
  void copy(void* dst, const void* src, int64_t bytes) { copy_bytes(dst, src, bytes); }
  void a2a(Collectives& part, const char* op_name, const void* send, std::span<const int64_t> sc, void* recv,
           std::span<const int64_t> rc, size_t es) {
    part.all_to_all_v(op_name, send, sc, recv, rc, es);
  }
  void ag(Collectives& part, const char* op_name, const void* send, void* recv, std::span<const int64_t> counts,
          size_t es) {
    part.all_gather_v(op_name, send, recv, counts, es);
  }
  void done() {}
};

// all_to_all_v_device's: the rank's device memory (comm_alloc, freed in comm stream order),
// comm_copy on the comm stream, the parts' all_to_all_v_device (each orders itself after the
// comm and compute streams' work); done() waits for the comm stream's last copies.
struct DeviceMem {
  const IntraDeviceOps& ops;
  class Buffer {
   public:
    Buffer() = default;
    Buffer(const IntraDeviceOps* ops, int64_t bytes) : ops_(ops), p_(static_cast<char*>(ops->comm_alloc(bytes))), n_(bytes) {}
    Buffer(Buffer&& o) noexcept { *this = std::move(o); }
    Buffer& operator=(Buffer&& o) noexcept {
      if (this != &o) {
        if (ops_) ops_->comm_free(p_);
        ops_ = o.ops_;
        p_ = o.p_;
        n_ = o.n_;
        o.ops_ = nullptr;
        o.p_ = nullptr;
        o.n_ = 0;
      }
      return *this;
    }
    ~Buffer() {
      if (ops_) ops_->comm_free(p_);
    }
    char* data() { return p_; }
    int64_t size() const { return n_; }

   private:
    const IntraDeviceOps* ops_ = nullptr;
    char* p_ = nullptr;
    int64_t n_ = 0;
  };
  Buffer make(int64_t bytes) { return Buffer(&ops, bytes); }
  void copy(void* dst, const void* src, int64_t bytes) {
    if (bytes > 0) ops.comm_copy(dst, src, bytes);
  }
  void a2a(Collectives& part, const char* op_name, const void* send, std::span<const int64_t> sc, void* recv,
           std::span<const int64_t> rc, size_t es) {
    part.all_to_all_v_device(op_name, send, sc, recv, rc, es);
  }
  void ag(Collectives& part, const char* op_name, const void* send, void* recv, std::span<const int64_t> counts,
          size_t es) {
    part.all_gather_v_device(op_name, send, recv, counts, es);
  }
  void done() { ops.comm_sync(); }
};

}  // namespace

template <class Mem>
void HierComm::gather_all(Mem& mem, const char* op_name, const void* send, std::span<const int64_t> counts, void* recv,
                          int64_t es) {
  const HierShape& s = shape_;
  const int n = size(), k = s.devices();
  const int d = s.device_of[static_cast<size_t>(group_rank_)];
  const auto& mine = s.on[static_cast<size_t>(d)];
  std::vector<int64_t> dev_counts(static_cast<size_t>(k), 0);  // elements per device
  for (int m = 0; m < n; ++m) dev_counts[static_cast<size_t>(s.device_of[static_cast<size_t>(m)])] += counts[static_cast<size_t>(m)];
  const int64_t total = sum(counts);
  // (1) the device's blocks, in its members' order
  typename Mem::Buffer dev_buf = mem.make(dev_counts[static_cast<size_t>(d)] * es);
  if (mine.size() > 1) {
    std::vector<int64_t> lc;
    for (int m : mine) lc.push_back(counts[static_cast<size_t>(m)]);
    in_part(kIntra, [&] { mem.ag(*local_, op_name, send, dev_buf.data(), lc, static_cast<size_t>(es)); });
  } else {
    mem.copy(dev_buf.data(), send, counts[static_cast<size_t>(group_rank_)] * es);
  }
  // (2) leaders: every device's blocks, device-major
  typename Mem::Buffer all;
  if (s.is_leader(group_rank_)) {
    if (k > 1) {
      all = mem.make(total * es);
      in_part(kCross, [&] { mem.ag(*cross_, op_name, dev_buf.data(), all.data(), dev_counts, static_cast<size_t>(es)); });
    } else {
      all = std::move(dev_buf);
    }
  } else {
    all = mem.make(total * es);  // sends nothing in (3)
  }
  // (3) the leader's copy to its device's members
  if (mine.size() > 1) {
    std::vector<int64_t> bc(mine.size(), 0);
    bc[0] = total;
    typename Mem::Buffer got = mem.make(total * es);
    in_part(kIntra, [&] { mem.ag(*local_, op_name, all.data(), got.data(), bc, static_cast<size_t>(es)); });
    all = std::move(got);
  }
  // (4) device-major to group order
  std::vector<int64_t> dev_off(static_cast<size_t>(k), 0);
  for (int e = 1; e < k; ++e) dev_off[static_cast<size_t>(e)] = dev_off[static_cast<size_t>(e - 1)] + dev_counts[static_cast<size_t>(e - 1)];
  std::vector<int64_t> at(static_cast<size_t>(n));  // member m's block in `all`
  for (int e = 0; e < k; ++e) {
    int64_t off = dev_off[static_cast<size_t>(e)];
    for (int m : s.on[static_cast<size_t>(e)]) {
      at[static_cast<size_t>(m)] = off;
      off += counts[static_cast<size_t>(m)];
    }
  }
  int64_t out = 0;
  for (int m = 0; m < n; ++m) {
    const int64_t c = counts[static_cast<size_t>(m)];
    mem.copy(static_cast<char*>(recv) + out * es, all.data() + at[static_cast<size_t>(m)] * es, c * es);
    out += c;
  }
  mem.done();
}

template <class Mem>
void HierComm::exchange_all(Mem& mem, const char* op_name, const void* send, std::span<const int64_t> S, void* recv,
                            int64_t es) {
  const HierShape& s = shape_;
  const int n = size(), k = s.devices();
  const int d = s.device_of[static_cast<size_t>(group_rank_)];
  const auto& mine = s.on[static_cast<size_t>(d)];
  const auto nn = static_cast<size_t>(n);
  auto S_ = [&](int i, int j) { return S[static_cast<size_t>(i) * nn + static_cast<size_t>(j)]; };
  auto row_total = [&](int i) { return sum(S.subspan(static_cast<size_t>(i) * nn, nn)); };
  auto col_total = [&](int j) {
    int64_t t = 0;
    for (int i = 0; i < n; ++i) t += S_(i, j);
    return t;
  };
  const bool leader = s.is_leader(group_rank_);
  const auto lz = mine.size();
  // (1) every member's whole send buffer to the leader (members' order)
  typename Mem::Buffer dev_send;
  if (lz > 1) {
    std::vector<int64_t> sc(lz, 0), rc(lz, 0);
    sc[0] = row_total(group_rank_);
    if (leader)
      for (size_t x = 0; x < lz; ++x) rc[x] = row_total(mine[x]);
    dev_send = mem.make(sum(rc) * es);
    in_part(kIntra, [&] { mem.a2a(*local_, op_name, send, sc, dev_send.data(), rc, static_cast<size_t>(es)); });
  } else {
    dev_send = mem.make(row_total(group_rank_) * es);
    mem.copy(dev_send.data(), send, row_total(group_rank_) * es);
  }
  typename Mem::Buffer per_member;  // leader: each member's receive buffer, members' order
  std::vector<int64_t> member_recv(lz);
  for (size_t x = 0; x < lz; ++x) member_recv[x] = col_total(mine[x]);
  if (leader) {
    // (2) device d's blocks for each device e: i on d, then j on e, in group order
    std::vector<int64_t> src_off(lz, 0);  // member x's send buffer in dev_send
    for (size_t x = 1; x < lz; ++x) src_off[x] = src_off[x - 1] + row_total(mine[x - 1]);
    std::vector<int64_t> cs(static_cast<size_t>(k), 0), cr(static_cast<size_t>(k), 0);
    typename Mem::Buffer cross_send = mem.make(dev_send.size());
    int64_t w = 0;
    for (int e = 0; e < k; ++e) {
      for (size_t x = 0; x < lz; ++x) {
        const int i = mine[x];
        for (int j : s.on[static_cast<size_t>(e)]) {
          int64_t at = src_off[x];
          for (int jj = 0; jj < j; ++jj) at += S_(i, jj);
          mem.copy(cross_send.data() + w * es, dev_send.data() + at * es, S_(i, j) * es);
          w += S_(i, j);
          cs[static_cast<size_t>(e)] += S_(i, j);
        }
      }
      for (int i : s.on[static_cast<size_t>(e)])
        for (int j : mine) cr[static_cast<size_t>(e)] += S_(i, j);
    }
    typename Mem::Buffer from = mem.make(k > 1 ? sum(cr) * es : 0);
    if (k > 1)
      in_part(kCross, [&] { mem.a2a(*cross_, op_name, cross_send.data(), cs, from.data(), cr, static_cast<size_t>(es)); });
    else
      from = std::move(cross_send);
    // (3a) each member's receive buffer: the blocks of senders 0..n-1 in group order; in
    // `from`, the block of i on e for j sits after e's earlier senders' blocks for d's members
    std::vector<int64_t> from_off(static_cast<size_t>(k), 0);
    for (int e = 1; e < k; ++e) from_off[static_cast<size_t>(e)] = from_off[static_cast<size_t>(e - 1)] + cr[static_cast<size_t>(e - 1)];
    per_member = mem.make(sum(member_recv) * es);
    int64_t out = 0;
    for (size_t x = 0; x < lz; ++x) {
      const int j = mine[x];
      for (int i = 0; i < n; ++i) {
        const int e = s.device_of[static_cast<size_t>(i)];
        int64_t at = from_off[static_cast<size_t>(e)];
        for (int ii : s.on[static_cast<size_t>(e)]) {
          if (ii == i) break;
          for (int jj : mine) at += S_(ii, jj);
        }
        for (int jj : mine) {
          if (jj == j) break;
          at += S_(i, jj);
        }
        mem.copy(per_member.data() + out * es, from.data() + at * es, S_(i, j) * es);
        out += S_(i, j);
      }
    }
  }
  // (3b) from the leader to each member
  if (lz > 1) {
    std::vector<int64_t> sc(lz, 0), rc(lz, 0);
    if (leader) sc = member_recv;
    rc[0] = col_total(group_rank_);
    in_part(kIntra, [&] { mem.a2a(*local_, op_name, per_member.data(), sc, recv, rc, static_cast<size_t>(es)); });
  } else {
    mem.copy(recv, per_member.data(), col_total(group_rank_) * es);
  }
  mem.done();
}

void HierComm::all_gather_impl(const char* op_name, const void* send, void* recv, std::span<const int64_t> counts,
                               size_t elem_size, const char* dtype, bool on_device) {
  if (on_device && !device_)
    throw std::logic_error(fmt::format("all_gather '{}' on device buffers: the hierarchical group {} was made without "
                                       "the rank's device",
                                       op_name, name_));
  const int n = size();
  if (static_cast<int>(counts.size()) != n)
    throw std::invalid_argument(fmt::format("all_gather '{}': {} counts for {} ranks", op_name, counts.size(), n));
  const auto me = static_cast<size_t>(group_rank_);
  const auto es = static_cast<int64_t>(elem_size);
  Meta meta{std::vector<int64_t>(counts.size(), counts[me]), {counts.begin(), counts.end()}, elem_size, dtype, 0,
            all_gather_bytes(counts, group_rank_, es)};
  run("all_gather", op_name, std::move(meta), [&] {
    if (on_device) {
      DeviceMem mem{*device_};
      device_->comm_wait_compute();  // the send buffer was written on the compute stream
      gather_all(mem, op_name, send, counts, recv, es);
    } else {
      HostMem mem;
      gather_all(mem, op_name, send, counts, recv, es);
    }
  });
}

std::vector<int64_t> HierComm::split_check(const char* op_name, std::span<const int64_t> send_counts,
                                           std::span<const int64_t> recv_counts) {
  const int n = size();
  if (static_cast<int>(send_counts.size()) != n || static_cast<int>(recv_counts.size()) != n)
    throw std::invalid_argument(fmt::format("all_to_all '{}': {} send / {} recv counts for {} ranks", op_name,
                                            send_counts.size(), recv_counts.size(), n));
  std::vector<int64_t> mine(send_counts.begin(), send_counts.end());
  mine.insert(mine.end(), recv_counts.begin(), recv_counts.end());
  std::vector<int64_t> all(static_cast<size_t>(2 * n * n));
  const std::vector<int64_t> two_n(static_cast<size_t>(n), 2 * n);
  const std::string check_name = std::string(op_name) + "/split_check";
  all_gather_impl(check_name.c_str(), mine.data(), all.data(), two_n, sizeof(int64_t), nullptr);
  if (auto bad = find_split_mismatch(all, n))
    throw SplitMismatchError(fmt::format("{}: split sizes disagree: rank {} sends {} elements to rank {}, which expects {}",
                                         collective_head("all_to_all", op_name, name_, seq_ + 1),
                                         members_[static_cast<size_t>(bad->from)], bad->sent,
                                         members_[static_cast<size_t>(bad->to)], bad->expected));
  return all;
}

void HierComm::all_to_all_impl(const char* kind, const char* op_name, const void* send,
                               std::span<const int64_t> send_counts, void* recv, std::span<const int64_t> recv_counts,
                               size_t elem_size, const char* dtype, bool on_device) {
  if (on_device && !device_)
    throw std::logic_error(fmt::format("all_to_all '{}' on device buffers: the hierarchical group {} was made without "
                                       "the rank's device",
                                       op_name, name_));
  const std::vector<int64_t> all = split_check(op_name, send_counts, recv_counts);
  const int n = size();
  const auto nn = static_cast<size_t>(n);
  std::vector<int64_t> S(nn * nn);  // row i: member i's send counts
  for (size_t i = 0; i < nn; ++i) std::copy_n(all.begin() + static_cast<std::ptrdiff_t>(i * 2 * nn), nn, S.begin() + static_cast<std::ptrdiff_t>(i * nn));
  const auto es = static_cast<int64_t>(elem_size);
  Meta meta{{send_counts.begin(), send_counts.end()}, {recv_counts.begin(), recv_counts.end()}, elem_size, dtype, 0,
            all_to_all_bytes(send_counts, recv_counts, group_rank_, es)};
  run(kind, op_name, std::move(meta), [&] {
    if (on_device) {
      DeviceMem mem{*device_};
      device_->comm_wait_compute();  // the send buffer was written on the compute stream
      exchange_all(mem, op_name, send, S, recv, es);
    } else {
      HostMem mem;
      exchange_all(mem, op_name, send, S, recv, es);
    }
  });
}

void HierComm::all_to_all_v_device(const char* op_name, const void* send, std::span<const int64_t> send_counts,
                                   void* recv, std::span<const int64_t> recv_counts, size_t elem_size) {
  all_to_all_impl("all_to_all", op_name, send, send_counts, recv, recv_counts, elem_size, nullptr, true);
}

void HierComm::all_to_all_v(const char* op_name, const void* send, std::span<const int64_t> send_counts, void* recv,
                            std::span<const int64_t> recv_counts, size_t elem_size) {
  all_to_all_impl("all_to_all", op_name, send, send_counts, recv, recv_counts, elem_size, nullptr);
}

void HierComm::all_gather_v(const char* op_name, const void* send, void* recv, std::span<const int64_t> counts,
                            size_t elem_size) {
  all_gather_impl(op_name, send, recv, counts, elem_size, nullptr);
}

void HierComm::all_gather_v_device(const char* op_name, const void* send, void* recv, std::span<const int64_t> counts,
                                   size_t elem_size) {
  all_gather_impl(op_name, send, recv, counts, elem_size, nullptr, true);
}

void HierComm::reduce_scatter_device(const char* op_name, const float* send, std::span<const int64_t> counts,
                                     float* recv) {
  const int n = size();
  if (static_cast<int>(counts.size()) != n)
    throw std::invalid_argument(fmt::format("reduce_scatter '{}': {} counts for {} ranks", op_name, counts.size(), n));
  if (!device_)
    throw std::logic_error(fmt::format("reduce_scatter '{}' on device buffers: the hierarchical group {} was made "
                                       "without the rank's device",
                                       op_name, name_));
  const int64_t mine = counts[static_cast<size_t>(group_rank_)];
  const std::vector<int64_t> recv_counts(static_cast<size_t>(n), mine);
  const int64_t es = sizeof(float);
  DeviceMem mem{*device_};
  auto gathered = mem.make(mine * n * es);  // every member's block for this rank, group order
  all_to_all_impl("reduce_scatter", op_name, send, counts, gathered.data(), recv_counts, sizeof(float), nullptr, true);
  if (mine == 0) return;
  device_->comm_zero(recv, mine * es);  // from zero, in group order: the host variant's sum
  for (int r = 0; r < n; ++r)
    device_->comm_add(recv, reinterpret_cast<const float*>(gathered.data()) + r * mine, mine);
  device_->comm_sync();
}

void HierComm::all_reduce_sum(const char* op_name, float* data, int64_t count) {
  const int n = size();
  const auto nn = static_cast<size_t>(n);
  Meta meta{{}, {}, sizeof(float), nullptr, count,
            all_reduce_bytes(count, n, group_rank_, sizeof(float))};
  run("all_reduce", op_name, std::move(meta), [&] {
    if (count == 0) return;
    std::vector<int64_t> chunk(nn);  // chunk j: count / n elements, one more for j < count % n
    for (int j = 0; j < n; ++j) chunk[static_cast<size_t>(j)] = count / n + (j < count % n ? 1 : 0);
    std::vector<int64_t> S(nn * nn);
    for (size_t i = 0; i < nn; ++i) std::copy(chunk.begin(), chunk.end(), S.begin() + static_cast<std::ptrdiff_t>(i * nn));
    const int64_t mine = chunk[static_cast<size_t>(group_rank_)];
    std::vector<float> gathered(static_cast<size_t>(mine) * nn);
    HostMem mem;
    exchange_all(mem, op_name, data, S, gathered.data(), sizeof(float));
    std::vector<float> reduced(static_cast<size_t>(mine), 0.0f);  // from zero, in group order
    for (size_t r = 0; r < nn; ++r)
      for (int64_t x = 0; x < mine; ++x) reduced[static_cast<size_t>(x)] += gathered[r * static_cast<size_t>(mine) + static_cast<size_t>(x)];
    gather_all(mem, op_name, reduced.data(), chunk, data, sizeof(float));
  });
}

void HierComm::all_to_all_q(const char* op_name, const float* send, std::span<const int64_t> send_counts, float* recv,
                            std::span<const int64_t> recv_counts, CommPrecision p, QuantError* err) {
  if (p == CommPrecision::fp32) {
    all_to_all_impl("all_to_all", op_name, send, send_counts, recv, recv_counts, sizeof(float), nullptr);
    return;
  }
  const auto q = quantize(send, static_cast<size_t>(sum(send_counts)), p, err);
  std::vector<uint16_t> rq(static_cast<size_t>(sum(recv_counts)));
  all_to_all_impl("all_to_all", op_name, q.data(), send_counts, rq.data(), recv_counts, 2, precision_dtype(p));
  dequantize(rq.data(), rq.size(), p, recv);
}

void HierComm::reduce_scatter_q(const char* op_name, const float* send, std::span<const int64_t> counts, float* recv,
                                CommPrecision p, QuantError* err) {
  const int n = size();
  if (static_cast<int>(counts.size()) != n)
    throw std::invalid_argument(fmt::format("reduce_scatter '{}': {} counts for {} ranks", op_name, counts.size(), n));
  const int64_t mine = counts[static_cast<size_t>(group_rank_)];
  const std::vector<int64_t> recv_counts(static_cast<size_t>(n), mine);
  std::vector<float> gathered(static_cast<size_t>(mine * n));
  if (p == CommPrecision::fp32) {
    all_to_all_impl("reduce_scatter", op_name, send, counts, gathered.data(), recv_counts, sizeof(float), nullptr);
  } else {
    const auto q = quantize(send, static_cast<size_t>(sum(counts)), p, err);
    std::vector<uint16_t> rq(gathered.size());
    all_to_all_impl("reduce_scatter", op_name, q.data(), counts, rq.data(), recv_counts, 2, precision_dtype(p));
    dequantize(rq.data(), rq.size(), p, gathered.data());
  }
  std::fill_n(recv, static_cast<size_t>(mine), 0.0f);
  for (int r = 0; r < n; ++r)
    for (int64_t i = 0; i < mine; ++i) recv[i] += gathered[static_cast<size_t>(r * mine + i)];
}

void HierComm::all_gather_q(const char* op_name, const float* send, float* recv, std::span<const int64_t> counts,
                            CommPrecision p, QuantError* err) {
  if (p == CommPrecision::fp32) {
    all_gather_impl(op_name, send, recv, counts, sizeof(float), nullptr);
    return;
  }
  const auto q = quantize(send, static_cast<size_t>(counts[static_cast<size_t>(group_rank_)]), p, err);
  std::vector<uint16_t> rq(static_cast<size_t>(sum(counts)));
  all_gather_impl(op_name, q.data(), rq.data(), counts, 2, precision_dtype(p));
  dequantize(rq.data(), rq.size(), p, recv);
}

}  // namespace embedscope::engine::detail

#include "comm/local/local_comm.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "embedscope/engine/comm/collective_math.h"

namespace embedscope::engine::detail {

namespace {

class HostIntraDeviceOps final : public IntraDeviceOps {
 public:
  void* comm_alloc(int64_t bytes) const override { return bytes > 0 ? new char[static_cast<size_t>(bytes)] : nullptr; }
  void comm_free(void* p) const noexcept override { delete[] static_cast<char*>(p); }
  void comm_to_device(void* dst, const void* src, int64_t bytes) const override { copy(dst, src, bytes); }
  void comm_to_host(void* dst, const void* src, int64_t bytes) const override { copy(dst, src, bytes); }
  void comm_copy(void* dst, const void* src, int64_t bytes) const override { copy(dst, src, bytes); }
  void comm_add(float* dst, const float* src, int64_t n) const override {
    for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
  }
  void comm_sync() const override {}
  void comm_wait_compute() const override {}
  void comm_zero(void* dst, int64_t bytes) const override {
    if (bytes > 0) std::memset(dst, 0, static_cast<size_t>(bytes));
  }

 private:
  static void copy(void* dst, const void* src, int64_t bytes) {
    if (bytes > 0) std::memcpy(dst, src, static_cast<size_t>(bytes));
  }
};

int64_t sum(std::span<const int64_t> v) { return std::accumulate(v.begin(), v.end(), int64_t{0}); }

/// Device memory of `ops`, freed at scope exit.
class Staged {
 public:
  Staged(const IntraDeviceOps& ops, int64_t bytes) : ops_(ops), p_(ops.comm_alloc(bytes)) {}
  ~Staged() { ops_.comm_free(p_); }
  Staged(const Staged&) = delete;
  Staged& operator=(const Staged&) = delete;
  char* get() const { return static_cast<char*>(p_); }
  /// Never freed: a peer may still read it (a departure that timed out).
  void leak() { p_ = nullptr; }

 private:
  const IntraDeviceOps& ops_;
  void* p_;
};

}  // namespace

std::unique_ptr<IntraDeviceOps> host_intra_device_ops() { return std::make_unique<HostIntraDeviceOps>(); }

LocalGroup::LocalGroup(std::string name, std::vector<int> members, std::chrono::milliseconds timeout)
    : name_(std::move(name)), members_(std::move(members)), timeout_(timeout) {
  if (members_.empty()) throw std::invalid_argument("LocalGroup '" + name_ + "': no member");
}

LocalComm::LocalComm(std::shared_ptr<LocalGroup> group, int group_rank, const IntraDeviceOps& ops)
    : group_(std::move(group)), group_rank_(group_rank), ops_(ops) {
  if (group_rank_ < 0 || group_rank_ >= size())
    throw std::invalid_argument(fmt::format("LocalComm: group rank {} outside group '{}' of {} members", group_rank_,
                                            group_->name(), size()));
}

void LocalComm::close_connections() noexcept {
  closed_ = true;
  std::lock_guard<std::mutex> lock(group_->mu_);
  if (group_->closed_by_ < 0) group_->closed_by_ = group_->members()[static_cast<size_t>(group_rank_)];
  group_->cv_.notify_all();
}

void LocalComm::wait(std::unique_lock<std::mutex>& lock, LocalGroup::Round& round, bool arrival, const char* kind,
                     const char* op_name, uint64_t seq, std::chrono::steady_clock::time_point deadline) {
  LocalGroup& g = *group_;
  const int n = size();
  auto done = [&] { return (arrival ? round.n_arrived : round.n_departed) == n; };
  const bool ok = g.cv_.wait_until(lock, deadline, [&] { return done() || g.closed_by_ >= 0; });
  if (done()) return;  // completion wins over a later close
  const std::string head = collective_head(kind, op_name, g.name(), seq);
  if (ok)  // closed
    throw CollectiveError(fmt::format("{} failed: rank {} closed its connections after an error", head, g.closed_by_),
                          g.name(), seq, {});
  std::vector<int> missing;
  for (int m = 0; m < n; ++m)
    if (!(arrival ? round.arrived : round.departed)[static_cast<size_t>(m)]) missing.push_back(g.members()[static_cast<size_t>(m)]);
  throw CollectiveError(fmt::format("{} did not finish within {} ms: rank(s) {} did not {}", head, g.timeout().count(),
                                    fmt::join(missing, ", "), arrival ? "arrive" : "finish reading"),
                        g.name(), seq, missing, true);
}

void LocalComm::run(const char* kind, const char* op_name, Meta meta, const void* send, int64_t send_bytes,
                    std::vector<int64_t> counts, const Move& move, bool on_device) {
  LocalGroup& g = *group_;
  const int n = size();
  const auto me = static_cast<size_t>(group_rank_);
  const uint64_t seq = ++seq_;
  const int64_t start = clock_ ? clock_->now_ns() : 0;
  const auto deadline = std::chrono::steady_clock::now() + g.timeout();
  if (vanish_at_ != 0 && seq >= vanish_at_)
    throw RankVanished(fmt::format("rank {} vanished before {} '{}' (group {}, sequence {})", g.members()[me], kind,
                                   op_name, g.name(), seq));
  const char* dtype = meta.dtype ? meta.dtype : dtype_name(meta.elem_size);
  FlightRecorder::Id flight = -1;
  if (flight_) {
    const int64_t in = meta.send.empty() ? meta.elements : sum(meta.send);
    const int64_t out = meta.recv.empty() ? meta.elements : sum(meta.recv);
    flight = flight_->scheduled(g.name(), g.members(), seq, kind, op_name, dtype, in, out, g.timeout().count());
  }
  const FlightFailMark flight_failed(flight_, flight);  // any throw below records when it failed
  if (closed_)
    throw CollectiveError(fmt::format("{} not started: this rank closed its connections after an earlier failure",
                                      collective_head(kind, op_name, g.name(), seq)),
                          g.name(), seq, {});
  // 1. stage (device memory: published as it is, once the compute stream's writes are done)
  Staged staged(ops_, on_device ? 0 : send_bytes);
  if (on_device) ops_.comm_wait_compute();
  else if (send_bytes > 0) ops_.comm_to_device(staged.get(), send, send_bytes);
  ops_.comm_sync();
  if (flight_) flight_->started(flight);
  ++counters_.collectives;
  // 2. arrive
  std::vector<const void*> peers;
  std::vector<std::vector<int64_t>> peer_counts;
  {
    std::unique_lock<std::mutex> lock(g.mu_);
    LocalGroup::Round& r = g.rounds_[seq];
    if (r.staged.empty()) {
      r.staged.assign(static_cast<size_t>(n), nullptr);
      r.counts.assign(static_cast<size_t>(n), {});
      r.arrived.assign(static_cast<size_t>(n), false);
      r.departed.assign(static_cast<size_t>(n), false);
    }
    r.staged[me] = on_device ? send : staged.get();
    r.counts[me] = std::move(counts);
    r.arrived[me] = true;
    ++r.n_arrived;
    g.cv_.notify_all();
    wait(lock, r, true, kind, op_name, seq, deadline);
    peers = r.staged;
    peer_counts = r.counts;
  }
  // 3. move (a failure still departs, so that no peer waits on this rank's staged buffer)
  std::exception_ptr failed;
  try {
    move(peers, peer_counts);
  } catch (...) {
    failed = std::current_exception();
  }
  // 4. depart
  {
    std::unique_lock<std::mutex> lock(g.mu_);
    LocalGroup::Round& r = g.rounds_[seq];
    r.departed[me] = true;
    ++r.n_departed;
    g.cv_.notify_all();
    if (failed) std::rethrow_exception(failed);
    try {
      wait(lock, r, false, kind, op_name, seq, deadline);
    } catch (...) {
      staged.leak();
      throw;
    }
    if (++r.n_left == n) g.rounds_.erase(seq);
  }
  counters_.bytes_sent += meta.bytes.sent;
  counters_.bytes_received += meta.bytes.received;
  if (flight_) flight_->completed(flight);
  if (observer_) {
    sessions::CollectiveRecord rec;
    rec.rank = g.members()[me];
    rec.op = kind;
    rec.name = op_name;
    rec.group = g.name();
    rec.sequence = seq;
    rec.dtype = dtype;
    rec.start_ns = start;
    rec.end_ns = clock_ ? clock_->now_ns() : 0;
    rec.bytes_sent = meta.bytes.sent;
    rec.bytes_received = meta.bytes.received;
    rec.peers = g.members();
    rec.send_elements = std::move(meta.send);
    rec.recv_elements = std::move(meta.recv);
    observer_(std::move(rec));
  }
}

void LocalComm::all_gather_impl(const char* op_name, const void* send, void* recv, std::span<const int64_t> counts,
                                size_t elem_size, const char* dtype, bool /*record_split_check*/, bool on_device) {
  const int n = size();
  if (static_cast<int>(counts.size()) != n)
    throw std::invalid_argument(fmt::format("all_gather '{}': {} counts for {} ranks", op_name, counts.size(), n));
  const auto me = static_cast<size_t>(group_rank_);
  const auto es = static_cast<int64_t>(elem_size);
  Meta meta{std::vector<int64_t>(counts.size(), counts[me]), {counts.begin(), counts.end()}, elem_size, dtype, 0,
            all_gather_bytes(counts, group_rank_, es)};
  const int64_t total = sum(counts);
  run("all_gather", op_name, std::move(meta), send, counts[me] * es, {}, [&](const auto& staged, const auto&) {
    Staged out(ops_, on_device ? 0 : total * es);  // device memory: straight into recv
    char* to = on_device ? static_cast<char*>(recv) : out.get();
    int64_t off = 0;
    for (int j = 0; j < n; ++j) {
      const int64_t b = counts[static_cast<size_t>(j)] * es;
      if (b > 0) ops_.comm_copy(to + off, staged[static_cast<size_t>(j)], b);
      off += b;
    }
    if (total > 0 && !on_device) ops_.comm_to_host(recv, out.get(), total * es);
    ops_.comm_sync();
  }, on_device);
}

void LocalComm::all_gather_v_device(const char* op_name, const void* send, void* recv, std::span<const int64_t> counts,
                                    size_t elem_size) {
  all_gather_impl(op_name, send, recv, counts, elem_size, nullptr, false, true);
}

void LocalComm::reduce_scatter_device(const char* op_name, const float* send, std::span<const int64_t> counts,
                                      float* recv) {
  const int n = size();
  if (static_cast<int>(counts.size()) != n)
    throw std::invalid_argument(fmt::format("reduce_scatter '{}': {} counts for {} ranks", op_name, counts.size(), n));
  const int64_t mine = counts[static_cast<size_t>(group_rank_)];
  const std::vector<int64_t> recv_counts(static_cast<size_t>(n), mine);
  split_check("reduce_scatter", op_name, counts, recv_counts);
  const int64_t es = sizeof(float);
  Meta meta{{counts.begin(), counts.end()}, recv_counts, sizeof(float), nullptr, 0,
            all_to_all_bytes(counts, recv_counts, group_rank_, es)};
  run("reduce_scatter", op_name, std::move(meta), send, sum(counts) * es, {counts.begin(), counts.end()},
      [&](const auto& staged, const auto& all_counts) {
        if (mine == 0) return;
        ops_.comm_zero(recv, mine * es);  // from zero, in member order: the host variant's sum
        for (int j = 0; j < n; ++j) {
          const auto& cj = all_counts[static_cast<size_t>(j)];
          const int64_t at = std::accumulate(cj.begin(), cj.begin() + group_rank_, int64_t{0});
          ops_.comm_add(recv, static_cast<const float*>(staged[static_cast<size_t>(j)]) + at, mine);
        }
        ops_.comm_sync();
      },
      true);
}

void LocalComm::split_check(const char* kind, const char* op_name, std::span<const int64_t> send_counts,
                            std::span<const int64_t> recv_counts) {
  const int n = size();
  if (static_cast<int>(send_counts.size()) != n || static_cast<int>(recv_counts.size()) != n)
    throw std::invalid_argument(fmt::format("{} '{}': {} send / {} recv counts for {} ranks", kind, op_name,
                                            send_counts.size(), recv_counts.size(), n));
  std::vector<int64_t> mine(send_counts.begin(), send_counts.end());
  mine.insert(mine.end(), recv_counts.begin(), recv_counts.end());
  std::vector<int64_t> all(static_cast<size_t>(2 * n * n));
  const std::vector<int64_t> two_n(static_cast<size_t>(n), 2 * n);
  const std::string check_name = std::string(op_name) + "/split_check";
  all_gather_impl(check_name.c_str(), mine.data(), all.data(), two_n, sizeof(int64_t), nullptr, true);
  if (auto bad = find_split_mismatch(all, n)) {
    const auto& m = group_->members();
    throw SplitMismatchError(fmt::format("{}: split sizes disagree: rank {} sends {} elements to rank {}, which expects {}",
                                         collective_head("all_to_all", op_name, group_->name(), seq_ + 1),
                                         m[static_cast<size_t>(bad->from)], bad->sent, m[static_cast<size_t>(bad->to)],
                                         bad->expected));
  }
}

void LocalComm::all_to_all_impl(const char* kind, const char* op_name, const void* send,
                                std::span<const int64_t> send_counts, void* recv, std::span<const int64_t> recv_counts,
                                size_t elem_size, const char* dtype, bool on_device) {
  split_check(kind, op_name, send_counts, recv_counts);
  const int n = size();
  const auto es = static_cast<int64_t>(elem_size);
  Meta meta{{send_counts.begin(), send_counts.end()}, {recv_counts.begin(), recv_counts.end()}, elem_size, dtype, 0,
            all_to_all_bytes(send_counts, recv_counts, group_rank_, es)};
  const int64_t total = sum(recv_counts);
  run(kind, op_name, std::move(meta), send, sum(send_counts) * es, {send_counts.begin(), send_counts.end()},
      [&](const auto& staged, const auto& counts) {
        Staged out(ops_, on_device ? 0 : total * es);  // device memory: straight into recv
        char* to = on_device ? static_cast<char*>(recv) : out.get();
        int64_t off = 0;
        for (int j = 0; j < n; ++j) {  // member j's block for this rank follows its blocks for members < rank()
          const auto& cj = counts[static_cast<size_t>(j)];
          const int64_t at = std::accumulate(cj.begin(), cj.begin() + group_rank_, int64_t{0}) * es;
          const int64_t b = recv_counts[static_cast<size_t>(j)] * es;
          if (b > 0) ops_.comm_copy(to + off, static_cast<const char*>(staged[static_cast<size_t>(j)]) + at, b);
          off += b;
        }
        if (total > 0 && !on_device) ops_.comm_to_host(recv, out.get(), total * es);
        ops_.comm_sync();
      },
      on_device);
}

void LocalComm::all_to_all_v_device(const char* op_name, const void* send, std::span<const int64_t> send_counts,
                                    void* recv, std::span<const int64_t> recv_counts, size_t elem_size) {
  all_to_all_impl("all_to_all", op_name, send, send_counts, recv, recv_counts, elem_size, nullptr, true);
}

void LocalComm::all_to_all_v(const char* op_name, const void* send, std::span<const int64_t> send_counts, void* recv,
                             std::span<const int64_t> recv_counts, size_t elem_size) {
  all_to_all_impl("all_to_all", op_name, send, send_counts, recv, recv_counts, elem_size, nullptr);
}

void LocalComm::all_gather_v(const char* op_name, const void* send, void* recv, std::span<const int64_t> counts,
                             size_t elem_size) {
  all_gather_impl(op_name, send, recv, counts, elem_size, nullptr, false);
}

void LocalComm::all_reduce_sum(const char* op_name, float* data, int64_t count) {
  const int n = size();
  const int64_t bytes = count * static_cast<int64_t>(sizeof(float));
  Meta meta{{}, {}, sizeof(float), nullptr, count,
            all_reduce_bytes(count, n, group_rank_, sizeof(float))};
  run("all_reduce", op_name, std::move(meta), data, bytes, {}, [&](const auto& staged, const auto&) {
    if (count == 0) return;
    Staged acc(ops_, bytes);
    ops_.comm_copy(acc.get(), staged[0], bytes);
    for (int j = 1; j < n; ++j)
      ops_.comm_add(reinterpret_cast<float*>(acc.get()), static_cast<const float*>(staged[static_cast<size_t>(j)]), count);
    ops_.comm_to_host(data, acc.get(), bytes);
    ops_.comm_sync();
  });
}

void LocalComm::all_to_all_q(const char* op_name, const float* send, std::span<const int64_t> send_counts, float* recv,
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

void LocalComm::reduce_scatter_q(const char* op_name, const float* send, std::span<const int64_t> counts, float* recv,
                                 CommPrecision p, QuantError* err) {
  const int n = size();
  if (static_cast<int>(counts.size()) != n)
    throw std::invalid_argument(fmt::format("reduce_scatter '{}': {} counts for {} ranks", op_name, counts.size(), n));
  const int64_t mine = counts[static_cast<size_t>(group_rank_)];
  const std::vector<int64_t> recv_counts(static_cast<size_t>(n), mine);
  if (p != CommPrecision::fp32) {  // as the ProcessGroup: quantized blocks exchanged, summed on the host
    const auto q = quantize(send, static_cast<size_t>(sum(counts)), p, err);
    std::vector<uint16_t> rq(static_cast<size_t>(mine * n));
    all_to_all_impl("reduce_scatter", op_name, q.data(), counts, rq.data(), recv_counts, 2, precision_dtype(p));
    std::vector<float> gathered(rq.size());
    dequantize(rq.data(), rq.size(), p, gathered.data());
    std::fill_n(recv, static_cast<size_t>(mine), 0.0f);
    for (int r = 0; r < n; ++r)
      for (int64_t i = 0; i < mine; ++i) recv[i] += gathered[static_cast<size_t>(r * mine + i)];
    return;
  }
  split_check("reduce_scatter", op_name, counts, recv_counts);
  const int64_t es = sizeof(float);
  Meta meta{{counts.begin(), counts.end()}, recv_counts, sizeof(float), nullptr, 0,
            all_to_all_bytes(counts, recv_counts, group_rank_, es)};
  run("reduce_scatter", op_name, std::move(meta), send, sum(counts) * es, {counts.begin(), counts.end()},
      [&](const auto& staged, const auto& all_counts) {
        if (mine == 0) return;
        Staged acc(ops_, mine * es);
        const std::vector<float> zeros(static_cast<size_t>(mine), 0.0f);
        ops_.comm_to_device(acc.get(), zeros.data(), mine * es);  // from zero, in member order: Gloo's sum
        for (int j = 0; j < n; ++j) {
          const auto& cj = all_counts[static_cast<size_t>(j)];
          const int64_t at = std::accumulate(cj.begin(), cj.begin() + group_rank_, int64_t{0});
          ops_.comm_add(reinterpret_cast<float*>(acc.get()), static_cast<const float*>(staged[static_cast<size_t>(j)]) + at,
                        mine);
        }
        ops_.comm_to_host(recv, acc.get(), mine * es);
        ops_.comm_sync();
      });
}

void LocalComm::all_gather_q(const char* op_name, const float* send, float* recv, std::span<const int64_t> counts,
                             CommPrecision p, QuantError* err) {
  if (p == CommPrecision::fp32) {
    all_gather_impl(op_name, send, recv, counts, sizeof(float), nullptr, false);
    return;
  }
  const auto q = quantize(send, static_cast<size_t>(counts[static_cast<size_t>(group_rank_)]), p, err);
  std::vector<uint16_t> rq(static_cast<size_t>(sum(counts)));
  all_gather_impl(op_name, q.data(), rq.data(), counts, 2, precision_dtype(p), false);
  dequantize(rq.data(), rq.size(), p, recv);
}

}  // namespace embedscope::engine::detail

#include "embedscope/engine/comm/nccl_comm.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <numeric>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gloo/rendezvous/file_store.h>

#include "embedscope/engine/comm/collective_math.h"
#include "embedscope/engine/comm/completion_watchdog.h"

namespace embedscope::engine {

namespace {
void cuda_check(cudaError_t rc, const char* call) {
  if (rc != cudaSuccess)
    throw std::runtime_error(fmt::format("CUDA: {} failed: {} ({})", call, cudaGetErrorName(rc), cudaGetErrorString(rc)));
}

std::string nccl_error(ncclResult_t rc, ncclComm_t comm) {
  const char* last = comm ? ncclGetLastError(comm) : ncclGetLastError(nullptr);
  return fmt::format("{}{}{}", ncclGetErrorString(rc), last && *last ? ": " : "", last ? last : "");
}

void nccl_check(ncclResult_t rc, const char* call, ncclComm_t comm = nullptr) {
  if (rc != ncclSuccess) throw std::runtime_error(fmt::format("NCCL: {} failed: {}", call, nccl_error(rc, comm)));
}

std::vector<int64_t> offsets(std::span<const int64_t> counts) {
  std::vector<int64_t> off(counts.size() + 1, 0);
  std::partial_sum(counts.begin(), counts.end(), off.begin() + 1);
  return off;
}

bool all_equal(std::span<const int64_t> v) {
  return std::adjacent_find(v.begin(), v.end(), std::not_equal_to<>()) == v.end();
}

// Restores the caller's current device.
struct DeviceGuard {
  int prev = 0;
  DeviceGuard() { cudaGetDevice(&prev); }
  ~DeviceGuard() { cudaSetDevice(prev); }
};

thread_local NcclGroup* t_group = nullptr;

int64_t steady_ns(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}
}  // namespace

std::string nccl_version() {
  int v = 0;
  nccl_check(ncclGetVersion(&v), "ncclGetVersion");
  // NCCL_VERSION(X,Y,Z) = X*10000 + Y*100 + Z since 2.9.
  return fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100);
}

ncclUniqueId exchange_nccl_unique_id(const std::string& store_dir, const std::string& key, int rank,
                                     std::chrono::milliseconds timeout) {
  std::filesystem::create_directories(store_dir);
  gloo::rendezvous::FileStore store(store_dir);
  ncclUniqueId id{};
  if (rank == 0) {
    nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    store.set(key, std::vector<char>(id.internal, id.internal + sizeof(id.internal)));
    return id;
  }
  try {
    store.wait({key}, timeout);
  } catch (const std::exception& e) {
    throw CollectiveError(fmt::format("NCCL unique id '{}' did not appear in store {} within {} ms: rank 0 did not "
                                      "publish it ({})", key, store_dir, timeout.count(), e.what()),
                          key, 0, {0}, true);
  }
  const std::vector<char> bytes = store.get(key);
  if (bytes.size() != sizeof(id.internal))
    throw std::runtime_error(fmt::format("NCCL unique id '{}' in store {}: {} bytes, expected {}", key, store_dir,
                                         bytes.size(), sizeof(id.internal)));
  std::copy(bytes.begin(), bytes.end(), id.internal);
  return id;
}

// ---- work ------------------------------------------------------------------

struct NcclWork::State {
  NcclComm* comm = nullptr;
  std::string head;                      // collective_head(...)
  cudaEvent_t done = nullptr;            // recorded on the comm stream after the collective
  std::chrono::steady_clock::time_point issued_at;
  sessions::CollectiveRecord record;     // all but end_ns, filled at issue
  FlightRecorder::Id flight = -1;        // its entry in the comm's flight recorder (-1: none)
  bool finished = false;
  ~State() {
    if (done) cudaEventDestroy(done);
  }
};

void NcclWork::wait_on(cudaStream_t stream) const {
  if (!s_ || !s_->done) throw std::logic_error("NcclWork::wait_on: the collective was not issued (NcclGroup not ended)");
  cuda_check(cudaStreamWaitEvent(stream, s_->done, 0), "cudaStreamWaitEvent");
}

bool NcclWork::done() {
  if (!s_) throw std::logic_error("NcclWork::done: empty handle");
  State& s = *s_;
  if (s.finished) return true;
  if (!s.done) throw std::logic_error("NcclWork::done: " + s.head + " was not issued (NcclGroup not ended)");
  NcclComm& c = *s.comm;
  if (c.aborted_)
    throw CollectiveError(fmt::format("{} cannot finish: the communicator of device {} was aborted", s.head, c.device_),
                          c.group_, s.record.sequence, {}, false);
  const cudaError_t q = cudaEventQuery(s.done);
  if (q != cudaSuccess && q != cudaErrorNotReady)
    throw CollectiveError(fmt::format("{} failed on device {}: {} ({})", s.head, c.device_, cudaGetErrorName(q),
                                      cudaGetErrorString(q)),
                          c.group_, s.record.sequence, {}, false);
  ncclResult_t async = ncclSuccess;
  const ncclResult_t rc = ncclCommGetAsyncError(c.comm_, &async);
  const bool async_error = rc != ncclSuccess || (async != ncclSuccess && async != ncclInProgress);
  const int64_t waited =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - s.issued_at).count();
  const int64_t timeout = std::chrono::duration_cast<std::chrono::nanoseconds>(c.timeout_).count();
  switch (poll_wait(q == cudaSuccess, async_error, waited, timeout)) {
    case WaitState::done:
      finish(s);
      return true;
    case WaitState::pending:
      return false;
    case WaitState::failed: {
      const std::string why = nccl_error(rc != ncclSuccess ? rc : async, c.comm_);
      c.abort();
      throw CollectiveError(fmt::format("{} failed on device {}: NCCL asynchronous error: {}", s.head, c.device_, why),
                            c.group_, s.record.sequence, {}, false);
    }
    case WaitState::timed_out:
      c.abort();
      throw CollectiveError(fmt::format("{} did not finish within {} ms on device {}: communicator aborted (a rank "
                                        "did not arrive or the transfer stalled)",
                                        s.head, c.timeout_.count(), c.device_),
                            c.group_, s.record.sequence, {}, true);
  }
  return false;
}

void NcclWork::finish(State& s) {
  NcclComm& c = *s.comm;
  s.finished = true;
  if (FlightRecorder* fr = c.flight_recorder()) fr->completed(s.flight);
  if (c.observer_) {
    sessions::CollectiveRecord r = s.record;
    r.end_ns = c.clock_ ? c.clock_->now_ns() : 0;
    c.observer_(std::move(r));
  }
}

void NcclWork::synchronize() {
  if (!s_) throw std::logic_error("NcclWork::synchronize: empty handle");
  State& s = *s_;
  if (s.finished) return;
  if (!s.done) throw std::logic_error("NcclWork::synchronize: " + s.head + " was not issued (NcclGroup not ended)");
  NcclComm& c = *s.comm;
  const std::string aborted_text =
      fmt::format("{} cannot finish: the communicator of device {} was aborted", s.head, c.device_);
  if (c.aborted_) throw CollectiveError(aborted_text, c.group_, s.record.sequence, {}, false);
  // Blocks in the driver until the end event completes (cudaEventBlockingSync); the watchdog
  // aborts the communicator at the deadline or on an asynchronous error, which ends the wait.
  cudaError_t q = cudaSuccess;
  const CompletionOutcome out = c.watchdog().wait([&] { q = cudaEventSynchronize(s.done); }, steady_ns(s.issued_at),
                                                  std::chrono::duration_cast<std::chrono::nanoseconds>(c.timeout_).count());
  switch (out.how) {
    case Completion::done:
      if (q != cudaSuccess)
        throw CollectiveError(fmt::format("{} failed on device {}: {} ({})", s.head, c.device_, cudaGetErrorName(q),
                                          cudaGetErrorString(q)),
                              c.group_, s.record.sequence, {}, false);
      finish(s);
      return;
    case Completion::failed:
      throw CollectiveError(fmt::format("{} failed on device {}: NCCL asynchronous error: {}", s.head, c.device_,
                                        c.async_error_text()),
                            c.group_, s.record.sequence, {}, false);
    case Completion::timed_out:
      throw CollectiveError(fmt::format("{} did not finish within {} ms on device {}: communicator aborted (a rank "
                                        "did not arrive or the transfer stalled)",
                                        s.head, c.timeout_.count(), c.device_),
                            c.group_, s.record.sequence, {}, true);
    case Completion::aborted:
      throw CollectiveError(aborted_text, c.group_, s.record.sequence, {}, false);
  }
}

// ---- communicator ----------------------------------------------------------

struct NcclComm::Op {
  enum class Kind { all_to_all, reduce_scatter, all_gather, all_reduce } kind;
  NcclComm* comm = nullptr;
  cudaStream_t compute = nullptr;
  const void* send = nullptr;
  void* recv = nullptr;
  std::vector<int64_t> send_counts, recv_counts;  // elements per peer (all_to_all); counts (others)
  int64_t count = 0;                              // all_reduce
  size_t elem_size = 4;
  std::shared_ptr<NcclWork::State> state;
};

NcclComm::NcclComm(ncclComm_t comm, int rank, int device, std::string group, std::vector<int> members,
                   std::chrono::milliseconds timeout)
    : comm_(comm), rank_(rank), device_(device), group_(std::move(group)), members_(std::move(members)),
      timeout_(timeout) {
  DeviceGuard g;
  cudaError_t rc = cudaSetDevice(device_);
  if (rc == cudaSuccess) rc = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
  if (rc != cudaSuccess) {
    ncclCommDestroy(comm_);  // the destructor will not run
    cuda_check(rc, "creating the comm stream");
  }
  CompletionWatchdog::Hooks hooks;
  hooks.now_ns = [] { return steady_ns(std::chrono::steady_clock::now()); };
  hooks.async_error = [this] {
    if (aborted_) return false;  // an aborted communicator cannot be asked
    ncclResult_t async = ncclSuccess;
    const ncclResult_t got = ncclCommGetAsyncError(comm_, &async);
    const bool bad = got != ncclSuccess || (async != ncclSuccess && async != ncclInProgress);
    if (bad) {
      std::lock_guard lock(async_error_mutex_);
      async_error_ = nccl_error(got != ncclSuccess ? got : async, comm_);
    }
    return bad;
  };
  hooks.abort = [this] {
    cudaSetDevice(device_);  // on the watchdog's own thread
    abort();
  };
  watchdog_ = std::make_unique<CompletionWatchdog>(std::move(hooks), kWatchdogCheckNs);
}

NcclComm::~NcclComm() {
  watchdog_.reset();  // its thread first: it may call into the communicator
  if (comm_ && !aborted_) ncclCommDestroy(comm_);
  if (stream_) cudaStreamDestroy(stream_);
}

void NcclComm::abort() {
  if (aborted_.exchange(true)) return;
  ncclCommAbort(comm_);
}

std::string NcclComm::async_error_text() const {
  std::lock_guard lock(async_error_mutex_);
  return async_error_;
}

std::unique_ptr<NcclComm> NcclComm::init_rank(const ncclUniqueId& id, int nranks, int rank, int device,
                                              std::string group, std::chrono::milliseconds timeout,
                                              std::vector<int> members) {
  if (members.empty()) {
    members.resize(static_cast<size_t>(nranks));
    std::iota(members.begin(), members.end(), 0);
  }
  if (static_cast<int>(members.size()) != nranks || rank < 0 || rank >= nranks)
    throw std::invalid_argument(fmt::format("NcclComm::init_rank: rank {} of {} with {} members", rank, nranks,
                                            members.size()));
  DeviceGuard g;
  cuda_check(cudaSetDevice(device), "cudaSetDevice");
  ncclComm_t comm = nullptr;
  nccl_check(ncclCommInitRank(&comm, nranks, id, rank), "ncclCommInitRank");
  return std::unique_ptr<NcclComm>(new NcclComm(comm, rank, device, std::move(group), std::move(members), timeout));
}

std::vector<std::unique_ptr<NcclComm>> NcclComm::init_all(const std::vector<int>& devices, std::string group,
                                                          std::chrono::milliseconds timeout, std::vector<int> members) {
  const int n = static_cast<int>(devices.size());
  if (n == 0) throw std::invalid_argument("NcclComm::init_all: no devices");
  if (!members.empty() && members.size() != devices.size())
    throw std::invalid_argument("NcclComm::init_all: " + std::to_string(members.size()) + " members for " +
                                std::to_string(devices.size()) + " devices");
  std::vector<ncclComm_t> comms(devices.size());
  nccl_check(ncclCommInitAll(comms.data(), n, devices.data()), "ncclCommInitAll");
  if (members.empty()) {
    members.resize(devices.size());
    std::iota(members.begin(), members.end(), 0);
  }
  std::vector<std::unique_ptr<NcclComm>> out;
  for (int r = 0; r < n; ++r)
    out.push_back(std::unique_ptr<NcclComm>(
        new NcclComm(comms[static_cast<size_t>(r)], r, devices[static_cast<size_t>(r)], group, members, timeout)));
  return out;
}

namespace {
// Enqueues one rank's part (inside ncclGroupStart / ncclGroupEnd).
void enqueue(NcclComm::Op& op) {
  NcclComm& c = *op.comm;
  const ncclComm_t comm = c.handle();
  const cudaStream_t s = c.stream();
  const int n = c.size();
  const int me = c.rank();
  const auto es = static_cast<int64_t>(op.elem_size);
  auto at = [](const void* p, int64_t bytes) { return static_cast<const char*>(p) + bytes; };
  auto at_mut = [](void* p, int64_t bytes) { return static_cast<char*>(p) + bytes; };
  using K = NcclComm::Op::Kind;
  switch (op.kind) {
    case K::all_to_all: {
      const auto so = offsets(op.send_counts), ro = offsets(op.recv_counts);
      for (int j = 0; j < n; ++j) {
        const auto ju = static_cast<size_t>(j);
        if (j == me) continue;  // the own block is copied on the comm stream before the group
        if (op.send_counts[ju] > 0)
          nccl_check(ncclSend(at(op.send, so[ju] * es), static_cast<size_t>(op.send_counts[ju] * es), ncclChar, j,
                              comm, s),
                     "ncclSend", comm);
        if (op.recv_counts[ju] > 0)
          nccl_check(ncclRecv(at_mut(op.recv, ro[ju] * es), static_cast<size_t>(op.recv_counts[ju] * es), ncclChar,
                              j, comm, s),
                     "ncclRecv", comm);
      }
      return;
    }
    case K::reduce_scatter: {
      const auto& counts = op.recv_counts;
      if (all_equal(counts)) {
        if (counts[0] > 0)
          nccl_check(ncclReduceScatter(op.send, op.recv, static_cast<size_t>(counts[0]), ncclFloat, ncclSum, comm, s),
                     "ncclReduceScatter", comm);
        return;
      }
      const auto off = offsets(counts);
      for (int j = 0; j < n; ++j) {
        const auto ju = static_cast<size_t>(j);
        if (counts[ju] == 0) continue;
        nccl_check(ncclReduce(at(op.send, off[ju] * 4), op.recv, static_cast<size_t>(counts[ju]), ncclFloat, ncclSum,
                              j, comm, s),
                   "ncclReduce", comm);
      }
      return;
    }
    case K::all_gather: {
      const auto& counts = op.recv_counts;
      if (all_equal(counts)) {
        if (counts[0] > 0)
          nccl_check(ncclAllGather(op.send, op.recv, static_cast<size_t>(counts[0] * es), ncclChar, comm, s),
                     "ncclAllGather", comm);
        return;
      }
      const auto off = offsets(counts);
      for (int j = 0; j < n; ++j) {
        const auto ju = static_cast<size_t>(j);
        if (counts[ju] == 0) continue;
        nccl_check(ncclBroadcast(op.send, at_mut(op.recv, off[ju] * es), static_cast<size_t>(counts[ju] * es),
                                 ncclChar, j, comm, s),
                   "ncclBroadcast", comm);
      }
      return;
    }
    case K::all_reduce:
      if (op.count > 0)
        nccl_check(ncclAllReduce(op.recv, op.recv, static_cast<size_t>(op.count), ncclFloat, ncclSum, comm, s),
                   "ncclAllReduce", comm);
      return;
  }
}

// Issues the parts of collectives as one NCCL group: each comm stream first waits for its
// compute stream, and an event marks the end of each part.
void issue(std::span<NcclComm::Op* const> ops) {
  DeviceGuard g;
  for (NcclComm::Op* op : ops) {
    NcclComm& c = *op->comm;
    if (c.aborted())
      throw CollectiveError(op->state->head + ": the communicator of device " + std::to_string(c.device()) +
                                " was aborted by an earlier collective",
                            c.name(), op->state->record.sequence, {}, false);
    cuda_check(cudaSetDevice(c.device()), "cudaSetDevice");
    cudaEvent_t ready = nullptr;
    cuda_check(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    cudaError_t w = cudaEventRecord(ready, op->compute);
    if (w == cudaSuccess) w = cudaStreamWaitEvent(c.stream(), ready, 0);
    cudaEventDestroy(ready);  // released once it completed; the wait is already enqueued
    cuda_check(w, "ordering the comm stream after the compute stream");
    if (op->kind == NcclComm::Op::Kind::all_to_all) {  // the own block: a device copy
      const auto me = static_cast<size_t>(c.rank());
      const auto es = static_cast<int64_t>(op->elem_size);
      const int64_t bytes = op->send_counts[me] * es;
      if (bytes > 0)
        cuda_check(cudaMemcpyAsync(static_cast<char*>(op->recv) + offsets(op->recv_counts)[me] * es,
                                   static_cast<const char*>(op->send) + offsets(op->send_counts)[me] * es,
                                   static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, c.stream()),
                   "cudaMemcpyAsync");
    }
  }
  nccl_check(ncclGroupStart(), "ncclGroupStart");
  try {
    for (NcclComm::Op* op : ops) enqueue(*op);
  } catch (...) {
    ncclGroupEnd();
    throw;
  }
  nccl_check(ncclGroupEnd(), "ncclGroupEnd");
  for (NcclComm::Op* op : ops) {
    NcclComm& c = *op->comm;
    cuda_check(cudaSetDevice(c.device()), "cudaSetDevice");
    // blocking sync: NcclWork::synchronize's thread sleeps in the driver until the event completes
    cuda_check(cudaEventCreateWithFlags(&op->state->done, cudaEventDisableTiming | cudaEventBlockingSync),
               "cudaEventCreateWithFlags");
    cuda_check(cudaEventRecord(op->state->done, c.stream()), "cudaEventRecord");
    if (FlightRecorder* fr = c.flight_recorder()) fr->started(op->state->flight);
  }
}
}  // namespace

NcclWork NcclComm::submit(std::unique_ptr<Op> op) {
  NcclWork work(op->state);
  if (t_group) {
    t_group->ops_.push_back(std::move(op));
    return work;
  }
  NcclComm::Op* one = op.get();
  issue(std::span<NcclComm::Op* const>(&one, 1));
  return work;
}

namespace {
// A new part with its state and record filled in (times on the comm's clock).
std::unique_ptr<NcclComm::Op> make_op(NcclComm& c, NcclComm::Op::Kind kind, const char* kind_name, const char* op_name,
                                      uint64_t seq, cudaStream_t compute, size_t elem_size, CollectiveBytes bytes,
                                      std::vector<int64_t> send_elems, std::vector<int64_t> recv_elems,
                                      const profiler::RunClock* clock, int64_t reduce_elements = 0) {
  auto op = std::make_unique<NcclComm::Op>();
  op->kind = kind;
  op->comm = &c;
  op->compute = compute;
  op->elem_size = elem_size;
  auto st = std::make_shared<NcclWork::State>();
  st->comm = &c;
  st->head = collective_head(kind_name, op_name, c.name(), seq);
  st->issued_at = std::chrono::steady_clock::now();
  auto& r = st->record;
  r.rank = c.members()[static_cast<size_t>(c.rank())];
  r.op = kind_name;
  r.name = op_name;
  r.group = c.name();
  r.sequence = seq;
  r.dtype = dtype_name(elem_size);
  r.start_ns = clock ? clock->now_ns() : 0;
  r.bytes_sent = bytes.sent;
  r.bytes_received = bytes.received;
  r.peers = c.members();
  r.send_elements = std::move(send_elems);
  r.recv_elements = std::move(recv_elems);
  if (FlightRecorder* fr = c.flight_recorder()) {
    int64_t in = reduce_elements, out = reduce_elements;  // all-reduce: the elements reduced
    if (!r.send_elements.empty()) in = std::accumulate(r.send_elements.begin(), r.send_elements.end(), int64_t{0});
    if (!r.recv_elements.empty()) out = std::accumulate(r.recv_elements.begin(), r.recv_elements.end(), int64_t{0});
    st->flight = fr->scheduled(c.name(), c.members(), seq, kind_name, op_name, r.dtype.c_str(), in, out,
                               c.timeout().count());
  }
  op->state = std::move(st);
  return op;
}

void check_counts(const char* what, const char* op_name, std::span<const int64_t> counts, int n) {
  if (static_cast<int>(counts.size()) != n)
    throw std::invalid_argument(fmt::format("{} '{}': {} counts for {} ranks", what, op_name, counts.size(), n));
  for (int64_t c : counts)
    if (c < 0) throw std::invalid_argument(fmt::format("{} '{}': negative count {}", what, op_name, c));
}
}  // namespace

NcclWork NcclComm::all_to_all_v(const char* op_name, cudaStream_t compute, const void* send,
                                std::span<const int64_t> send_counts, void* recv,
                                std::span<const int64_t> recv_counts, size_t elem_size) {
  const int n = size();
  check_counts("all_to_all", op_name, send_counts, n);
  check_counts("all_to_all", op_name, recv_counts, n);
  if (!t_group) {
    // Outside a group the peers' splits are unknown here: all-gather them first (as the Gloo
    // path does, also on one rank, so sequence numbers match it) and check every pair before
    // data moves.
    std::vector<int64_t> mine(send_counts.begin(), send_counts.end());
    mine.insert(mine.end(), recv_counts.begin(), recv_counts.end());
    const size_t total = static_cast<size_t>(2 * n * n);
    int64_t* dev = nullptr;
    DeviceGuard g;
    cuda_check(cudaSetDevice(device_), "cudaSetDevice");
    cuda_check(cudaMallocAsync(reinterpret_cast<void**>(&dev), total * sizeof(int64_t), stream_), "cudaMallocAsync");
    std::vector<int64_t> all(total);
    try {
      cuda_check(cudaMemcpyAsync(dev + static_cast<size_t>(rank_ * 2 * n), mine.data(), mine.size() * sizeof(int64_t),
                                 cudaMemcpyHostToDevice, stream_),
                 "cudaMemcpyAsync");
      const std::string check_name = std::string(op_name) + "/split_check";
      std::vector<int64_t> two_n(static_cast<size_t>(n), 2 * n);
      // In place: this rank's block already sits at its offset.
      all_gather_v(check_name.c_str(), stream_, dev + static_cast<size_t>(rank_ * 2 * n), dev, two_n,
                   sizeof(int64_t))
          .synchronize();
      // on the comm stream, then wait for it alone: a cudaMemcpy (legacy default stream) would also
      // wait for the rank's compute stream (a blocking stream) and so for its kernels in flight
      cuda_check(cudaMemcpyAsync(all.data(), dev, total * sizeof(int64_t), cudaMemcpyDeviceToHost, stream_),
                 "cudaMemcpyAsync (split sizes)");
      cuda_check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (split sizes)");
    } catch (...) {
      cudaFreeAsync(dev, stream_);
      throw;
    }
    cuda_check(cudaFreeAsync(dev, stream_), "cudaFreeAsync");
    if (auto bad = find_split_mismatch(all, n))
      throw SplitMismatchError(fmt::format("{}: split sizes disagree: rank {} sends {} elements to rank {}, which "
                                           "expects {}",
                                           collective_head("all_to_all", op_name, group_, seq_ + 1),
                                           members_[static_cast<size_t>(bad->from)], bad->sent,
                                           members_[static_cast<size_t>(bad->to)], bad->expected));
  }
  const uint64_t seq = ++seq_;
  const CollectiveBytes b = all_to_all_bytes(send_counts, recv_counts, rank_, static_cast<int64_t>(elem_size));
  auto op = make_op(*this, Op::Kind::all_to_all, "all_to_all", op_name, seq, compute, elem_size, b,
                    {send_counts.begin(), send_counts.end()}, {recv_counts.begin(), recv_counts.end()}, clock_);
  op->send = send;
  op->recv = recv;
  op->send_counts.assign(send_counts.begin(), send_counts.end());
  op->recv_counts.assign(recv_counts.begin(), recv_counts.end());
  counters_.bytes_sent += b.sent;
  counters_.bytes_received += b.received;
  ++counters_.collectives;
  return submit(std::move(op));
}

NcclWork NcclComm::reduce_scatter(const char* op_name, cudaStream_t compute, const float* send,
                                  std::span<const int64_t> counts, float* recv) {
  check_counts("reduce_scatter", op_name, counts, size());
  const uint64_t seq = ++seq_;
  const CollectiveBytes b = reduce_scatter_bytes(counts, rank_, sizeof(float));
  std::vector<int64_t> recv_elems(counts.size(), counts[static_cast<size_t>(rank_)]);
  auto op = make_op(*this, Op::Kind::reduce_scatter, "reduce_scatter", op_name, seq, compute, sizeof(float), b,
                    {counts.begin(), counts.end()}, std::move(recv_elems), clock_);
  op->send = send;
  op->recv = recv;
  op->recv_counts.assign(counts.begin(), counts.end());
  counters_.bytes_sent += b.sent;
  counters_.bytes_received += b.received;
  ++counters_.collectives;
  return submit(std::move(op));
}

NcclWork NcclComm::all_gather_v(const char* op_name, cudaStream_t compute, const void* send, void* recv,
                                std::span<const int64_t> counts, size_t elem_size) {
  check_counts("all_gather", op_name, counts, size());
  const uint64_t seq = ++seq_;
  const CollectiveBytes b = all_gather_bytes(counts, rank_, static_cast<int64_t>(elem_size));
  std::vector<int64_t> send_elems(counts.size(), counts[static_cast<size_t>(rank_)]);
  auto op = make_op(*this, Op::Kind::all_gather, "all_gather", op_name, seq, compute, elem_size, b,
                    std::move(send_elems), {counts.begin(), counts.end()}, clock_);
  op->send = send;
  op->recv = recv;
  op->recv_counts.assign(counts.begin(), counts.end());
  counters_.bytes_sent += b.sent;
  counters_.bytes_received += b.received;
  ++counters_.collectives;
  return submit(std::move(op));
}

NcclWork NcclComm::all_reduce_sum(const char* op_name, cudaStream_t compute, float* data, int64_t count) {
  if (count < 0) throw std::invalid_argument(fmt::format("all_reduce '{}': negative count {}", op_name, count));
  const uint64_t seq = ++seq_;
  const CollectiveBytes b = all_reduce_bytes(count, size(), rank(), sizeof(float));
  auto op = make_op(*this, Op::Kind::all_reduce, "all_reduce", op_name, seq, compute, sizeof(float), b, {}, {}, clock_,
                    count);
  op->recv = data;
  op->count = count;
  counters_.bytes_sent += b.sent;
  counters_.bytes_received += b.received;
  ++counters_.collectives;
  return submit(std::move(op));
}

// ---- group -----------------------------------------------------------------

NcclGroup::NcclGroup() {
  if (t_group) throw std::logic_error("NcclGroup: a group is already open on this thread");
  t_group = this;
}

NcclGroup::~NcclGroup() {
  if (!ended_) {
    try {
      end();
    } catch (...) {
    }
  }
}

void NcclGroup::end() {
  if (ended_) return;
  ended_ = true;
  t_group = nullptr;
  // Cross-check the ranks held here, per (group, sequence): all-to-all splits pairwise, and the
  // block counts of reduce-scatter / all-gather (the same on every rank).
  std::map<std::pair<std::string, uint64_t>, std::vector<NcclComm::Op*>> by_collective;
  for (auto& op : ops_) by_collective[{op->comm->name(), op->state->record.sequence}].push_back(op.get());
  for (auto& [key, parts] : by_collective) {
    const NcclComm::Op& first = *parts.front();
    if (first.kind == NcclComm::Op::Kind::reduce_scatter || first.kind == NcclComm::Op::Kind::all_gather) {
      for (const NcclComm::Op* p : parts)
        if (p->recv_counts != first.recv_counts)
          throw SplitMismatchError(fmt::format("{}: block counts differ between rank {} ({}) and rank {} ({})",
                                               first.state->head, first.state->record.rank,
                                               fmt::join(first.recv_counts, ","), p->state->record.rank,
                                               fmt::join(p->recv_counts, ",")));
      continue;
    }
    if (first.kind != NcclComm::Op::Kind::all_to_all) continue;
    const int n = first.comm->size();
    if (static_cast<int>(parts.size()) != n) continue;  // not every rank here: the peers check their side
    std::vector<int64_t> all(static_cast<size_t>(2 * n * n));
    for (NcclComm::Op* p : parts) {
      const auto base = static_cast<size_t>(p->comm->rank() * 2 * n);
      std::copy(p->send_counts.begin(), p->send_counts.end(), all.begin() + static_cast<std::ptrdiff_t>(base));
      std::copy(p->recv_counts.begin(), p->recv_counts.end(),
                all.begin() + static_cast<std::ptrdiff_t>(base) + n);
    }
    if (auto bad = find_split_mismatch(all, n)) {
      const auto& members = parts.front()->comm->members();
      throw SplitMismatchError(fmt::format("{}: split sizes disagree: rank {} sends {} elements to rank {}, which "
                                           "expects {}",
                                           parts.front()->state->head, members[static_cast<size_t>(bad->from)],
                                           bad->sent, members[static_cast<size_t>(bad->to)], bad->expected));
    }
  }
  std::vector<NcclComm::Op*> raw;
  for (auto& op : ops_) raw.push_back(op.get());
  issue(raw);
  ops_.clear();
}

}  // namespace embedscope::engine

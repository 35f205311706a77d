#include "embedscope/engine/comm/gloo_process_group.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <numeric>
#include <thread>

#include <unistd.h>
#include <cstdio>
#include <functional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/alltoallv.h>
#include <gloo/common/error.h>
#include <gloo/config.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/tcp/pair.h>  // its gloo/common/memory.h: comm/gloo/vendor/ (engine/CMakeLists.txt)
#include "embedscope/engine/comm/collective_math.h"
#include "comm/gloo/key_eraser.h"
#include "comm/gloo/stranded_sends.h"
#include "comm/gloo/pause_watch.h"

namespace embedscope::engine {

struct Rendezvous::Impl {
  std::shared_ptr<gloo::rendezvous::Store> store;
  std::function<bool(const std::string&)> has;  // is the key set? (never blocks)
  KeyEraser* eraser = nullptr;                  // the store's key removal (null: keys are kept)
  std::string hostname = "127.0.0.1";
  std::mutex mu;
  std::shared_ptr<gloo::transport::Device> device;  // one TCP device (listener + loop) per process

  std::shared_ptr<gloo::transport::Device> get_device() {
    std::lock_guard<std::mutex> lock(mu);
    if (!device) {
      gloo::transport::tcp::attr attr;
      attr.hostname = hostname;
      device = gloo::transport::tcp::CreateDevice(attr);
    }
    return device;
  }
};

namespace {
class StoreRendezvous : public Rendezvous {
 public:
  Impl& impl() override { return impl_; }
  Impl impl_;
};

std::string arrival_key(const std::string& group, uint64_t seq, int rank) {
  return fmt::format("{}/arrive/{}/{}", group, seq, rank);
}

// The arrival keys a member of a group holds in the store (tester50 F7: a file store kept every
// key of every collective until the run ended, ~12 files a step). A member reads the arrival keys
// of collective s of its peers only inside its own collective s (the missing ranks of a failed
// collective; the paced collective's figures after it completed), and it sets its own key of
// s + 1 only after its collective s returned. So once every member's key of `seq` is set, no
// member reads a key of an earlier collective of the group any more, and this member removes its
// own keys of them: what the store holds stays at about one key per member and group (the last
// collective's; one more while a peer's key of it is not seen yet), whatever the number of steps.
// A member never removes a peer's key, nor its own key of `seq` itself (a peer may still be
// inside that collective). `all_seen`: the caller read every member's key of `seq` already.
// `own`: this member's keys still in the store (their sequence numbers); `seq` is added to it.
void release_arrival_keys(Rendezvous::Impl& rv, const std::string& group, int size, int me, uint64_t seq,
                          bool all_seen, std::vector<uint64_t>& own) noexcept {
  if (!rv.eraser) return;  // a store that cannot remove keys keeps them all, as before
  try {
    own.push_back(seq);
    bool all = true;
    if (!all_seen)
      for (int r = 0; r < size && all; ++r) all = r == me || rv.has(arrival_key(group, seq, r));
    if (!all) return;  // a peer's key not seen yet (a collective that completes without it): later
    for (const uint64_t s : own)
      if (s != seq) rv.eraser->erase_key(arrival_key(group, s, me));
    own.assign(1, seq);
  } catch (const std::exception&) {  // the store could not be read: the keys stay
  }
}

// The in-process store (ranks that are threads of one process): gloo's HashStore with a
// non-blocking check and key removal.
class InProcessStore : public gloo::rendezvous::HashStore, public KeyEraser {
 public:
  bool has(const std::string& key) {
    std::lock_guard<std::mutex> lock(m_);
    return map_.count(key) != 0;
  }
  void erase_key(const std::string& key) noexcept override {
    std::lock_guard<std::mutex> lock(m_);
    map_.erase(key);
  }
};

// A non-null pointer for zero-sized buffers (Gloo rejects null).
char g_empty[8];

// What this rank's own waiters get when it closes its connections (ProcessGroup::run tells it apart).
constexpr const char* kClosedByThisRank = "this rank closed its connections";

// Wakes every waiter on `pair` in this process (pending sends and receives of its unbound
// buffers, its bound buffers) with an IoException(msg), unless the pair already failed: Gloo's
// tcp::Pair::signalExceptionExternal (gloo/transport/tcp/pair.cc at 5b14351), the call Gloo's
// own UnboundBuffer makes on every pair when one of its waits times out. It takes the pair's
// mutex, which the device loop takes too, and on a pair that close() already closed it only
// signals (its fd is gone; the state stays CLOSED). It is protected: reached here through a
// pointer to member formed in a derived class, which C++ allows for a protected member (the
// class is never instantiated).
struct PairWaker : gloo::transport::tcp::Pair {
  static void wake(gloo::transport::tcp::Pair& pair, const std::string& msg) {
    const auto signal = &PairWaker::signalExceptionExternal;
    (pair.*signal)(msg);
  }
};
void* nonnull(void* p) { return p ? p : g_empty; }
void* nonnull(const void* p) { return p ? const_cast<void*>(p) : g_empty; }
}  // namespace

std::string gloo_version() {
  return fmt::format("{}.{}.{}", GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR, GLOO_VERSION_PATCH);
}

__extension__ typedef __int128 int128;

int64_t emulated_transfer_ns(const LinkSpec& link, int64_t bytes) {
  int64_t t = link.latency_ns;
  if (link.bandwidth_bytes_per_s > 0 && bytes > 0) {
    const int128 num = static_cast<int128>(bytes) * 1'000'000'000;  // exact: < 2^93
    t += static_cast<int64_t>((num + link.bandwidth_bytes_per_s - 1) / link.bandwidth_bytes_per_s);
  }
  return t;
}

int64_t emulated_delivery_ns(const NetworkSpec& net, int local_world_size, std::span<const int> members,
                             int group_rank, std::size_t to, std::span<const int64_t> sent_bytes) {
  if (!net.limited() || static_cast<int>(to) == group_rank || sent_bytes[to] <= 0) return 0;
  const int lws = std::max(1, local_world_size);
  const auto node = [&](size_t j) { return members[j] / lws; };
  const bool intra = node(to) == node(static_cast<size_t>(group_rank));
  const LinkSpec& link = intra ? net.intra_node : net.inter_node;
  int64_t shared = 0;  // bytes the port has pushed when the flow to `to` ends (max-min fair share)
  for (size_t k = 0; k < members.size(); ++k) {
    if (static_cast<int>(k) == group_rank || (node(k) == node(static_cast<size_t>(group_rank))) != intra) continue;
    shared += std::min(sent_bytes[k], sent_bytes[to]);
  }
  return emulated_transfer_ns(link, shared);
}

std::vector<int64_t> emulated_delivery_ns(const NetworkSpec& net, int local_world_size, std::span<const int> members,
                                          int group_rank, std::span<const int64_t> sent_bytes) {
  std::vector<int64_t> out(members.size(), 0);
  for (size_t k = 0; k < members.size(); ++k)
    out[k] = emulated_delivery_ns(net, local_world_size, members, group_rank, k, sent_bytes);
  return out;
}

int64_t emulated_release_ns(bool ring, int group_rank, std::span<const EmulatedMember> members) {
  const auto me = static_cast<size_t>(group_rank);
  int64_t start = 0, hold = members[me].port_ns;
  for (size_t j = 0; j < members.size(); ++j) {
    start = std::max(start, members[j].arrival_ns);
    if (j == me) continue;
    if (ring)
      hold = std::max(hold, members[j].port_ns);
    else if (me < members[j].deliver_ns.size())
      hold = std::max(hold, members[j].deliver_ns[me]);
  }
  return start + hold;
}

namespace {
int64_t pg_steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Which steady clock an arrival time is on: the kernel's boot id (else the host name), hashed.
int64_t clock_domain() {
  static const int64_t id = [] {
    std::string text;
    if (std::FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
      char buf[64] = {};
      if (std::fgets(buf, sizeof(buf), f)) text = buf;
      std::fclose(f);
    }
    if (text.empty()) {
      char host[256] = {};
      gethostname(host, sizeof(host) - 1);
      text = host;
    }
    return static_cast<int64_t>(std::hash<std::string>{}(text) & 0x7fffffffffffffffULL);
  }();
  return id;
}

// Arrival-key value of a paced collective: int64 clock domain, arrival, port time, then one
// delivery time per member.
std::vector<char> encode_member(const EmulatedMember& m) {
  std::vector<int64_t> v{clock_domain(), m.arrival_ns, m.port_ns};
  v.insert(v.end(), m.deliver_ns.begin(), m.deliver_ns.end());
  std::vector<char> out(v.size() * sizeof(int64_t));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// A member's published figures; an arrival on another host's steady clock counts as `done_ns`
// (this rank's time when the collective returned: every member had arrived by then).
EmulatedMember decode_member(const std::vector<char>& bytes, int n, int64_t done_ns) {
  EmulatedMember m;
  const size_t want = static_cast<size_t>(3 + n) * sizeof(int64_t);
  if (bytes.size() != want) {  // not a paced arrival (a peer with another network setting): no bound
    m.arrival_ns = done_ns;
    return m;
  }
  std::vector<int64_t> v(static_cast<size_t>(3 + n));
  std::memcpy(v.data(), bytes.data(), want);
  m.arrival_ns = v[0] == clock_domain() ? v[1] : done_ns;
  m.port_ns = v[2];
  m.deliver_ns.assign(v.begin() + 3, v.end());
  return m;
}

size_t total(std::span<const int64_t> counts) {
  return static_cast<size_t>(std::accumulate(counts.begin(), counts.end(), int64_t{0}));
}
}  // namespace

std::shared_ptr<Rendezvous> Rendezvous::in_process() {
  auto store = std::make_shared<InProcessStore>();
  // the store's own lookup: HashStore's wait would hold a missing key's check for 1 ms
  return over_store(store, [s = store.get()](const std::string& key) { return s->has(key); }, "127.0.0.1");
}

std::shared_ptr<Rendezvous> Rendezvous::over_store(std::shared_ptr<gloo::rendezvous::Store> store,
                                                   std::function<bool(const std::string&)> has, std::string hostname) {
  auto rv = std::make_shared<StoreRendezvous>();
  rv->impl_.store = std::move(store);
  rv->impl_.has = std::move(has);
  rv->impl_.eraser = dynamic_cast<KeyEraser*>(rv->impl_.store.get());  // a store that can remove keys
  rv->impl_.hostname = std::move(hostname);
  return rv;
}

std::string Rendezvous::device_address() { return impl().get_device()->str(); }

struct ProcessGroup::Impl {
  std::shared_ptr<gloo::rendezvous::Context> ctx;
  std::vector<uint64_t> own_keys;  // this member's arrival keys still in the store (release_arrival_keys)
  // wakes the sends a failed pair leaves queued (comm/gloo/stranded_sends.h); after ctx: destroyed first
  std::unique_ptr<StrandedSendWatch> watch;
};

ProcessGroup::ProcessGroup(std::shared_ptr<Rendezvous> rv, std::string name, std::vector<int> members,
                           int group_rank, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()), rv_(std::move(rv)), name_(std::move(name)),
      members_(std::move(members)), group_rank_(group_rank), timeout_(timeout) {
  auto& rimpl = rv_->impl();
  impl_->ctx = std::make_shared<gloo::rendezvous::Context>(group_rank_, size());
  impl_->ctx->setTimeout(timeout_);
  PauseWatch::instance();  // its ticker runs from now: a failed collective asks it whether this process was stopped
  try {
    gloo::rendezvous::PrefixStore prefixed(name_, *rimpl.store);
    auto device = rimpl.get_device();
    impl_->ctx->connectFullMesh(prefixed, device);
    impl_->watch = std::make_unique<StrandedSendWatch>(impl_->ctx);
  } catch (const std::exception& e) {
    throw CollectiveError(fmt::format("connecting group '{}' (ranks {}) failed: {}", name_,
                                      fmt::join(members_, ","), e.what()),
                          name_, 0, {});
  }
}

ProcessGroup::~ProcessGroup() = default;

void ProcessGroup::close_connections() noexcept {
  if (closed_.exchange(true)) return;
  // Pair by pair, what gloo::Context::closeConnections does (Pair::close: a hard close, the
  // peers see the connection reset), then this rank's own waiters on the pair are woken: a
  // collective of this rank blocked in Gloo (on its comm thread) would otherwise wait out its
  // timeout, as close() does not signal local waiters (ci47: 30 s per crashed launch).
  for (int i = 0; i < size(); ++i) {
    if (i == group_rank_) continue;
    try {
      auto& pair = impl_->ctx->getPair(i);
      if (!pair) continue;
      pair->close();
      if (auto* tcp = dynamic_cast<gloo::transport::tcp::Pair*>(pair.get())) PairWaker::wake(*tcp, kClosedByThisRank);
    } catch (const std::exception&) {  // a pair that is already broken: nothing left to close
    }
  }
}

template <class F>
void ProcessGroup::run(const char* kind, const char* op_name, Splits splits, F&& body) {
  const uint64_t seq = ++seq_;
  last_emulated_ns_ = 0;
  const CommCounters before = counters_;
  const int64_t start = clock_ ? clock_->now_ns() : 0;
  const auto steady_start = std::chrono::steady_clock::now();
  if (vanish_at_ != 0 && seq >= vanish_at_)
    throw RankVanished(fmt::format("rank {} vanished before {} '{}' (group {}, sequence {})",
                                   members_[static_cast<size_t>(group_rank_)], kind, op_name, name_, seq));
  const char* dtype = splits.dtype ? splits.dtype : dtype_name(splits.elem_size);
  FlightRecorder::Id flight = -1;
  if (flight_) {
    int64_t in = splits.elements, out = splits.elements;
    if (!splits.send.empty()) in = std::accumulate(splits.send.begin(), splits.send.end(), int64_t{0});
    if (!splits.recv.empty()) out = std::accumulate(splits.recv.begin(), splits.recv.end(), int64_t{0});
    flight = flight_->scheduled(name_, members_, seq, kind, op_name, dtype, in, out, timeout_.count());
  }
  const FlightFailMark flight_failed(flight_, flight);  // any throw below records when it failed
  if (closed_)
    throw CollectiveError(fmt::format("{} not started: this rank closed its connections after an earlier failure",
                                      collective_head(kind, op_name, name_, seq)),
                          name_, seq, {});
  auto& rimpl = rv_->impl();
  // The slow-network emulation's figures of this rank (docs/training-step.md, "Slow-network emulation"): its own
  // port time and its deliveries to each member, published with its arrival time (steady clock)
  // in its arrival key, so that every member can hold itself until the data of the last member
  // to arrive could have crossed the emulated links (tester48 F5).
  const bool emulate = splits.paced && network_.limited() && size() > 1;
  EmulatedMember mine;
  if (emulate) {
    const int n = size();
    const auto me = static_cast<size_t>(group_rank_);
    std::vector<int64_t> sent(static_cast<size_t>(n), 0), received(static_cast<size_t>(n), 0);
    if (splits.ring_bytes > 0) {
      sent[static_cast<size_t>((group_rank_ + 1) % n)] = splits.ring_bytes;
      received[static_cast<size_t>((group_rank_ + n - 1) % n)] = splits.ring_bytes;
    } else if (!splits.send.empty()) {
      for (size_t j = 0; j < static_cast<size_t>(n); ++j) {
        sent[j] = splits.send[j] * static_cast<int64_t>(splits.elem_size);
        received[j] = splits.recv[j] * static_cast<int64_t>(splits.elem_size);
      }
    }
    sent[me] = received[me] = 0;
    mine.port_ns = emulated_min_ns(sent, received);
    mine.deliver_ns = emulated_delivery_ns(network_, local_world_size_, members_, group_rank_, sent);
    mine.arrival_ns = pg_steady_ns();
    rimpl.store->set(arrival_key(name_, seq, group_rank_), encode_member(mine));
  } else {
    rimpl.store->set(arrival_key(name_, seq, group_rank_), {1});
  }
  if (flight_) flight_->started(flight);
  ++counters_.collectives;
  // This rank closed its connections while the collective was in flight (close_connections
  // from another thread, after this rank's own failure): a consequence of that, blaming no peer.
  const auto closed_in_flight = [&](const std::string& what) {
    return CollectiveError(fmt::format("{} failed: this rank closed its connections after an earlier failure while "
                                       "the collective was in flight{}",
                                       collective_head(kind, op_name, name_, seq),
                                       what == kClosedByThisRank ? "" : " (" + what + ")"),
                           name_, seq, {});
  };
  impl_->watch->begin();
  struct EndWatch {
    StrandedSendWatch& w;
    ~EndWatch() { w.end(); }
  } end_watch{*impl_->watch};
  try {
    body(static_cast<uint32_t>(seq & 0xffffff));
  } catch (const gloo::Exception& e) {
    if (closed_) throw closed_in_flight(e.what());
    const std::string what = e.what();
    // this rank's own process did not run for longer than the timeout inside the collective (it
    // was stopped and continued): the cause of its peers' failure, not a victim of a peer (tester53
    // F4), so a hang of its own (timed out: ended hang, no consequence), whatever Gloo said
    // (a timeout, or the connection its peers closed meanwhile)
    {
      const int64_t from = std::chrono::duration_cast<std::chrono::nanoseconds>(steady_start.time_since_epoch()).count();
      const int64_t paused = PauseWatch::instance().paused_ns(from, PauseWatch::now_ns());
      if (paused > std::chrono::duration_cast<std::chrono::nanoseconds>(timeout_).count())
        throw CollectiveError(self_paused_text(collective_head(kind, op_name, name_, seq), paused, timeout_.count(), what),
                              name_, seq, {}, true);
    }
    std::vector<int> missing;
    for (int r = 0; r < size(); ++r)
      if (!rimpl.has(arrival_key(name_, seq, r))) missing.push_back(members_[static_cast<size_t>(r)]);
    const std::string head = collective_head(kind, op_name, name_, seq);
    // everyone came, and a peer stopped sending: stopped or stalled inside the collective (SIGSTOP,
    // swapping, a debugger: tester47 F10), or its transfer too slow for the timeout
    if (missing.empty() && what.find("Timed out") != std::string::npos)
      throw CollectiveError(fmt::format("{} did not finish within {} ms (every rank arrived; a peer stopped sending: "
                                        "a stalled or stopped process, or a transfer too slow for the timeout): {}",
                                        head, timeout_.count(), what),
                            name_, seq, {}, true);
    const auto waited = std::chrono::steady_clock::now() - steady_start;
    if (!missing.empty() && what.find("Timed out") == std::string::npos && waited < timeout_) {
      // The wait ended early: a peer's connection broke (it died, or closed its connections
      // after its own failure). A live peer may be a few ms behind: give the store a short
      // grace (at most 100 ms, within the timeout) so that only ranks that really had not
      // arrived are named.
      const auto grace_end = std::min(steady_start + timeout_, std::chrono::steady_clock::now() + std::chrono::milliseconds(100));
      while (!missing.empty() && std::chrono::steady_clock::now() < grace_end) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        std::vector<int> still;
        for (int r = 0; r < size(); ++r)
          if (std::find(missing.begin(), missing.end(), members_[static_cast<size_t>(r)]) != missing.end() &&
              !rimpl.has(arrival_key(name_, seq, r)))
            still.push_back(members_[static_cast<size_t>(r)]);
        missing = std::move(still);
      }
      const double ms = std::chrono::duration<double, std::milli>(waited).count();
      if (missing.empty())
        throw CollectiveError(fmt::format("{} failed after {:.1f} ms, before its {} ms timeout: a peer's connection "
                                          "broke (every rank had arrived): {}", head, ms, timeout_.count(), what),
                              name_, seq, {});
      // not a timeout: a peer failed (it died, or closed its connections after its own failure);
      // the run ends as a consequence of it, and the flight recorder says so (tester36 D8)
      throw CollectiveError(fmt::format("{} failed after {:.1f} ms, before its {} ms timeout: a peer's connection "
                                        "broke; rank(s) {} did not arrive", head, ms, timeout_.count(),
                                        fmt::join(missing, ", ")),
                            name_, seq, missing, false);
    }
    if (!missing.empty())
      throw CollectiveError(fmt::format("{} did not finish within {} ms: rank(s) {} did not arrive", head,
                                        timeout_.count(), fmt::join(missing, ", ")),
                            name_, seq, missing, true);
    throw CollectiveError(fmt::format("{} failed: {}", head, e.what()), name_, seq, {});
  } catch (const std::exception& e) {  // Gloo's EnforceNotMet: e.g. a send on a pair just closed
    if (closed_) throw closed_in_flight(e.what());
    throw;
  }
  if (emulate) {
    // Every member has arrived (the collective completed), so every arrival key is set.
    const int n = size();
    std::vector<EmulatedMember> all(static_cast<size_t>(n));
    const int64_t done_ns = pg_steady_ns();
    for (int r = 0; r < n; ++r) {
      if (r == group_rank_) {
        all[static_cast<size_t>(r)] = mine;
        continue;
      }
      all[static_cast<size_t>(r)] = decode_member(rimpl.store->get(arrival_key(name_, seq, r)), n, done_ns);
    }
    const int64_t release_ns = emulated_release_ns(splits.ring_bytes > 0, group_rank_, all);
    const int64_t last_arrival = std::max_element(all.begin(), all.end(), [](const auto& a, const auto& b) {
                                   return a.arrival_ns < b.arrival_ns;
                                 })->arrival_ns;
    const int64_t min_ns = release_ns - last_arrival;  // the modelled duration from the effective start
    last_emulated_ns_ = min_ns;
    const int64_t held_ns = release_ns - mine.arrival_ns;
    const int64_t timeout_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(timeout_).count();
    if (held_ns > timeout_ns) {  // a link this slow times out, as a real one would: never a hang
      std::this_thread::sleep_until(steady_start + timeout_);
      throw CollectiveError(fmt::format("{} did not finish within {} ms (every rank arrived; the emulated network "
                                        "needs {:.1f} ms for the transfers from the last rank's arrival, "
                                        "{:.1f} ms from this rank's)",
                                        collective_head(kind, op_name, name_, seq), timeout_.count(),
                                        static_cast<double>(min_ns) / 1e6, static_cast<double>(held_ns) / 1e6),
                            name_, seq, {}, true);
    }
    std::this_thread::sleep_until(std::chrono::steady_clock::time_point(std::chrono::nanoseconds(release_ns)));
  }
  release_arrival_keys(rimpl, name_, size(), group_rank_, seq, emulate, impl_->own_keys);
  if (flight_) flight_->completed(flight);
  if (observer_) {
    sessions::CollectiveRecord r;
    r.rank = members_[static_cast<size_t>(group_rank_)];
    r.op = kind;
    r.name = op_name;
    r.group = name_;
    r.sequence = seq;
    r.dtype = dtype;
    r.start_ns = start;
    r.end_ns = clock_ ? clock_->now_ns() : 0;
    r.bytes_sent = counters_.bytes_sent - before.bytes_sent;
    r.bytes_received = counters_.bytes_received - before.bytes_received;
    r.peers = members_;
    r.send_elements = std::move(splits.send);
    r.recv_elements = std::move(splits.recv);
    observer_(std::move(r));
  }
}

void ProcessGroup::all_to_all_v(const char* op_name, const void* send, std::span<const int64_t> send_counts,
                                void* recv, std::span<const int64_t> recv_counts, size_t elem_size) {
  all_to_all_impl("all_to_all", op_name, send, send_counts, recv, recv_counts, elem_size);
}

int64_t emulated_collective_ns(const NetworkSpec& net, int local_world_size, std::span<const int> members,
                               int group_rank, std::span<const int64_t> sent_bytes,
                               std::span<const int64_t> received_bytes) {
  if (!net.limited()) return 0;
  const int lws = std::max(1, local_world_size);
  const int my_node = members[static_cast<size_t>(group_rank)] / lws;
  bool has[2] = {false, false};
  int64_t sent[2] = {0, 0}, received[2] = {0, 0};  // [0] intra-node, [1] inter-node
  for (size_t j = 0; j < members.size(); ++j) {
    if (static_cast<int>(j) == group_rank) continue;
    const int c = members[j] / lws == my_node ? 0 : 1;
    has[c] = true;
    sent[c] += sent_bytes[j];
    received[c] += received_bytes[j];
  }
  int64_t t = 0;
  const LinkSpec* link[2] = {&net.intra_node, &net.inter_node};
  for (int c = 0; c < 2; ++c)
    if (has[c]) t = std::max(t, emulated_transfer_ns(*link[c], std::max(sent[c], received[c])));
  return t;
}

int64_t ProcessGroup::emulated_min_ns(std::span<const int64_t> sent_bytes,
                                      std::span<const int64_t> received_bytes) const {
  return emulated_collective_ns(network_, local_world_size_, members_, group_rank_, sent_bytes, received_bytes);
}

void ProcessGroup::all_to_all_impl(const char* kind, const char* op_name, const void* send,
                                   std::span<const int64_t> send_counts, void* recv,
                                   std::span<const int64_t> recv_counts, size_t elem_size, const char* dtype) {
  const int n = size();
  if (static_cast<int>(send_counts.size()) != n || static_cast<int>(recv_counts.size()) != n)
    throw std::invalid_argument(fmt::format("all_to_all '{}': {} send / {} recv counts for {} ranks", op_name,
                                            send_counts.size(), recv_counts.size(), n));
  // Cross-check the split sizes of every pair before moving data.
  std::vector<int64_t> mine(send_counts.begin(), send_counts.end());
  mine.insert(mine.end(), recv_counts.begin(), recv_counts.end());
  std::vector<int64_t> all(static_cast<size_t>(2 * n * n));
  std::vector<int64_t> two_n(static_cast<size_t>(n), 2 * n);
  const std::string check_name = std::string(op_name) + "/split_check";
  all_gather_impl(check_name.c_str(), mine.data(), all.data(), two_n, sizeof(int64_t),
                  {std::vector<int64_t>(static_cast<size_t>(n), 2 * n), two_n, sizeof(int64_t), nullptr, 0, false});
  if (auto bad = find_split_mismatch(all, n))
    throw SplitMismatchError(fmt::format(
        "{}: split sizes disagree: rank {} sends {} elements to rank {}, which expects {}",
        collective_head("all_to_all", op_name, name_, seq_ + 1), members_[static_cast<size_t>(bad->from)], bad->sent,
        members_[static_cast<size_t>(bad->to)], bad->expected));
  Splits splits{{send_counts.begin(), send_counts.end()}, {recv_counts.begin(), recv_counts.end()}, elem_size, dtype};
  run(kind, op_name, std::move(splits), [&](uint32_t tag) {
    gloo::AlltoallvOptions opts(impl_->ctx);
    std::vector<int64_t> in(send_counts.begin(), send_counts.end()), out(recv_counts.begin(), recv_counts.end());
    // Gloo's public setters are typed; move bytes.
    std::vector<int64_t> in_bytes(in), out_bytes(out);
    for (auto& v : in_bytes) v *= static_cast<int64_t>(elem_size);
    for (auto& v : out_bytes) v *= static_cast<int64_t>(elem_size);
    opts.setInput(static_cast<char*>(nonnull(send)), in_bytes);
    opts.setOutput(static_cast<char*>(nonnull(recv)), out_bytes);
    opts.setTag(tag);
    opts.setTimeout(timeout_);
    gloo::alltoallv(opts);
    const CollectiveBytes b = all_to_all_bytes(in, out, group_rank_, static_cast<int64_t>(elem_size));
    counters_.bytes_sent += b.sent;
    counters_.bytes_received += b.received;
  });
}

void ProcessGroup::reduce_scatter(const char* op_name, const float* send, std::span<const int64_t> counts,
                                  float* recv) {
  reduce_scatter_q(op_name, send, counts, recv, CommPrecision::fp32, nullptr);
}

void ProcessGroup::reduce_scatter_q(const char* op_name, const float* send, std::span<const int64_t> counts,
                                    float* recv, CommPrecision p, QuantError* err) {
  const int n = size();
  const int64_t mine = counts[static_cast<size_t>(group_rank_)];
  // Pairwise exchange: block j goes to rank j; we receive our block from every rank.
  std::vector<float> gathered(static_cast<size_t>(mine * n));
  std::vector<int64_t> recv_counts(static_cast<size_t>(n), mine);
  if (p == CommPrecision::fp32) {
    all_to_all_impl("reduce_scatter", op_name, send, counts, gathered.data(), recv_counts, sizeof(float));
  } else {
    const auto q = quantize(send, total(counts), p, err);
    std::vector<uint16_t> rq(gathered.size());
    all_to_all_impl("reduce_scatter", op_name, q.data(), counts, rq.data(), recv_counts, 2, precision_dtype(p));
    dequantize(rq.data(), rq.size(), p, gathered.data());
  }
  // fill_n, not memset: a rank that holds no rows of the group's shard gets recv == nullptr with
  // mine == 0, and memset(nullptr, 0, 0) is undefined (UBSan's nonnull-attribute report in
  // Parity.MixedShardingWithExplicitRanks, .ci/run's sanitize stage).
  std::fill_n(recv, static_cast<size_t>(mine), 0.0f);
  for (int r = 0; r < n; ++r) {
    const float* block = gathered.data() + static_cast<size_t>(r) * static_cast<size_t>(mine);
    for (int64_t i = 0; i < mine; ++i) recv[i] += block[i];
  }
}

void ProcessGroup::all_to_all_q(const char* op_name, const float* send, std::span<const int64_t> send_counts,
                                float* recv, std::span<const int64_t> recv_counts, CommPrecision p, QuantError* err) {
  if (p == CommPrecision::fp32) {
    all_to_all_impl("all_to_all", op_name, send, send_counts, recv, recv_counts, sizeof(float));
    return;
  }
  const auto q = quantize(send, total(send_counts), p, err);
  std::vector<uint16_t> rq(total(recv_counts));
  all_to_all_impl("all_to_all", op_name, q.data(), send_counts, rq.data(), recv_counts, 2, precision_dtype(p));
  dequantize(rq.data(), rq.size(), p, recv);
}

void ProcessGroup::all_gather_q(const char* op_name, const float* send, float* recv, std::span<const int64_t> counts,
                                CommPrecision p, QuantError* err) {
  if (p == CommPrecision::fp32) {
    all_gather_v(op_name, send, recv, counts, sizeof(float));
    return;
  }
  const auto q = quantize(send, static_cast<size_t>(counts[static_cast<size_t>(group_rank_)]), p, err);
  std::vector<uint16_t> rq(total(counts));
  all_gather_impl(op_name, q.data(), rq.data(), counts, 2,
                  {std::vector<int64_t>(counts.size(), counts[static_cast<size_t>(group_rank_)]),
                   {counts.begin(), counts.end()}, 2, precision_dtype(p), 0, true});
  dequantize(rq.data(), rq.size(), p, recv);
}

void ProcessGroup::all_gather_v(const char* op_name, const void* send, void* recv,
                                std::span<const int64_t> counts, size_t elem_size) {
  all_gather_impl(op_name, send, recv, counts, elem_size,
                  {std::vector<int64_t>(counts.size(), counts[static_cast<size_t>(group_rank_)]),
                   {counts.begin(), counts.end()}, elem_size, nullptr, 0, true});
}

void ProcessGroup::all_gather_impl(const char* op_name, const void* send, void* recv,
                                   std::span<const int64_t> counts, size_t elem_size, Splits splits) {
  run("all_gather", op_name, std::move(splits), [&](uint32_t tag) {
    gloo::AllgathervOptions opts(impl_->ctx);
    std::vector<size_t> elems(counts.begin(), counts.end());
    const auto me = static_cast<size_t>(group_rank_);
    std::vector<size_t> bytes(elems);
    for (auto& v : bytes) v *= elem_size;
    opts.setInput(static_cast<char*>(nonnull(send)), bytes[me]);
    opts.setOutput(static_cast<char*>(nonnull(recv)), bytes);
    opts.setTag(tag);
    opts.setTimeout(timeout_);
    gloo::allgatherv(opts);
    const CollectiveBytes b = all_gather_bytes(counts, group_rank_, static_cast<int64_t>(elem_size));
    counters_.bytes_sent += b.sent;
    counters_.bytes_received += b.received;
  });
}

void ProcessGroup::all_reduce_impl(const char* op_name, float* data, int64_t count,
                                   void (*reduce)(void*, const void*, const void*, size_t)) {
  if (count == 0 || size() == 1) {
    run("all_reduce", op_name, {{}, {}, sizeof(float), nullptr, 0, true, count}, [](uint32_t) {});
    return;
  }
  const int64_t ring_bytes = all_reduce_bytes(count, size(), group_rank_, sizeof(float)).sent;
  run("all_reduce", op_name, {{}, {}, sizeof(float), nullptr, ring_bytes, true, count}, [&](uint32_t tag) {
    gloo::AllreduceOptions opts(impl_->ctx);
    opts.setOutput(data, static_cast<size_t>(count));
    opts.setReduceFunction(reduce);
    opts.setTag(tag);
    opts.setTimeout(timeout_);
    gloo::allreduce(opts);
    // Ring all-reduce: 2 (count - this rank's chunk) elements each way (all_reduce_bytes).
    counters_.bytes_sent += ring_bytes;
    counters_.bytes_received += ring_bytes;
  });
}

void ProcessGroup::all_reduce_q(const char* op_name, float* data, int64_t count, CommPrecision p, QuantError* err) {
  if (p == CommPrecision::fp32) {
    all_reduce_sum(op_name, data, count);
    return;
  }
  const int n = size();
  // every term rounded, the rank's own too (as all_to_all_q), whatever the group's size
  std::vector<uint16_t> q = quantize(data, static_cast<size_t>(count), p, err);
  const int64_t ring_bytes = all_reduce_bytes(count, n, group_rank_, 2).sent;
  run("all_reduce", op_name, {{}, {}, 2, precision_dtype(p), ring_bytes, true, count}, [&](uint32_t tag) {
    if (n == 1 || count == 0) return;
    // chunk j of the buffer: [off[j], off[j + 1]), count / n elements, the first count % n one more
    std::vector<int64_t> off(static_cast<size_t>(n) + 1, 0);
    for (int j = 0; j < n; ++j) off[static_cast<size_t>(j) + 1] = off[static_cast<size_t>(j)] + count / n + (j < count % n ? 1 : 0);
    const auto me = static_cast<size_t>(group_rank_);
    const int64_t mine = off[me + 1] - off[me];
    // reduce-scatter phase: chunk j to rank j (pairwise), the n terms of this rank's chunk summed
    // in fp32 in rank order, the sum rounded for the all-gather phase
    std::vector<int64_t> in_bytes(static_cast<size_t>(n)), out_bytes(static_cast<size_t>(n), mine * 2);
    for (size_t j = 0; j < static_cast<size_t>(n); ++j) in_bytes[j] = (off[j + 1] - off[j]) * 2;
    std::vector<uint16_t> terms(static_cast<size_t>(mine * n));
    {
      gloo::AlltoallvOptions opts(impl_->ctx);
      opts.setInput(static_cast<char*>(nonnull(q.data())), in_bytes);
      opts.setOutput(static_cast<char*>(nonnull(terms.data())), out_bytes);
      opts.setTag(tag);
      opts.setTimeout(timeout_);
      gloo::alltoallv(opts);
    }
    std::vector<float> t(terms.size()), sum(static_cast<size_t>(mine), 0.0f);
    dequantize(terms.data(), terms.size(), p, t.data());
    for (int r = 0; r < n; ++r)
      for (int64_t i = 0; i < mine; ++i) sum[static_cast<size_t>(i)] += t[static_cast<size_t>(r * mine + i)];
    const std::vector<uint16_t> sq = quantize(sum.data(), sum.size(), p, nullptr);
    // all-gather phase: every rank's rounded chunk to every rank (a tag of its own: bit 24, above
    // every sequence tag run() gives)
    {
      gloo::AllgathervOptions opts(impl_->ctx);
      std::vector<size_t> chunk_bytes(static_cast<size_t>(n));
      for (size_t j = 0; j < static_cast<size_t>(n); ++j) chunk_bytes[j] = static_cast<size_t>(off[j + 1] - off[j]) * 2;
      opts.setInput(static_cast<char*>(nonnull(sq.data())), chunk_bytes[me]);
      opts.setOutput(static_cast<char*>(nonnull(q.data())), chunk_bytes);
      opts.setTag(tag | 0x1000000u);
      opts.setTimeout(timeout_);
      gloo::allgatherv(opts);
    }
    // counted as a ring all-reduce of 2-byte elements (all_reduce_bytes), as all_reduce_sum
    counters_.bytes_sent += ring_bytes;
    counters_.bytes_received += ring_bytes;
  });
  dequantize(q.data(), q.size(), p, data);  // one rank: its term rounded, nothing on the wire
}

void ProcessGroup::all_reduce_sum(const char* op_name, float* data, int64_t count) {
  all_reduce_impl(op_name, data, count, static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
}

void ProcessGroup::all_reduce_max(const char* op_name, float* data, int64_t count) {
  all_reduce_impl(op_name, data, count, static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::max<float>));
}

}  // namespace embedscope::engine

#include "handshake.h"

#include <unistd.h>

#include <chrono>
#include <random>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "embedscope/engine/workload/spec_error.h"

namespace embedscope::engine::launch {

namespace {
int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string token() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::random_device rd;
  const uint64_t r = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return fmt::format("{}:{}:{:016x}", host, getpid(), r);
}

std::string compact(const nlohmann::json& j) {
  std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

std::string escape_pointer(const std::string& key) {
  std::string out;
  for (char c : key) out += c == '~' ? std::string("~0") : c == '/' ? std::string("~1") : std::string(1, c);
  return out;
}
}  // namespace

std::string fnv1a64_hex(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a 64 offset basis and prime (Fowler, Noll, Vo)
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return fmt::format("{:016x}", h);
}

std::string first_difference(const nlohmann::json& a, const nlohmann::json& b, const std::string& where) {
  if (a.type() == b.type() && a.is_object()) {
    std::vector<std::string> keys;
    for (auto it = a.begin(); it != a.end(); ++it) keys.push_back(it.key());
    for (auto it = b.begin(); it != b.end(); ++it)
      if (!a.contains(it.key())) keys.push_back(it.key());
    std::sort(keys.begin(), keys.end());
    for (const auto& k : keys) {
      const std::string at = where + "/" + escape_pointer(k);
      if (!a.contains(k)) return fmt::format("{}: missing vs {}", at, compact(b[k]));
      if (!b.contains(k)) return fmt::format("{}: {} vs missing", at, compact(a[k]));
      if (auto d = first_difference(a[k], b[k], at); !d.empty()) return d;
    }
    return "";
  }
  if (a.type() == b.type() && a.is_array()) {
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
      if (auto d = first_difference(a[i], b[i], where + "/" + std::to_string(i)); !d.empty()) return d;
    if (a.size() != b.size())
      return fmt::format("{}: {} elements vs {}", where.empty() ? "/" : where, a.size(), b.size());
    return "";
  }
  if (a == b) return "";
  return fmt::format("{}: {} vs {}", where.empty() ? "/" : where, compact(a), compact(b));
}

std::string refusal_value(const std::string& reason) {
  return nlohmann::json{{"reason", reason}, {"wall_ns", wall_ns()}}.dump(-1, ' ', false,
                                                                          nlohmann::json::error_handler_t::replace);
}

namespace {
// Waits (polling) until every key of `keys` is set or `timeout` has passed, as
// RunStore::wait_for, and ends early for a cancel, a dead or a refusing rank (handshake).
// `rank_of[i]` is the rank whose arrival keys[i] tells. Returns the indices still missing.
std::vector<size_t> wait_for_ranks(RunStore& store, const std::vector<std::string>& keys, const std::vector<int>& rank_of,
                                   std::chrono::milliseconds timeout, const std::atomic<bool>* cancel,
                                   const std::string& where, int rank, int world, int64_t arrived_wall_ns) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<size_t> missing;
  for (size_t i = 0; i < keys.size(); ++i) missing.push_back(i);
  auto missing_ranks = [&] {
    std::vector<int> ranks;
    for (size_t i : missing) ranks.push_back(rank_of[i]);
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    return ranks;
  };
  for (int round = 0;; ++round) {
    std::vector<size_t> still;
    for (size_t i : missing)
      if (!store.has(keys[i])) still.push_back(i);
    missing = std::move(still);
    if (missing.empty()) return missing;
    if (cancel && cancel->load())
      throw RendezvousCancelled(fmt::format("{}: cancelled during the rendezvous (rank {} of {}; rank(s) {} had not "
                                            "arrived)", where, rank, world, fmt::join(missing_ranks(), ", ")));
    if (round % 5 == 0)  // a dead or refusing rank: every 5 polls, a store round trip each
      for (int r : missing_ranks()) {
        if (const std::string k = fmt::format("dead/{}", r); store.has(k))
          throw std::runtime_error(fmt::format("{}: rank {} {} before the rendezvous completed (this is rank {})",
                                               where, r, store.get(k), rank));
        if (const std::string k = fmt::format("refused/{}", r); !store.has(fmt::format("claim/{}", r)) && store.has(k)) {
          const auto v = nlohmann::json::parse(store.get(k), nullptr, false);
          const bool ok = v.is_object() && v.contains("reason") && v.contains("wall_ns");
          const int64_t at = ok && v["wall_ns"].is_number_integer() ? v["wall_ns"].get<int64_t>() : 0;
          // an older refusal is an earlier run's (with the same run id) that left its key
          if (ok && at >= arrived_wall_ns - std::chrono::duration_cast<std::chrono::nanoseconds>(timeout).count())
            throw SpecError(fmt::format("{}: rank {} refused its input before the rendezvous (this is rank {}): {}",
                                        where, r, rank, v["reason"].is_string() ? v["reason"].get<std::string>() : "?"));
        }
      }
    if (std::chrono::steady_clock::now() >= deadline) return missing;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}
}  // namespace

HandshakeResult handshake(RunStore& store, int rank, int world, const nlohmann::json& document,
                          std::chrono::milliseconds timeout, const std::atomic<bool>* cancel) {
  HandshakeResult out;
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t arrived = wall_ns();
  const std::string where = fmt::format("rendezvous {} (run id {})", store.url(), store.run_id());
  const std::string claim_key = fmt::format("claim/{}", rank);
  auto claimed = [&](const std::string& by) {
    return SpecError(fmt::format(
        "{}: rank {} is claimed already{}: two processes were given rank {}, or an earlier run with this run id "
        "left its keys there; give every process its own rank, and a fresh --run-id or an empty directory",
        where, rank, by.empty() ? "" : " by " + by, rank));
  };
  if (store.has(claim_key)) throw claimed(store.get(claim_key));
  const std::string mine = token();
  try {
    store.set(claim_key, mine);
  } catch (const std::exception&) {  // set between our check and our set
    throw claimed("");
  }
  const std::string text = document.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  out.digest = fnv1a64_hex(text);
  store.set(fmt::format("digest/{}", rank), nlohmann::json{{"digest", out.digest}, {"document", document}}.dump(
                                                -1, ' ', false, nlohmann::json::error_handler_t::replace));
  std::vector<std::string> keys;
  std::vector<int> rank_of;
  for (int r = 0; r < world; ++r) keys.push_back(fmt::format("claim/{}", r)), rank_of.push_back(r);
  for (int r = 0; r < world; ++r) keys.push_back(fmt::format("digest/{}", r)), rank_of.push_back(r);
  const auto missing = wait_for_ranks(store, keys, rank_of, timeout, cancel, where, rank, world, arrived);
  if (!missing.empty()) {
    std::vector<int> ranks;
    for (size_t i : missing)
      if (ranks.empty() || ranks.back() != static_cast<int>(i) % world) ranks.push_back(static_cast<int>(i) % world);
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    throw SpecError(fmt::format("{}: rank(s) {} of {} did not arrive within {} ms (this is rank {}); start every "
                                "rank with the same --rendezvous and --run-id",
                                where, fmt::join(ranks, ", "), world, timeout.count(), rank));
  }
  out.rendezvous_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
  if (const std::string holder = store.get(claim_key); holder != mine) throw claimed(holder);
  for (int r = 0; r < world; ++r) {
    if (r == rank) continue;
    const auto theirs = nlohmann::json::parse(store.get(fmt::format("digest/{}", r)), nullptr, false);
    if (theirs.is_discarded() || !theirs.contains("digest"))
      throw SpecError(fmt::format("{}: rank {}'s digest is not one this version writes", where, r));
    if (theirs["digest"] == out.digest) continue;
    std::string diff = first_difference(document, theirs["document"]);
    if (diff.empty()) diff = "(texts differ, values equal)";
    throw SpecError(fmt::format("{}: rank {}'s workload and plan differ from rank {}'s (digest {} vs {}): first at "
                                "{} (rank {} vs rank {}); every rank must run the same workload, flags and plan",
                                where, r, rank, out.digest, theirs["digest"].get<std::string>(), diff, rank, r));
  }
  // clock offset to rank 0 (Cristian's algorithm over the store)
  if (rank == 0) {
    std::vector<std::string> req;
    for (int r = 1; r < world; ++r) req.push_back(fmt::format("clock/req/{}", r));
    for (int r = 1; r < world; ++r) {
      if (!wait_for_ranks(store, {req[static_cast<size_t>(r - 1)]}, {r}, timeout, cancel, where, rank, world, arrived).empty())
        throw SpecError(fmt::format("{}: rank {} did not ask for the clock within {} ms", where, r, timeout.count()));
      store.set(fmt::format("clock/resp/{}", r), std::to_string(wall_ns()));
    }
  } else {
    const int64_t sent = wall_ns();
    store.set(fmt::format("clock/req/{}", rank), std::to_string(sent));
    const std::string resp = fmt::format("clock/resp/{}", rank);
    if (!wait_for_ranks(store, {resp}, {0}, timeout, cancel, where, rank, world, arrived).empty())
      throw SpecError(fmt::format("{}: rank 0 did not answer the clock request within {} ms", where, timeout.count()));
    const int64_t received = wall_ns();
    const int64_t theirs = std::stoll(store.get(resp));
    out.clock_offset_ns = theirs - (sent + (received - sent) / 2);
    out.clock_uncertainty_ns = (received - sent) / 2;
  }
  return out;
}

}  // namespace embedscope::engine::launch

#pragma once
// The rendezvous store of a run of one rank per process: a gloo FileStore in a directory that
// every rank sees, or a gloo RedisStore (a Redis server every rank reaches), under a prefix of
// the run id (as gloo's PrefixStore joins it: "embedscope/<run_id>/<key>"), so that the keys of
// an earlier run in the same directory are never read (another run id) or are refused (the same
// run id: the rank's claim key exists already; handshake.h). The keys can be removed
// (comm/gloo/key_eraser.h; a file store's file, a Redis key with DEL: gloo's RedisStore has no
// delete): the collectives' arrival keys are, once no rank reads them any more
// (comm/gloo/process_group.cpp), so that the directory or the Redis database does not grow with
// the steps (tester50 F7), and a complete run removes all of its own. Internal to the engine.

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gloo::rendezvous {
class Store;
}

namespace embedscope::engine::launch {

/// A parsed rendezvous URL: "file:///PATH" (PATH an absolute directory: file:///shared/dir) or
/// "redis://HOST[:PORT][/PREFIX]" (PORT default 6379; an IPv6 HOST in brackets: [::1]:6379).
struct RendezvousUrl {
  std::string scheme;  ///< "file" or "redis"
  std::string path;    ///< file: the directory; redis: the key prefix ("" for none)
  std::string host;    ///< redis
  int port = 6379;     ///< redis
};

/// Parses `url`. Throws SpecError naming the URL: empty, no "scheme://", an empty path or host,
/// a file:// path that is not absolute (file://es1: "es1" is a host part) or is the root
/// directory, an unclosed '[', a port that is not 1..65535, or another scheme.
RendezvousUrl parse_rendezvous_url(const std::string& url);

/// The key (under the run's prefix) that the launcher sets with the first rank it saw die
/// (report_dead_rank, "rank 1 was killed by signal 9 (Killed) (seen by launch)"): every wait on
/// the run's store (gloo's connectFullMesh among them) then ends at once, throwing
/// gloo::IoException "a peer ended before it had set its rendezvous entries", instead of waiting
/// out its timeout for entries a dead peer never sets.
inline constexpr const char* kFirstDeathKey = "dead/first";

/// The run's keys: `store` is the namespaced store (what gloo's connectFullMesh and the
/// collectives' arrival keys use; it is also a KeyEraser, whose erase_key removes a key: its
/// file, or the Redis key), `has(key)` tells without blocking whether a key of it is set.
class RunStore {
 public:
  /// Opens the store of `url` with every key under "embedscope/<run_id>" (redis with a prefix:
  /// "<prefix>/embedscope/<run_id>"). Throws SpecError when the directory does not exist or is
  /// not a directory ("file:///x: /x does not exist"), the Redis server cannot be reached
  /// (hiredis's reason), or run_id is empty or holds a '/'. Safe to use from several threads
  /// (one lock around the store: a hiredis connection is not thread-safe).
  RunStore(const std::string& url, const std::string& run_id);
  ~RunStore();
  const std::string& url() const { return url_; }
  const std::string& run_id() const { return run_id_; }
  std::shared_ptr<gloo::rendezvous::Store> store() const { return prefixed_; }
  bool has(const std::string& key) const;
  /// Sets `key` (which must not be set: a FileStore refuses to overwrite one, gloo::EnforceNotMet).
  void set(const std::string& key, const std::string& value);
  /// The value of `key`, which must be set (call has() or wait_for() first: a FileStore's own
  /// get waits 30 s for a missing key).
  std::string get(const std::string& key);
  /// Removes every key this RunStore set (and has not removed since), except `keep`: their
  /// files (gloo FileStore keeps their list), or the Redis keys (DEL; their list kept here).
  /// Call only when no other rank reads them any more. Throws gloo::IoException when the Redis
  /// server cannot be reached.
  void remove_own_keys(const std::vector<std::string>& keep);
  /// Removes `keys` (set by any rank; a key not set is skipped). Throws as remove_own_keys.
  void remove_keys(const std::vector<std::string>& keys);
  /// Polls (every ms) until every key is set or `timeout` has passed; returns the indices into
  /// `keys` of those still missing (empty: all set).
  std::vector<size_t> wait_for(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) const;

 private:
  struct Base;
  std::string url_, run_id_, prefix_;
  std::shared_ptr<Base> base_;
  std::shared_ptr<gloo::rendezvous::Store> prefixed_;
};

}  // namespace embedscope::engine::launch

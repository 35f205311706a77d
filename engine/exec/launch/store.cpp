#include "store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <iterator>

#include <functional>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gloo/common/error.h>
#include <gloo/common/string.h>
#include <gloo/rendezvous/file_store.h>
#define HIREDIS_NESTED_INCLUDE 1
#include <gloo/rendezvous/redis_store.h>

#include "comm/gloo/key_eraser.h"
#include "embedscope/engine/workload/spec_error.h"

namespace embedscope::engine::launch {

RendezvousUrl parse_rendezvous_url(const std::string& url) {
  if (url.empty()) throw SpecError("--rendezvous: empty; give a store URL such as file:///shared/dir");
  const auto sep = url.find("://");
  if (sep == std::string::npos || sep == 0)
    throw SpecError(fmt::format("--rendezvous {}: not a URL; give file:///shared/dir or redis://host:port", url));
  RendezvousUrl u;
  u.scheme = url.substr(0, sep);
  const std::string rest = url.substr(sep + 3);
  if (u.scheme == "file") {
    u.path = rest;
    if (u.path.empty()) throw SpecError(fmt::format("--rendezvous {}: no directory after file://", url));
    // file://HOST/PATH: what follows file:// up to the next '/' is a host, not a directory; a
    // relative directory would name another store in every working directory and on every node
    if (u.path[0] != '/')
      throw SpecError(fmt::format("--rendezvous {}: a file:// URL needs an absolute directory, file:///abs/dir (three "
                                  "slashes; here '{}' is read as a host name)",
                                  url, u.path.substr(0, u.path.find('/'))));
    if (u.path.find_first_not_of('/') == std::string::npos)
      throw SpecError(fmt::format("--rendezvous {}: not the root directory: the store writes one file per key; give a "
                                  "directory of its own, e.g. file:///shared/es", url));
    return u;
  }
  if (u.scheme != "redis")
    throw SpecError(fmt::format("--rendezvous {}: the scheme '{}' is not supported; use file:///shared/dir (a "
                                "directory every rank sees) or redis://host:port[/prefix]", url, u.scheme));
  const auto slash = rest.find('/');
  const std::string hostport = rest.substr(0, slash);
  if (slash != std::string::npos) u.path = rest.substr(slash + 1);
  while (!u.path.empty() && u.path.back() == '/') u.path.pop_back();
  auto colon = hostport.rfind(':');
  if (!hostport.empty() && hostport[0] == '[') {  // an IPv6 address in brackets (RFC 3986): [::1]:6379
    const auto close = hostport.find(']');
    if (close == std::string::npos)
      throw SpecError(fmt::format("--rendezvous {}: no ']' after the IPv6 address; give redis://[::1]:6379", url));
    u.host = hostport.substr(1, close - 1);
    const std::string after = hostport.substr(close + 1);
    if (!after.empty() && after[0] != ':')
      throw SpecError(fmt::format("--rendezvous {}: '{}' after the IPv6 address; give redis://[ADDRESS]:PORT", url, after));
    colon = after.empty() ? std::string::npos : close + 1;
  } else {
    u.host = hostport.substr(0, colon);
  }
  if (u.host.empty()) throw SpecError(fmt::format("--rendezvous {}: no host after redis://", url));
  if (colon != std::string::npos) {
    const std::string port = hostport.substr(colon + 1);
    size_t used = 0;
    long p = 0;
    try {
      p = std::stol(port, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != port.size() || p < 1 || p > 65535)
      throw SpecError(fmt::format("--rendezvous {}: port '{}' is not 1..65535", url, port));
    u.port = static_cast<int>(p);
  }
  return u;
}

// The store under the prefix, with a non-blocking check and one lock (RedisStore's hiredis
// context is not thread-safe; FileStore's key list is not either), and the removal of keys: a
// key's entry is its file in a file store, the key itself in Redis.
struct RunStore::Base : gloo::rendezvous::Store {
  std::unique_ptr<gloo::rendezvous::Store> store;
  std::function<bool(const std::string&)> check;
  std::function<std::vector<std::string>()> own_entries;      // the entries of the keys set here
  std::function<std::string(const std::string&)> entry_of;    // a key's entry
  std::function<void(const std::string&)> remove_entry;       // removes an entry (not there: nothing)
  std::function<void(const std::string&)> forget;             // an entry removed: off the list of own_entries
  std::function<void(const std::string&)> remember;          // Redis: a key set here (FileStore keeps its own list)
  // the run's "dead/first" key (report_dead_rank): a peer's death, seen by its launcher, ends every wait
  std::string death_key;
  std::mutex mu;
  void set(const std::string& key, const std::vector<char>& data) override {
    std::lock_guard<std::mutex> lock(mu);
    store->set(key, data);
    if (remember) remember(key);
  }
  std::vector<char> get(const std::string& key) override {
    wait({key}, kDefaultTimeout);
    std::lock_guard<std::mutex> lock(mu);
    return store->get(key);
  }
  bool has(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu);
    return check(key);
  }
  // removes the key's entry, and drops it from the list of the keys set here (FileStore's list,
  // which would otherwise grow by one string a collective; the Redis keys' own)
  void erase(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu);
    const std::string entry = entry_of(key);
    remove_entry(entry);
    forget(entry);
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, kDefaultTimeout); }
  // polls, so that the lock is not held while waiting
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (int polls = 0;; ++polls) {
      bool all = true;
      for (const auto& k : keys) all = all && has(k);
      if (all) return;
      // a peer that died while this rank waits for its entries never sets them: the launcher that
      // saw it die says so in the store, and the wait ends now rather than at its timeout (30 s,
      // tester62c F4); checked every 20 polls (~20 ms), one more lookup
      if (!death_key.empty() && polls % 20 == 0 && has(death_key))
        throw ::gloo::IoException("a peer ended before it had set its rendezvous entries");
      if (std::chrono::steady_clock::now() >= deadline)
        // in words, without gloo's source file:line (twice with GLOO_THROW_IO_EXCEPTION + GLOO_ERROR_MSG)
        throw ::gloo::IoException(fmt::format(
            "waited {:.0f} s for the peers' rendezvous entries {} and they did not come (a peer that has not "
            "started, ended, or stopped)",
            std::chrono::duration<double>(timeout).count(), fmt::join(keys, ", ")));
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
};

namespace {
struct Files : gloo::rendezvous::FileStore {
  using FileStore::FileStore;
  bool has(const std::string& key) { return check({key}); }
  std::string path_of(const std::string& key) { return objectPath(key); }
  // drops `path` from the list of the files set here (getAllKeyFilePaths); the latest first:
  // a removed key is one of the last few set
  void forget(const std::string& path) {
    for (auto it = keyFilePaths_.rbegin(); it != keyFilePaths_.rend(); ++it)
      if (*it == path) {
        keyFilePaths_.erase(std::next(it).base());
        return;
      }
  }
};

// gloo's RedisStore, which has no delete, with DEL on its connection (hiredis, the library gloo's
// store is built on; its context is the protected member redis_).
struct Redis : gloo::rendezvous::RedisStore {
  using RedisStore::RedisStore;
  // DEL key (Redis: "Removes the specified keys. A key is ignored if it does not exist.");
  // throws gloo::IoException with hiredis's reason when the server cannot be reached
  void del(const std::string& key) {
    auto* reply = static_cast<redisReply*>(redisCommand(redis_, "DEL %b", key.data(), key.size()));
    if (!reply) GLOO_THROW_IO_EXCEPTION(GLOO_ERROR_MSG("Redis DEL ", key, ": ", redis_->errstr));
    freeReplyObject(reply);
  }
};

// The run's keys under "<prefix>/" (what gloo's PrefixStore does, with the same joined names).
class RunPrefixStore : public gloo::rendezvous::Store {
 public:
  RunPrefixStore(std::string prefix, std::shared_ptr<gloo::rendezvous::Store> base)
      : prefix_(std::move(prefix)), base_(std::move(base)) {}
  void set(const std::string& key, const std::vector<char>& data) override { base_->set(join(key), data); }
  std::vector<char> get(const std::string& key) override { return base_->get(join(key)); }
  void wait(const std::vector<std::string>& keys) override { wait(keys, kDefaultTimeout); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    std::vector<std::string> joined;
    for (const auto& k : keys) joined.push_back(join(k));
    base_->wait(joined, timeout);
  }

 protected:
  std::string join(const std::string& key) const { return prefix_ + "/" + key; }

 private:
  std::string prefix_;
  std::shared_ptr<gloo::rendezvous::Store> base_;  // kept alive by the rendezvous that holds this store
};

// The run's keys, which can be removed (KeyEraser: the collectives' arrival keys once no member
// reads them, comm/gloo/process_group.cpp): a file store's files, a Redis store's keys (DEL).
class ErasableRunPrefixStore : public RunPrefixStore, public KeyEraser {
 public:
  ErasableRunPrefixStore(std::string prefix, std::shared_ptr<gloo::rendezvous::Store> base,
                         std::function<void(const std::string&)> erase)
      : RunPrefixStore(std::move(prefix), std::move(base)), erase_(std::move(erase)) {}
  void erase_key(const std::string& key) noexcept override {
    try {
      erase_(join(key));
    } catch (const std::exception&) {  // the key stays, as every key did before
    }
  }

 private:
  std::function<void(const std::string&)> erase_;
};
}  // namespace

RunStore::RunStore(const std::string& url, const std::string& run_id) : url_(url), run_id_(run_id) {
  const RendezvousUrl u = parse_rendezvous_url(url);
  if (run_id.empty() || run_id.find('/') != std::string::npos)
    throw SpecError(fmt::format("--run-id '{}': must be non-empty and hold no '/'", run_id));
  prefix_ = "embedscope/" + run_id;
  base_ = std::make_shared<Base>();
  if (u.scheme == "file") {
    struct stat sb {};
    if (stat(u.path.c_str(), &sb) != 0)
      throw SpecError(fmt::format("--rendezvous {}: {} does not exist (create the directory, on a file system "
                                  "every rank sees)", url, u.path));
    if (!S_ISDIR(sb.st_mode)) throw SpecError(fmt::format("--rendezvous {}: {} is not a directory", url, u.path));
    auto files = std::make_unique<Files>(u.path);
    Files* f = files.get();
    base_->check = [f](const std::string& k) { return f->has(k); };
    base_->own_entries = [f] { return f->getAllKeyFilePaths(); };
    base_->entry_of = [f](const std::string& k) { return f->path_of(k); };
    base_->remove_entry = [](const std::string& path) { ::unlink(path.c_str()); };
    base_->forget = [f](const std::string& path) { f->forget(path); };
    base_->store = std::move(files);
  } else {
    if (!u.path.empty()) prefix_ = u.path + "/" + prefix_;
    std::unique_ptr<Redis> redis;
    try {
      redis = std::make_unique<Redis>(u.host, u.port);
    } catch (const std::exception& e) {
      throw SpecError(fmt::format("--rendezvous {}: cannot reach the Redis server at {}:{}: {}", url, u.host, u.port,
                                  e.what()));
    }
    auto* r = redis.get();
    // the keys set here, for remove_own_keys (gloo's RedisStore keeps no list)
    auto own = std::make_shared<std::set<std::string>>();
    base_->check = [r](const std::string& k) { return r->check({k}); };
    base_->own_entries = [own] { return std::vector<std::string>(own->begin(), own->end()); };
    base_->entry_of = [](const std::string& k) { return k; };
    base_->remove_entry = [r](const std::string& k) { r->del(k); };
    base_->forget = [own](const std::string& k) { own->erase(k); };
    base_->remember = [own](const std::string& k) { own->insert(k); };
    base_->store = std::move(redis);
  }
  base_->death_key = prefix_ + "/" + kFirstDeathKey;
  Base* base = base_.get();
  prefixed_ = std::make_shared<ErasableRunPrefixStore>(prefix_, base_, [base](const std::string& k) { base->erase(k); });
}

RunStore::~RunStore() = default;

bool RunStore::has(const std::string& key) const { return base_->has(prefix_ + "/" + key); }

void RunStore::set(const std::string& key, const std::string& value) {
  prefixed_->set(key, std::vector<char>(value.begin(), value.end()));
}

std::string RunStore::get(const std::string& key) {
  const auto v = prefixed_->get(key);
  return {v.begin(), v.end()};
}

void RunStore::remove_own_keys(const std::vector<std::string>& keep) {
  std::lock_guard<std::mutex> lock(base_->mu);
  std::vector<std::string> kept;
  for (const auto& k : keep) kept.push_back(base_->entry_of(prefix_ + "/" + k));
  for (const auto& e : base_->own_entries())
    if (std::find(kept.begin(), kept.end(), e) == kept.end()) {
      base_->remove_entry(e);
      base_->forget(e);
    }
}

void RunStore::remove_keys(const std::vector<std::string>& keys) {
  for (const auto& k : keys) base_->erase(prefix_ + "/" + k);
}

std::vector<size_t> RunStore::wait_for(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<size_t> missing;
  for (size_t i = 0; i < keys.size(); ++i) missing.push_back(i);
  for (;;) {
    std::vector<size_t> still;
    for (size_t i : missing)
      if (!has(keys[i])) still.push_back(i);
    missing = std::move(still);
    if (missing.empty() || std::chrono::steady_clock::now() >= deadline) return missing;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace embedscope::engine::launch

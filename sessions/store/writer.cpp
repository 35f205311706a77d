#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <cstring>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "embedscope/sessions/store/session.h"
#include "schema/schema.h"

namespace embedscope::sessions {

namespace {
constexpr size_t kOpsPerTransaction = 100000;  // commit within big batches: the dirty pages stay in cache
constexpr size_t kWakeOps = 50000;             // pending ops that wake the writer before the interval

std::string hostname() {
  char buf[256] = {};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}
template <class T>
std::string json_array(const std::vector<T>& v) {
  return fmt::format("[{}]", fmt::join(v, ","));
}
}  // namespace

void SessionWriter::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errmsg(db_);
    sqlite3_free(err);
    throw SessionError(fmt::format("{}: {}", path_, msg));
  }
}

SessionWriter::SessionWriter(const std::string& path, bool overwrite) : path_(path) {
  // SQLite's memory statistics take a global mutex on every allocation; nothing here reads
  // them. Only possible before SQLite initialises (later calls return SQLITE_MISUSE: harmless).
  static const int no_memstatus = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
  (void)no_memstatus;
  if (path.empty()) throw SessionError("the session file name is empty");
  struct stat sb {};
  if (lstat(path.c_str(), &sb) == 0) {
    if (!S_ISREG(sb.st_mode)) throw SessionError(fmt::format("{}: exists and is not a regular file", path));
    if (!overwrite)
      throw SessionError(fmt::format("{}: already exists; choose another name or allow overwriting it "
                                     "(embedscope run --force-overwrite)", path));
    std::remove(path.c_str());
  }
  for (const char* suffix : {"-wal", "-shm", "-journal"}) std::remove((path + suffix).c_str());
  // Claim the name atomically, so two runs never share a file.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) throw SessionError(fmt::format("{}: cannot create the session file: {}", path, std::strerror(errno)));
  ::close(fd);
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                      nullptr) != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw SessionError(fmt::format("{}: cannot create the session file: {}", path, msg));
  }
  try {
    // Large pages: fewer B-tree splits for the append-mostly ops table. NORMAL sync in WAL mode
    // never loses a commit to a killed process (only to a power cut).
    exec("PRAGMA page_size=65536; PRAGMA cache_size=-65536; PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;");
    exec("BEGIN");
    exec(detail::kSchemaSql);
    exec(fmt::format("PRAGMA user_version={}", kSchemaVersion).c_str());
    for (int i = 0; i < kNumCategories; ++i)
      exec(fmt::format("INSERT INTO categories VALUES ({}, '{}')", i, to_string(static_cast<OpCategory>(i))).c_str());
    exec("COMMIT");
  } catch (...) {
    sqlite3_close(db_);
    throw;
  }
  const char* sql[][2] = {
      {"meta", "INSERT OR REPLACE INTO metadata VALUES (?1, ?2)"},
      {"string", "INSERT INTO strings VALUES (?1, ?2)"},
      {"lane", "INSERT OR REPLACE INTO lanes (rank, lane, name, kind) VALUES (?1, ?2, ?3, ?4)"},
      {"lane_max", "UPDATE lanes SET max_duration_ns = max(max_duration_ns, ?3) WHERE rank = ?1 AND lane = ?2"},
      {"op", "INSERT INTO ops VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"},
      {"coll", "INSERT INTO collectives (rank, op, name, group_name, sequence, dtype, step, start_ns, end_ns, "
               "bytes_sent, bytes_received, peers, send_elements, recv_elements) VALUES "
               "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"},
      {"load", "INSERT OR REPLACE INTO load_counters VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"},
      {"step", "INSERT OR REPLACE INTO steps VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"},
      {"rank", "INSERT OR REPLACE INTO ranks VALUES (?1, ?2, ?3, ?4)"},
      {"memory", "INSERT OR REPLACE INTO memory_counters VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"},
      {"snapshot", "INSERT INTO memory_snapshots VALUES (?1, ?2, ?3, ?4, ?5)"},
      {"mem_event", "INSERT INTO memory_events (rank, time_ns, step, action, address, size, requested, tag) VALUES "
                    "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"},
      {"block", "INSERT OR REPLACE INTO memory_blocks VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"},
      {"id_hist", "INSERT OR REPLACE INTO id_histogram VALUES (?1, ?2, ?3, ?4, ?5, ?6)"},
  };
  for (auto& [key, text] : sql) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v3(db_, text, -1, SQLITE_PREPARE_PERSISTENT, &st, nullptr) != SQLITE_OK)
      throw SessionError(fmt::format("{}: {}", path_, sqlite3_errmsg(db_)));
    stmts_[key] = st;
  }
  set_metadata("format", "embedscope-session");
  set_metadata("ended", "running");
  set_metadata("writer_pid", std::to_string(getpid()));
  set_metadata("writer_host", hostname());
  set_metadata("sqlite_version", sqlite3_libversion());
  thread_ = std::thread([this] { loop(); });
}

SessionWriter::~SessionWriter() {
  try {
    close("crashed", "the session was not closed by the run");
  } catch (...) {
  }
  for (auto& [k, st] : stmts_) sqlite3_finalize(st);
  if (db_) sqlite3_close(db_);
}

int32_t SessionWriter::intern(const char* s) {
  if (auto it = by_pointer_.find(s); it != by_pointer_.end()) return it->second;
  auto [it, inserted] = by_text_.try_emplace(s, static_cast<int32_t>(by_text_.size()));
  if (inserted) pending_.new_strings.emplace_back(it->second, s);
  by_pointer_[s] = it->second;
  return it->second;
}

void SessionWriter::set_metadata(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mu_);
  pending_.metadata.emplace_back(key, value);
}

void SessionWriter::add_rank(const RankInfo& rank) {
  std::lock_guard<std::mutex> lock(mu_);
  pending_.ranks.push_back(rank);
}

void SessionWriter::add_lane(const LaneInfo& lane) {
  std::lock_guard<std::mutex> lock(mu_);
  pending_.lanes.push_back(lane);
}

void SessionWriter::add_ops(const std::vector<OpEvent>& ops) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& op : ops) {
      pending_.op_names.push_back(intern(op.name));
      pending_.ops.push_back(op);
    }
    ops_received_ += static_cast<int64_t>(ops.size());
    wake = pending_.ops.size() >= kWakeOps;  // a burst: start writing before the interval ends
  }
  if (wake) cv_.notify_all();
}

void SessionWriter::add_collective(CollectiveRecord c) {
  std::lock_guard<std::mutex> lock(mu_);
  pending_.collectives.push_back(std::move(c));
}

void SessionWriter::add_load(const LoadCounter& c) {
  std::lock_guard<std::mutex> lock(mu_);
  pending_.load.push_back(c);
}

void SessionWriter::add_step(const StepMetric& s) {
  std::lock_guard<std::mutex> lock(mu_);
  pending_.steps.push_back(s);
}

void SessionWriter::add_memory(const MemoryCounter& m) {
  std::lock_guard<std::mutex> lock(mu_);
  pending_.memory.push_back(m);
}

void SessionWriter::add_memory_events(const std::vector<MemoryEvent>& events) {
  std::lock_guard<std::mutex> lock(mu_);
  pending_.memory_events.insert(pending_.memory_events.end(), events.begin(), events.end());
}

void SessionWriter::add_id_histogram(const std::vector<IdHistogramBucket>& buckets) {
  std::lock_guard<std::mutex> lock(mu_);
  pending_.id_histogram.insert(pending_.id_histogram.end(), buckets.begin(), buckets.end());
}

void SessionWriter::add_snapshot(MemorySnapshot snapshot) {
  std::lock_guard<std::mutex> lock(mu_);
  snapshot.id = next_snapshot_id_++;
  pending_.snapshots.push_back(std::move(snapshot));
}

int64_t SessionWriter::ops_received() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ops_received_;
}

void SessionWriter::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait_for(lock, kCommitInterval, [&] { return stop_ || pending_.ops.size() >= kWakeOps; });
    Pending batch;
    std::swap(batch, pending_);
    const bool stopping = stop_;
    lock.unlock();
    if (!batch.empty()) {
      try {
        write(batch);
      } catch (const std::exception& e) {
        lock.lock();
        if (write_error_.empty()) write_error_ = e.what();
        lock.unlock();
      }
    }
    lock.lock();
    if (stopping && pending_.empty()) return;
  }
}

void SessionWriter::write(Pending& p) {
  auto bind_text = [](sqlite3_stmt* st, int i, const std::string& s) {
    sqlite3_bind_text(st, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
  };
  auto step = [&](sqlite3_stmt* st) {
    if (sqlite3_step(st) != SQLITE_DONE) throw SessionError(fmt::format("{}: {}", path_, sqlite3_errmsg(db_)));
    sqlite3_reset(st);
  };
  exec("BEGIN");
  for (auto& [id, text] : p.new_strings) {
    auto* st = stmts_["string"];
    sqlite3_bind_int(st, 1, id);
    bind_text(st, 2, text);
    step(st);
  }
  for (auto& [k, v] : p.metadata) {
    auto* st = stmts_["meta"];
    bind_text(st, 1, k);
    bind_text(st, 2, v);
    step(st);
  }
  for (auto& r : p.ranks) {
    auto* st = stmts_["rank"];
    sqlite3_bind_int(st, 1, r.rank);
    bind_text(st, 2, r.host);
    bind_text(st, 3, r.device);
    sqlite3_bind_int64(st, 4, r.memory_capacity_bytes);
    step(st);
  }
  for (auto& l : p.lanes) {
    auto* st = stmts_["lane"];
    sqlite3_bind_int(st, 1, l.rank);
    sqlite3_bind_int(st, 2, l.lane);
    bind_text(st, 3, l.name);
    bind_text(st, 4, l.kind);
    step(st);
  }
  std::map<std::pair<int32_t, int32_t>, int64_t> max_dur;
  std::pair<int32_t, int32_t> last_lane{-1, -1};
  int64_t* last_max = nullptr;
  auto bind_op = [&](sqlite3_stmt* st, int base, size_t i) {
    const OpEvent& o = p.ops[i];
    sqlite3_bind_int(st, base + 1, o.rank * 256 + static_cast<int>(o.lane));
    sqlite3_bind_int64(st, base + 2, o.start_ns);
    sqlite3_bind_int64(st, base + 3, next_op_id_++);
    sqlite3_bind_int64(st, base + 4, o.end_ns);
    sqlite3_bind_int(st, base + 5, static_cast<int>(o.category));
    sqlite3_bind_int(st, base + 6, p.op_names[i]);
    sqlite3_bind_int64(st, base + 7, o.step);
    sqlite3_bind_int64(st, base + 8, o.bytes);
    sqlite3_bind_int64(st, base + 9, static_cast<int64_t>(o.correlation));
    const std::pair<int32_t, int32_t> lane{o.rank, static_cast<int32_t>(o.lane)};
    if (lane != last_lane) {  // ops come in runs of one lane
      last_lane = lane;
      last_max = &max_dur[lane];
    }
    *last_max = std::max(*last_max, o.end_ns - o.start_ns);
  };
  auto* op_st = stmts_["op"];
  for (size_t i = 0; i < p.ops.size(); ++i) {
    bind_op(op_st, 0, i);
    step(op_st);
    if (i % kOpsPerTransaction == kOpsPerTransaction - 1) exec("COMMIT; BEGIN");  // keep the dirty set in cache
  }
  for (auto& [key, d] : max_dur) {
    auto* st = stmts_["lane_max"];
    sqlite3_bind_int(st, 1, key.first);
    sqlite3_bind_int(st, 2, key.second);
    sqlite3_bind_int64(st, 3, d);
    step(st);
  }
  for (auto& c : p.collectives) {
    auto* st = stmts_["coll"];
    sqlite3_bind_int(st, 1, c.rank);
    bind_text(st, 2, c.op);
    bind_text(st, 3, c.name);
    bind_text(st, 4, c.group);
    sqlite3_bind_int64(st, 5, static_cast<int64_t>(c.sequence));
    bind_text(st, 6, c.dtype);
    sqlite3_bind_int64(st, 7, c.step);
    sqlite3_bind_int64(st, 8, c.start_ns);
    sqlite3_bind_int64(st, 9, c.end_ns);
    sqlite3_bind_int64(st, 10, c.bytes_sent);
    sqlite3_bind_int64(st, 11, c.bytes_received);
    bind_text(st, 12, json_array(c.peers));
    bind_text(st, 13, json_array(c.send_elements));
    bind_text(st, 14, json_array(c.recv_elements));
    step(st);
  }
  for (auto& c : p.load) {
    auto* st = stmts_["load"];
    sqlite3_bind_int64(st, 1, c.step);
    sqlite3_bind_int(st, 2, c.rank);
    sqlite3_bind_int(st, 3, c.table);
    sqlite3_bind_int(st, 4, c.shard);
    sqlite3_bind_int64(st, 5, c.ids);
    sqlite3_bind_int64(st, 6, c.unique_ids);
    sqlite3_bind_int64(st, 7, c.bytes_in);
    sqlite3_bind_int64(st, 8, c.bytes_out);
    sqlite3_bind_int64(st, 9, c.lookup_ns);
    step(st);
  }
  for (auto& s : p.steps) {
    auto* st = stmts_["step"];
    sqlite3_bind_int64(st, 1, s.step);
    sqlite3_bind_int(st, 2, s.rank);
    sqlite3_bind_int64(st, 3, s.start_ns);
    sqlite3_bind_int64(st, 4, s.end_ns);
    sqlite3_bind_double(st, 5, s.loss);
    sqlite3_bind_int64(st, 6, s.memory_in_use_bytes);
    sqlite3_bind_int64(st, 7, s.memory_peak_bytes);
    step(st);
  }
  for (auto& m : p.memory) {
    auto* st = stmts_["memory"];
    sqlite3_bind_int64(st, 1, m.step);
    sqlite3_bind_int(st, 2, m.rank);
    sqlite3_bind_int64(st, 3, m.allocated);
    sqlite3_bind_int64(st, 4, m.reserved);
    sqlite3_bind_int64(st, 5, m.peak_allocated);
    sqlite3_bind_int64(st, 6, m.peak_reserved);
    sqlite3_bind_int64(st, 7, m.largest_free_block);
    sqlite3_bind_int64(st, 8, m.rounding_loss);
    sqlite3_bind_int64(st, 9, m.segments);
    sqlite3_bind_double(st, 10, m.external_fragmentation);
    sqlite3_bind_double(st, 11, m.memviz_fragmentation);
    step(st);
  }
  for (auto& e : p.memory_events) {
    auto* st = stmts_["mem_event"];
    sqlite3_bind_int(st, 1, e.rank);
    sqlite3_bind_int64(st, 2, e.time_ns);
    sqlite3_bind_int64(st, 3, e.step);
    bind_text(st, 4, e.action);
    sqlite3_bind_int64(st, 5, e.address);
    sqlite3_bind_int64(st, 6, e.size);
    sqlite3_bind_int64(st, 7, e.requested);
    bind_text(st, 8, e.tag);
    step(st);
  }
  for (auto& sn : p.snapshots) {
    auto* st = stmts_["snapshot"];
    sqlite3_bind_int64(st, 1, sn.id);
    sqlite3_bind_int(st, 2, sn.rank);
    sqlite3_bind_int64(st, 3, sn.step);
    sqlite3_bind_int64(st, 4, sn.time_ns);
    bind_text(st, 5, sn.reason);
    step(st);
    for (auto& b : sn.blocks) {
      auto* bst = stmts_["block"];
      sqlite3_bind_int64(bst, 1, sn.id);
      sqlite3_bind_int64(bst, 2, b.address);
      sqlite3_bind_int64(bst, 3, b.segment_address);
      sqlite3_bind_int64(bst, 4, b.segment_size);
      sqlite3_bind_int64(bst, 5, b.size);
      sqlite3_bind_int64(bst, 6, b.requested);
      sqlite3_bind_int(bst, 7, b.allocated ? 1 : 0);
      bind_text(bst, 8, b.tag);
      step(bst);
    }
  }
  for (auto& h : p.id_histogram) {
    auto* st = stmts_["id_hist"];
    sqlite3_bind_int(st, 1, h.rank);
    sqlite3_bind_int(st, 2, h.table);
    sqlite3_bind_int(st, 3, h.bucket);
    sqlite3_bind_int64(st, 4, h.row_begin);
    sqlite3_bind_int64(st, 5, h.row_end);
    sqlite3_bind_int64(st, 6, h.ids);
    step(st);
  }
  exec("COMMIT");
}

void SessionWriter::close(const std::string& ended, const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    closed_ = true;
    pending_.metadata.emplace_back("ended", ended);
    pending_.metadata.emplace_back("end_message", message);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // One self-contained file from here on.
  exec("PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode=DELETE;");
  if (!write_error_.empty()) throw SessionError(write_error_);
}

}  // namespace embedscope::sessions

#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embedscope/sessions/store/session.h"

namespace embedscope::sessions {

namespace {

struct Stmt {
  sqlite3_stmt* st = nullptr;
  ~Stmt() { sqlite3_finalize(st); }
};

std::string this_host() {
  char buf[256] = {};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

// Column text, "" for NULL (a damaged or hand-edited file must not crash the reader).
std::string col_text(sqlite3_stmt* st, int i) {
  const unsigned char* t = sqlite3_column_text(st, i);
  return t ? reinterpret_cast<const char*>(t) : "";
}

template <class T>
std::vector<T> parse_array(const unsigned char* text) {
  std::vector<T> out;
  if (!text) return out;
  for (const auto& v : nlohmann::json::parse(reinterpret_cast<const char*>(text))) out.push_back(v.get<T>());
  return out;
}

}  // namespace

void SessionReader::check(int rc, const char* what) const {
  if (rc == SQLITE_OK || rc == SQLITE_ROW || rc == SQLITE_DONE) return;
  const int primary = rc & 0xff;
  const std::string detail = sqlite3_errmsg(db_);
  if (primary == SQLITE_NOTADB)
    throw SessionError(fmt::format("{}: not an SQLite database ({})", path_, detail));
  if (primary == SQLITE_CORRUPT)
    throw SessionError(fmt::format("{}: the session file is truncated or corrupt ({}, while {})", path_, detail, what));
  throw SessionError(fmt::format("{}: {} while {}", path_, detail, what));
}

SessionReader::SessionReader(const std::string& path) : path_(path) {
  struct stat sb {};
  if (path.empty()) throw SessionError("the session file name is empty");
  if (stat(path.c_str(), &sb) != 0)
    throw SessionError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  if (S_ISDIR(sb.st_mode)) throw SessionError(fmt::format("{}: is a directory, not a session file", path));
  if (sb.st_size == 0) throw SessionError(fmt::format("{}: the file is empty (not a session)", path));
  const std::string uri = "file:" + path + "?mode=ro";
  if (sqlite3_open_v2(uri.c_str(), &db_, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, nullptr) !=
      SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw SessionError(fmt::format("{}: cannot open: {}", path, msg));
  }
  try {
    {
      Stmt s;
      check(sqlite3_prepare_v2(db_, "PRAGMA user_version", -1, &s.st, nullptr), "reading the schema version");
      check(sqlite3_step(s.st), "reading the schema version");
      version_ = sqlite3_column_int(s.st, 0);
    }
    {
      Stmt s;
      check(sqlite3_prepare_v2(db_, "SELECT count(*) FROM sqlite_schema WHERE name = 'metadata'", -1, &s.st, nullptr),
            "reading the schema");
      check(sqlite3_step(s.st), "reading the schema");
      if (sqlite3_column_int(s.st, 0) == 0)
        throw SessionError(fmt::format("{}: an SQLite database, but not an Embedscope session (no metadata table; a copy "
                                       "of a running or killed session needs its -wal file beside it)", path));
    }
    if (version_ > kSchemaVersion)
      throw SessionError(fmt::format(
          "{}: written by a newer Embedscope (session schema version {}; this build reads up to {}); update Embedscope",
          path, version_, kSchemaVersion));
    if (version_ < 1) throw SessionError(fmt::format("{}: not an Embedscope session (schema version {})", path, version_));
    {
      Stmt s;
      check(sqlite3_prepare_v2(db_, "SELECT key, value FROM metadata", -1, &s.st, nullptr), "reading metadata");
      int rc;
      while ((rc = sqlite3_step(s.st)) == SQLITE_ROW)
        meta_[col_text(s.st, 0)] = col_text(s.st, 1);
      check(rc, "reading metadata");
    }
    auto has_table = [&](const char* name) {
      Stmt s;
      check(sqlite3_prepare_v2(db_, "SELECT count(*) FROM sqlite_schema WHERE name = ?1", -1, &s.st, nullptr),
            "reading the schema");
      sqlite3_bind_text(s.st, 1, name, -1, SQLITE_STATIC);
      check(sqlite3_step(s.st), "reading the schema");
      return sqlite3_column_int(s.st, 0) > 0;
    };
    has_memory_tables_ = has_table("memory_counters");
    has_id_histogram_ = has_table("id_histogram");
    if (meta_.empty())
      throw SessionError(fmt::format("{}: the session holds no metadata yet: its run was killed before the first commit",
                                     path));
    if (meta("format") != "embedscope-session")
      throw SessionError(fmt::format("{}: not an Embedscope session (metadata 'format' is '{}')", path, meta("format")));
    {
      Stmt s;
      check(sqlite3_prepare_v2(db_, "SELECT id, value FROM strings ORDER BY id", -1, &s.st, nullptr), "reading strings");
      int rc;
      while ((rc = sqlite3_step(s.st)) == SQLITE_ROW) {  // ids are dense: 0, 1, 2, ...
        const int64_t id = sqlite3_column_int64(s.st, 0);
        if (id != static_cast<int64_t>(strings_.size()))
          throw SessionError(fmt::format("{}: the session file is corrupt (strings id {} where {} was expected)", path,
                                         id, strings_.size()));
        strings_.push_back(col_text(s.st, 1));
      }
      check(rc, "reading strings");
    }
    {
      Stmt s;
      check(sqlite3_prepare_v2(db_, "SELECT rank, lane, max_duration_ns FROM lanes", -1, &s.st, nullptr), "reading lanes");
      int rc;
      while ((rc = sqlite3_step(s.st)) == SQLITE_ROW)
        max_duration_[{sqlite3_column_int(s.st, 0), sqlite3_column_int(s.st, 1)}] = sqlite3_column_int64(s.st, 2);
      check(rc, "reading lanes");
    }
  } catch (...) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw;
  }
}

SessionReader::~SessionReader() { sqlite3_close(db_); }

std::string SessionReader::meta(const std::string& key, const std::string& fallback) const {
  auto it = meta_.find(key);
  return it == meta_.end() ? fallback : it->second;
}

std::string SessionReader::status() const {
  const std::string ended = meta("ended", "running");
  if (ended != "running") return ended;
  const std::string pid = meta("writer_pid");
  if (!pid.empty() && meta("writer_host") == this_host()) {
    const long p = std::strtol(pid.c_str(), nullptr, 10);
    if (p > 0 && kill(static_cast<pid_t>(p), 0) != 0 && errno == ESRCH) return "crashed";
  }
  return "running";
}

const std::string& SessionReader::name(int32_t id) const {
  static const std::string unknown = "?";
  return id >= 0 && static_cast<size_t>(id) < strings_.size() ? strings_[static_cast<size_t>(id)] : unknown;
}

template <class Row>
void SessionReader::each_row(const std::string& sql, const char* what, Row&& row,
                             const std::function<void(sqlite3_stmt*)>& bind) const {
  Stmt s;
  check(sqlite3_prepare_v2(db_, sql.c_str(), -1, &s.st, nullptr), what);
  if (bind) bind(s.st);
  int rc;
  while ((rc = sqlite3_step(s.st)) == SQLITE_ROW) row(s.st);
  check(rc, what);
}

std::vector<RankInfo> SessionReader::ranks() const {
  std::vector<RankInfo> out;
  each_row("SELECT rank, host, device, memory_capacity_bytes FROM ranks ORDER BY rank", "reading ranks",
           [&](sqlite3_stmt* st) {
             out.push_back({sqlite3_column_int(st, 0), col_text(st, 1), col_text(st, 2), sqlite3_column_int64(st, 3)});
           });
  return out;
}

std::vector<LaneInfo> SessionReader::lanes() const {
  std::vector<LaneInfo> out;
  each_row("SELECT rank, lane, name, kind FROM lanes ORDER BY rank, lane", "reading lanes", [&](sqlite3_stmt* st) {
    out.push_back({sqlite3_column_int(st, 0), sqlite3_column_int(st, 1), col_text(st, 2), col_text(st, 3)});
  });
  return out;
}

namespace {
constexpr const char* kOpColumns =
    "lane_key >> 8, lane_key & 255, category, name_id, step, start_ns, end_ns, bytes, correlation";
OpRecord op_from(sqlite3_stmt* st, const std::string& path) {
  OpRecord o;
  o.rank = sqlite3_column_int(st, 0);
  o.lane = sqlite3_column_int(st, 1);
  const int cat = sqlite3_column_int(st, 2);
  if (cat < 0 || cat >= kNumCategories)
    throw SessionError(fmt::format("{}: the session file is corrupt (an op of rank {} has category {})", path, o.rank, cat));
  o.category = static_cast<OpCategory>(cat);
  o.name_id = sqlite3_column_int(st, 3);
  o.step = sqlite3_column_int64(st, 4);
  o.start_ns = sqlite3_column_int64(st, 5);
  o.end_ns = sqlite3_column_int64(st, 6);
  o.bytes = sqlite3_column_int64(st, 7);
  o.correlation = static_cast<uint64_t>(sqlite3_column_int64(st, 8));
  return o;
}
}  // namespace

std::vector<OpRecord> SessionReader::ops(int32_t rank, int32_t lane, int64_t t0_ns, int64_t t1_ns) const {
  // An op overlapping [t0, t1) starts in [t0 - longest op of the lane, t1): a range scan of
  // the clustered (lane_key, start_ns) key.
  int64_t longest = 0;
  if (auto it = max_duration_.find({rank, lane}); it != max_duration_.end()) longest = it->second;
  std::vector<OpRecord> out;
  each_row(
      fmt::format("SELECT {} FROM ops WHERE lane_key = ?1 AND start_ns >= ?2 AND start_ns < ?3 AND end_ns > ?4 "
                  "ORDER BY start_ns",
                  kOpColumns),
      "querying ops", [&](sqlite3_stmt* st) { out.push_back(op_from(st, path_)); },
      [&](sqlite3_stmt* st) {
        sqlite3_bind_int(st, 1, rank * 256 + lane);
        sqlite3_bind_int64(st, 2, t0_ns - longest);
        sqlite3_bind_int64(st, 3, t1_ns);
        sqlite3_bind_int64(st, 4, t0_ns);
      });
  return out;
}

std::vector<OpRecord> SessionReader::all_ops() const {
  std::vector<OpRecord> out;
  each_row(fmt::format("SELECT {} FROM ops ORDER BY lane_key, start_ns", kOpColumns), "reading ops",
           [&](sqlite3_stmt* st) { out.push_back(op_from(st, path_)); });
  return out;
}

int64_t SessionReader::op_count() const {
  int64_t n = 0;
  each_row("SELECT count(*) FROM ops", "counting ops", [&](sqlite3_stmt* st) { n = sqlite3_column_int64(st, 0); });
  return n;
}

std::vector<StepMetric> SessionReader::steps() const {
  std::vector<StepMetric> out;
  each_row("SELECT step, rank, start_ns, end_ns, loss, memory_in_use_bytes, memory_peak_bytes FROM steps "
           "ORDER BY step, rank",
           "reading steps", [&](sqlite3_stmt* st) {
             out.push_back({sqlite3_column_int64(st, 0), sqlite3_column_int(st, 1), sqlite3_column_int64(st, 2),
                            sqlite3_column_int64(st, 3), sqlite3_column_double(st, 4), sqlite3_column_int64(st, 5),
                            sqlite3_column_int64(st, 6)});
           });
  return out;
}

std::vector<LoadCounter> SessionReader::load() const {
  std::vector<LoadCounter> out;
  each_row("SELECT step, rank, table_index, shard, ids, unique_ids, bytes_in, bytes_out, lookup_ns "
           "FROM load_counters ORDER BY step, rank, table_index, shard",
           "reading load counters", [&](sqlite3_stmt* st) {
             out.push_back({sqlite3_column_int64(st, 0), sqlite3_column_int(st, 1), sqlite3_column_int(st, 2),
                            sqlite3_column_int(st, 3), sqlite3_column_int64(st, 4), sqlite3_column_int64(st, 5),
                            sqlite3_column_int64(st, 6), sqlite3_column_int64(st, 7), sqlite3_column_int64(st, 8)});
           });
  return out;
}

std::vector<CollectiveRecord> SessionReader::collectives() const {
  std::vector<CollectiveRecord> out;
  each_row("SELECT rank, op, name, group_name, sequence, dtype, step, start_ns, end_ns, bytes_sent, "
           "bytes_received, peers, send_elements, recv_elements FROM collectives ORDER BY id",
           "reading collectives", [&](sqlite3_stmt* st) {
             CollectiveRecord c;
             c.rank = sqlite3_column_int(st, 0);
             c.op = col_text(st, 1);
             c.name = col_text(st, 2);
             c.group = col_text(st, 3);
             c.sequence = static_cast<uint64_t>(sqlite3_column_int64(st, 4));
             c.dtype = col_text(st, 5);
             c.step = sqlite3_column_int64(st, 6);
             c.start_ns = sqlite3_column_int64(st, 7);
             c.end_ns = sqlite3_column_int64(st, 8);
             c.bytes_sent = sqlite3_column_int64(st, 9);
             c.bytes_received = sqlite3_column_int64(st, 10);
             try {
               c.peers = parse_array<int32_t>(sqlite3_column_text(st, 11));
               c.send_elements = parse_array<int64_t>(sqlite3_column_text(st, 12));
               c.recv_elements = parse_array<int64_t>(sqlite3_column_text(st, 13));
             } catch (const std::exception& e) {
               throw SessionError(
                   fmt::format("{}: collectives row {} {}: bad split list: {}", path_, c.group, c.sequence, e.what()));
             }
             out.push_back(std::move(c));
           });
  return out;
}

std::vector<MemoryCounter> SessionReader::memory_counters() const {
  std::vector<MemoryCounter> out;
  if (!has_memory_tables_) return out;
  each_row("SELECT step, rank, allocated_bytes, reserved_bytes, peak_allocated_bytes, peak_reserved_bytes, "
           "largest_free_block_bytes, rounding_loss_bytes, segments, external_fragmentation, "
           "memviz_fragmentation FROM memory_counters ORDER BY step, rank",
           "reading memory counters", [&](sqlite3_stmt* st) {
             MemoryCounter m;
             m.step = sqlite3_column_int64(st, 0);
             m.rank = sqlite3_column_int(st, 1);
             m.allocated = sqlite3_column_int64(st, 2);
             m.reserved = sqlite3_column_int64(st, 3);
             m.peak_allocated = sqlite3_column_int64(st, 4);
             m.peak_reserved = sqlite3_column_int64(st, 5);
             m.largest_free_block = sqlite3_column_int64(st, 6);
             m.rounding_loss = sqlite3_column_int64(st, 7);
             m.segments = sqlite3_column_int64(st, 8);
             m.external_fragmentation = sqlite3_column_double(st, 9);
             m.memviz_fragmentation = sqlite3_column_double(st, 10);
             out.push_back(m);
           });
  return out;
}

std::vector<MemoryEvent> SessionReader::memory_events() const {
  std::vector<MemoryEvent> out;
  if (!has_memory_tables_) return out;
  each_row("SELECT rank, time_ns, step, action, address, size, requested, tag FROM memory_events ORDER BY id",
           "reading memory events", [&](sqlite3_stmt* st) {
             out.push_back({sqlite3_column_int(st, 0), sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 2),
                            col_text(st, 3), sqlite3_column_int64(st, 4), sqlite3_column_int64(st, 5),
                            sqlite3_column_int64(st, 6), col_text(st, 7)});
           });
  return out;
}

std::vector<MemorySnapshot> SessionReader::memory_snapshots() const {
  std::vector<MemorySnapshot> out;
  if (!has_memory_tables_) return out;
  each_row("SELECT id, rank, step, time_ns, reason FROM memory_snapshots ORDER BY id", "reading memory snapshots",
           [&](sqlite3_stmt* st) {
             out.push_back({sqlite3_column_int64(st, 0), sqlite3_column_int(st, 1), sqlite3_column_int64(st, 2),
                            sqlite3_column_int64(st, 3), col_text(st, 4), {}});
           });
  return out;
}

std::vector<MemoryBlockRecord> SessionReader::memory_blocks(int64_t snapshot_id) const {
  std::vector<MemoryBlockRecord> out;
  if (!has_memory_tables_) return out;
  each_row(
      "SELECT segment_address, segment_size, address, size, requested, allocated, tag FROM memory_blocks "
      "WHERE snapshot_id = ?1 ORDER BY address",
      "reading memory blocks",
      [&](sqlite3_stmt* st) {
        out.push_back({sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 2),
                       sqlite3_column_int64(st, 3), sqlite3_column_int64(st, 4), sqlite3_column_int(st, 5) != 0,
                       col_text(st, 6)});
      },
      [&](sqlite3_stmt* st) { sqlite3_bind_int64(st, 1, snapshot_id); });
  return out;
}

std::vector<IdHistogramBucket> SessionReader::id_histogram() const {
  std::vector<IdHistogramBucket> out;
  if (!has_id_histogram_) return out;
  each_row("SELECT rank, table_index, bucket, row_begin, row_end, ids FROM id_histogram ORDER BY table_index, bucket, rank",
           "reading the id histogram", [&](sqlite3_stmt* st) {
             out.push_back({sqlite3_column_int(st, 0), sqlite3_column_int(st, 1), sqlite3_column_int(st, 2),
                            sqlite3_column_int64(st, 3), sqlite3_column_int64(st, 4), sqlite3_column_int64(st, 5)});
           });
  return out;
}

}  // namespace embedscope::sessions

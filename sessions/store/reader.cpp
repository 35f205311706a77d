#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>

#include <fmt/format.h>

#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "schema/definitions.h"
#include "store/op_blocks.h"
#include "store/op_scan.h"
#include "store/plan_json.h"
#include "store/read_only_open.h"
#include "store/writer_lock.h"

namespace embedscope::sessions {

namespace sd = schema::detail;

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

std::string col_text(sqlite3_stmt* st, int i) {
  std::string s;
  sd::read_value(st, i, s);
  return s;
}

}  // namespace

struct SessionReader::Impl {
  const std::string& path;
  sqlite3* db = nullptr;
  int version = 0;
  int64_t world_size = -1;  // metadata world_size (-1: absent): the bound of every rank id read
  std::map<std::pair<int32_t, int32_t>, int64_t> max_duration;  // per lane

  explicit Impl(const std::string& p) : path(p) {}
  ~Impl() { sqlite3_close(db); }

  void check(int rc, const char* what) const {
    if (rc == SQLITE_OK || rc == SQLITE_ROW || rc == SQLITE_DONE) return;
    const int primary = rc & 0xff;
    const std::string detail = sqlite3_errmsg(db);
    if (primary == SQLITE_NOTADB) throw SessionError(fmt::format("{}: not an SQLite database ({})", path, detail));
    if (primary == SQLITE_CORRUPT)
      throw SessionError(fmt::format("{}: the session file is truncated or corrupt ({}, while {})", path, detail, what));
    throw SessionError(fmt::format("{}: {} while {}", path, detail, what));
  }

  /// Runs `sql` (after `bind`), calling `row` for each result row; errors name the file.
  template <class Row>
  void each_row(const std::string& sql, const char* what, Row&& row,
                const std::function<void(sqlite3_stmt*)>& bind = {}) const {
    Stmt s;
    check(sqlite3_prepare_v2(db, sql.c_str(), -1, &s.st, nullptr), what);
    if (bind) bind(s.st);
    int rc;
    while ((rc = sqlite3_step(s.st)) == SQLITE_ROW) {
      try {
        row(s.st);
      } catch (const sd::RowError& e) {
        throw SessionError(fmt::format("{}: {}", path, e.what()));
      }
    }
    check(rc, what);
  }

  /// Every row of a record table, `tail` appended to its SELECT (which names the columns the
  /// file's version has). A value the table's rules refuse (text in an integer column, negative
  /// bytes, a rank outside the world, a step ending before it starts: definitions.h ValueRule)
  /// throws SessionError "PATH: table T, row (...), column C: ...: the session file is damaged or
  /// was edited".
  template <class R>
  std::vector<R> records(const sd::RecordTable<R>& t, const std::string& tail, const char* what,
                         const std::function<void(sqlite3_stmt*)>& bind = {}) const {
    std::vector<R> out;
    sd::ReadContext ctx{world_size, tail.c_str(), 0};
    each_row(
        t.select_sql(version) + " " + tail, what,
        [&](sqlite3_stmt* st) {
          R r{};
          ctx.row = static_cast<int64_t>(out.size());
          t.read(st, version, r, ctx);
          out.push_back(std::move(r));
        },
        bind);
    return out;
  }

  bool has_table(const char* name) const {
    Stmt s;
    check(sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_schema WHERE name = ?1", -1, &s.st, nullptr),
          "reading the schema");
    sqlite3_bind_text(s.st, 1, name, -1, SQLITE_STATIC);
    check(sqlite3_step(s.st), "reading the schema");
    return sqlite3_column_int(s.st, 0) > 0;
  }
};

SessionReader::SessionReader(const std::string& path) : impl_(std::make_unique<Impl>(path_)), path_(path) {
  struct stat sb {};
  if (path.empty()) throw SessionError("the session file name is empty");
  if (stat(path.c_str(), &sb) != 0)
    throw SessionError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  if (S_ISDIR(sb.st_mode)) throw SessionError(fmt::format("{}: is a directory, not a session file", path));
  // the system's reason (was SQLite's "unable to open database file" for a file without read permission)
  if (::access(path.c_str(), R_OK) != 0) throw SessionError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  if (sb.st_size == 0) {
    if (const std::string who = detail::live_writer(path); !who.empty())
      throw SessionError(fmt::format("{}: nothing committed yet: {} and has just started; try again in a moment",
                                     path, who));
    // no live writer now: empty for good, unless a writer filled and closed it since the stat
    if (stat(path.c_str(), &sb) != 0 || sb.st_size == 0)
      throw SessionError(fmt::format("{}: the file is empty (not a session)", path));
  }
  detail::refuse_cut_short(path);  // read_only_open.h (tester54 F6: read as rows of NULLs)
  // before this reader has a connection to the file: the probe opens and closes a descriptor of
  // it, and a close drops every POSIX lock this process holds on the file (SQLite's included)
  writer_lock_ = static_cast<int>(detail::probe_writer_lock(path));
  Impl& m = *impl_;
  // A reader never writes and never makes the writer fail (no checkpoint on close, a wait while
  // the writer holds a lock for a moment), and reads a session whose -shm cannot be made (a full
  // disk): read_only_open.h.
  // the companions SQLite may create for a WAL-mode file copied without them (F10: an empty -wal
  // and a -shm left beside a copy that is no session, whose message asks for the -wal)
  const bool had_wal = std::filesystem::exists(path + "-wal"), had_shm = std::filesystem::exists(path + "-shm");
  m.db = detail::open_session_read_only(path, 10000);
  auto read_version = [&] {
    Stmt s;
    m.check(sqlite3_prepare_v2(m.db, "PRAGMA user_version", -1, &s.st, nullptr), "reading the schema version");
    m.check(sqlite3_step(s.st), "reading the schema version");
    version_ = m.version = sqlite3_column_int(s.st, 0);
  };
  auto read_metadata = [&] {
    m.each_row("SELECT key, value FROM metadata", "reading metadata",
               [&](sqlite3_stmt* st) { meta_[col_text(st, 0)] = col_text(st, 1); });
  };
  read_version();
  // A run that has only just claimed the file has committed nothing yet: say so. Where its
  // writer has gone meanwhile, what it committed since is read again (each query sees the
  // latest commit).
  auto just_started = [&] {
    if (const std::string who = detail::live_writer(path); !who.empty())
      throw SessionError(fmt::format("{}: nothing committed yet: {} and has just started; try again in a moment",
                                     path, who));
  };
  if (!m.has_table("metadata")) just_started();
  if (!m.has_table("metadata")) {
    sqlite3_close(m.db);  // before its companions go: no descriptor of them stays open
    m.db = nullptr;
    std::error_code ec;
    if (!had_wal && std::filesystem::file_size(path + "-wal", ec) == 0 && !ec) {
      std::filesystem::remove(path + "-wal", ec);
      if (!had_shm) std::filesystem::remove(path + "-shm", ec);
    }
    throw SessionError(fmt::format("{}: an SQLite database, but not an Embedscope session (no metadata table; a copy "
                                   "of a running or killed session needs its -wal file beside it)", path));
  }
  if (version_ > kSchemaVersion)
    throw SessionError(fmt::format(
        "{}: written by a newer Embedscope (session schema version {}; this build reads up to {}); update Embedscope",
        path, version_, kSchemaVersion));
  if (version_ < 1) {  // the schema was committed after the version was read
    just_started();
    read_version();
  }
  if (version_ < 1) throw SessionError(fmt::format("{}: not an Embedscope session (schema version {})", path, version_));
  read_metadata();
  has_memory_tables_ = m.has_table("memory_counters");
  has_id_histogram_ = m.has_table("id_histogram");
  has_shards_ = m.has_table("shards");
  has_import_stats_ = m.has_table("import_stats");
  has_rebalances_ = m.has_table("rebalances") && m.has_table("plan_changes");
  has_memory_stacks_ = m.has_table("memory_stacks");
  has_flight_recorder_ = m.has_table("flight_recorder");
  if (m.has_table("op_blocks"))  // complete once the writer closed: its marker row (lane_key -1) is there
    m.each_row("SELECT EXISTS (SELECT 1 FROM op_blocks WHERE lane_key = -1)", "reading op_blocks",
               [&](sqlite3_stmt* st) { has_op_blocks_ = sqlite3_column_int(st, 0) != 0; });
  if (meta_.empty()) {
    just_started();
    read_metadata();
  }
  if (meta_.empty())
    throw SessionError(fmt::format("{}: the session holds no metadata yet: its run was killed before the first commit",
                                   path));
  if (meta(meta::kFormat) != "embedscope-session")
    throw SessionError(
        fmt::format("{}: not an Embedscope session (metadata 'format' is '{}')", path, meta(meta::kFormat)));
  if (const auto it = meta_.find(meta::kWorldSize); it != meta_.end()) {
    // every per-rank list is sized by it: a hand-edited 99999999999 took 23.5 GB (tester54 F3)
    const std::string& v = it->second;
    int64_t w = -1;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), w);
    if (v.empty() || ec != std::errc() || end != v.data() + v.size() || w < 0 || w > meta::kMaxWorldSize)
      throw SessionError(fmt::format("{}: metadata world_size '{}' is not a whole number in [0, {}]: the session file is "
                                     "damaged or was edited",
                                     path, v.size() > 40 ? v.substr(0, 40) + "..." : v, meta::kMaxWorldSize));
    m.world_size = w;
  }
  m.each_row("SELECT id, value FROM strings ORDER BY id", "reading strings", [&](sqlite3_stmt* st) {
    const int64_t id = sqlite3_column_int64(st, 0);  // ids are dense: 0, 1, 2, ...
    if (id != static_cast<int64_t>(strings_.size()))
      throw SessionError(fmt::format("{}: the session file is corrupt (strings id {} where {} was expected)", path, id,
                                     strings_.size()));
    strings_.push_back(col_text(st, 1));
  });
  m.each_row("SELECT rank, lane, max_duration_ns FROM lanes", "reading lanes", [&](sqlite3_stmt* st) {
    m.max_duration[{sqlite3_column_int(st, 0), sqlite3_column_int(st, 1)}] = sqlite3_column_int64(st, 2);
  });
}

SessionReader::~SessionReader() = default;

std::string SessionReader::meta(const std::string& key, const std::string& fallback) const {
  auto it = meta_.find(key);
  return it == meta_.end() ? fallback : it->second;
}

std::string SessionReader::status() const {
  const std::string ended = meta(meta::kEnded, "running");
  if (ended != "running") return ended;
  const std::string pid = meta(meta::kWriterPid);
  if (!pid.empty() && meta(meta::kWriterHost) == this_host()) {
    // the writer holds its lock until it has closed the file: where flock works, a free lock is a
    // writer that is gone, even if its pid names another process now (retest54 R3); only without
    // flock the pid decides
    switch (static_cast<detail::WriterLock>(writer_lock_)) {
      case detail::WriterLock::held:
        return "running";
      case detail::WriterLock::free:
        return "crashed";
      case detail::WriterLock::unknown:
        break;
    }
    const long p = std::strtol(pid.c_str(), nullptr, 10);
    if (p > 0 && kill(static_cast<pid_t>(p), 0) != 0 && errno == ESRCH) return "crashed";
  }
  return "running";
}

const std::string& SessionReader::name(int32_t id) const {
  static const std::string unknown = "?";
  return id >= 0 && static_cast<size_t>(id) < strings_.size() ? strings_[static_cast<size_t>(id)] : unknown;
}

std::vector<RankInfo> SessionReader::ranks() const {
  return impl_->records(sd::ranks_table(), "ORDER BY rank", "reading ranks");
}

std::vector<LaneInfo> SessionReader::lanes() const {
  return impl_->records(sd::lanes_table(), "ORDER BY rank, lane", "reading lanes");
}

namespace detail {
OpRecord op_from_row(sqlite3_stmt* st, const std::string& path) {
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
}  // namespace detail

std::vector<OpRecord> SessionReader::ops(int32_t rank, int32_t lane, int64_t t0_ns, int64_t t1_ns) const {
  // An op overlapping [t0, t1) starts in [t0 - longest op of the lane, t1): a range scan of
  // the clustered (lane_key, start_ns) key.
  // The longest op is never negative (a damaged lanes row may say so), and t0 - longest stops at
  // the smallest int64 (a caller asking for everything passes it as t0; the subtraction used
  // to wrap around to a huge start, which found no op at all).
  int64_t longest = 0;
  if (auto it = impl_->max_duration.find({rank, lane}); it != impl_->max_duration.end())
    longest = std::max<int64_t>(0, it->second);
  const int64_t from =
      t0_ns < std::numeric_limits<int64_t>::min() + longest ? std::numeric_limits<int64_t>::min() : t0_ns - longest;
  std::vector<OpRecord> out;
  impl_->each_row(
      fmt::format("SELECT {} FROM ops WHERE lane_key = ?1 AND start_ns >= ?2 AND start_ns < ?3 AND end_ns > ?4 "
                  "ORDER BY start_ns",
                  detail::kOpColumns),
      "querying ops", [&](sqlite3_stmt* st) { out.push_back(detail::op_from_row(st, path_)); },
      [&](sqlite3_stmt* st) {
        sqlite3_bind_int64(st, 1, int64_t{rank} * 256 + lane);  // no int overflow for a rank read from a damaged file
        sqlite3_bind_int64(st, 2, from);
        sqlite3_bind_int64(st, 3, t1_ns);
        sqlite3_bind_int64(st, 4, t0_ns);
      });
  return out;
}

std::vector<OpRecord> SessionReader::lane_ops(int32_t rank, int32_t lane) const {
  if (!has_op_blocks_ || rank < 0 || lane < 0 || lane > 255) {  // (no lane key of blocks for the rest)
    constexpr int64_t kMin = std::numeric_limits<int64_t>::min(), kMax = std::numeric_limits<int64_t>::max();
    return ops(rank, lane, kMin, kMax);
  }
  std::vector<OpRecord> out;
  bool sized = false;
  impl_->each_row(
      "SELECT op_count, data, (SELECT sum(op_count) FROM op_blocks WHERE lane_key = ?1) FROM op_blocks "
      "WHERE lane_key = ?1 ORDER BY block",
      "reading op_blocks",
      [&](sqlite3_stmt* st) {
        if (!sized) {  // one allocation for the lane (the sum is read once, with the first block)
          out.reserve(static_cast<size_t>(std::clamp<int64_t>(sqlite3_column_int64(st, 2), 0, int64_t{1} << 32)));
          sized = true;
        }
        const void* data = sqlite3_column_blob(st, 1);
        const int size = sqlite3_column_bytes(st, 1);
        try {
          detail::unpack_ops(data, static_cast<size_t>(size), sqlite3_column_int64(st, 0), rank, lane, out);
        } catch (const detail::BadBlock& e) {
          throw SessionError(fmt::format("{}: the session file is corrupt (op_blocks of rank {} lane {}: {})", path_, rank,
                                         lane, e.what()));
        }
      },
      [&](sqlite3_stmt* st) { sqlite3_bind_int64(st, 1, int64_t{rank} * 256 + lane); });
  return out;
}

std::vector<OpRecord> SessionReader::all_ops() const {
  std::vector<OpRecord> out;
  if (has_op_blocks_) {  // the packed copy of a closed session: the same records, in the same order
    // one allocation: the marker's op count, never more than the blocks' bytes can hold (an op
    // takes at least 7 bytes; a damaged marker does not make the reader allocate gigabytes)
    impl_->each_row("SELECT (SELECT op_count FROM op_blocks WHERE lane_key = -1), (SELECT sum(length(data)) FROM op_blocks)",
                    "reading op_blocks", [&](sqlite3_stmt* st) {
                      const int64_t bytes = std::max<int64_t>(0, sqlite3_column_int64(st, 1));
                      out.reserve(static_cast<size_t>(std::clamp<int64_t>(sqlite3_column_int64(st, 0), 0, bytes / 7)));
                    });
    detail::scan_lanes(impl_->db, path_, true,
                       [&](std::vector<OpRecord>& lane) { out.insert(out.end(), lane.begin(), lane.end()); });
    return out;
  }
  impl_->each_row(fmt::format("SELECT {} FROM ops ORDER BY lane_key, start_ns", detail::kOpColumns), "reading ops",
                  [&](sqlite3_stmt* st) { out.push_back(detail::op_from_row(st, path_)); });
  return out;
}

int64_t SessionReader::op_count() const {
  int64_t n = 0;
  impl_->each_row("SELECT count(*) FROM ops", "counting ops", [&](sqlite3_stmt* st) { n = sqlite3_column_int64(st, 0); });
  return n;
}

std::vector<StepMetric> SessionReader::steps() const {
  return impl_->records(sd::steps_table(), "ORDER BY step, rank", "reading steps");
}

std::vector<LoadCounter> SessionReader::load() const {
  return impl_->records(sd::load_counters_table(), "ORDER BY step, rank, table_index, shard", "reading load counters");
}

std::vector<CollectiveRecord> SessionReader::collectives() const {
  return impl_->records(sd::collectives_table(), "ORDER BY id", "reading collectives");
}

std::vector<MemoryCounter> SessionReader::memory_counters() const {
  if (!has_memory_tables_) return {};
  return impl_->records(sd::memory_counters_table(), "ORDER BY step, rank", "reading memory counters");
}

std::vector<MemoryEvent> SessionReader::memory_events() const {
  if (!has_memory_tables_) return {};
  return impl_->records(sd::memory_events_table(), "ORDER BY id", "reading memory events");
}

std::vector<MemorySnapshot> SessionReader::memory_snapshots() const {
  if (!has_memory_tables_) return {};
  return impl_->records(sd::memory_snapshots_table(), "ORDER BY id", "reading memory snapshots");
}

std::vector<MemoryBlockRecord> SessionReader::memory_blocks(int64_t snapshot_id) const {
  if (!has_memory_tables_) return {};
  std::vector<MemoryBlockRecord> out;
  for (auto& b : impl_->records(sd::memory_blocks_table(), "WHERE snapshot_id = ?1 ORDER BY address",
                                "reading memory blocks", [&](sqlite3_stmt* st) { sqlite3_bind_int64(st, 1, snapshot_id); }))
    out.push_back(std::move(b.block));
  return out;
}

std::vector<IdHistogramBucket> SessionReader::id_histogram() const {
  if (!has_id_histogram_) return {};
  return impl_->records(sd::id_histogram_table(), "ORDER BY table_index, bucket, rank", "reading the id histogram");
}

std::vector<RebalanceRecord> SessionReader::rebalances() const {
  if (!has_rebalances_) return {};
  return impl_->records(sd::rebalances_table(), "ORDER BY step", "reading rebalances");
}

std::vector<FlightRecord> SessionReader::flight_records() const {
  if (!has_flight_recorder_) return {};
  return impl_->records(sd::flight_recorder_table(), "ORDER BY rank, dump, record_id", "reading flight_recorder");
}

std::vector<PlanChangeRecord> SessionReader::plan_changes() const {
  if (!has_rebalances_) return {};
  return impl_->records(sd::plan_changes_table(), "ORDER BY step, table_index, shard_index", "reading plan_changes");
}

std::vector<ImportStat> SessionReader::import_stats() const {
  if (!has_import_stats_) return {};
  return impl_->records(sd::import_stats_table(), "ORDER BY name", "reading import_stats");
}

std::vector<ShardRecord> SessionReader::shards() const {
  if (has_shards_) {
    auto rows = impl_->records(sd::shards_table(), "ORDER BY table_index, shard_index", "reading shards");
    if (!rows.empty()) return rows;
  }
  try {
    return detail::shards_from_plan_json(meta(meta::kShardingPlanJson));
  } catch (const std::exception& e) {
    throw SessionError(fmt::format("{}: metadata {}: {}", path_, meta::kShardingPlanJson, e.what()));
  }
}

}  // namespace embedscope::sessions

namespace embedscope::sessions {

std::vector<MemoryFrame> SessionReader::memory_frames() const {
  if (!has_memory_stacks_) return {};
  return impl_->records(sd::memory_frames_table(), "ORDER BY id", "reading memory frames");
}

std::vector<MemoryStackFrame> SessionReader::memory_stacks() const {
  if (!has_memory_stacks_) return {};
  return impl_->records(sd::memory_stacks_table(), "ORDER BY stack_id, depth", "reading memory stacks");
}

std::vector<MemoryTimelinePoint> SessionReader::memory_timeline() const {
  if (!has_memory_stacks_) return {};
  return impl_->records(sd::memory_timeline_table(), "ORDER BY rank, entry", "reading the memory timeline");
}

}  // namespace embedscope::sessions

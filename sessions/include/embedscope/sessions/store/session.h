#pragma once
// The session file: one SQLite database per run (schema: sessions/schema/FORMAT.md).
//
// SessionWriter owns one writer thread. Producers (the tracer, the engine) hand it records;
// the thread inserts them in batched transactions, committing at least every
// `kCommitInterval`, in WAL mode, so a killed run loses at most the last second and the file
// still opens. Until close() the metadata says ended = "running".
//
// SessionReader opens a file read-only (it never changes it) and answers the app's queries:
// metadata, lanes, the ops of one lane in a time range (a clustered index on
// (rank, lane, start_ns)), steps, load counters and collectives, as plain structs.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "embedscope/sessions/model/events.h"

struct sqlite3;
struct sqlite3_stmt;

namespace embedscope::sessions {

/// A session file that cannot be created, opened or read. what() names the file and the
/// problem, e.g. "run.db: not an SQLite database (file is not a database)".
class SessionError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The schema version this build writes and reads (PRAGMA user_version).
constexpr int kSchemaVersion = 3;
constexpr std::chrono::milliseconds kCommitInterval{250};

/// A lane of a rank: a thread of the CPU executor (or, later, a CUDA stream).
struct LaneInfo {
  int32_t rank = 0;
  int32_t lane = 0;
  std::string name;   ///< "compute", "comm"
  std::string kind;   ///< "thread" or "stream"
};

class SessionWriter {
 public:
  /// Creates `path`, writes the schema, starts the writer thread, and records ended =
  /// "running", the writer's pid and host. The name is claimed atomically (O_EXCL), so two
  /// writers never share a file. Throws SessionError if `path` exists (unless `overwrite`
  /// and it is a regular file) or cannot be created.
  explicit SessionWriter(const std::string& path, bool overwrite = false);
  /// Closes with ended = "crashed" if close() was not called.
  ~SessionWriter();
  SessionWriter(const SessionWriter&) = delete;
  SessionWriter& operator=(const SessionWriter&) = delete;

  void set_metadata(const std::string& key, const std::string& value);
  void add_rank(const RankInfo& rank);
  void add_lane(const LaneInfo& lane);
  /// Takes a batch of spans (names must outlive the call only until it returns: they are
  /// interned before it returns).
  void add_ops(const std::vector<OpEvent>& ops);
  void add_collective(CollectiveRecord c);
  void add_load(const LoadCounter& c);
  void add_step(const StepMetric& s);
  void add_memory(const MemoryCounter& m);
  void add_memory_events(const std::vector<MemoryEvent>& events);
  /// Stores id histogram buckets (a rank's, at the end of its run).
  void add_id_histogram(const std::vector<IdHistogramBucket>& buckets);
  /// Stores a snapshot (its id is assigned here).
  void add_snapshot(MemorySnapshot snapshot);
  /// Flushes everything, records `ended` and `message`, checkpoints the WAL into the file and
  /// leaves a single self-contained file (journal_mode DELETE). Idempotent. Throws
  /// SessionError if the final write fails.
  void close(const std::string& ended, const std::string& message = "");

  const std::string& path() const { return path_; }
  /// Ops handed to the writer so far.
  int64_t ops_received() const;

 private:
  struct Pending {
    std::vector<std::pair<std::string, std::string>> metadata;
    std::vector<RankInfo> ranks;
    std::vector<LaneInfo> lanes;
    std::vector<OpEvent> ops;
    std::vector<int32_t> op_names;  // interned name id per op
    std::vector<CollectiveRecord> collectives;
    std::vector<LoadCounter> load;
    std::vector<StepMetric> steps;
    std::vector<MemoryCounter> memory;
    std::vector<MemoryEvent> memory_events;
    std::vector<MemorySnapshot> snapshots;
    std::vector<IdHistogramBucket> id_histogram;
    std::vector<std::pair<int32_t, std::string>> new_strings;
    bool empty() const {
      return metadata.empty() && ranks.empty() && lanes.empty() && ops.empty() && collectives.empty() && load.empty() &&
             steps.empty() && memory.empty() && memory_events.empty() && snapshots.empty() && id_histogram.empty() &&
             new_strings.empty();
    }
  };
  int32_t intern(const char* s);  // caller holds mu_
  void loop();
  void write(Pending& p);
  void exec(const char* sql);

  std::string path_;
  sqlite3* db_ = nullptr;
  std::map<std::string, sqlite3_stmt*> stmts_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  Pending pending_;
  std::unordered_map<const char*, int32_t> by_pointer_;
  std::unordered_map<std::string, int32_t> by_text_;
  int64_t ops_received_ = 0;
  int64_t next_op_id_ = 0;
  int64_t next_snapshot_id_ = 0;
  bool stop_ = false;
  bool closed_ = false;
  std::string write_error_;
  std::thread thread_;
};

/// An op as stored: the name is an index into SessionReader::strings().
struct OpRecord {
  int32_t rank = 0;
  int32_t lane = 0;
  OpCategory category = OpCategory::other;
  int32_t name_id = 0;
  int64_t step = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t bytes = 0;
  uint64_t correlation = 0;
};

class SessionReader {
 public:
  /// Opens read-only. Throws SessionError naming the file for: a missing or empty file, a file
  /// that is not SQLite, a truncated or corrupt database, a schema newer than kSchemaVersion,
  /// an SQLite file that is not an Embedscope session.
  explicit SessionReader(const std::string& path);
  ~SessionReader();
  SessionReader(const SessionReader&) = delete;
  SessionReader& operator=(const SessionReader&) = delete;

  const std::string& path() const { return path_; }
  int schema_version() const { return version_; }
  const std::map<std::string, std::string>& metadata() const { return meta_; }
  /// The metadata value, or `fallback` when absent.
  std::string meta(const std::string& key, const std::string& fallback = "") const;
  /// How the run ended: complete, cancelled, crashed, oom, hang, failed, or running. A file
  /// that still says running while its writer process (same host) is gone reads "crashed".
  std::string status() const;
  const std::vector<std::string>& strings() const { return strings_; }
  const std::string& name(int32_t id) const;
  std::vector<RankInfo> ranks() const;
  std::vector<LaneInfo> lanes() const;
  /// Ops of one lane that overlap [t0_ns, t1_ns), ordered by start.
  std::vector<OpRecord> ops(int32_t rank, int32_t lane, int64_t t0_ns, int64_t t1_ns) const;
  /// Every op, ordered by (rank, lane, start).
  std::vector<OpRecord> all_ops() const;
  int64_t op_count() const;
  std::vector<StepMetric> steps() const;
  std::vector<LoadCounter> load() const;
  std::vector<CollectiveRecord> collectives() const;
  /// Memory tables (schema 2; empty for version-1 files).
  std::vector<MemoryCounter> memory_counters() const;
  std::vector<MemoryEvent> memory_events() const;
  /// Snapshots without their blocks; memory_blocks() gives those.
  std::vector<MemorySnapshot> memory_snapshots() const;
  std::vector<MemoryBlockRecord> memory_blocks(int64_t snapshot_id) const;
  /// Whether the file has the id_histogram table (schema 3; older files do not).
  bool has_id_histogram() const { return has_id_histogram_; }
  /// Every stored bucket, ordered by (table, bucket, rank); empty without the table.
  std::vector<IdHistogramBucket> id_histogram() const;

 private:
  void check(int rc, const char* what) const;
  /// Runs `sql` (after `bind`), calling `row` for each result row; errors name the file.
  template <class Row>
  void each_row(const std::string& sql, const char* what, Row&& row,
                const std::function<void(sqlite3_stmt*)>& bind = {}) const;
  std::string path_;
  sqlite3* db_ = nullptr;
  int version_ = 0;
  std::map<std::string, std::string> meta_;
  std::vector<std::string> strings_;
  std::map<std::pair<int32_t, int32_t>, int64_t> max_duration_;  // per lane
  bool has_memory_tables_ = false;
  bool has_id_histogram_ = false;
};

}  // namespace embedscope::sessions

#pragma once
// The session file: one SQLite database per run (schema: sessions/schema/FORMAT.md, tables
// described once in embedscope/sessions/schema/tables.h). SQLite stays behind this interface:
// nothing here names it.
//
// SessionWriter owns one writer thread. Producers (the tracer, the engine) hand it records;
// the thread inserts them in batched transactions, committing at least every
// `kCommitInterval`, in WAL mode, so a killed run loses at most the last second and the file
// still opens. Until close() the metadata says ended = "running".
//
// SessionReader opens a file read-only (it never changes it) and answers the app's queries:
// metadata, lanes, the ops of one lane in a time range (a clustered index on
// (rank, lane, start_ns)), steps, load counters and collectives, as plain structs. It reads
// every older schema version as it is (tables a version lacks read as empty).

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <optional>
#include <string>
#include <vector>

#include "embedscope/sessions/model/events.h"
#include "embedscope/sessions/model/flight_record.h"
#include "embedscope/sessions/schema/tables.h"  // kSchemaVersion

namespace embedscope::sessions {

/// A session file that cannot be created, opened or read. what() names the file and the
/// problem, e.g. "run.db: not an SQLite database (file is not a database)".
class SessionError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A session writer's write failed (a full disk, an I/O error) while a run was recording: what()
/// is SessionWriter::write_failure()'s error. A run stops at the end of the step in which it
/// learns of it (its session ends `write_failed`). Also what the SessionWriter constructor throws
/// when the new file cannot be written at all ("run.db: cannot be written: No space left on
/// device", "run.db: database or disk is full"): nothing is left behind, and this is not bad
/// input (the CLI exits 1).
class SessionWriteError : public SessionError {
 public:
  using SessionError::SessionError;
};

/// The writer commits at least this often.
constexpr std::chrono::milliseconds kCommitInterval{250};

/// The version of the SQLite library that reads and writes session files, e.g. "3.46.1".
std::string sqlite_version();

/// The one refusal of every output that `--force-overwrite` may replace (a run's, an import's or
/// a merge's session, an export, a plan, a profile, token ids): throws SessionError
/// "PATH: not overwritten: a run (pid 4242) is still writing it (...); wait for it to end, stop it,
/// or choose another name" when a live run writes the session file `path` (its writer lock is
/// held; only on a file system without flock: its metadata says running and its writer process
/// is alive on this host - a killed run's pid reused by another process is not a writer). Replacing it
/// would lose that run's session, the run still saying `session: PATH`. Nothing when `path` does
/// not exist, is not a session, or its writer has ended. Never changes the file.
void refuse_replacing_live_session(const std::string& path);

class SessionWriter {
 public:
  /// The constructor's checks of an existing `path`, without creating anything: throws the
  /// same SessionError the constructor would for a file that exists (and `overwrite` is
  /// false, or it is not a regular file, or a live writer holds it). For a command to refuse
  /// before it starts work; the constructor checks again (the name is claimed only there).
  static void check_path(const std::string& path, bool overwrite);
  /// Removes a session file and SQLite's companions (-wal, -shm, -journal) after its writer has
  /// closed it: what a cancelled import does, so that nothing half-written is left. Missing
  /// files are not an error; never throws.
  static void remove_files(const std::string& path);
  /// Creates `path`, writes the schema, starts the writer thread, and records ended =
  /// "running", the writer's pid and host. The name is claimed atomically (O_EXCL) and held
  /// with an advisory lock (flock) until close(), so two writers never share a file. Throws
  /// SessionError if `path` exists (unless `overwrite` and it is a regular file), if a live
  /// writer holds it ("run.db: not overwritten: a run (pid 4242) is still writing it; ..."),
  /// or if it cannot be created; throws SessionWriteError (no file left behind) where the file
  /// system has no room for it: less than 256 KiB (held for the end mark: see close(); the
  /// writer's store/end_reserve.h) or the schema's first commit fails.
  explicit SessionWriter(const std::string& path, bool overwrite = false);
  /// Closes with ended = "crashed" if close() was not called.
  ~SessionWriter();
  SessionWriter(const SessionWriter&) = delete;
  SessionWriter& operator=(const SessionWriter&) = delete;

  /// Sets metadata `key` (model/metadata_keys.h) to `value`; a later value replaces it.
  void set_metadata(const std::string& key, const std::string& value);
  /// A rank and its device (table `ranks`; a second record of a rank replaces the first).
  void add_rank(const RankInfo& rank);
  /// A lane of a rank (table `lanes`).
  void add_lane(const LaneInfo& lane);
  /// Takes a batch of spans (names must outlive the call only until it returns: they are
  /// interned before it returns). Back-pressure: when the pending records (spans, collectives,
  /// steps, load counters) take about 32 MiB of the file (the writer behind, e.g. starved of CPU),
  /// this, add_step, add_step_records and add_collective wait until the writer has taken them or
  /// close() is called, so that memory and each commit stay bounded.
  void add_ops(const std::vector<OpEvent>& ops);
  /// As add_ops(vector): the `n` spans at `ops`, without a vector to copy them into first.
  void add_ops(const OpEvent* ops, size_t n);
  /// One rank's row of a collective (table `collectives`).
  void add_collective(CollectiveRecord c);
  /// One shard's load in one step (table `load_counters`).
  void add_load(const LoadCounter& c);
  /// One rank's step (table `steps`).
  void add_step(const StepMetric& s);
  /// One rank's device memory at a step end (table `memory_counters`).
  void add_memory(const MemoryCounter& m);
  /// Allocator actions, in order (table `memory_events`).
  void add_memory_events(const std::vector<MemoryEvent>& events);
  /// Stores id histogram buckets: each record holds a (table, bucket, rank)'s total so far, and
  /// a later record of the same key replaces the earlier one (in the file and among the records
  /// not yet written, so a bucket is written once per commit however often it is sent).
  void add_id_histogram(const std::vector<IdHistogramBucket>& buckets);
  /// One rank's finished step in one go: its step row, its shards' load counters and the id
  /// histogram buckets whose totals the step changed (add_id_histogram), handed to the writer
  /// together so that they land in the same transaction: a killed run keeps, for every step it
  /// kept, that step's counters and its ids in the histogram, and for no other step
  /// (tester49 F16).
  void add_step_records(const StepMetric& step, const std::vector<LoadCounter>& load,
                        const std::vector<IdHistogramBucket>& histogram);
  /// Stores the sharding plan the run used, one record per shard (table `shards`, schema 4);
  /// a second record of the same (table, shard_index) replaces the first.
  void add_shards(std::vector<ShardRecord> shards);
  /// Stores a run's live rebalances and the shards they moved (tables `rebalances`,
  /// `plan_changes`, schema 6); a second record of the same key replaces the first.
  void add_rebalances(std::vector<RebalanceRecord> rebalances, std::vector<PlanChangeRecord> changes);
  /// Stores the problems of an import (table `import_stats`, schema 5); a second record of the
  /// same name replaces the first.
  void add_import_stats(std::vector<ImportStat> stats);
  /// Distinct stack frames (table `memory_frames`, schema 5).
  void add_memory_frames(const std::vector<MemoryFrame>& frames);
  /// The frames of each stack (table `memory_stacks`, schema 5).
  void add_memory_stacks(const std::vector<MemoryStackFrame>& rows);
  /// Memory counters after trace entries (table `memory_timeline`, schema 5).
  void add_memory_timeline(const std::vector<MemoryTimelinePoint>& points);
  /// Stores a dump of a rank's collective flight recorder (table `flight_recorder`, schema 8),
  /// and wakes the writer so that it is committed at once rather than at the next interval; a
  /// second record of the same (rank, dump, record_id) replaces the first.
  void add_flight_records(std::vector<FlightRecord> records);
  /// Stores a snapshot (its id is assigned here).
  void add_snapshot(MemorySnapshot snapshot);
  /// Flushes everything, records `ended` and `message` (unless the session no longer reads
  /// ended = running: an end recorded first by another connection, mark_session_ended, stays),
  /// checkpoints the WAL into the file,
  /// leaves WAL mode (one self-contained file, journal_mode DELETE) and closes the file, which
  /// releases the writer lock. Readers never make it fail: a checkpoint waits for them (up to
  /// 10 s), and where open readers keep the file in WAL mode for more than 0.5 s it stays in WAL
  /// mode (complete in the database beside an empty -wal). Idempotent. Throws SessionError if
  /// a write of the run failed (write_failure()): then ended = "write_failed" and a message
  /// naming the failure, the steps kept and `ended` / `message` are written alone, into room
  /// held on the file system since the constructor (a full disk still takes them: retest49 R3),
  /// the rolled-back commit's frames are cut off the -wal (no reader calls it damaged), and a
  /// file in which nothing was committed is removed (no half-created file is left behind).
  void close(const std::string& ended, const std::string& message = "");

  /// Waits until everything handed to the writer before the call is committed (the writer takes
  /// it at once rather than at the next kCommitInterval), a write failed, or close() began. For a
  /// producer faster than the writer (the simulator: thousands of steps a second), so that a
  /// SIGKILL loses only what it made since its last sync: without it the writer fell seconds
  /// behind and a kill at 1.5 s left nothing committed. Throws nothing.
  void sync();

  const std::string& path() const;
  /// Ops handed to the writer so far.
  int64_t ops_received() const;

  /// What the writer had kept when a write failed (a full disk, an I/O error): the failed
  /// transaction is rolled back and nothing after it is written, so the file holds the commits
  /// before it, whole.
  struct WriteFailure {
    std::string error;             ///< "PATH: database or disk is full (No space left on device)"
    int64_t commits = 0;           ///< transactions committed before the failure (0: nothing recorded)
    int64_t steps_kept = 0;        ///< step rows committed by the rank that committed fewest (0: none)
    int64_t last_step_kept = -1;   ///< the last step every rank that committed steps committed; -1 none
  };
  /// Whether a write failed (cheap: a step loop may ask it after every step).
  bool write_failed() const;
  /// The failure, or nullopt while every write succeeded.
  std::optional<WriteFailure> write_failure() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
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
  /// PRAGMA user_version of the file: 1 .. kSchemaVersion.
  int schema_version() const { return version_; }
  const std::map<std::string, std::string>& metadata() const { return meta_; }
  /// The metadata value, or `fallback` when absent.
  std::string meta(const std::string& key, const std::string& fallback = "") const;
  /// How the run ended: complete, cancelled, crashed, oom, hang, failed, or running. A file
  /// that still says running while its writer (same host) is gone reads "crashed": where flock
  /// works, gone means its writer lock was free when the reader opened the file (a killed run's
  /// pid may name another process since: retest54 R3); where it does not, that the metadata
  /// `writer_pid` names no process.
  std::string status() const;
  /// The interned op names; OpRecord::name_id indexes them.
  const std::vector<std::string>& strings() const { return strings_; }
  /// strings()[id], or "?" for an id out of range.
  const std::string& name(int32_t id) const;
  std::vector<RankInfo> ranks() const;
  std::vector<LaneInfo> lanes() const;
  /// Ops of one lane that overlap [t0_ns, t1_ns), ordered by start.
  std::vector<OpRecord> ops(int32_t rank, int32_t lane, int64_t t0_ns, int64_t t1_ns) const;
  /// Every op of one lane, ordered by start (ties in the order they were written): the same
  /// records as ops(rank, lane, min, max), read from the packed copy `op_blocks` that a closed
  /// session of schema 12 holds (about 7x faster than a row per op: 4.7M ops in 0.15 s), else
  /// from the ops rows. Throws SessionError naming the file for a damaged block or row.
  std::vector<OpRecord> lane_ops(int32_t rank, int32_t lane) const;
  /// Whether the file has packed ops (`op_blocks` rows: schema 12, written when its writer closed).
  bool has_op_blocks() const { return has_op_blocks_; }
  /// Every op, ordered by (rank, lane, start).
  std::vector<OpRecord> all_ops() const;
  int64_t op_count() const;
  /// Ordered by (step, rank).
  std::vector<StepMetric> steps() const;
  /// Ordered by (step, rank, table, shard).
  std::vector<LoadCounter> load() const;
  /// In insertion order.
  std::vector<CollectiveRecord> collectives() const;
  /// Memory tables (schema 2; empty for version-1 files).
  std::vector<MemoryCounter> memory_counters() const;
  std::vector<MemoryEvent> memory_events() const;
  /// Snapshots without their blocks; memory_blocks() gives those.
  std::vector<MemorySnapshot> memory_snapshots() const;
  std::vector<MemoryBlockRecord> memory_blocks(int64_t snapshot_id) const;
  /// Whether the file has the memory_frames, memory_stacks and memory_timeline tables (schema 5).
  bool has_memory_stacks() const { return has_memory_stacks_; }
  /// Ordered by id; empty without the table.
  std::vector<MemoryFrame> memory_frames() const;
  /// Ordered by (stack_id, depth); empty without the table.
  std::vector<MemoryStackFrame> memory_stacks() const;
  /// Ordered by (rank, entry); empty without the table.
  std::vector<MemoryTimelinePoint> memory_timeline() const;
  /// Whether the file has the id_histogram table (schema 3; older files do not).
  bool has_id_histogram() const { return has_id_histogram_; }
  /// Every stored bucket, ordered by (table, bucket, rank); empty without the table.
  std::vector<IdHistogramBucket> id_histogram() const;
  /// Whether the file has the shards table (schema 4; older files do not).
  bool has_shards_table() const { return has_shards_; }
  /// The sharding plan the run used, ordered by (table, shard_index). From the `shards` table
  /// where the file has rows in it; otherwise (older files, or a writer that stored no shards)
  /// built from the metadata `sharding_plan_json` (table = the
  /// position in its "tables" list, shard_index = the position in "shards", node from "node"
  /// or -1, planned_bytes -1); empty when neither is there. Throws SessionError naming the file
  /// when sharding_plan_json is not valid JSON of that shape.
  std::vector<ShardRecord> shards() const;
  /// The live rebalances, ordered by step; empty for files before schema 6 (no such table) and
  /// runs without a policy.
  std::vector<RebalanceRecord> rebalances() const;
  /// The shards live rebalances moved, ordered by (step, table, shard_index); empty for files
  /// before schema 6 and runs whose plan never changed.
  std::vector<PlanChangeRecord> plan_changes() const;
  /// The problems an importer counted, ordered by name (schema 5; empty for older files and for
  /// sessions Embedscope ran).
  std::vector<ImportStat> import_stats() const;
  /// Every dump of the ranks' collective flight recorders, ordered by (rank, dump, record_id);
  /// empty for files before schema 8 and runs that never dumped.
  std::vector<FlightRecord> flight_records() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string path_;
  int version_ = 0;
  std::map<std::string, std::string> meta_;
  std::vector<std::string> strings_;
  bool has_memory_tables_ = false;
  bool has_id_histogram_ = false;
  bool has_shards_ = false;
  bool has_import_stats_ = false;
  bool has_rebalances_ = false;
  bool has_memory_stacks_ = false;
  bool has_flight_recorder_ = false;
  bool has_op_blocks_ = false;
  // the writer lock when the file was opened (store/writer_lock.h WriterLock: 0 held, 1 free,
  // 2 unknown), probed before this reader's connection existed
  int writer_lock_ = 2;
};

}  // namespace embedscope::sessions

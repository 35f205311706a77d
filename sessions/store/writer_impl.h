#pragma once
// SessionWriter's state, shared by its sources (internal to the sessions library):
// writer.cpp (opening, the records taken, the writer thread and its commits) and
// writer_end.cpp (close: the op blocks, the end mark after a failed write, leaving WAL mode).

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/end_mark.h"  // scan_wal
#include "embedscope/sessions/store/session.h"
#include "schema/definitions.h"
#include "store/end_reserve.h"
#include "store/op_blocks.h"
#include "store/writer_lock.h"

namespace embedscope::sessions {

namespace {
constexpr size_t kOpsPerTransaction = 100000;  // commit within big batches: the dirty pages stay in cache
constexpr size_t kWakeOps = 50000;             // pending ops that wake the writer before the interval
// pending records (about this many bytes of the file: Pending::file_bytes) at which add_ops,
// add_step, add_step_records and add_collective wait for the writer to take them: a writer
// starved of CPU (a simulated run beside other work) let them grow without bound, and its first
// commit could pass a full disk's limit with every step in it (ci53: Sim51WriteFailed kept
// nothing). 32 MiB: at 2 MiB an import of a 220 MB chrome trace lost its parse/write overlap
// (3.2-3.5 s -> 3.7-4.2 s wall at the same CPU time)
constexpr size_t kHoldBytes = 32u << 20;
// Ops per INSERT statement: one multi-row statement per 100 ops costs about half the CPU time of
// 100 single-row statements (the per-statement work of sqlite3_step, reset and the cursor is
// paid once). 9 columns x 100 = 900 parameters, within SQLite's limit of 32766. A divisor of
// kOpsPerTransaction, so that transactions still end on the same op.
constexpr size_t kOpsPerStatement = 100;
static_assert(kOpsPerTransaction % kOpsPerStatement == 0);
constexpr int kOpColumns = 9;  // the columns of ops_table(), bound by hand in write()
// How long a statement waits for a reader's lock (SQLITE_BUSY) before it fails.
constexpr std::chrono::milliseconds kBusyTimeout{10000};
// How long close() tries to leave WAL mode while readers hold the file open.
constexpr std::chrono::milliseconds kLeaveWalFor{500};

inline void step_or_throw(sqlite3* db, sqlite3_stmt* st, const std::string& path) {
  if (sqlite3_step(st) != SQLITE_DONE) throw SessionError(fmt::format("{}: {}", path, sqlite3_errmsg(db)));
  sqlite3_reset(st);
}
}  // namespace

struct SessionWriter::Impl {
  struct Pending {
    std::vector<std::pair<std::string, std::string>> metadata;
    /// close()'s end rows (end_message, then ended): written only while the session still reads
    /// ended = running, so that an end another connection recorded first (a run stopped at once:
    /// mark_session_ended, end_mark.h) is not replaced by this writer's own a moment later
    std::vector<std::pair<std::string, std::string>> end;
    std::vector<RankInfo> ranks;
    std::vector<LaneInfo> lanes;
    std::vector<OpEvent> ops;
    std::vector<int32_t> op_names;  // interned name id per op
    std::vector<CollectiveRecord> collectives;
    std::vector<LoadCounter> load;
    std::vector<StepMetric> steps;
    /// About what the records a run adds every step take in the file, bytes (a packed op about
    /// 16-24 B, a collective row with its index about 100-130 B: the DLRM simulation of
    /// Sim51WriteFailed commits 4.3 KB a step of 2 ranks): kHoldBytes' measure.
    size_t file_bytes() const {
      return ops.size() * 24 + collectives.size() * 128 + (steps.size() + load.size()) * 64 + memory_events.size() * 64;
    }
    std::vector<MemoryCounter> memory;
    std::vector<MemoryEvent> memory_events;
    std::vector<MemorySnapshot> snapshots;
    std::vector<IdHistogramBucket> id_histogram;
    /// where each (table, bucket, rank) of id_histogram is: a later total replaces it in place
    std::map<std::tuple<int32_t, int32_t, int32_t>, size_t> id_histogram_at;
    void add_id_histogram(const std::vector<IdHistogramBucket>& buckets) {
      for (const IdHistogramBucket& b : buckets) {
        auto [at, inserted] = id_histogram_at.try_emplace({b.table, b.bucket, b.rank}, id_histogram.size());
        if (inserted)
          id_histogram.push_back(b);
        else
          id_histogram[at->second] = b;
      }
    }
    std::vector<ShardRecord> shards;
    std::vector<RebalanceRecord> rebalances;
    std::vector<PlanChangeRecord> plan_changes;
    std::vector<ImportStat> import_stats;
    std::vector<MemoryFrame> frames;
    std::vector<MemoryStackFrame> stacks;
    std::vector<MemoryTimelinePoint> timeline;
    std::vector<FlightRecord> flight;
    std::vector<std::pair<int32_t, std::string>> new_strings;
    bool empty() const {
      return metadata.empty() && end.empty() && ranks.empty() && lanes.empty() && ops.empty() && collectives.empty() && load.empty() &&
             steps.empty() && memory.empty() && memory_events.empty() && snapshots.empty() && id_histogram.empty() &&
             shards.empty() && rebalances.empty() && plan_changes.empty() && import_stats.empty() && frames.empty() && stacks.empty() && timeline.empty() && flight.empty() && new_strings.empty();
    }
  };

  explicit Impl(std::string p) : path(std::move(p)) {}
  int32_t intern(const char* s);  // caller holds mu
  void loop();
  void write(Pending& p);
  void exec(const char* sql);
  /// After the last commit: checkpoints the WAL and leaves WAL mode where readers allow it.
  void finish_wal();
  /// After the last commit, in one transaction: the last block of every lane packed while the
  /// run went on, the blocks of lanes whose ops came out of start order (packed from their rows),
  /// and the marker row (lane_key -1) that tells readers the blocks are complete. The blocks are
  /// a copy for fast reading: where this fails (a full disk) the transaction is rolled back and
  /// readers, finding no marker, read the ops rows, so nothing here is an error.
  void write_op_blocks();
  /// Inserts block `block` of lane `lane_key` (throws SessionError).
  void insert_block(int64_t lane_key, int64_t block, const detail::OpPacker& packed);
  /// A lane's ops packed as they come (writer thread, then close()): each full block goes into
  /// `op_blocks` with the ops' own transaction. A lane whose ops stop coming in start order
  /// (ties keep insertion order, as the ops key does) stops here and is packed from its rows at
  /// close.
  struct LanePack {
    detail::OpPacker packer;
    int64_t blocks = 0;
    int64_t last_start = std::numeric_limits<int64_t>::min();
    bool in_order = true;
  };
  std::map<int64_t, LanePack> packs;  // by lane key
  /// Prepares `sql` as statement `key`; checks that it takes the columns of `table` it names.
  void prepare(const char* key, const std::string& sql, const schema::TableInfo* table = nullptr, int columns = -1);
  template <class R>
  void insert_all(const char* key, const schema::detail::RecordTable<R>& t, const std::vector<R>& rows);

  std::string path;
  sqlite3* db = nullptr;
  int lock_fd = -1;  // holds the writer lock (writer_lock.h); its file is held (held_files.h) while open
  /// Closes lock_fd after SQLite's close (writer_lock.h), first releasing the file's hold
  /// (held_files.h: the descriptors other readers of this process kept open close with it).
  void close_lock_fd();
  /// room for the end mark after a failed write (retest49 R3), freed just before it is written
  detail::EndReserve end_reserve;
  std::map<std::string, sqlite3_stmt*> stmts;
  mutable std::mutex mu;
  std::condition_variable cv;
  std::condition_variable drained;  // the writer took the pending records (hold_if_behind waits on it)
  /// Back-pressure (kHoldBytes): with `lock` held on mu, waits while the pending records reach
  /// kHoldBytes, until the writer takes them or close() stops it; true if it waited.
  bool hold_if_behind(std::unique_lock<std::mutex>& lock) {
    if (stop || pending.file_bytes() < kHoldBytes) return false;
    cv.notify_all();
    drained.wait(lock, [&] { return stop || pending.file_bytes() < kHoldBytes; });
    return true;
  }
  Pending pending;
  std::unordered_map<const char*, int32_t> by_pointer;
  std::unordered_map<std::string, int32_t> by_text;
  int64_t ops_received = 0;
  int64_t next_op_id = 0;
  int64_t next_snapshot_id = 0;
  bool stop = false;
  bool closed = false;
  std::string write_error;
  // after a failed write (write_error set): nothing more is written (loop)
  std::atomic<bool> failed{false};
  int64_t commits = 0;                                // batches committed whole (loop)
  // sync(): batches the writer took (non-empty) and finished writing (committed or failed), and
  // a sync asking the writer to take the pending records now rather than at the interval
  int64_t batches_taken = 0, batches_done = 0;
  bool sync_requested = false;
  std::condition_variable batch_done;
  std::map<int32_t, std::pair<int64_t, int64_t>> committed_steps;  // by rank: step rows, last step
  /// Writes `ended` / `message` alone after a failed write, where the file still takes them.
  void write_end_after_failure(const std::string& ended, const std::string& message);
  /// Removes the file (and its -wal, -shm) when nothing was committed: a failed creation.
  void remove_if_nothing_committed();
  std::thread thread;
};

}  // namespace embedscope::sessions

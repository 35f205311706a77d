#include "store/writer_impl.h"

#include "store/held_files.h"

#include <unistd.h>

namespace embedscope::sessions {

namespace {
std::string hostname() {
  char buf[256] = {};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}
}  // namespace

std::string sqlite_version() { return sqlite3_libversion(); }

void SessionWriter::Impl::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errmsg(db);
    sqlite3_free(err);
    throw SessionError(fmt::format("{}: {}", path, msg));
  }
}

void SessionWriter::Impl::prepare(const char* key, const std::string& sql, const schema::TableInfo* table, int columns) {
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v3(db, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &st, nullptr) != SQLITE_OK)
    throw SessionError(fmt::format("{}: {}", path, sqlite3_errmsg(db)));
  stmts[key] = st;
  // A hand-bound statement must bind every column of its table's description.
  if (table && sqlite3_bind_parameter_count(st) != (columns < 0 ? static_cast<int>(table->columns.size()) : columns))
    throw std::logic_error(fmt::format("session writer: statement '{}' binds {} parameters, table {} has {} columns",
                                       key, sqlite3_bind_parameter_count(st), table->name, table->columns.size()));
}

void SessionWriter::check_path(const std::string& path, bool overwrite) {
  if (path.empty()) throw SessionError("the session file name is empty");
  struct stat sb {};
  if (lstat(path.c_str(), &sb) != 0) return;
  if (!S_ISREG(sb.st_mode)) throw SessionError(fmt::format("{}: exists and is not a regular file", path));
  if (!overwrite)
    throw SessionError(fmt::format("{}: already exists; choose another name or allow overwriting it "
                                   "(embedscope run --force-overwrite)", path));
  refuse_replacing_live_session(path);  // its data would be lost
}

void refuse_replacing_live_session(const std::string& path) {
  if (const std::string who = detail::live_writer(path); !who.empty())
    throw SessionError(fmt::format("{}: not overwritten: {}; wait for it to end, stop it, or choose another name",
                                   path, who));
}

void SessionWriter::remove_files(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::remove((path + suffix).c_str());
}

SessionWriter::SessionWriter(const std::string& path, bool overwrite) : impl_(std::make_unique<Impl>(path)) {
  // SQLite's memory statistics take a global mutex on every allocation; nothing here reads
  // them. Only possible before SQLite initialises (later calls return SQLITE_MISUSE: harmless).
  static const int no_memstatus = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
  (void)no_memstatus;
  check_path(path, overwrite);
  struct stat sb {};
  if (lstat(path.c_str(), &sb) == 0) std::remove(path.c_str());
  for (const char* suffix : {"-wal", "-shm", "-journal"}) std::remove((path + suffix).c_str());
  // Claim the name atomically, so two runs never share a file, and hold the writer lock
  // (writer_lock.h) until SQLite has closed it.
  Impl& m = *impl_;
  m.lock_fd = detail::claim_session_file(path);
  // from here a descriptor of the file opened elsewhere in this process is closed only after
  // SQLite's (held_files.h: its close would drop the connection's POSIX locks)
  detail::hold_file_locks(m.lock_fd);
  // a file system without room for the end mark: no session is started (a run on a full disk
  // says so at once, exit 1, rather than after the schema's commit failed)
  if (const std::string no_room = m.end_reserve.hold(path, detail::kEndReserveBytes); !no_room.empty()) {
    m.close_lock_fd();
    m.remove_if_nothing_committed();
    throw SessionWriteError(fmt::format("{}: cannot be written: {}", path, no_room));
  }
  if (sqlite3_open_v2(path.c_str(), &m.db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                      nullptr) != SQLITE_OK) {
    std::string msg = m.db ? sqlite3_errmsg(m.db) : "out of memory";
    sqlite3_close(m.db);
    m.db = nullptr;
    m.close_lock_fd();
    throw SessionError(fmt::format("{}: cannot create the session file: {}", path, msg));
  }
  // A reader opening the file (stats, the workbench) may hold a lock for a moment: wait for it
  // rather than fail (commits in WAL mode never wait for readers; the schema's first commit,
  // made before WAL mode is on, and the final checkpoint can).
  sqlite3_busy_timeout(m.db, static_cast<int>(kBusyTimeout.count()));
  namespace sd = schema::detail;
  try {
    // 16 KiB pages: fewer B-tree splits for the append-mostly ops table than SQLite's 4 KiB, less
    // rewritten per commit than 64 KiB (each dirty page goes to the WAL whole, then to the file at
    // the checkpoint). bench_sessions, 2M events, quiet machine: 4 KiB 0.998 M/s, 8 KiB 1.05,
    // 16 KiB 1.07-1.08, 32 KiB 1.06-1.07, 64 KiB 0.95-0.97; the readers' benchmarks unchanged.
    // NORMAL sync in WAL mode never loses a commit to a killed process (only to a power cut).
    try {
      m.exec("PRAGMA page_size=16384; PRAGMA cache_size=-65536; PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;");
      m.exec("BEGIN");
      m.exec(schema::schema_sql().c_str());
      m.exec(fmt::format("PRAGMA user_version={}", kSchemaVersion).c_str());
      for (int i = 0; i < kNumCategories; ++i)
        m.exec(fmt::format("INSERT INTO categories VALUES ({}, '{}')", i, to_string(static_cast<OpCategory>(i))).c_str());
      m.exec("COMMIT");
    } catch (const SessionError& e) {  // the schema could not be written (a full disk): a write failure, not bad input
      const int sys = sqlite3_system_errno(m.db);
      throw SessionWriteError(sys != 0 ? fmt::format("{} ({})", e.what(), std::strerror(sys)) : std::string(e.what()));
    }
    // Hand-bound statements (tables without a record type), checked against their descriptions.
    m.prepare("meta", "INSERT OR REPLACE INTO metadata VALUES (?1, ?2)", &sd::metadata_table());
    // the end rows of close(): only over ended = running (Pending::end); ?3 is the key "ended"
    m.prepare("meta_end", "INSERT OR REPLACE INTO metadata SELECT ?1, ?2 WHERE (SELECT value FROM metadata WHERE key = ?3) = 'running'",
              &sd::metadata_table(), 3);
    m.prepare("string", "INSERT INTO strings VALUES (?1, ?2)", &sd::strings_table());
    m.prepare("op", "INSERT INTO ops VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)", &sd::ops_table());
    m.prepare("op_block", "INSERT INTO op_blocks VALUES (?1, ?2, ?3, ?4)", &sd::op_blocks_table());
    {
      std::string many = "INSERT INTO ops VALUES ";
      for (size_t r = 0; r < kOpsPerStatement; ++r) many += r ? ", (?, ?, ?, ?, ?, ?, ?, ?, ?)" : "(?, ?, ?, ?, ?, ?, ?, ?, ?)";
      m.prepare("ops", many, &sd::ops_table(), static_cast<int>(kOpsPerStatement) * kOpColumns);
    }
    m.prepare("lane_max", "UPDATE lanes SET max_duration_ns = max(max_duration_ns, ?3) WHERE rank = ?1 AND lane = ?2");
    // Record tables: statements generated from their descriptions.
    m.prepare("lane", sd::lanes_table().insert_sql(true));
    m.prepare("coll", sd::collectives_table().insert_sql(false));
    m.prepare("load", sd::load_counters_table().insert_sql(true));
    m.prepare("step", sd::steps_table().insert_sql(true));
    m.prepare("rank", sd::ranks_table().insert_sql(true));
    m.prepare("memory", sd::memory_counters_table().insert_sql(true));
    m.prepare("snapshot", sd::memory_snapshots_table().insert_sql(false));
    m.prepare("mem_event", sd::memory_events_table().insert_sql(false));
    m.prepare("block", sd::memory_blocks_table().insert_sql(true));
    m.prepare("id_hist", sd::id_histogram_table().insert_sql(true));
    m.prepare("shard", sd::shards_table().insert_sql(true));
    m.prepare("rebalance", sd::rebalances_table().insert_sql(true));
    m.prepare("plan_change", sd::plan_changes_table().insert_sql(true));
    m.prepare("import_stat", sd::import_stats_table().insert_sql(true));
    m.prepare("mem_frame", sd::memory_frames_table().insert_sql(true));
    m.prepare("mem_stack", sd::memory_stacks_table().insert_sql(true));
    m.prepare("mem_timeline", sd::memory_timeline_table().insert_sql(true));
    m.prepare("flight", sd::flight_recorder_table().insert_sql(true));
  } catch (...) {
    for (auto& [k, st] : m.stmts) sqlite3_finalize(st);
    sqlite3_close(m.db);
    m.db = nullptr;
    m.close_lock_fd();
    m.remove_if_nothing_committed();  // the file this constructor created (a full disk): not a session
    throw;
  }
  set_metadata(meta::kFormat, "embedscope-session");
  set_metadata(meta::kEnded, "running");
  set_metadata(meta::kWriterPid, std::to_string(getpid()));
  set_metadata(meta::kWriterHost, hostname());
  set_metadata(meta::kSqliteVersion, sqlite3_libversion());
  m.thread = std::thread([&m] { m.loop(); });
}

SessionWriter::~SessionWriter() {
  try {
    close("crashed", "the session was not closed by the run");
  } catch (...) {
  }
  for (auto& [k, st] : impl_->stmts) sqlite3_finalize(st);
  if (impl_->db) sqlite3_close(impl_->db);
  impl_->close_lock_fd();  // after SQLite's close: see writer_lock.h
}

const std::string& SessionWriter::path() const { return impl_->path; }

void SessionWriter::Impl::close_lock_fd() {
  if (lock_fd < 0) return;
  detail::release_file_locks(lock_fd);
  ::close(lock_fd);
  lock_fd = -1;
}

int32_t SessionWriter::Impl::intern(const char* s) {
  if (auto it = by_pointer.find(s); it != by_pointer.end()) return it->second;
  auto [it, inserted] = by_text.try_emplace(s, static_cast<int32_t>(by_text.size()));
  if (inserted) pending.new_strings.emplace_back(it->second, s);
  by_pointer[s] = it->second;
  return it->second;
}

void SessionWriter::set_metadata(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->pending.metadata.emplace_back(key, value);
}

void SessionWriter::add_rank(const RankInfo& rank) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->pending.ranks.push_back(rank);
}

void SessionWriter::add_lane(const LaneInfo& lane) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->pending.lanes.push_back(lane);
}

void SessionWriter::add_ops(const std::vector<OpEvent>& ops) { add_ops(ops.data(), ops.size()); }

void SessionWriter::add_ops(const OpEvent* ops, size_t n) {
  bool wake = false;
  Impl& m = *impl_;
  {
    std::unique_lock<std::mutex> lock(m.mu);
    m.pending.ops.insert(m.pending.ops.end(), ops, ops + n);
    for (size_t i = 0; i < n; ++i) m.pending.op_names.push_back(m.intern(ops[i].name));
    m.ops_received += static_cast<int64_t>(n);
    wake = m.pending.ops.size() >= kWakeOps;  // a burst: start writing before the interval ends
    if (m.hold_if_behind(lock)) wake = false;
  }
  if (wake) m.cv.notify_all();
}

void SessionWriter::add_collective(CollectiveRecord c) {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->pending.collectives.push_back(std::move(c));
  impl_->hold_if_behind(lock);
}

void SessionWriter::add_load(const LoadCounter& c) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->pending.load.push_back(c);
}

void SessionWriter::add_step(const StepMetric& s) {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->pending.steps.push_back(s);
  impl_->hold_if_behind(lock);
}

void SessionWriter::add_memory(const MemoryCounter& mc) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->pending.memory.push_back(mc);
}

void SessionWriter::add_memory_events(const std::vector<MemoryEvent>& events) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->pending.memory_events.insert(impl_->pending.memory_events.end(), events.begin(), events.end());
}

void SessionWriter::add_id_histogram(const std::vector<IdHistogramBucket>& buckets) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->pending.add_id_histogram(buckets);
}

void SessionWriter::add_step_records(const StepMetric& step, const std::vector<LoadCounter>& load,
                                     const std::vector<IdHistogramBucket>& histogram) {
  std::unique_lock<std::mutex> lock(impl_->mu);  // one lock: the writer takes all of them or none
  impl_->pending.steps.push_back(step);
  impl_->pending.load.insert(impl_->pending.load.end(), load.begin(), load.end());
  impl_->pending.add_id_histogram(histogram);
  impl_->hold_if_behind(lock);
}

void SessionWriter::add_shards(std::vector<ShardRecord> shards) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto& p = impl_->pending.shards;
  p.insert(p.end(), std::make_move_iterator(shards.begin()), std::make_move_iterator(shards.end()));
}

void SessionWriter::add_rebalances(std::vector<RebalanceRecord> rebalances, std::vector<PlanChangeRecord> changes) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto& p = impl_->pending;
  p.rebalances.insert(p.rebalances.end(), std::make_move_iterator(rebalances.begin()), std::make_move_iterator(rebalances.end()));
  p.plan_changes.insert(p.plan_changes.end(), std::make_move_iterator(changes.begin()), std::make_move_iterator(changes.end()));
}

void SessionWriter::add_import_stats(std::vector<ImportStat> stats) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto& p = impl_->pending.import_stats;
  p.insert(p.end(), std::make_move_iterator(stats.begin()), std::make_move_iterator(stats.end()));
}

void SessionWriter::add_memory_frames(const std::vector<MemoryFrame>& frames) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->pending.frames.insert(impl_->pending.frames.end(), frames.begin(), frames.end());
}

void SessionWriter::add_memory_stacks(const std::vector<MemoryStackFrame>& rows) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->pending.stacks.insert(impl_->pending.stacks.end(), rows.begin(), rows.end());
}

void SessionWriter::add_memory_timeline(const std::vector<MemoryTimelinePoint>& points) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->pending.timeline.insert(impl_->pending.timeline.end(), points.begin(), points.end());
}

void SessionWriter::add_flight_records(std::vector<FlightRecord> records) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    auto& p = impl_->pending.flight;
    p.insert(p.end(), std::make_move_iterator(records.begin()), std::make_move_iterator(records.end()));
  }
  impl_->cv.notify_all();  // a dump is written at once: a SIGKILL may follow the SIGTERM that asked for it
}

void SessionWriter::add_snapshot(MemorySnapshot snapshot) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  snapshot.id = impl_->next_snapshot_id++;
  impl_->pending.snapshots.push_back(std::move(snapshot));
}

int64_t SessionWriter::ops_received() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->ops_received;
}

void SessionWriter::Impl::loop() {
  std::unique_lock<std::mutex> lock(mu);
  for (;;) {
    cv.wait_for(lock, kCommitInterval, [&] {
      return stop || sync_requested || pending.ops.size() >= kWakeOps || !pending.flight.empty() ||
             pending.file_bytes() >= kHoldBytes;
    });
    Pending batch;
    std::swap(batch, pending);
    sync_requested = false;
    const bool stopping = stop;
    const bool any = !batch.empty();
    if (any) ++batches_taken;
    lock.unlock();
    drained.notify_all();
    if (!batch.empty() && !failed.load()) {
      try {
        write(batch);
        lock.lock();
        ++commits;
        for (const StepMetric& st : batch.steps) {
          auto& [rows, last] = committed_steps.try_emplace(st.rank, 0, -1).first->second;
          ++rows;
          last = std::max(last, st.step);
        }
        lock.unlock();
      } catch (const std::exception& e) {
        // the transaction under way is rolled back: the file keeps the commits before it, whole,
        // and nothing more is written (tester49 F3: a full disk went on failing every 250 ms and
        // left a -wal that readers called damaged)
        const int sys = sqlite3_system_errno(db);
        sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
        lock.lock();
        if (write_error.empty())
          write_error = sys != 0 ? fmt::format("{} ({})", e.what(), std::strerror(sys)) : std::string(e.what());
        failed = true;
        lock.unlock();
      }
    }
    lock.lock();
    if (any) {
      ++batches_done;
      batch_done.notify_all();
    }
    if (stopping && pending.empty()) return;
  }
}

void SessionWriter::sync() {
  std::unique_lock<std::mutex> lock(impl_->mu);
  auto& m = *impl_;
  if (m.stop || m.failed.load()) return;
  const int64_t want = m.batches_taken + (m.pending.empty() ? 0 : 1);
  if (m.batches_done >= want) return;
  m.sync_requested = true;
  m.cv.notify_all();
  m.batch_done.wait(lock, [&] { return m.stop || m.failed.load() || m.batches_done >= want; });
}


template <class R>
void SessionWriter::Impl::insert_all(const char* key, const schema::detail::RecordTable<R>& t, const std::vector<R>& rows) {
  auto* st = stmts[key];
  for (const auto& r : rows) {
    t.bind(st, r);
    step_or_throw(db, st, path);
  }
}

void SessionWriter::Impl::write(Pending& p) {
  namespace sd = schema::detail;
  using sd::bind_value;
  auto step = [&](sqlite3_stmt* st) { step_or_throw(db, st, path); };
  exec("BEGIN");
  for (auto& [id, text] : p.new_strings) {
    auto* st = stmts["string"];
    bind_value(st, 1, id);
    bind_value(st, 2, text);
    step(st);
  }
  for (auto& [k, v] : p.metadata) {
    auto* st = stmts["meta"];
    bind_value(st, 1, k);
    bind_value(st, 2, v);
    step(st);
  }
  for (auto& [k, v] : p.end) {  // end_message before ended: the condition reads ended
    auto* st = stmts["meta_end"];
    bind_value(st, 1, k);
    bind_value(st, 2, v);
    bind_value(st, 3, std::string(meta::kEnded));
    step(st);
  }
  insert_all("rank", sd::ranks_table(), p.ranks);
  insert_all("lane", sd::lanes_table(), p.lanes);
  std::map<std::pair<int32_t, int32_t>, int64_t> max_dur;
  std::pair<int32_t, int32_t> last_lane{-1, -1};
  int64_t* last_max = nullptr;
  // Binds op i as the row whose first parameter is `b` + 1 (the columns of ops_table(), in order).
  auto bind_op = [&](sqlite3_stmt* st, size_t i, int b) {
    const OpEvent& o = p.ops[i];
    sqlite3_bind_int(st, b + 1, o.rank * 256 + static_cast<int>(o.lane));
    sqlite3_bind_int64(st, b + 2, o.start_ns);
    sqlite3_bind_int64(st, b + 3, next_op_id++);
    sqlite3_bind_int64(st, b + 4, o.end_ns);
    sqlite3_bind_int(st, b + 5, static_cast<int>(o.category));
    sqlite3_bind_int(st, b + 6, p.op_names[i]);
    sqlite3_bind_int64(st, b + 7, o.step);
    sqlite3_bind_int64(st, b + 8, o.bytes);
    sqlite3_bind_int64(st, b + 9, static_cast<int64_t>(o.correlation));
    const std::pair<int32_t, int32_t> lane{o.rank, static_cast<int32_t>(o.lane)};
    if (lane != last_lane) {  // ops come in runs of one lane
      last_lane = lane;
      last_max = &max_dur[lane];
    }
    *last_max = std::max(*last_max, o.end_ns - o.start_ns);
  };
  // Whole statements of kOpsPerStatement rows, then the rest one row at a time; the same rows in
  // the same order (ids are insertion order) either way.
  auto* op_st = stmts["op"];
  auto* ops_st = stmts["ops"];
  size_t i = 0;
  for (; i + kOpsPerStatement <= p.ops.size(); i += kOpsPerStatement) {
    for (size_t r = 0; r < kOpsPerStatement; ++r) bind_op(ops_st, i + r, static_cast<int>(r) * kOpColumns);
    step(ops_st);
    if ((i + kOpsPerStatement) % kOpsPerTransaction == 0) exec("COMMIT; BEGIN");  // keep the dirty set in cache
  }
  for (; i < p.ops.size(); ++i) {
    bind_op(op_st, i, 0);
    step(op_st);
  }
  // the packed copy (op_blocks), lane by lane as the ops come
  LanePack* pack = nullptr;
  int64_t pack_key = -1;
  for (size_t k = 0; k < p.ops.size(); ++k) {
    const OpEvent& o = p.ops[k];
    const int64_t key = int64_t{o.rank} * 256 + static_cast<int>(o.lane);
    if (key != pack_key) {
      pack_key = key;
      pack = &packs[key];
    }
    if (!pack->in_order) continue;
    if (o.start_ns < pack->last_start) {  // packed from its rows at close
      pack->in_order = false;
      pack->packer = {};
      continue;
    }
    pack->last_start = o.start_ns;
    OpRecord r;
    r.category = o.category;
    r.name_id = p.op_names[k];
    r.step = o.step;
    r.start_ns = o.start_ns;
    r.end_ns = o.end_ns;
    r.bytes = o.bytes;
    r.correlation = o.correlation;
    pack->packer.add(r);
    if (pack->packer.count() == detail::kOpsPerBlock) {
      insert_block(key, pack->blocks++, pack->packer);
      pack->packer.clear();
    }
  }
  for (auto& [key, d] : max_dur) {
    auto* st = stmts["lane_max"];
    sqlite3_bind_int(st, 1, key.first);
    sqlite3_bind_int(st, 2, key.second);
    sqlite3_bind_int64(st, 3, d);
    step(st);
  }
  insert_all("coll", sd::collectives_table(), p.collectives);
  insert_all("load", sd::load_counters_table(), p.load);
  insert_all("step", sd::steps_table(), p.steps);
  insert_all("memory", sd::memory_counters_table(), p.memory);
  insert_all("mem_event", sd::memory_events_table(), p.memory_events);
  std::vector<sd::BlockRow> blocks;
  for (auto& sn : p.snapshots) {
    auto* st = stmts["snapshot"];
    sd::memory_snapshots_table().bind(st, sn);
    step(st);
    blocks.clear();
    for (auto& b : sn.blocks) blocks.push_back({sn.id, std::move(b)});
    insert_all("block", sd::memory_blocks_table(), blocks);
  }
  insert_all("id_hist", sd::id_histogram_table(), p.id_histogram);
  insert_all("shard", sd::shards_table(), p.shards);
  insert_all("rebalance", sd::rebalances_table(), p.rebalances);
  insert_all("plan_change", sd::plan_changes_table(), p.plan_changes);
  insert_all("import_stat", sd::import_stats_table(), p.import_stats);
  insert_all("mem_frame", sd::memory_frames_table(), p.frames);
  insert_all("mem_stack", sd::memory_stacks_table(), p.stacks);
  insert_all("mem_timeline", sd::memory_timeline_table(), p.timeline);
  insert_all("flight", sd::flight_recorder_table(), p.flight);
  exec("COMMIT");
}

}  // namespace embedscope::sessions

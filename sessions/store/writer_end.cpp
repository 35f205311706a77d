// SessionWriter::close and what it does at the end of a session (writer_impl.h).
#include "store/writer_impl.h"

namespace embedscope::sessions {

void SessionWriter::close(const std::string& ended, const std::string& message) {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    if (m.closed) return;
    m.closed = true;
    // not over an end recorded meanwhile by a connection of its own (a stop at once: end_mark.h)
    m.pending.end.emplace_back(meta::kEndMessage, message);
    m.pending.end.emplace_back(meta::kEnded, ended);
    m.stop = true;
  }
  m.cv.notify_all();
  m.drained.notify_all();
  m.batch_done.notify_all();  // a sync() under way returns
  if (m.thread.joinable()) m.thread.join();
  if (m.write_error.empty()) m.write_op_blocks();
  if (!m.write_error.empty()) m.write_end_after_failure(ended, message);
  m.end_reserve.release();  // room for the checkpoint on a nearly full disk
  m.finish_wal();
  // Closed here, not in the destructor: the writer lock goes with it, so the session may be
  // overwritten from now on.
  for (auto& [k, st] : m.stmts) sqlite3_finalize(st);
  m.stmts.clear();
  sqlite3_close(m.db);
  m.db = nullptr;
  // after a failed write the rolled-back commit's frames stay in the -wal behind the last commit,
  // where SQLite never reads them, and every reader called them damaged (retest49 on tester49
  // F3): the -wal is cut at its last valid commit, under the writer lock (a cut needs no room)
  if (!m.write_error.empty() && m.commits > 0) {
    const WalScan wal = scan_wal(m.path);
    if (wal.present && wal.committed_frames > 0 && wal.unread_bytes > 0)
      (void)::truncate((m.path + "-wal").c_str(), wal.readable_bytes);
  }
  m.close_lock_fd();  // after SQLite's close: see writer_lock.h
  if (!m.write_error.empty()) {
    m.remove_if_nothing_committed();
    throw SessionError(m.write_error);
  }
}

bool SessionWriter::write_failed() const { return impl_->failed.load(); }

std::optional<SessionWriter::WriteFailure> SessionWriter::write_failure() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->write_error.empty()) return std::nullopt;
  WriteFailure f;
  f.error = impl_->write_error;
  f.commits = impl_->commits;
  bool first = true;
  for (const auto& [rank, c] : impl_->committed_steps) {
    f.steps_kept = first ? c.first : std::min(f.steps_kept, c.first);
    f.last_step_kept = first ? c.second : std::min(f.last_step_kept, c.second);
    first = false;
  }
  return f;
}

void SessionWriter::Impl::write_end_after_failure(const std::string& ended, const std::string& message) {
  if (commits == 0) return;  // nothing recorded: the file goes (remove_if_nothing_committed)
  // the rolled-back commit's pages are still allocated in the -wal: a small commit fits there
  sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);  // none open: a no-op
  int64_t rows = -1, last = -1;
  for (const auto& [rank, c] : committed_steps) {
    rows = rows < 0 ? c.first : std::min(rows, c.first);
    last = last < 0 ? c.second : std::min(last, c.second);
  }
  const std::string kept = rows <= 0 ? std::string("no step")
                                     : fmt::format("{} step{} (through step {})", rows, rows == 1 ? "" : "s", last);
  const std::string run = ended == "write_failed" ? std::string("stopped there")
                          : message.empty()         ? "ended " + ended
                                                    : fmt::format("ended {}: {}", ended, message);
  const std::string text =
      fmt::format("{}; the session keeps {}, every commit before the failure, whole; the run {}", write_error, kept, run);
  // the room held since the start (end_reserve.h): the new frames of this commit take it, even
  // when the failed commit could not write one (a disk filled by another process)
  end_reserve.release();
  const std::vector<std::pair<std::string, std::string>> end_rows{{meta::kEnded, "write_failed"}, {meta::kEndMessage, text}};
  auto commit_end = [&] {
    if (sqlite3_exec(db, "BEGIN", nullptr, nullptr, nullptr) != SQLITE_OK) return false;
    auto* st = stmts["meta"];
    bool ok = st != nullptr;
    for (const auto& [k, v] : end_rows) {
      if (!ok) break;
      schema::detail::bind_value(st, 1, k);
      schema::detail::bind_value(st, 2, v);
      ok = sqlite3_step(st) == SQLITE_DONE;
      sqlite3_reset(st);
    }
    ok = sqlite3_exec(db, ok ? "COMMIT" : "ROLLBACK", nullptr, nullptr, nullptr) == SQLITE_OK && ok;
    if (sqlite3_get_autocommit(db) == 0) sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);  // COMMIT failed
    return ok;
  };
  if (commit_end()) return;
  // The failed commit wrote no frame (the -wal ended at the limit: a file size limit, or a disk
  // filled to the page), so the end mark finds no room in the -wal either: copy the -wal into the
  // database (the database file may still have room) and write it into the emptied -wal (ci53:
  // the run said write_failed, its session read crashed, 1 in 2,577 tests under load).
  int log = 0, done = 0;
  if (sqlite3_wal_checkpoint_v2(db, nullptr, SQLITE_CHECKPOINT_TRUNCATE, &log, &done) == SQLITE_OK) commit_end();
}

void SessionWriter::Impl::remove_if_nothing_committed() {
  if (commits > 0) return;
  std::remove(path.c_str());
  for (const char* suffix : {"-wal", "-shm", "-journal"}) std::remove((path + suffix).c_str());
}

void SessionWriter::Impl::insert_block(int64_t lane_key, int64_t block, const detail::OpPacker& packed) {
  auto* st = stmts["op_block"];
  sqlite3_bind_int64(st, 1, lane_key);
  sqlite3_bind_int64(st, 2, block);
  sqlite3_bind_int64(st, 3, static_cast<int64_t>(packed.count()));
  sqlite3_bind_blob64(st, 4, packed.data().data(), packed.data().size(), SQLITE_STATIC);
  step_or_throw(db, st, path);
}

void SessionWriter::Impl::write_op_blocks() {
  if (next_op_id == 0) return;  // no ops
  sqlite3_stmt* sel = nullptr;
  try {
    exec("BEGIN");
    for (auto& [key, lane] : packs) {
      if (lane.in_order) {
        if (lane.packer.count()) insert_block(key, lane.blocks++, lane.packer);
        continue;
      }
      // ops out of start order: the lane's rows in the order of the ops key, as a reader's range
      // scan returns them (ties on start by id)
      const std::string drop = fmt::format("DELETE FROM op_blocks WHERE lane_key = {}", key);
      exec(drop.c_str());
      if (sqlite3_prepare_v2(db,
                             fmt::format("SELECT {} FROM ops WHERE lane_key = ?1 ORDER BY start_ns, id",
                                         detail::kOpColumns)
                                 .c_str(),
                             -1, &sel, nullptr) != SQLITE_OK)
        throw SessionError(sqlite3_errmsg(db));
      sqlite3_bind_int64(sel, 1, key);
      detail::OpPacker packer;
      int64_t block = 0;
      int rc;
      while ((rc = sqlite3_step(sel)) == SQLITE_ROW) {
        packer.add(detail::op_from_row(sel, path));  // as the reader reads an ops row
        if (packer.count() == detail::kOpsPerBlock) {
          insert_block(key, block++, packer);
          packer.clear();
        }
      }
      if (rc != SQLITE_DONE) throw SessionError(sqlite3_errmsg(db));
      if (packer.count()) insert_block(key, block, packer);
      sqlite3_finalize(sel);
      sel = nullptr;
    }
    // the marker: every lane is packed; op_count = the session's ops
    const std::string marker =
        fmt::format("INSERT INTO op_blocks VALUES (-1, 0, {}, x'')", next_op_id);
    exec(marker.c_str());
    exec("COMMIT");
  } catch (const std::exception&) {
    sqlite3_finalize(sel);
    sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
  }
}

void SessionWriter::Impl::finish_wal() {
  // Everything is committed: the data is safe in the database and its -wal file whatever
  // happens here, so nothing below is an error (SQLite: "WAL mode keeps the data").
  // 1. Copy the WAL into the database. TRUNCATE waits (busy handler) for readers in a read
  //    transaction; readers that merely hold the file open do not block it. A checkpoint that
  //    cannot complete leaves the rest in the WAL, which every reader sees.
  int log = 0, done = 0;
  if (sqlite3_wal_checkpoint_v2(db, nullptr, SQLITE_CHECKPOINT_TRUNCATE, &log, &done) != SQLITE_OK)
    sqlite3_wal_checkpoint_v2(db, nullptr, SQLITE_CHECKPOINT_PASSIVE, &log, &done);
  // 2. Leave WAL mode (one self-contained file). That needs an exclusive lock, which an open
  //    reader connection prevents (in WAL mode every connection holds a shared lock on the
  //    file while open), and the change does not call the busy handler: retry for a while,
  //    then stay in WAL mode. The file is then complete (after step 1) beside an empty -wal.
  const auto deadline = std::chrono::steady_clock::now() + kLeaveWalFor;
  for (;;) {
    sqlite3_stmt* st = nullptr;
    std::string mode;
    if (sqlite3_prepare_v2(db, "PRAGMA journal_mode=DELETE", -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
      if (const auto* t = sqlite3_column_text(st, 0)) mode = reinterpret_cast<const char*>(t);
    sqlite3_finalize(st);
    if (mode == "delete" || std::chrono::steady_clock::now() >= deadline) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace embedscope::sessions

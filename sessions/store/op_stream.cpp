#include "embedscope/sessions/store/op_stream.h"

#include <sqlite3.h>

#include <fmt/format.h>

#include "store/op_scan.h"
#include "store/read_only_open.h"

namespace embedscope::sessions {

void for_each_lane_ops(const SessionReader& session, const std::function<void(std::vector<OpRecord>& lane_ops)>& fn) {
  const std::string& path = session.path();
  sqlite3* db = nullptr;
  struct Close {
    sqlite3*& db;
    ~Close() { sqlite3_close(db); }
  } close{db};
  // as SessionReader: no checkpoint on close, a wait while a writer holds a lock for a moment,
  // a session whose -shm cannot be made read all the same (read_only_open.h)
  db = detail::open_session_read_only(path, 10000);
  detail::scan_lanes(db, path, session.has_op_blocks(), fn);
}

}  // namespace embedscope::sessions

#pragma once
// The collective calls of a session's measured steps, for tests that time them by hand: one entry
// per (group_name, sequence), in that order.

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace embedscope::test_support {

/// One collective call: each member's bytes (the larger of its bytes sent and received, B), the
/// last member's arrival (`last`, the largest start_ns) and the call's end (the largest end_ns),
/// ns on the session's clock; its time is end - last.
struct CollectiveCall {
  std::vector<int64_t> bytes;
  int64_t last = 0, end = 0;
};

/// Reads table `collectives` of the session at `path` (rows with step >= 0). Adds a gtest failure
/// (and returns what it read) when the file cannot be opened or queried.
inline std::vector<CollectiveCall> collective_calls(const std::string& path) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK) << path;
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db,
                               "SELECT group_name, sequence, start_ns, end_ns, bytes_sent, bytes_received "
                               "FROM collectives WHERE step >= 0",
                               -1, &st, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(db);
  std::map<std::pair<std::string, int64_t>, CollectiveCall> calls;
  while (st && sqlite3_step(st) == SQLITE_ROW) {
    CollectiveCall& c = calls[{reinterpret_cast<const char*>(sqlite3_column_text(st, 0)), sqlite3_column_int64(st, 1)}];
    c.last = std::max<int64_t>(c.last, sqlite3_column_int64(st, 2));
    c.end = std::max<int64_t>(c.end, sqlite3_column_int64(st, 3));
    c.bytes.push_back(std::max<int64_t>(sqlite3_column_int64(st, 4), sqlite3_column_int64(st, 5)));
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  std::vector<CollectiveCall> out;
  for (auto& [key, c] : calls) out.push_back(std::move(c));
  return out;
}

}  // namespace embedscope::test_support

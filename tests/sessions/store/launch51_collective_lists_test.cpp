// launch51: a collectives row's per-peer lists (peers, send_elements, recv_elements: JSON arrays
// of integers in the file) are read without a JSON parse when they are as the writer writes them
// ("[1,-2,3]", "[]"), the case of every session Embedscope writes; any other JSON array (spaces,
// a file edited or written by another tool) is read as JSON, as before, and a list that is no
// JSON array is refused naming the row.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "embedscope/sessions/store/session.h"

namespace {
namespace fs = std::filesystem;
namespace ss = embedscope::sessions;

fs::path launch51c_scratch(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("es_launch51_lists_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// A closed session of one collective with these lists.
std::string launch51c_session(const fs::path& dir, const std::vector<int32_t>& peers, const std::vector<int64_t>& send,
                              const std::vector<int64_t>& recv) {
  const std::string db = (dir / "c.db").string();
  ss::SessionWriter w(db);
  w.set_metadata("world_size", "1");
  ss::CollectiveRecord c;
  c.op = "all_to_all";
  c.name = "output_dist/all_to_all";
  c.group = "world";
  c.sequence = 7;
  c.dtype = "float32";
  c.peers = peers;
  c.send_elements = send;
  c.recv_elements = recv;
  w.add_collective(c);
  w.close("complete");
  return db;
}

void launch51c_set(const std::string& db, const std::string& column, const std::string& text) {
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  const std::string sql = "UPDATE collectives SET " + column + " = '" + text + "'";
  EXPECT_EQ(sqlite3_exec(h, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(h);
  sqlite3_close(h);
}
}  // namespace

TEST(Launch51CollectiveLists, TheWritersListsReadBackExactlyExtremesIncluded) {
  const fs::path dir = launch51c_scratch("round");
  const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  const std::vector<int32_t> peers{0, 3, std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min()};
  const std::vector<int64_t> send{lo, -1, 0, hi}, recv{};
  const std::string db = launch51c_session(dir, peers, send, recv);
  const auto c = ss::SessionReader(db).collectives();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].peers, peers);
  EXPECT_EQ(c[0].send_elements, send);
  EXPECT_EQ(c[0].recv_elements, recv);
  fs::remove_all(dir);
}

TEST(Launch51CollectiveLists, OtherJsonArraysAreReadAsJsonAndANonArrayIsRefused) {
  const fs::path dir = launch51c_scratch("json");
  const std::string db = launch51c_session(dir, {0, 1}, {1, 2}, {3, 4});
  launch51c_set(db, "peers", "[ 0 , 1 ]");         // spaces: JSON, not the writer's form
  launch51c_set(db, "send_elements", "[5,6] ");    // a space after it
  launch51c_set(db, "recv_elements", "[7e0, 8]");  // an exponent: JSON's number, read as 7
  const auto c = ss::SessionReader(db).collectives();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].peers, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(c[0].send_elements, (std::vector<int64_t>{5, 6}));
  EXPECT_EQ(c[0].recv_elements, (std::vector<int64_t>{7, 8}));
  launch51c_set(db, "peers", "[0,1");  // cut: no JSON array
  try {
    (void)ss::SessionReader(db).collectives();
    ADD_FAILURE() << "a cut list was read";
  } catch (const ss::SessionError& e) {
    EXPECT_NE(std::string(e.what()).find("collectives row world 7: bad split list"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

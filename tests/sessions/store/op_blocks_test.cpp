// The packed copy of the ops (table op_blocks, schema 12): SessionReader::lane_ops gives from it
// exactly the records the ops rows give, and reads the rows where a file has no blocks (older
// versions, a writer that never closed); a damaged block is an error naming the file.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "embedscope/sessions/store/session.h"

using namespace embedscope::sessions;

namespace {

std::string op_blocks_scratch(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("es_op_blocks_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const auto path = dir / name;
  std::filesystem::remove(path);
  return path.string();
}

void op_blocks_exec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sql;
  sqlite3_close(db);
}

int64_t op_blocks_query(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr);
  const int64_t v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
  sqlite3_finalize(st);
  sqlite3_close(db);
  return v;
}

constexpr int64_t kLongLane = 70'000;  // five blocks: 4 x 16,384 + 4,464

// Rank 0 lane 0: kLongLane ops written newest first in batches (the blocks follow start order,
// not insertion order: packed from the rows at close), starting at -5 ms, with two ops of one
// start (kept in insertion order), negative steps, bytes up to 2^40 and correlations across 2^63.
// Rank 0 lane 1: 66,000 ops in start order (its first blocks are packed while the run goes on),
// then one that starts earlier (the lane is packed again from its rows at close). Rank 1 lane 0:
// kLongLane ops in start order (four blocks during the run, the last one at close). Rank 1 lane 1:
// three ops with the extremes of int64 times. Lane (1, 2) has no ops.
std::string op_blocks_session(const std::string& name) {
  const std::string path = op_blocks_scratch(name);
  SessionWriter w(path);
  w.add_lane({0, 0, "compute", "thread"});
  w.add_lane({1, 0, "compute", "thread"});
  w.add_lane({1, 1, "comm", "thread"});
  w.add_lane({0, 1, "comm", "thread"});
  w.add_lane({1, 2, "empty", "thread"});
  static const char* names[] = {"lookup", "dense", "input_dist/ids", "a2a"};
  std::vector<OpEvent> batch;
  for (int64_t i = kLongLane - 1; i >= 0; --i) {
    const int64_t start = -5'000'000 + i * 1'000 + (i % 7) * 3;
    const auto cat = static_cast<OpCategory>(i % kNumCategories);
    const uint64_t corr = i % 3 ? static_cast<uint64_t>(i) * 977 : std::numeric_limits<uint64_t>::max() - static_cast<uint64_t>(i);
    batch.push_back({0, Lane::compute, cat, names[i % 4], i / 1000 - 3, start, start + 10 + (i % 500) * 37,
                     (i % 11) << (i % 30), corr});
    if (batch.size() == 9'000) {
      w.add_ops(batch);
      batch.clear();
    }
  }
  w.add_ops(batch);
  batch.clear();
  for (int64_t i = 0; i < kLongLane; ++i) {
    if (i < 66'000)
      batch.push_back({0, Lane::comm, OpCategory::comm, names[3], i / 100, i * 50, i * 50 + 40, i, static_cast<uint64_t>(i)});
    batch.push_back({1, Lane::compute, OpCategory::dense, names[i % 2], i / 100, i * 70 - 9, i * 70 + (i % 13), 0, 0});
    if (batch.size() >= 10'000) {
      w.add_ops(batch);
      batch.clear();
    }
  }
  batch.push_back({0, Lane::comm, OpCategory::comm, "early", 0, 1'234, 1'260, 5, 5});  // out of order
  w.add_ops(batch);
  // the same start twice: insertion order decides
  w.add_ops({{0, Lane::compute, OpCategory::comm, "tie_second", 7, 777'777'000, 777'778'000, 1, 2},
             {0, Lane::compute, OpCategory::lookup, "tie_third", 7, 777'777'000, 777'779'000, 0, 0}});
  w.add_ops({{1, Lane::comm, OpCategory::comm, "a2a", 0, std::numeric_limits<int64_t>::min() / 2, -1, -7, 0},
             {1, Lane::comm, OpCategory::other, "late", -1, 0, std::numeric_limits<int64_t>::max() / 2, 0, 1},
             {1, Lane::comm, OpCategory::memcpy, "h2d", 2, 5, 5, int64_t{1} << 62, 9}});
  w.close("complete");
  return path;
}

void expect_same_ops(const std::vector<OpRecord>& got, const std::vector<OpRecord>& want, const SessionReader& r) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const OpRecord &a = got[i], &b = want[i];
    const bool same = a.rank == b.rank && a.lane == b.lane && a.category == b.category && a.name_id == b.name_id &&
                      a.step == b.step && a.start_ns == b.start_ns && a.end_ns == b.end_ns && a.bytes == b.bytes &&
                      a.correlation == b.correlation;
    ASSERT_TRUE(same) << "op " << i << ": " << r.name(a.name_id) << " at " << a.start_ns << " vs " << r.name(b.name_id)
                      << " at " << b.start_ns;
  }
}

constexpr int64_t kEver = std::numeric_limits<int64_t>::max();

TEST(OpBlocks, LaneOpsAreTheOpsRowsInOrder) {
  const std::string path = op_blocks_session("blocks.db");
  EXPECT_EQ(op_blocks_query(path, "SELECT count(*) FROM op_blocks WHERE lane_key = 0"), 5);
  EXPECT_EQ(op_blocks_query(path, "SELECT op_count FROM op_blocks WHERE lane_key = 0 AND block = 4"),
            kLongLane + 2 - 4 * 16'384);
  EXPECT_EQ(op_blocks_query(path, "SELECT count(*) FROM op_blocks WHERE lane_key = 256 + 2"), 0);  // no ops, no block
  EXPECT_EQ(op_blocks_query(path, "SELECT count(*) FROM op_blocks WHERE lane_key = 256"), 5);
  EXPECT_EQ(op_blocks_query(path, "SELECT count(*) FROM op_blocks WHERE lane_key = 1"), 5);
  EXPECT_EQ(op_blocks_query(path, "SELECT sum(op_count) FROM op_blocks WHERE lane_key = 1"), 66'001);
  // the marker: every op of the session
  EXPECT_EQ(op_blocks_query(path, "SELECT op_count FROM op_blocks WHERE lane_key = -1"), 2 * kLongLane + 66'001 + 2 + 3);
  SessionReader r(path);
  EXPECT_EQ(r.schema_version(), 12);
  ASSERT_TRUE(r.has_op_blocks());
  const auto lane0 = r.lane_ops(0, 0);
  ASSERT_EQ(lane0.size(), static_cast<size_t>(kLongLane + 2));
  expect_same_ops(lane0, r.ops(0, 0, std::numeric_limits<int64_t>::min(), kEver), r);
  // hand-checked records: the first op (i = 0) and the tie, in insertion order
  EXPECT_EQ(lane0.front().start_ns, -5'000'000);
  EXPECT_EQ(lane0.front().end_ns, -5'000'000 + 10);
  EXPECT_EQ(lane0.front().step, -3);
  EXPECT_EQ(lane0.front().correlation, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(r.name(lane0.front().name_id), "lookup");
  const auto& second = lane0[static_cast<size_t>(kLongLane)];
  EXPECT_EQ(r.name(second.name_id), "tie_second");
  EXPECT_EQ(second.correlation, 2u);
  EXPECT_EQ(r.name(lane0.back().name_id), "tie_third");
  EXPECT_EQ(lane0.back().end_ns, 777'779'000);
  const auto lane11 = r.lane_ops(1, 1);
  ASSERT_EQ(lane11.size(), 3u);
  expect_same_ops(lane11, r.ops(1, 1, std::numeric_limits<int64_t>::min(), kEver), r);
  EXPECT_EQ(lane11[0].start_ns, std::numeric_limits<int64_t>::min() / 2);
  EXPECT_EQ(lane11[0].bytes, -7);
  EXPECT_EQ(lane11[1].end_ns, std::numeric_limits<int64_t>::max() / 2);
  EXPECT_EQ(lane11[2].bytes, int64_t{1} << 62);
  EXPECT_EQ(lane11[2].rank, 1);
  EXPECT_EQ(lane11[2].lane, 1);
  for (auto [rank, lane] : {std::pair{0, 1}, std::pair{1, 0}}) {
    SCOPED_TRACE(testing::Message() << "rank " << rank << " lane " << lane);
    expect_same_ops(r.lane_ops(rank, lane), r.ops(rank, lane, std::numeric_limits<int64_t>::min(), kEver), r);
  }
  const auto lane01 = r.lane_ops(0, 1);
  ASSERT_EQ(lane01.size(), 66'001u);
  EXPECT_EQ(lane01[0].start_ns, 0);
  EXPECT_EQ(r.name(lane01[25].name_id), "early");  // 1,234 ns: after the op at 1,200
  EXPECT_EQ(lane01[26].start_ns, 1'250);
  EXPECT_EQ(lane01.back().end_ns, 65'999 * 50 + 40);
  EXPECT_EQ(r.lane_ops(1, 0).back().start_ns, (kLongLane - 1) * 70 - 9);
  EXPECT_TRUE(r.lane_ops(1, 2).empty());
  EXPECT_TRUE(r.lane_ops(5, 0).empty());  // no such lane
  EXPECT_TRUE(r.lane_ops(-1, 255).empty());  // not the marker
}

TEST(OpBlocks, FilesWithoutBlocksReadTheOpsRows) {
  // a file whose writer never closed (or of schema 11 and before) has no blocks
  const std::string path = op_blocks_session("noblocks.db");
  const std::vector<OpRecord> packed = SessionReader(path).lane_ops(0, 0);
  // blocks without the marker (a run killed after it packed some): not used
  op_blocks_exec(path, "DELETE FROM op_blocks WHERE lane_key = -1; UPDATE op_blocks SET data = x'00' WHERE lane_key = 0");
  SessionReader r(path);
  EXPECT_FALSE(r.has_op_blocks());
  expect_same_ops(r.lane_ops(0, 0), packed, r);
  op_blocks_exec(path, "DELETE FROM op_blocks");
  op_blocks_exec(path, "DROP TABLE op_blocks; PRAGMA user_version = 11");
  SessionReader v11(path);
  EXPECT_EQ(v11.schema_version(), 11);
  EXPECT_FALSE(v11.has_op_blocks());
  expect_same_ops(v11.lane_ops(0, 0), packed, v11);
  EXPECT_EQ(v11.lane_ops(1, 1).size(), 3u);
  // a run still writing: its full blocks are in the file, the marker is not
  const std::string live = op_blocks_scratch("live.db");
  SessionWriter w(live);
  w.add_lane({0, 0, "compute", "thread"});
  std::vector<OpEvent> many;
  for (int64_t i = 0; i < 70'000; ++i) many.push_back({0, Lane::compute, OpCategory::lookup, "lookup", 0, i * 10, i * 10 + 5, 0, 0});
  w.add_ops(many);
  w.set_metadata("workload_name", "live");
  std::vector<OpRecord> seen;
  for (int i = 0; i < 300 && seen.size() < many.size(); ++i) {  // committed within kCommitInterval
    usleep(10'000);
    try {
      SessionReader reading(live);
      EXPECT_FALSE(reading.has_op_blocks());
      seen = reading.lane_ops(0, 0);
    } catch (const SessionError&) {  // nothing committed yet
    }
  }
  ASSERT_EQ(seen.size(), many.size());
  EXPECT_EQ(seen.back().end_ns, 699'995);
  EXPECT_EQ(op_blocks_query(live, "SELECT count(*) FROM op_blocks WHERE lane_key = 0"), 4);  // the first 4 x 16,384
  w.close("complete");
  SessionReader closed(live);
  EXPECT_TRUE(closed.has_op_blocks());
  expect_same_ops(closed.lane_ops(0, 0), seen, closed);
}

TEST(OpBlocks, ADamagedBlockIsAnErrorNamingTheFile) {
  auto error = [](const std::string& path) {
    try {
      SessionReader(path).lane_ops(0, 0);
    } catch (const SessionError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string more = op_blocks_session("count.db");
  op_blocks_exec(more, "UPDATE op_blocks SET op_count = op_count + 1 WHERE lane_key = 0 AND block = 4");
  EXPECT_NE(error(more).find("count.db: the session file is corrupt (op_blocks of rank 0 lane 0: a block of 4467 ops "
                             "ends after 4466 ops)"),
            std::string::npos)
      << error(more);
  const std::string fewer = op_blocks_session("fewer.db");
  op_blocks_exec(fewer, "UPDATE op_blocks SET op_count = 4465 WHERE lane_key = 0 AND block = 4");
  // the last op (tie_third) is 8 bytes: start +0, duration 2000 (2 bytes), category, name id, step +0, bytes 0,
  // correlation -2
  EXPECT_NE(error(fewer).find("a block of 4465 ops has 8 bytes left over"), std::string::npos) << error(fewer);
  const std::string cut = op_blocks_session("cut.db");
  op_blocks_exec(cut, "UPDATE op_blocks SET data = substr(data, 1, 10) WHERE lane_key = 0 AND block = 0");
  EXPECT_NE(error(cut).find("cut.db: the session file is corrupt (op_blocks of rank 0 lane 0: a block of 16384 ops ends "
                            "after 1 ops)"),
            std::string::npos)
      << error(cut);
  // one op by hand: start 0, duration 10 (zigzag 20), category 7, then name, step, bytes, correlation 0
  const std::string cat = op_blocks_session("cat.db");
  op_blocks_exec(cat, "UPDATE op_blocks SET op_count = 1, data = x'00140700000000' WHERE lane_key = 256 + 1");
  try {
    SessionReader(cat).lane_ops(1, 1);
    ADD_FAILURE() << "category 7 was accepted";
  } catch (const SessionError& e) {
    EXPECT_NE(std::string(e.what()).find("cat.db: the session file is corrupt (op_blocks of rank 1 lane 1: an op of rank 1 "
                                         "has category 7)"),
              std::string::npos)
        << e.what();
  }
  std::filesystem::remove_all(std::filesystem::path(more).parent_path());
}

}  // namespace

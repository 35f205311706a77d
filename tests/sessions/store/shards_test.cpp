// The sharding plan as rows (table `shards`, schema 4), and the same rows built from the
// metadata sharding_plan_json where a file has no such rows.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>

#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"

using namespace embedscope::sessions;
namespace fs = std::filesystem;

namespace {

fs::path shards_scratch() {
  static const auto dir = [] {
    auto d = fs::temp_directory_path() / ("es_shards_" + std::to_string(getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

ShardRecord shard(int32_t table, const char* name, const char* type, int32_t node, int32_t index, int32_t rank,
                  int64_t row_offset, int64_t num_rows, int64_t col_offset, int64_t num_cols, int64_t bytes) {
  ShardRecord s;
  s.table = table;
  s.table_name = name;
  s.sharding_type = type;
  s.node = node;
  s.shard_index = index;
  s.rank = rank;
  s.row_offset = row_offset;
  s.num_rows = num_rows;
  s.col_offset = col_offset;
  s.num_cols = num_cols;
  s.planned_bytes = bytes;
  return s;
}

TEST(Shards, RoundTripOrderedByTableAndShard) {
  const std::string path = (shards_scratch() / "shards.db").string();
  {
    SessionWriter w(path);
    w.set_metadata(meta::kShardingPlanJson, R"({"tables": [{"name": "ignored", "shards": [{"rank": 9}]}]})");
    // given out of order, in two batches
    w.add_shards({shard(1, "t_item", "column_wise", -1, 1, 3, 0, 1000, 8, 8, 64000),
                  shard(0, "t_user", "table_row_wise", 1, 0, 2, 0, 50, 0, 16, 6400)});
    w.add_shards({shard(1, "t_item", "column_wise", -1, 0, 1, 0, 1000, 0, 8, 64000),
                  shard(0, "t_user", "table_row_wise", 1, 1, 3, 50, 50, 0, 16, 6400)});
    w.close("complete");
  }
  SessionReader r(path);
  EXPECT_EQ(r.schema_version(), kSchemaVersion);
  EXPECT_TRUE(r.has_shards_table());
  const auto s = r.shards();  // the table wins over sharding_plan_json
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].table, 0);
  EXPECT_EQ(s[0].shard_index, 0);
  EXPECT_EQ(s[0].table_name, "t_user");
  EXPECT_EQ(s[0].sharding_type, "table_row_wise");
  EXPECT_EQ(s[0].node, 1);
  EXPECT_EQ(s[0].rank, 2);
  EXPECT_EQ(s[0].num_rows, 50);
  EXPECT_EQ(s[0].num_cols, 16);
  EXPECT_EQ(s[0].planned_bytes, 6400);
  EXPECT_EQ(s[1].shard_index, 1);
  EXPECT_EQ(s[1].rank, 3);
  EXPECT_EQ(s[1].row_offset, 50);
  EXPECT_EQ(s[2].table, 1);
  EXPECT_EQ(s[2].shard_index, 0);
  EXPECT_EQ(s[2].rank, 1);
  EXPECT_EQ(s[2].col_offset, 0);
  EXPECT_EQ(s[3].shard_index, 1);
  EXPECT_EQ(s[3].col_offset, 8);
  EXPECT_EQ(s[3].node, -1);
  EXPECT_EQ(s[3].planned_bytes, 64000);
}

TEST(Shards, BuiltFromThePlanJsonWhenTheTableHasNoRows) {
  const std::string path = (shards_scratch() / "json.db").string();
  {
    SessionWriter w(path);
    w.set_metadata(meta::kShardingPlanJson,
                   R"({"world_size": 4, "local_world_size": 2, "tables": [)"
                   R"({"name": "a", "sharding_type": "data_parallel", "shards": [)"
                   R"({"rank": 0, "row_offset": 0, "num_rows": 10, "col_offset": 0, "num_cols": 4},)"
                   R"({"rank": 1, "row_offset": 0, "num_rows": 10, "col_offset": 0, "num_cols": 4}]},)"
                   R"({"name": "b", "sharding_type": "table_row_wise", "node": 1, "shards": [)"
                   R"({"rank": 2, "row_offset": 0, "num_rows": 7, "col_offset": 0, "num_cols": 8},)"
                   R"({"rank": 3, "row_offset": 7, "num_rows": 6, "col_offset": 0, "num_cols": 8}]}]})");
    w.close("complete");
  }
  SessionReader r(path);
  EXPECT_TRUE(r.has_shards_table());
  const auto s = r.shards();
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[1].table, 0);
  EXPECT_EQ(s[1].table_name, "a");
  EXPECT_EQ(s[1].sharding_type, "data_parallel");
  EXPECT_EQ(s[1].shard_index, 1);
  EXPECT_EQ(s[1].rank, 1);
  EXPECT_EQ(s[1].node, -1);
  EXPECT_EQ(s[3].table, 1);
  EXPECT_EQ(s[3].table_name, "b");
  EXPECT_EQ(s[3].node, 1);
  EXPECT_EQ(s[3].shard_index, 1);
  EXPECT_EQ(s[3].rank, 3);
  EXPECT_EQ(s[3].row_offset, 7);
  EXPECT_EQ(s[3].num_rows, 6);
  EXPECT_EQ(s[3].num_cols, 8);
  EXPECT_EQ(s[3].planned_bytes, -1);
}

TEST(Shards, NoPlanGivesNoShardsAndABadPlanNamesTheFile) {
  const std::string none = (shards_scratch() / "none.db").string();
  {
    SessionWriter w(none);
    w.close("complete");
  }
  EXPECT_TRUE(SessionReader(none).shards().empty());
  const std::string bad = (shards_scratch() / "bad.db").string();
  {
    SessionWriter w(bad);
    w.set_metadata(meta::kShardingPlanJson, "{\"tables\": [");
    w.close("complete");
  }
  SessionReader r(bad);
  try {
    r.shards();
    ADD_FAILURE() << "a truncated plan was accepted";
  } catch (const SessionError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.db: metadata sharding_plan_json: "), std::string::npos) << e.what();
  }
}

// A file whose version was lowered by hand (as tests do to mimic older files) still reads a
// table it has, with the columns the table was created with.
TEST(Shards, ATableOfALaterVersionIsReadWhereItIs) {
  const std::string path = (shards_scratch() / "lowered.db").string();
  {
    SessionWriter w(path);
    w.add_shards({shard(0, "t", "table_wise", -1, 0, 1, 0, 10, 0, 4, 160)});
    w.close("complete");
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "DROP TABLE id_histogram; PRAGMA user_version = 2;", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  SessionReader r(path);
  EXPECT_EQ(r.schema_version(), 2);
  const auto s = r.shards();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].rank, 1);
  EXPECT_EQ(s[0].planned_bytes, 160);
}

}  // namespace

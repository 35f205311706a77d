// The scaling study's bytes on the wire per step (ScalingPoint::wire_bytes_per_step): each point's
// figure is its session's collectives' bytes sent over the measured steps (summed here with SQL),
// per step; a 1-GPU point sends nothing; the JSON carries it and reads it back.
#include <gtest/gtest.h>

#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/exec/scaling_study.h"
#include "embedscope/engine/workload/presets.h"

namespace es = embedscope::engine;
namespace fs = std::filesystem;

namespace {
// every rank's bytes sent in the session's collectives of the measured steps
int64_t session_bytes_sent(const std::string& session) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(session.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, "SELECT coalesce(sum(bytes_sent), 0) FROM collectives WHERE step >= 0", -1, &st, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(db);
  EXPECT_EQ(sqlite3_step(st), SQLITE_ROW);
  const int64_t v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
  return v;
}
}  // namespace

TEST(ScalingWireBytes, EachPointsBytesPerStepAreItsSessions) {
  es::WorkloadSpec base = es::load_preset("tiny");
  base.steps = 3;
  base.warmup_steps = 1;
  const fs::path dir = fs::temp_directory_path() / ("es_scaling_wire_" + std::to_string(getpid()));
  fs::remove_all(dir);
  es::ScalingStudyOptions o;
  o.hardware = std::string(EMBEDSCOPE_TEST_DATA) + "/hardware/round_numbers.json";  // 2 GPUs a node
  o.gpus = {1, 2, 4};
  o.shardings = {es::ShardingType::table_wise, es::ShardingType::row_wise};
  o.session_dir = dir.string();
  const auto points = es::run_scaling_study(base, o);
  ASSERT_EQ(points.size(), 6u);
  for (const es::ScalingPoint& p : points) {
    ASSERT_TRUE(p.error.empty()) << p.error;
    if (p.gpus == 1) {
      EXPECT_EQ(p.wire_bytes_per_step, 0);  // no peer
      continue;
    }
    const int64_t sent = session_bytes_sent(p.session_path);
    EXPECT_GT(sent, 0);
    EXPECT_EQ(p.wire_bytes_per_step, sent / 3) << es::to_string(p.sharding) << " " << p.gpus;
  }
  // row_wise moves each pooled bag to every rank: more bytes than table_wise at 4 GPUs
  EXPECT_GT(points[5].wire_bytes_per_step, points[2].wire_bytes_per_step);
  // in the JSON and back
  es::ScalingStudy st;
  st.workload = "tiny";
  st.hardware = "round_numbers";
  st.gpus_per_node = 2;
  st.batch_size_per_gpu = base.batch_size;
  st.steps = 3;
  st.points = points;
  const nlohmann::json j = es::to_json(st);
  EXPECT_EQ(j["points"][2]["wire_bytes_per_step"], points[2].wire_bytes_per_step);
  const es::ScalingStudy back = es::scaling_study_from_json(j, "study.json");
  EXPECT_EQ(back.points[2].wire_bytes_per_step, points[2].wire_bytes_per_step);
  // a study written before the field: read as 0
  nlohmann::json old = j;
  old["points"][2].erase("wire_bytes_per_step");
  EXPECT_EQ(es::scaling_study_from_json(old, "old.json").points[2].wire_bytes_per_step, 0);
  fs::remove_all(dir);
}

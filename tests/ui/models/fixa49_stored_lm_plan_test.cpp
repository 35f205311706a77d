// tester49 F-A (fixa49): the workbench's Sharding plan read a session's stored lm_embedding
// workload with the input's checks (its token file opened, a dtype beside a .npy compared with
// the file's own), so an older session, or one whose token file had moved, had no estimate beside
// its peak. It reads the stored workload as recorded now (engine::parse_stored_lm_workload).
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/exec/lm_run.h"
#include "embedscope/engine/workload/lm_spec.h"
#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/store/session.h"
#include "models/sharding_plan_model.h"
#include "support/input_files.h"

namespace {
namespace fs = std::filesystem;

fs::path fixa49_ui_dir() {
  static const fs::path d = [] {
    const auto p = fs::temp_directory_path() / ("fixa49_ui_" + std::to_string(::getpid()));
    fs::remove_all(p);
    fs::create_directories(p);
    return p;
  }();
  return d;
}

// lm45's shape (V 190,000 x H 16 fp32 tied, 1 rank, 32 tokens, 1 step): its allocator replay
// peaks at 50,352,640 B (tests/engine/planner/lm_memory_replay_test.cpp by hand); ids from a file.
nlohmann::json fixa49_ui_workload(const std::string& token_file) {
  return {{"model", "lm_embedding"},   {"name", "fixa49"},      {"vocab_size", 190000},
          {"hidden_size", 16},         {"sequence_length", 32}, {"micro_batch_size", 1},
          {"devices", {{"count", 1}}}, {"steps", 1},            {"sharding", {{"type", "vocab_parallel"}}},
          {"token_ids", {{"file", token_file}}}};
}
}  // namespace

TEST(Fixa49StoredLmPlan, TheEstimateIsShownForAnOlderSessionWhoseTokenFileIsGone) {
  namespace eng = embedscope::engine;
  namespace ss = embedscope::sessions;
  const fs::path npy = fixa49_ui_dir() / "ids.npy", db = fixa49_ui_dir() / "old.db";
  embedscope::test_support::write_id_npy(npy, 40, 4);  // <u4
  eng::LmRunOptions opt;
  opt.session_path = db.string();
  opt.overwrite = true;
  eng::run_lm(eng::parse_lm_workload(fixa49_ui_workload(npy.string()), "fixa49"), opt);
  fs::remove(npy);
  // what a session before 811a50e2 stored: "uint16" beside the .npy of <u4, here at a path gone
  nlohmann::json stored = fixa49_ui_workload((fixa49_ui_dir() / "moved" / "ids.npy").string());
  stored["token_ids"]["dtype"] = "uint16";
  {
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open(db.string().c_str(), &h), SQLITE_OK);
    const std::string sql = "UPDATE metadata SET value = '" + stored.dump() + "' WHERE key = 'workload_json';";
    EXPECT_EQ(sqlite3_exec(h, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    EXPECT_EQ(sqlite3_changes(h), 1);
    sqlite3_close(h);
  }
  const ss::SessionReader r(db.string());
  embedscope::ui::ShardingPlanModel m(r, ss::analyze(r));
  ASSERT_EQ(m.ranks().size(), 1u);
  EXPECT_EQ(m.ranks()[0].planned_bytes, 50'352'640);  // 0 before: the stored workload did not parse
  EXPECT_EQ(m.ranks()[0].peak_planned_bytes, 50'352'640);
  EXPECT_EQ(m.ranks()[0].peak_bytes, 50'352'640);  // the run's measured peak
  fs::remove_all(fixa49_ui_dir());
}

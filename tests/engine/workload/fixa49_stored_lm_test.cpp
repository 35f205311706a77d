// tester49 F-A (fixa49): a session's stored lm_embedding workload was read with the input's
// checks, which open the token file: a session written before 811a50e2 stores "dtype": "uint16"
// beside a .npy of another dtype (refused since then), and any session whose token file has moved
// or gone was "unreadable" to `stats` and to the rate reader (tokens/s fell back to samples/s).
// A stored workload is now read as recorded (parse_stored_lm_workload); `run`'s parse stays strict.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/exec/lm_run.h"
#include "embedscope/engine/workload/lm_spec.h"
#include "embedscope/engine/workload/session_rate.h"
#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"
#include "support/input_files.h"

namespace {
namespace fs = std::filesystem;
namespace fixa49_es = embedscope::engine;
namespace fixa49_ss = embedscope::sessions;

fs::path fixa49_dir() {
  static const fs::path d = [] {
    const auto p = fs::temp_directory_path() / ("fixa49_stored_" + std::to_string(::getpid()));
    fs::remove_all(p);
    fs::create_directories(p);
    return p;
  }();
  return d;
}

// V 190,000 x H 16 fp32 tied, 1 rank, B 1 x S 32 = 32 tokens a step, 2 steps (lm45's shape: its
// allocator replay peaks at 50,350,080 B), ids from a 40-id .npy of <u4.
nlohmann::json fixa49_workload(const std::string& token_file) {
  return {{"model", "lm_embedding"},     {"name", "fixa49"},        {"vocab_size", 190000},
          {"hidden_size", 16},           {"sequence_length", 32},   {"micro_batch_size", 1},
          {"devices", {{"count", 1}}},   {"steps", 2},              {"sharding", {{"type", "vocab_parallel"}}},
          {"token_ids", {{"file", token_file}}}};
}

void fixa49_set_meta(const fs::path& db, const std::string& key, const std::string& value) {
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(db.string().c_str(), &h), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(h, "UPDATE metadata SET value = ?2 WHERE key = ?1", -1, &st, nullptr), SQLITE_OK);
  sqlite3_bind_text(st, 1, key.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 2, value.c_str(), -1, SQLITE_TRANSIENT);
  EXPECT_EQ(sqlite3_step(st), SQLITE_DONE);
  sqlite3_finalize(st);
  EXPECT_EQ(sqlite3_changes(h), 1);
  sqlite3_close(h);
}

// A session run with a token file, whose stored workload then says what an older version wrote
// ("dtype": "uint16" beside the .npy of <u4) about a file that is no longer there.
fs::path fixa49_old_session() {
  const fs::path dir = fixa49_dir();
  const fs::path npy = dir / "ids.npy";
  embedscope::test_support::write_id_npy(npy, 40, 4);
  const fs::path db = dir / "old.db";
  fixa49_es::LmRunOptions opt;
  opt.session_path = db.string();
  opt.overwrite = true;
  fixa49_es::run_lm(fixa49_es::parse_lm_workload(fixa49_workload(npy.string()), "fixa49"), opt);
  fs::remove(npy);
  nlohmann::json stored = fixa49_workload((dir / "moved" / "ids.npy").string());
  stored["token_ids"]["dtype"] = "uint16";
  fixa49_set_meta(db, "workload_json", stored.dump());
  return db;
}
}  // namespace

TEST(Fixa49StoredLmWorkload, AStoredWorkloadIsReadAsRecordedWithoutItsTokenFile) {
  const fs::path db = fixa49_old_session();
  const fixa49_ss::SessionReader r(db.string());
  const nlohmann::json stored = nlohmann::json::parse(r.meta("workload_json"));
  // the input's parse refuses it (the file is gone), as `run` must
  EXPECT_THROW(fixa49_es::parse_lm_workload(stored, "workload_json"), fixa49_es::SpecError);
  // the stored reading takes the fields as recorded
  const fixa49_es::LmWorkloadSpec s = fixa49_es::parse_stored_lm_workload(stored, "workload_json");
  EXPECT_EQ(s.vocab_size, 190000);
  EXPECT_EQ(s.hidden_size, 16);
  EXPECT_EQ(s.tokens_per_step(), 32);
  EXPECT_EQ(s.token_file, (fixa49_dir() / "moved" / "ids.npy").string());
  EXPECT_EQ(s.token_file_dtype, fixa49_es::TokenDtype::uint16);
  EXPECT_FALSE(s.token_file_ids);
  EXPECT_TRUE(s.ids_from_file());
  // an int64 .npy's dtype as an older to_json wrote it is taken too; an unknown one is still refused
  nlohmann::json i64 = stored;
  i64["token_ids"]["dtype"] = "int64";
  EXPECT_EQ(fixa49_es::parse_stored_lm_workload(i64, "w").token_file_dtype, fixa49_es::TokenDtype::int64);
  i64["token_ids"]["dtype"] = "int8";
  EXPECT_THROW(fixa49_es::parse_stored_lm_workload(i64, "w"), fixa49_es::SpecError);

  // the rate reader: tokens, 32 a step over the measured mean step time
  const fixa49_ss::RunStats st = fixa49_ss::analyze(r);
  ASSERT_EQ(st.steps, 2);
  ASSERT_GT(st.step_time_ns.mean, 0);
  const auto lm = fixa49_es::lm_workload_of(r);
  ASSERT_TRUE(lm.has_value());
  EXPECT_EQ(lm->tokens_per_step(), 32);
  const auto rate = fixa49_es::throughput_of(r, st);
  EXPECT_EQ(rate.unit, "tokens");
  EXPECT_DOUBLE_EQ(rate.per_s, 32.0 / (st.step_time_ns.mean * 1e-9));

  // stats: the model line and the step size from the stored workload, not "unreadable"
  const auto cli = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "stats " + db.string(), fixa49_dir());
  ASSERT_EQ(cli.code, 0) << cli.err;
  EXPECT_EQ(cli.out.find("unreadable"), std::string::npos) << cli.out;
  EXPECT_NE(cli.out.find("model        lm_embedding 190000 x 16 (not padded), fp32, tied, sequence 32; vocab_parallel\n"),
            std::string::npos)
      << cli.out;
  EXPECT_NE(cli.out.find("2 measured steps of 32 tokens"), std::string::npos) << cli.out;
}

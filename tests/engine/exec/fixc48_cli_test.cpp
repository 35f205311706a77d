// fixc48: `compare --json` gives each session's drain steps (fixd47 F9's leftover), and an
// lm_embedding run's header names a .npy token file's own dtype (retest47 R3), through the CLI.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/analysis/memory_analysis.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"
#include "support/input_files.h"

namespace {
namespace fixc48_fs = std::filesystem;

fixc48_fs::path fixc48_cli_dir() {
  static const fixc48_fs::path d = [] {
    const auto p = fixc48_fs::temp_directory_path() / ("es_fixc48_" + std::to_string(getpid()));
    fixc48_fs::create_directories(p);
    return p;
  }();
  return d;
}

embedscope::test_support::CliResult fixc48_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, fixc48_cli_dir());
}

std::string fixc48_lm_workload(const std::string& name, const nlohmann::json& token_ids) {
  const fixc48_fs::path f = fixc48_cli_dir() / (name + ".json");
  std::ofstream(f) << nlohmann::json{{"name", name}, {"model", "lm_embedding"}, {"vocab_size", 100},
                                     {"hidden_size", 16}, {"sequence_length", 8}, {"micro_batch_size", 2},
                                     {"devices", {{"count", 2}}}, {"steps", 2}, {"token_ids", token_ids}}
                          .dump();
  return f.string();
}
}  // namespace

TEST(Fixc48CompareJson, EachSessionGivesItsDrainStepsAsStatsDoes) {
  // semi_sync over 4 steps: its last 2 drain the pipeline, 2 counted; base: none
  const std::string semi = (fixc48_cli_dir() / "semi.db").string(), base = (fixc48_cli_dir() / "base.db").string();
  auto r = fixc48_cli("run --preset tiny --pipeline semi_sync --steps 4 -o " + semi + " --force-overwrite");
  ASSERT_EQ(r.code, 0) << r.err;
  r = fixc48_cli("run --preset tiny --steps 4 -o " + base + " --force-overwrite");
  ASSERT_EQ(r.code, 0) << r.err;
  r = fixc48_cli("stats " + semi + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["drain_steps"], 2);
  r = fixc48_cli("compare " + base + " " + semi + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["sessions"].size(), 2u);
  EXPECT_EQ(j["sessions"][0]["steps"], 4);
  EXPECT_EQ(j["sessions"][0]["drain_steps"], 0);
  EXPECT_EQ(j["sessions"][0]["counted_steps"], 4);
  EXPECT_EQ(j["sessions"][0]["all_drain"], false);
  EXPECT_EQ(j["sessions"][1]["steps"], 4);
  EXPECT_EQ(j["sessions"][1]["drain_steps"], 2);
  EXPECT_EQ(j["sessions"][1]["counted_steps"], 2);
  EXPECT_EQ(j["sessions"][1]["all_drain"], false);
}

TEST(Fixc48NpyHeader, TheRunNamesTheNpysOwnDtypeAndRefusesAContradictingOne) {
  const fixc48_fs::path npy = fixc48_cli_dir() / "x4.npy";
  embedscope::test_support::write_id_npy(npy, 40, 4);
  auto r = fixc48_cli("run " + fixc48_lm_workload("npy_ok", {{"file", "x4.npy"}}) + " -o " +
                      (fixc48_cli_dir() / "npy_ok.db").string() + " --force-overwrite");
  ASSERT_EQ(r.code, 0) << r.err;
  // 40 ids hold (40 - 1) / 8 = 4 sequences of 8 + 1; 2 steps x 2 sequences read 4
  EXPECT_NE(r.err.find("token ids    " + npy.string() +
                       " (.npy of uint32, 40 ids: 4 sequences of 8 + 1 before it wraps around; the run reads 4)\n"),
            std::string::npos)
      << r.err;
  const std::string w = fixc48_lm_workload("npy16", {{"file", "x4.npy"}, {"dtype", "uint16"}});
  r = fixc48_cli("run " + w + " -o " + (fixc48_cli_dir() / "npy16.db").string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(w + ": /token_ids/dtype: uint16 disagrees with x4.npy's own <u4 (uint32); a .npy says its own "
                           "dtype: leave dtype out"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fixc48_fs::exists(fixc48_cli_dir() / "npy16.db"));
}

// tester47 F14 nit 6: an lm_embedding run records its engine's allocator settings.
TEST(Fixc48LmAllocator, AnLmRunRecordsItsEnginesAllocator) {
  const std::string db = (fixc48_cli_dir() / "lm_alloc.db").string();
  const auto r = fixc48_cli("run --preset gpt2_small_embedding --simulate h100_sxm --steps 1 -o " + db +
                            " --force-overwrite");
  ASSERT_EQ(r.code, 0) << r.err;
  const embedscope::sessions::SessionReader s(db);
  const embedscope::sessions::AllocatorSettings a = embedscope::sessions::allocator_settings(s);
  EXPECT_EQ(a.source, "the run's engine");
  EXPECT_EQ(a.recorded, "caching");
  EXPECT_EQ(s.meta(embedscope::sessions::meta::kAllocatorSettingsJson),
            R"({"allocator":"caching","compaction":false,"max_split_size":0})");
}

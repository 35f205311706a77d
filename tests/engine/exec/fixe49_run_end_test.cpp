// tester49 F3, F11, F14: a session that cannot be written (a file size limit standing in for a
// full disk) stops the run with the steps kept said and exit 1; a Criteo TSV's malformed line or
// short file refused before anything runs (exit 2, no session); the ranks of a session holding
// different steps: the imbalance over the common steps, said in one line.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embedscope/engine/workload/presets.h"
#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"
#include "support/criteo_fixture.h"

namespace {
namespace fs = std::filesystem;

fs::path fixe49r_scratch(const std::string& name) {
  return embedscope::test_support::fresh_scratch("es_fixe49_" + name + "_" + std::to_string(getpid()));
}

// `embedscope run --preset tiny --steps 100000 --network-latency 1000000 -o db` with files limited to `limit` bytes
// (cli_run.h's file_size_limit: a write past it fails with EFBIG, as on a full disk); returns
// the exit status (-1: a signal) and its stderr.
embedscope::test_support::CliResult fixe49r_run_limited(const std::string& db, long long limit) {
  embedscope::test_support::ChildIo io;
  io.file_size_limit = limit;  // stderr piped, stdout to /dev/null
  // 1 ms of emulated latency per collective paces the steps (about 10 ms each): the writer's first
  // 250 ms commit then holds a few steps on any machine, well under the limit; unpaced, a fast
  // machine put more than 2 MiB of steps in the first commit, which then failed with nothing kept
  const auto r = embedscope::test_support::run_signalled(
      EMBEDSCOPE_CLI, {"run", "--preset", "tiny", "--steps", "100000", "--network-latency", "1000000", "-o", db}, 0, {}, io);
  return {WIFEXITED(r.status) ? WEXITSTATUS(r.status) : -1, "", r.piped};
}
}  // namespace

// F3: the run stops, says how many steps the session keeps, exits 1; the session reads
// write_failed with the same count, and its steps are there.
TEST(Fixe49WriteFailed, FullDiskStopsTheRunAndTheSessionSaysWhatItKept) {
  const fs::path dir = fixe49r_scratch("full");
  const std::string db = (dir / "y.db").string();
  const auto run = fixe49r_run_limited(db, 2 * 1024 * 1024);
  const std::string& err = run.err;
  ASSERT_EQ(run.code, 1) << err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(err, m, std::regex(R"(error: run ended write_failed: .*y\.db: .*; the session keeps (\d+) steps \(through step (\d+)\))")))
      << err;
  const int64_t kept = std::stoll(m[1].str()), last = std::stoll(m[2].str());
  EXPECT_GE(kept, 1);
  EXPECT_EQ(last, kept - 1);  // tiny: no warm-up, steps 0 .. kept - 1
  EXPECT_LT(kept, 100000);    // it stopped
  EXPECT_NE(err.find("session: " + db), std::string::npos) << err;
  const embedscope::sessions::SessionReader s(db);
  EXPECT_EQ(s.status(), "write_failed");
  EXPECT_NE(s.meta(embedscope::sessions::meta::kEndMessage).find(fmt::format("the session keeps {} steps", kept)),
            std::string::npos)
      << s.meta(embedscope::sessions::meta::kEndMessage);
  int64_t rank0 = 0;
  for (const auto& st : s.steps()) rank0 += st.rank == 0;
  EXPECT_GE(rank0, kept);  // rank 0 may hold one more than the rank that committed fewest
  EXPECT_LE(rank0, kept + 1);
}

// F3: nothing recorded (the limit below the first commit): no half-created file left behind.
TEST(Fixe49WriteFailed, NothingRecordedLeavesNoFile) {
  const fs::path dir = fixe49r_scratch("full0");
  const std::string db = (dir / "x.db").string();
  const auto run = fixe49r_run_limited(db, 20 * 1024);
  const int rc = run.code;
  const std::string& err = run.err;
  EXPECT_NE(rc, 0) << err;
  EXPECT_FALSE(fs::exists(db)) << err;
  EXPECT_FALSE(fs::exists(db + "-wal")) << err;
  EXPECT_NE(err.find("x.db"), std::string::npos) << err;
}

// F11: a malformed line and a short file are refused before step 0: exit 2, no session, no step line.
TEST(Fixe49CriteoUpFront, MalformedLineAndShortFileRefusedBeforeAnythingRuns) {
  const fs::path dir = fixe49r_scratch("tsv");
  namespace ts = embedscope::test_support;
  ts::CriteoFixtureOptions o;
  o.lines = 199;
  o.malformed_at = {57};  // line 58
  ts::write_criteo_fixture(dir / "crit.tsv", o);
  nlohmann::json w = nlohmann::json::parse(embedscope::engine::preset_json("criteo_kaggle"));
  for (auto& t : w["tables"]) t["num_embeddings"] = std::min<int64_t>(t["num_embeddings"].get<int64_t>(), 1000);
  w["devices"]["count"] = 2;
  w["batch_size"] = 16;
  w["steps"] = 20;  // needs (warmup + 20) x 32 samples: more than the 199
  w["input"] = {{"kind", "criteo_tsv"}, {"paths", {(dir / "crit.tsv").string()}}};
  std::ofstream(dir / "w.json") << w.dump();
  auto r = ts::run_cli(EMBEDSCOPE_CLI, "run " + (dir / "w.json").string() + " -o " + (dir / "t.db").string(), dir);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("crit.tsv: line 58: field 17 (C3)"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("step 1/"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "t.db"));
  w["input"]["malformed_lines"] = "skip";
  std::ofstream(dir / "w.json") << w.dump();
  r = ts::run_cli(EMBEDSCOPE_CLI, "run " + (dir / "w.json").string() + " -o " + (dir / "t.db").string(), dir);
  EXPECT_EQ(r.code, 2) << r.err;
  const int64_t warmup = w.value("warmup_steps", 0);
  EXPECT_NE(r.err.find(fmt::format("the run needs {} samples", (warmup + 20) * 32)), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the files hold 199"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("step 1/"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "t.db"));
}

// F14: rank 1 holds steps 0-2, rank 0 steps 0-4; rank 0 looks up 10 ids a step, rank 1 30:
// over the common steps 0-2 the imbalance is 90 / 60 = 1.5 (over each rank's own steps it would
// be 90 / 70 = 1.29).
TEST(Fixe49UnequalSteps, ImbalanceOverTheStepsEveryRankHolds) {
  const fs::path dir = fixe49r_scratch("uneq");
  const std::string db = (dir / "u.db").string();
  {
    embedscope::sessions::SessionWriter w(db);
    w.set_metadata(embedscope::sessions::meta::kWorldSize, "2");
    w.set_metadata(embedscope::sessions::meta::kSamplesPerStep, "8");
    for (int32_t r = 0; r < 2; ++r)
      for (int64_t s = 0; s < (r == 0 ? 5 : 3); ++s) {
        const int64_t t0 = 1000000 * s;
        w.add_step_records({s, r, t0, t0 + 500000, 0.5, 0, 0}, {{s, r, 0, r, r == 0 ? 10 : 30, 0, 0, 0, 100 * (r + 1)}}, {});
      }
    w.close("crashed", "rank 1 was killed");
  }
  const embedscope::sessions::SessionReader s(db);
  const auto st = embedscope::sessions::analyze(s);
  ASSERT_EQ(st.rank_step_counts.size(), 2u);
  EXPECT_EQ(st.common_last_step, 2);
  EXPECT_DOUBLE_EQ(st.lookups_max_over_mean, 1.5);
  ASSERT_TRUE(st.lookup_time_max_over_mean.has_value());
  EXPECT_DOUBLE_EQ(*st.lookup_time_max_over_mean, 600.0 / 450.0);  // 300 vs 600 ns over steps 0-2
  EXPECT_EQ(st.ranks[0].ids_looked_up, 50);  // each rank's own steps
  EXPECT_EQ(st.ranks[1].ids_looked_up, 90);
  const std::string text = embedscope::sessions::unequal_rank_steps_text(st);
  EXPECT_NE(text.find("rank 1 3 steps (through step 2); rank 0 5 steps (through step 4)"), std::string::npos) << text;
  EXPECT_NE(text.find("over the steps through step 2"), std::string::npos) << text;
  const auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "stats " + db, dir);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("imbalance    ids looked up max/mean 1.50"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("steps        the ranks hold different steps"), std::string::npos) << r.out;
}

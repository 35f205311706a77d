// launch51 (a tester's leftovers): what `launch` does once its ranks have ended. It merged the rank
// sessions and summarised the merged one without a word (the tester saw ~20 s and ~80 s of
// silence after Ctrl-C on a long run), and a Ctrl-C meanwhile killed it by the default action,
// leaving a half-written merged session and no word on where the rank sessions were. It now says
// "merging N rank sessions (S steps) into OUT" and "summarising OUT (S steps)"; the merge is
// written under a temporary name and put in place once complete, and a Ctrl-C during it cancels
// it at once (exit 130), naming the rank sessions and the command that merges them; a Ctrl-C
// after it stops at once too, naming the merged session and the rank sessions. And --kill-after's
// help says it is not a time limit (task 2).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "embedscope/sessions/analysis/analysis.h"
#include <nlohmann/json.hpp>

#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;
namespace ts = embedscope::test_support;

fs::path launch51e_scratch(const std::string& name) {
  return ts::fresh_scratch("es_launch51_end_" + name + "_" + std::to_string(getpid()));
}

int64_t launch51e_steps(const std::string& db, int32_t rank) {
  const embedscope::sessions::SessionReader s(db);
  int64_t n = 0;
  for (const auto& st : s.steps()) n += st.rank == rank ? 1 : 0;
  return n;
}

// The files of `dir` whose names hold `part` (a staged merge: ".m.db.merging-PID").
std::vector<std::string> launch51e_files_with(const fs::path& dir, const std::string& part) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(part) != std::string::npos) out.push_back(e.path().filename().string());
  return out;
}
}  // namespace

// The two phases after the ranks are said on stderr, with the steps the ranks printed (3 each).
TEST(Launch51LaunchEnd, SaysWhenItMergesAndWhenItSummarises) {
  const fs::path dir = launch51e_scratch("say");
  const std::string db = (dir / "m.db").string();
  const auto r = ts::run_cli(EMBEDSCOPE_CLI, "launch -n 2 run --preset tiny --steps 3 --warmup-steps 0 -o " + db, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const size_t merging = r.err.find("embedscope launch: merging 2 rank sessions (3 steps) into " + db + "\n");
  const size_t summarising = r.err.find("embedscope launch: summarising " + db + " (3 steps)\n");
  ASSERT_NE(merging, std::string::npos) << r.err;
  ASSERT_NE(summarising, std::string::npos) << r.err;
  EXPECT_LT(merging, summarising);
  EXPECT_GT(merging, r.err.find("[rank 0] step 3/3"));  // after the ranks
  EXPECT_EQ(launch51e_steps(db, 0), 3);
  EXPECT_EQ(launch51e_steps(db, 1), 3);
  EXPECT_TRUE(launch51e_files_with(dir, ".merging-").empty());
}

// launch's line under its table now comes from the step rows alone (analyze_step_times): the same
// figures as the whole analysis, here of a semi_sync run whose last steps drain (left out of the
// step time: tester46 F21), merged from 2 ranks.
TEST(Launch51LaunchEnd, TheSummarysStepTimeIsTheWholeAnalysissWithoutReadingOps) {
  namespace ss = embedscope::sessions;
  const fs::path dir = launch51e_scratch("steptime");
  const std::string db = (dir / "m.db").string();
  const auto r = ts::run_cli(EMBEDSCOPE_CLI,
                             "launch -n 2 run --preset tiny --steps 6 --warmup-steps 0 --pipeline semi_sync -o " + db, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const ss::SessionReader merged(db);
  const ss::RunStats all = ss::analyze(merged), steps = ss::analyze_step_times(merged);
  EXPECT_EQ(steps.ended, "complete");
  EXPECT_EQ(steps.ended, all.ended);
  EXPECT_EQ(steps.steps, all.steps);
  EXPECT_GT(all.drain_steps, 0);  // the case worth checking: drain steps left out
  EXPECT_EQ(steps.drain_steps, all.drain_steps);
  EXPECT_EQ(steps.counted_steps(), all.counted_steps());
  EXPECT_EQ(steps.step_time_ns.mean, all.step_time_ns.mean);
  EXPECT_EQ(steps.step_time_ns.p50, all.step_time_ns.p50);
  EXPECT_EQ(steps.step_time_ns.max, all.step_time_ns.max);
  EXPECT_EQ(steps.loss, all.loss);
  EXPECT_EQ(steps.samples_per_s, all.samples_per_s);
  EXPECT_TRUE(steps.ranks.empty());  // nothing per rank: no op was read
  EXPECT_TRUE(steps.critical_paths.empty());
}

// A Ctrl-C as the merge starts (the signal sent when launch says "merging"): launch stops at once
// (exit 130), whichever phase it reaches first - the merge (cancelled: no merged session, nothing
// staged left) or, where the merge of 300 steps was already in place, the summary (the merged
// session complete) - and names the rank sessions, which are whole (300 steps each) and merge
// with the command it gives.
TEST(Launch51LaunchEnd, ACtrlCWhileMergingStopsAtOnceAndNamesTheRankSessions) {
  const fs::path dir = launch51e_scratch("stop");
  const std::string db = (dir / "m.db").string();
  const std::string r0 = (dir / "m.rank0.db").string(), r1 = (dir / "m.rank1.db").string();
  const auto run = ts::run_signalled(
      EMBEDSCOPE_CLI, {"launch", "-n", "2", "run", "--preset", "tiny", "--steps", "300", "--warmup-steps", "0", "-o", db},
      SIGINT, {ts::SignalWhen("embedscope launch: merging")}, ts::ChildIo(2, (dir / "out.txt").string()));
  const std::string& err = run.piped;
  ASSERT_EQ(run.sent, 1) << err;
  ASSERT_TRUE(WIFEXITED(run.status)) << "ended by a signal: " << err;  // before: killed by SIGINT, silent
  EXPECT_EQ(WEXITSTATUS(run.status), 130) << err;
  if (err.find("embedscope launch: cancelling the merge") != std::string::npos) {  // the merge cancelled
    EXPECT_NE(err.find("launch cancelled; nothing was written (no " + db + " written)\n"), std::string::npos) << err;
    EXPECT_NE(err.find("embedscope launch: the rank sessions are kept: " + r0 + ", " + r1 + " (merge them: embedscope "
                       "merge " + r0 + " " + r1 + " -o " + db + ")\n"),
              std::string::npos)
        << err;
    EXPECT_FALSE(fs::exists(db));
  } else {  // the merge already in place: stopped in the summary
    EXPECT_NE(err.find("embedscope launch: stopped; the session " + db + " is complete (embedscope stats " + db +
                       "); the rank sessions are kept: " + r0 + ", " + r1 + "\n"),
              std::string::npos)
        << err;
    EXPECT_EQ(launch51e_steps(db, 0), 300);
    EXPECT_EQ(launch51e_steps(db, 1), 300);
  }
  EXPECT_TRUE(launch51e_files_with(dir, ".merging-").empty()) << "a staged merge was left behind";
  EXPECT_EQ(launch51e_steps(r0, 0), 300);
  EXPECT_EQ(launch51e_steps(r1, 1), 300);
  EXPECT_EQ(embedscope::sessions::SessionReader(r0).status(), "complete");
  // the command it names merges them
  const auto merged = ts::run_cli(EMBEDSCOPE_CLI, "merge " + r0 + " " + r1 + " -o " + (dir / "again.db").string(), dir);
  EXPECT_EQ(merged.code, 0) << merged.err;
  EXPECT_EQ(launch51e_steps((dir / "again.db").string(), 1), 300);
}

// Task 2: --kill-after's help says what the option does, not a time limit on the run.
TEST(Launch51LaunchEnd, KillAfterHelpSaysItIsNotATimeLimit) {
  const auto r = ts::run_merged(std::string(EMBEDSCOPE_CLI) + " launch --help");
  EXPECT_EQ(r.code, 0) << r.out;
  const size_t at = r.out.find("--kill-after");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string help = r.out.substr(at);
  for (const char* said : {"Not a time limit: once a rank has died of a signal or exited non-zero",
                           "wait S seconds for the other ranks to end on their own",
                           "SIGKILL when a rank died of a signal, else SIGTERM and, if still running min(S, 10) s later, "
                           "SIGKILL",
                           "While no rank has failed, nothing is stopped however long the run takes", "=120"})
    EXPECT_NE(help.find(said), std::string::npos) << said << "\n" << help;
}

// docs55 D17: `launch --json -n 2 run ...` was refused ("give the command to launch") although
// `launch -n 2 run ... --json` worked; --json before `run` is launch's own flag now, the same
// JSON result (the merged session, its ranks, how it ended).
TEST(Launch51LaunchEnd, JsonBeforeRunIsLaunchsOwnFlag) {
  const fs::path dir = launch51e_scratch("json");
  const std::string db = (dir / "j.db").string();
  const auto r = ts::run_cli(EMBEDSCOPE_CLI, "launch --json -n 2 run --preset tiny --steps 2 --warmup-steps 0 -o " + db, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j["ended"], "complete");
  EXPECT_EQ(j["session"], db);
  EXPECT_EQ(launch51e_steps(db, 1), 2);
}

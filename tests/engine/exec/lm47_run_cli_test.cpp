// tester47: `run` of an lm_embedding workload as a DLRM run: a diverged loss ends the run crashed
// (F7), progress lines (F3), a second SIGTERM stops at once recorded as cancelled (F2, `scenario`
// too). Tiny workloads (vocabulary 100, hidden 16, 2 ranks) except where a step must still be
// running when a signal comes.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/engine/exec/lm_run.h"
#include "embedscope/engine/workload/lm_spec.h"
#include "embedscope/engine/workload/spec_error.h"
#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"
#include "support/input_files.h"

namespace {
namespace fs = std::filesystem;
using nlohmann::json;

fs::path lm47_scratch() {
  static const fs::path dir = [] {
    const fs::path d = fs::temp_directory_path() / ("es_lm47_" + std::to_string(getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

// vocabulary 100, hidden 16, sequence 8 x micro batch 2, 2 ranks, sgd at `lr`
std::string lm47_workload(const std::string& name, double lr, int steps) {
  const fs::path f = lm47_scratch() / (name + ".json");
  std::ofstream(f) << json{{"name", name},
                           {"model", "lm_embedding"},
                           {"vocab_size", 100},
                           {"hidden_size", 16},
                           {"sequence_length", 8},
                           {"micro_batch_size", 2},
                           {"devices", {{"count", 2}}},
                           {"optimizer", {{"type", "sgd"}, {"learning_rate", lr}}},
                           {"steps", steps}}
                          .dump();
  return f.string();
}

embedscope::test_support::CliResult lm47_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, lm47_scratch());
}

}  // namespace

// F7: a learning rate of 1e30 makes step 0's update blow the table up; step 1's loss is NaN. The
// run ends crashed naming it (exit 1, not "NOT NULL constraint failed: steps.loss", exit 2), and
// the session reads crashed with step 0 kept (its loss ln(100) = 4.605 near the uniform start).
TEST(Lm47Diverged, ANanLossEndsTheRunCrashedWithEarlierStepsKept) {
  const std::string wl = lm47_workload("diverge", 1e30, 4);
  const std::string db = (lm47_scratch() / "diverge.db").string();
  const auto r = lm47_cli("run " + wl + " --json -o " + db);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  const json j = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j.at("ended"), "crashed");
  EXPECT_EQ(j.at("session"), db);
  const std::string error = j.at("error").get<std::string>();
  EXPECT_NE(error.find("training diverged: the loss is"), std::string::npos) << error;
  EXPECT_NE(error.find("nan at step 1"), std::string::npos) << error;
  EXPECT_NE(r.err.find("error: run ended crashed: rank "), std::string::npos) << r.err;
  embedscope::sessions::SessionReader s(db);
  EXPECT_EQ(s.status(), "crashed");
  const auto steps = s.steps();
  ASSERT_EQ(steps.size(), 2u);  // step 0 of both ranks
  for (const auto& st : steps) {
    EXPECT_EQ(st.step, 0);
    EXPECT_NEAR(st.loss, std::log(100.0), 0.05);
  }
  const auto stats = lm47_cli("stats " + db);
  EXPECT_EQ(stats.code, 0) << stats.err;
  EXPECT_NE(stats.out.find("training diverged"), std::string::npos) << stats.out;
}

// F3: an lm_embedding `run` prints the progress lines of a DLRM run, the rate in tokens/s; stderr
// is a file here, so 3 steps give 3 lines (one every max(1, 3 / 10) steps). The loss each line
// shows is the step's loss of the --json summary, to 4 decimals.
TEST(Lm47Progress, AnLmRunPrintsStepTokensPerSecondEtaAndLoss) {
  const std::string wl = lm47_workload("progress", 0.1, 3);
  const auto r = lm47_cli("run " + wl + " --json -o " + (lm47_scratch() / "progress.db").string());
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j.at("loss").size(), 3u);
  for (int step = 1; step <= 3; ++step) {
    const std::string head = "step " + std::to_string(step) + "/3  ";
    const size_t at = r.err.find(head);
    ASSERT_NE(at, std::string::npos) << r.err;
    const std::string line = r.err.substr(at, r.err.find('\n', at) - at);
    EXPECT_NE(line.find(" tokens/s  ETA "), std::string::npos) << line;
    char loss[32];
    std::snprintf(loss, sizeof(loss), "  loss %.4f", j.at("loss")[static_cast<size_t>(step - 1)].get<double>());
    EXPECT_NE(line.find(loss), std::string::npos) << line << " / " << loss;
  }
}

using embedscope::test_support::stop_twice;

namespace {

json lm47_json_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream text;
  text << f.rdbuf();
  return json::parse(text.str(), nullptr, false);
}

}  // namespace

// F2: the second SIGTERM comes while step 2 of an lm_embedding run runs (vocabulary 32,000, hidden
// 256, 4 sequences of 256: about 25 GFLOP a rank, a second or more a step here). The process
// exits 130 (not killed by the signal), names the session, prints its JSON object, and the session
// reads cancelled with the stop's message. Should step 2 end first, the run ends cancelled (exit 0).
TEST(Lm47Stop, ASecondSigtermStopsAnLmRunAtOnceRecordedAsCancelled) {
  const fs::path f = lm47_scratch() / "long.json";
  std::ofstream(f) << json{{"name", "long"},          {"model", "lm_embedding"}, {"vocab_size", 32000},
                           {"hidden_size", 256},      {"sequence_length", 256},  {"micro_batch_size", 4},
                           {"devices", {{"count", 2}}}, {"steps", 5}}
                          .dump();
  const std::string db = (lm47_scratch() / "long.db").string(), out = (lm47_scratch() / "long.out").string();
  const auto st = stop_twice(EMBEDSCOPE_CLI, {"run", f.string(), "--json", "-o", db}, out, "step 1/5");
  ASSERT_EQ(st.sent, 2) << st.err;
  ASSERT_TRUE(WIFEXITED(st.status)) << "killed by signal " << (WIFSIGNALED(st.status) ? WTERMSIG(st.status) : 0) << "\n"
                                    << st.err;
  const json j = lm47_json_file(out);
  ASSERT_TRUE(j.is_object()) << st.err;
  EXPECT_EQ(j.at("ended"), "cancelled");
  EXPECT_EQ(j.at("session"), db);
  embedscope::sessions::SessionReader s(db);
  EXPECT_EQ(s.status(), "cancelled");
  if (WEXITSTATUS(st.status) == 130) {
    EXPECT_EQ(j.at("stopped_at_once"), true);
    EXPECT_EQ(j.at("recorded"), true);
    EXPECT_NE(st.err.find("stopped at once; session: " + db + " (recorded as cancelled by the user)"), std::string::npos)
        << st.err;
    // the end message (the steps the writer had committed stay: none or step 0, by the timing)
    const auto stats = lm47_cli("stats " + db);
    EXPECT_NE(stats.out.find("stopped at once by a second Ctrl-C (or SIGTERM): the step in progress did not complete"),
              std::string::npos)
        << stats.out << stats.err;
  } else {
    EXPECT_EQ(WEXITSTATUS(st.status), 0) << st.err;
  }
}

// F2 for `scenario`: its run 0 (llama3_8b_embedding_scaled, V 128,256 x H 128 on 4 ranks, about a
// second a step) stopped at once in its step 2: exit 130, the JSON object names the scenario and
// the run, the session is cancelled.
TEST(Lm47Stop, ASecondSigtermStopsAScenarioAtOnceRecordedAsCancelled) {
  const fs::path dir = lm47_scratch() / "scn";
  const std::string out = (lm47_scratch() / "scn.out").string();
  const auto st = stop_twice(EMBEDSCOPE_CLI,
      {"scenario", "vocab_parallel_vs_sequence_parallel", "--steps", "5", "--json", "-o", dir.string()}, out,
      "  step 1/5");
  ASSERT_EQ(st.sent, 2) << st.err;
  ASSERT_TRUE(WIFEXITED(st.status)) << "killed by signal " << (WIFSIGNALED(st.status) ? WTERMSIG(st.status) : 0) << "\n"
                                    << st.err;
  const json j = lm47_json_file(out);
  ASSERT_TRUE(j.is_object()) << st.err;
  const std::string db = (dir / "vocab_parallel_vs_sequence_parallel-0.db").string();
  if (WEXITSTATUS(st.status) == 130) {
    EXPECT_EQ(j.at("ended"), "cancelled");
    EXPECT_EQ(j.at("stopped_at_once"), true);
    EXPECT_EQ(j.at("recorded"), true);
    EXPECT_EQ(j.at("session"), db);
    EXPECT_EQ(j.at("scenario"), "vocab_parallel_vs_sequence_parallel");
    EXPECT_EQ(j.at("run"), 0);
    EXPECT_NE(st.err.find("the later runs were not run"), std::string::npos) << st.err;
  } else {  // run 0 ended cancelled first: the comparison's object
    EXPECT_EQ(WEXITSTATUS(st.status), 0) << st.err;
  }
  embedscope::sessions::SessionReader s(db);
  EXPECT_EQ(s.status(), "cancelled");
}

namespace {

std::string lm47_token_workload(const std::string& name, const json& token_ids) {
  const fs::path f = lm47_scratch() / (name + ".json");
  std::ofstream(f) << json{{"name", name}, {"model", "lm_embedding"}, {"vocab_size", 100}, {"hidden_size", 16},
                           {"sequence_length", 8}, {"micro_batch_size", 2}, {"devices", {{"count", 2}}},
                           {"steps", 2}, {"token_ids", token_ids}}
                          .dump();
  return f.string();
}
}  // namespace

// F1: a raw .bin without "dtype" was read as uint16 without a word (a uint32 file: id, 0, id, 0);
// now refused naming the field. A .npy says its own dtype: no "dtype" needed.
TEST(Lm47TokenFile, ARawBinNeedsItsDtypeAnNpySaysItsOwn) {
  embedscope::engine::write_token_bin((lm47_scratch() / "u32.bin").string(), {1, 2, 3, 4, 5, 6, 7, 8, 9, 10},
                                      embedscope::engine::TokenDtype::uint32);
  const json base = {{"model", "lm_embedding"}, {"vocab_size", 100}, {"hidden_size", 16}, {"sequence_length", 8}};
  json j = base;
  j["token_ids"] = {{"file", "u32.bin"}};
  try {
    embedscope::engine::parse_lm_workload(j, "w.json", lm47_scratch().string());
    FAIL() << "a .bin without dtype was read";
  } catch (const embedscope::engine::SpecError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("w.json: /token_ids/dtype: required with a raw .bin file (uint16 or uint32", 0),
              0u)
        << e.what();
  }
  j["token_ids"] = {{"file", "u32.bin"}, {"dtype", "uint32"}};
  const auto s = embedscope::engine::parse_lm_workload(j, "w.json", lm47_scratch().string());
  ASSERT_TRUE(s.token_file_ids);
  EXPECT_EQ(*s.token_file_ids, (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
  embedscope::test_support::write_id_npy(lm47_scratch() / "ids.npy", 12, 2);
  j["token_ids"] = {{"file", "ids.npy"}};
  const auto n = embedscope::engine::parse_lm_workload(j, "w.json", lm47_scratch().string());
  ASSERT_TRUE(n.token_file_ids);
  EXPECT_EQ(n.token_file_ids->size(), 12u);
  EXPECT_EQ(n.token_file_ids->at(11), 11);
}

// F1: the run's header names the token file: 40 uint16 ids hold (40 - 1) / 8 = 4 sequences of
// 8 + 1 (sequence 4 would need id 40); 2 steps x 2 sequences (vocab_parallel: B a step) read 4.
// A 3-id file is less than one sequence: a warning.
TEST(Lm47TokenFile, TheRunsHeaderNamesTheTokenFileAndWarnsWhenShort) {
  std::vector<int64_t> ids(40);
  for (int i = 0; i < 40; ++i) ids[static_cast<size_t>(i)] = i;
  const std::string forty = (lm47_scratch() / "forty.bin").string(), three = (lm47_scratch() / "three.bin").string();
  embedscope::engine::write_token_bin(forty, ids, embedscope::engine::TokenDtype::uint16);
  embedscope::engine::write_token_bin(three, {5, 6, 7}, embedscope::engine::TokenDtype::uint16);
  auto r = lm47_cli("run " + lm47_token_workload("forty", {{"file", "forty.bin"}, {"dtype", "uint16"}}) + " -o " +
                    (lm47_scratch() / "forty.db").string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("token ids    " + forty +
                       " (uint16, 40 ids: 4 sequences of 8 + 1 before it wraps around; the run reads 4)\n"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;
  r = lm47_cli("run " + lm47_token_workload("three", {{"file", "three.bin"}, {"dtype", "uint16"}}) + " -o " +
               (lm47_scratch() / "three.db").string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("token ids    " + three +
                       " (uint16, 3 ids: 0 sequences of 8 + 1 before it wraps around; the run reads 4, so it wraps)\n"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("warning: " + three + " holds 3 ids, fewer than one sequence's 8 + 1"), std::string::npos)
      << r.err;
}

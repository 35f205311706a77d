// One rule for every writer (tester45 F6/F7, app/cli/commands/output_guard.h): an existing output
// needs --force-overwrite, and an output that is one of the command's inputs is refused with or
// without it. Before: `rebalance S.db --plan-out S.db` turned the session into plan JSON,
// `tokenize --input T -o T` replaced the text with token ids, `calibrate S.db -o S.db
// --force-overwrite` destroyed the session and then failed reading it, `run W.json -o W.json
// --force-overwrite` replaced the workload. Each assertion below failed on that code.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;

fs::path output_guard_scratch() {
  static const auto dir = [] {
    auto d = fs::temp_directory_path() / ("es_output_guard_" + std::to_string(getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}
embedscope::test_support::CliResult output_guard_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, output_guard_scratch());
}
std::string output_guard_slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}
std::string output_guard_text() { return std::string(EMBEDSCOPE_TEST_DATA) + "/tokens/fixture.txt"; }

}  // namespace

TEST(OutputGuard, TokenizeNeverWritesOverItsInputAndAsksBeforeReplacing) {
  const fs::path dir = output_guard_scratch() / "tokenize";
  fs::create_directories(dir);
  const fs::path text = dir / "corpus.txt";
  fs::copy_file(output_guard_text(), text);
  const std::string corpus = output_guard_slurp(text);
  // -o is the input: refused, with or without --force-overwrite; the text is kept
  for (const char* force : {"", " --force-overwrite"}) {
    const auto r = output_guard_cli("tokenize --vocab-size 40 --input " + text.string() + " -o " + text.string() + force);
    EXPECT_EQ(r.code, 2) << force;
    EXPECT_EQ(r.err, "error: -o " + text.string() + ": is an input of this tokenize (" + text.string() +
                         "); writing there would destroy it (--force-overwrite does not allow that): choose another -o\n");
    EXPECT_EQ(output_guard_slurp(text), corpus);
  }
  auto r = output_guard_cli("tokenize --vocab-size 40 --input " + text.string() + " -o " + (dir / "ids.bin").string() +
                            " --model-out " + text.string() + " --force-overwrite");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--model-out " + text.string() + ": is an input of this tokenize"), std::string::npos) << r.err;
  EXPECT_EQ(output_guard_slurp(text), corpus);
  // an existing -o needs --force-overwrite
  const fs::path bin = dir / "ids.bin";
  std::ofstream(bin) << "mine";
  r = output_guard_cli("tokenize --vocab-size 40 --input " + text.string() + " -o " + bin.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "error: -o " + bin.string() + ": already exists; choose another name or allow overwriting it "
                       "(embedscope tokenize ... -o " + bin.string() + " --force-overwrite)\n");
  EXPECT_EQ(output_guard_slurp(bin), "mine");
  r = output_guard_cli("tokenize --vocab-size 40 --input " + text.string() + " -o " + bin.string() + " --force-overwrite");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(fs::file_size(bin), 13u * 2);  // the fixture's 13 uint16 ids (tokenize_test.cpp)
  // a fit range of one rank and an empty text are refused before training; nothing is written
  const fs::path none = dir / "none.bin";
  r = output_guard_cli("tokenize --vocab-size 40 --input " + text.string() + " -o " + none.string() +
                       " --fit-first-rank 10 --fit-last-rank 5");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--fit-first-rank 10 / --fit-last-rank 5: the fit needs at least two ranks"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(none));
  std::ofstream(dir / "empty.txt").close();
  r = output_guard_cli("tokenize --vocab-size 40 --input " + (dir / "empty.txt").string() + " -o " + none.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("the input text is empty"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(none));
}

TEST(OutputGuard, RebalanceCalibrateAndRunKeepTheirInputs) {
  const fs::path dir = output_guard_scratch() / "session";
  fs::create_directories(dir);
  const std::string db = (dir / "s.db").string();
  ASSERT_EQ(output_guard_cli("run --preset tiny --steps 2 -o " + db).code, 0);
  const std::string session = output_guard_slurp(db);
  // rebalance: --plan-out is the session (refused even with --force-overwrite) / an existing file
  auto r = output_guard_cli("rebalance " + db + " --plan-out " + db + " --force-overwrite");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--plan-out " + db + ": is an input of this rebalance"), std::string::npos) << r.err;
  const fs::path plan = dir / "plan.json";
  std::ofstream(plan) << "mine";
  r = output_guard_cli("rebalance " + db + " --plan-out " + plan.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--plan-out " + plan.string() + ": already exists; choose another name or allow overwriting it "
                       "(embedscope rebalance ... --plan-out " + plan.string() + " --force-overwrite)"),
            std::string::npos) << r.err;
  EXPECT_EQ(output_guard_slurp(plan), "mine");
  r = output_guard_cli("rebalance " + db + " --plan-out " + plan.string() + " --force-overwrite");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(output_guard_slurp(plan).find("\"tables\""), std::string::npos) << output_guard_slurp(plan);
  // calibrate -o the session it fits, run -o its own workload / plan file
  r = output_guard_cli("calibrate " + db + " -o " + db + " --force-overwrite --no-dense-bench");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("-o " + db + ": is an input of this calibrate"), std::string::npos) << r.err;
  const fs::path wl = dir / "mine.json";
  fs::copy_file(std::string(EMBEDSCOPE_TEST_DATA) + "/../../resources/workloads/tiny.json", wl);
  const std::string workload = output_guard_slurp(wl);
  r = output_guard_cli("run " + wl.string() + " -o " + wl.string() + " --force-overwrite");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("-o " + wl.string() + ": is an input of this run"), std::string::npos) << r.err;
  EXPECT_EQ(output_guard_slurp(wl), workload);
  r = output_guard_cli("run --preset tiny --plan " + plan.string() + " -o " + plan.string() + " --force-overwrite");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("-o " + plan.string() + ": is an input of this run"), std::string::npos) << r.err;
  EXPECT_EQ(output_guard_slurp(db), session);  // nothing above touched the session
}

// The CLI's output names and messages (tester61c F1, F2, F4, F9, F10, F13): an empty output name
// refused by every command that writes a file, as run refuses it; `--preset -o x.db`; export's
// words for a file that is no session; the memory refusal whose two sides round alike; a copy of
// a killed session without its -wal left as it was; the exit codes in --help.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/engine/workload/presets.h"
#include "embedscope/engine/workload/spec.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;
using embedscope::test_support::run_cli;

fs::path rob61c_scratch(const std::string& name) {
  return embedscope::test_support::fresh_scratch("es_rob61c_" + name + "_" + std::to_string(getpid()));
}
}  // namespace

TEST(Rob61CliNames, AnEmptyOutputNameIsRefusedByEveryCommandThatWritesAFile) {
  const fs::path dir = rob61c_scratch("empty");
  // the name is refused while the flags are read, before any input is: only calibrate's check that
  // its sessions exist comes first (an empty s.db, never read)
  std::ofstream(dir / "s.db").put('\0');
  const std::vector<std::string> commands = {
      "run --preset tiny -o ''",
      "export s.db --format csv -o ''",
      "export s.db --format kineto -o ''",
      "export s.db --format chrome -o ''",
      "import nccl.json -o ''",
      "merge a.db b.db -o ''",
      "scenario communication_storm -o ''",
      "rebalance s.db --plan-out ''",
      "calibrate s.db -o ''",
      "scaling --preset tiny --simulate h100_sxm -o ''",
      "tokenize t.txt -o ''",
  };
  for (const auto& c : commands) {
    const auto r = run_cli(std::string("cd '") + dir.string() + "' && " + EMBEDSCOPE_CLI, c, dir);
    EXPECT_EQ(r.code, 2) << c << "\n" << r.err;
    EXPECT_NE(r.err.find("an empty name; "), std::string::npos) << c << "\n" << r.err;
  }
  // nothing written into the current folder (before: export csv / kineto wrote there, import wrote nccl.db)
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename() != "out.txt" && e.path().filename() != "err.txt" && e.path().filename() != "s.db")
      left.push_back(e.path().filename());
  EXPECT_TRUE(left.empty()) << left.front();
}

TEST(Rob61CliNames, PresetFollowedByAnOptionSaysThePresetIsMissing) {
  const fs::path dir = rob61c_scratch("preset");
  const auto r = run_cli(EMBEDSCOPE_CLI, "run --preset -o " + (dir / "x.db").string(), dir);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--preset: 1 required TEXT missing ('-o' is an option"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("cannot open"), std::string::npos) << r.err;  // before: x.db read as the workload
  EXPECT_FALSE(fs::exists(dir / "x.db"));
}

TEST(Rob61CliNames, ExportWordsAFileThatIsNoSessionAsStatsDoes) {
  const fs::path dir = rob61c_scratch("notsql");
  {
    std::ofstream f(dir / "notsql.db", std::ios::binary);
    for (int i = 0; i < 5000; ++i) f.put(static_cast<char>((i * 7919 + 13) & 0xff));
  }
  const std::string file = (dir / "notsql.db").string();
  const auto stats = run_cli(EMBEDSCOPE_CLI, "stats " + file, dir);
  const auto exp = run_cli(EMBEDSCOPE_CLI, "export " + file + " --format csv -o " + (dir / "x").string(), dir);
  EXPECT_EQ(exp.code, 2) << exp.err;
  const std::string said = file + ": not a session (not an SQLite database), nor a file embedscope import reads";
  EXPECT_NE(stats.err.find(said), std::string::npos) << stats.err;
  EXPECT_NE(exp.err.find(said), std::string::npos) << exp.err;
  EXPECT_NE(exp.err.find("export reads the sessions (.db)"), std::string::npos) << exp.err;
}

// tiny with the direct allocator on devices of 31843840 bytes: at batch 16384 and 40 steps a rank
// needs a few bytes more than that, which rounds to the same 30.4 MiB
TEST(Rob61CliNames, AMemoryRefusalWhoseSidesRoundAlikeGivesTheBytes) {
  const fs::path dir = rob61c_scratch("oom");
  auto spec = embedscope::engine::load_preset("tiny");
  spec.memory.allocator = embedscope::engine::AllocatorKind::direct;
  constexpr int64_t kHave = 31843840;
  spec.devices.memory_bytes = kHave;
  std::ofstream(dir / "tinyoom.json") << embedscope::engine::to_json(spec).dump(2);
  const auto r = run_cli(EMBEDSCOPE_CLI, "run " + (dir / "tinyoom.json").string() + " --batch-size 16384 --steps 40 -o " +
                                             (dir / "o.db").string(), dir);
  const std::string err = r.err;
  ASSERT_EQ(r.code, 2) << err;
  std::smatch m;
  // whatever the rank needs: either the rounded figures differ, or the bytes are given and agree
  if (std::regex_search(err, m, std::regex(R"(needs ([0-9.]+ [KMG]iB) \((\d+) bytes\) .*> ([0-9.]+ [KMG]iB) \((\d+) bytes: (\d+) bytes short\))"))) {
    EXPECT_EQ(m[1].str(), m[3].str());
    EXPECT_EQ(std::stoll(m[4].str()), kHave);
    EXPECT_EQ(std::stoll(m[2].str()) - kHave, std::stoll(m[5].str()));
    EXPECT_GT(std::stoll(m[5].str()), 0);
  } else {
    ASSERT_TRUE(std::regex_search(err, m, std::regex(R"(needs ([0-9.]+ [KMG]iB) \(.*> ([0-9.]+ [KMG]iB))"))) << err;
    EXPECT_NE(m[1].str(), m[2].str()) << err;  // never "needs A > A"
  }
}

TEST(Rob61CliNames, HelpListsTheExitCodes) {
  const fs::path dir = rob61c_scratch("help");
  for (const std::string c : {"--help", "stats --help", "run --help", "export --help"}) {
    const auto r = run_cli(EMBEDSCOPE_CLI, c, dir);
    EXPECT_EQ(r.code, 0) << c;
    EXPECT_NE(r.out.find("Exit codes: 0 ok"), std::string::npos) << c << "\n" << r.out;
    EXPECT_NE(r.out.find("2 bad input"), std::string::npos) << c;
  }
}

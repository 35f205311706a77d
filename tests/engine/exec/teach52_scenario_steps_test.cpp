// tester52 F1: `embedscope scenario`'s table summed each run's exposed communication over its
// counted steps (a semi_sync run's 4 of 6, a base run's 6) under a `steps` column that said 6 for
// both, and gave no warning when every measured step of a run drained its pipeline. Now the
// figure is per counted step (what `stats` prints "per step"), the steps column says "4 of 6",
// the JSON carries counted_steps and exposed_comm_per_step_ns, and an all-drain run gets stats'
// warning. The references are `stats --json` / `stats` on the same sessions.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "support/cli_run.h"

namespace {

using nlohmann::json;

std::filesystem::path teach52_scratch() {
  static const auto dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("es_teach52_scenario_" + std::to_string(getpid()));
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

embedscope::test_support::CliResult teach52_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, teach52_scratch());
}

// The tiny preset (2 ranks) with the base, sparse_dist and semi_sync pipelines, 6 steps each.
std::string teach52_pipelines_file() {
  json runs = json::array();
  for (const char* p : {"base", "sparse_dist", "semi_sync"})
    runs.push_back({{"label", p}, {"preset", "tiny"}, {"overrides", {{"steps", 6}, {"pipeline", p}}}});
  const json j = {{"id", "t52p"}, {"title", "pipelines"}, {"explanation", "drain steps"}, {"runs", runs}};
  const auto path = teach52_scratch() / "t52p.json";
  std::ofstream(path) << j.dump(1);
  return path.string();
}

TEST(Teach52ScenarioSteps, ExposedCommIsPerCountedStepAndTheCountedStepsAreSaid) {
  const std::string file = teach52_pipelines_file();
  const std::string dir = (teach52_scratch() / "six").string();
  auto r = teach52_cli("scenario " + file + " -o " + dir + " --json");
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  const json runs = json::parse(r.out).at("runs");
  ASSERT_EQ(runs.size(), 3u);
  const int64_t counted[] = {6, 5, 4};  // semi_sync drains 2 steps, sparse_dist 1
  for (size_t i = 0; i < 3; ++i) {
    const json& f = runs[i].at("figures");
    EXPECT_EQ(f.at("steps"), 6) << i;
    EXPECT_EQ(f.at("counted_steps"), counted[i]) << i;
    EXPECT_EQ(f.at("drain_steps"), 6 - counted[i]) << i;
    EXPECT_EQ(f.at("all_drain"), false) << i;
    EXPECT_FALSE(runs[i].contains("warning")) << runs[i].dump();
    // stats on the same session: its total over the counted steps, and its drain steps
    const auto st = teach52_cli("stats --json " + runs[i].at("session").get<std::string>());
    ASSERT_EQ(st.code, 0) << st.err;
    const json s = json::parse(st.out);
    EXPECT_EQ(s.at("drain_steps"), 6 - counted[i]) << i;
    EXPECT_EQ(f.at("exposed_comm_ns"), s.at("exposed_comm_ns")) << i;
    ASSERT_GT(s.at("exposed_comm_ns").get<int64_t>(), 0) << i;
    EXPECT_DOUBLE_EQ(f.at("exposed_comm_per_step_ns").get<double>(),
                     s.at("exposed_comm_ns").get<double>() / static_cast<double>(counted[i]))
        << i;
  }
  // the table: the steps column says what was counted, no warning
  r = teach52_cli("scenario " + file + " -o " + dir + " --force-overwrite");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("complete   5 of 6 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("complete   4 of 6 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("complete        6 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("exposed/step"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("warning"), std::string::npos) << r.out;
  // tester52 F11: compare's per-rank footer says the drain steps are not in the sums
  const std::string base = runs[0].at("session").get<std::string>(), semi = runs[2].at("session").get<std::string>();
  r = teach52_cli("compare " + base + " " + semi);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("(exposed communication: each session's counted steps summed - a pipeline's drain steps are left "
                       "out, as in stats; a GPU run's is its streams')\n"),
            std::string::npos)
      << r.out;
  r = teach52_cli("compare " + base + " " + base);  // no drain steps: every measured step
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("(exposed communication: all measured steps summed; a GPU run's is its streams')\n"),
            std::string::npos)
      << r.out;
}

TEST(Teach52ScenarioSteps, EveryStepADrainStepWarnsAsStatsDoes) {
  const std::string file = teach52_pipelines_file();
  const std::string dir = (teach52_scratch() / "two").string();
  const auto r = teach52_cli("scenario " + file + " --steps 2 -o " + dir);
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  // stats' warning on the semi_sync session (2 steps, both drain it) and on the others (none)
  const std::string warning = "warning: every measured step drains the semi_sync pipeline";
  const auto semi = teach52_cli("stats " + dir + "/t52p-2.db");
  ASSERT_EQ(semi.code, 0) << semi.err;
  const size_t at = semi.out.find(warning);
  ASSERT_NE(at, std::string::npos) << semi.out;
  const std::string stats_line = semi.out.substr(at, semi.out.find('\n', at) - at);
  EXPECT_NE(r.out.find("run 2 (semi_sync): " + stats_line + "\n"), std::string::npos) << stats_line << "\n" << r.out;
  // sparse_dist drains 1 of 2: counted, no warning (stats gives none either)
  EXPECT_EQ(teach52_cli("stats " + dir + "/t52p-1.db").out.find("warning: every"), std::string::npos);
  EXPECT_EQ(r.out.find("run 1 (sparse_dist): warning"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("complete   1 of 2 "), std::string::npos) << r.out;
  // --json: the warning on its run, every step counted
  const auto j = teach52_cli("scenario " + file + " --steps 2 -o " + dir + " --force-overwrite --json");
  ASSERT_EQ(j.code, 0) << j.err;
  const json runs = json::parse(j.out).at("runs");
  EXPECT_EQ(runs[2].at("figures").at("all_drain"), true);
  EXPECT_EQ(runs[2].at("figures").at("counted_steps"), 2);
  EXPECT_EQ("warning: " + runs[2].at("warning").get<std::string>(), stats_line);
  EXPECT_FALSE(runs[0].contains("warning"));
  EXPECT_FALSE(runs[1].contains("warning"));
}

}  // namespace

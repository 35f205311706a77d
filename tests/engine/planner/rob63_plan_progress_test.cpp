// A long `plan --auto` says where it is: at most once a second a line on stderr with the
// proposals scored and the best plan so far (tester62c: 22 s without a word); stdout, --json's
// object, is unchanged. The meter itself (planner/search_progress.h) against hand counts.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/search_progress.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;
namespace es = embedscope::engine;
using nlohmann::json;
}  // namespace

// Five proposals and two scored plans; one report, after the meter's first second, with the
// counts and the best that fits: the scored plan's critical path replaces every estimate, a
// later estimate (even a lower one) does not replace it, a plan that does not fit is never best.
TEST(Rob63PlanProgress, TheMeterReportsOnceASecondWithTheBestThatFits) {
  std::vector<es::SearchProgress> got;
  es::planner_detail::ProgressMeter m([&](const es::SearchProgress& p) { got.push_back(p); });
  m.count("uniform:table_wise", 3e6, true, false);
  m.count("uniform:row_wise", 1e6, false, false);  // lower, but does not fit
  m.count("uniform:column_wise", 2e6, true, false);
  EXPECT_TRUE(got.empty());  // within the first second: nothing
  m.count("grid", 2.5e6, true, true);  // scored: the best from now on, though its figure is higher
  std::this_thread::sleep_for(std::chrono::milliseconds(1050));
  m.count("balanced", 1.5e6, true, false);  // an estimate after a scored plan: not the best
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].proposals, 4);
  EXPECT_EQ(got[0].scored, 1);
  EXPECT_EQ(got[0].best_proposer, "grid");
  EXPECT_DOUBLE_EQ(got[0].best_ns, 2.5e6);
  EXPECT_TRUE(got[0].best_scored);
  EXPECT_GE(got[0].seconds, 1.0);
  m.count("greedy", 2.4e6, true, true);  // within the next second: counted, not reported
  EXPECT_EQ(got.size(), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(1050));
  m.count("split:table_wise/column_wise", 9e6, false, true);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].proposals, 4);
  EXPECT_EQ(got[1].scored, 3);
  EXPECT_EQ(got[1].best_proposer, "greedy");
  EXPECT_DOUBLE_EQ(got[1].best_ns, 2.4e6);
}

// 160 tables on 64 simulated H100s: a search of about a second of CPU (240 such tables: 1.4 s of
// CPU, 17 s of wall time at a load of 14 on 2 cores). Every stderr line is a progress line, one a second at most (their count is at most the
// command's wall seconds), at least one when the search ran 1.5 s or more; stdout is the JSON
// object alone.
TEST(Rob63PlanProgress, PlanAutoPrintsProgressOnStderrAndLeavesStdoutAlone) {
  const fs::path dir = embedscope::test_support::fresh_scratch("es_rob63_progress_" + std::to_string(getpid()));
  json tables = json::array(), features = json::array();
  for (int i = 0; i < 160; ++i) {
    const std::string t = "t" + std::to_string(i), f = "f" + std::to_string(i);
    const int64_t rows = i < 4 ? 20000000 / (i + 1) : i % 10 == 0 ? 1000000 : 10000 + 137 * i;
    tables.push_back({{"name", t}, {"num_embeddings", rows}, {"embedding_dim", 64}, {"feature_names", {f}}});
    features.push_back({{"name", f}, {"pooling_factor", 1 + i % 4}});
  }
  const json w{{"name", "progress"},
               {"batch_size", 512},
               {"devices", {{"count", 64}, {"backend", "simulated"}, {"hardware", "h100_sxm"}}},
               {"tables", tables},
               {"features", features}};
  std::ofstream(dir / "w.json") << w.dump(1);
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "plan " + (dir / "w.json").string() + " --auto --json", dir);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);  // the whole of stdout is the one object
  const double seconds = j["search"]["seconds"].get<double>();
  const std::regex line(R"(plan --auto: \d+ s, \d+ proposal\(s\), \d+ scored; best so far: (none fits yet|\S+ \((estimated|critical path) \d+\.\d{3} ms\)))");
  std::istringstream err(r.err);
  int lines = 0;
  for (std::string l; std::getline(err, l);) {
    EXPECT_TRUE(std::regex_match(l, line)) << l;
    ++lines;
  }
  EXPECT_LE(lines, static_cast<int>(wall) + 1) << r.err;
  if (seconds >= 1.5) {
    EXPECT_GE(lines, 1) << "a search of " << seconds << " s said nothing";
  }
  EXPECT_EQ(r.out.find("plan --auto:"), std::string::npos);
  RecordProperty("search_seconds", std::to_string(seconds));
}

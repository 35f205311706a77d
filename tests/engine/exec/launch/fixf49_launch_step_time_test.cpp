// tester49 F5: `launch` printed each rank's own step mean (95 ms) where `stats` of the merged
// session prints 107 ms (each step's slowest rank), with nothing saying which is which. The
// column is now "own step mean", and a line under the table gives the merged session's figure:
// the same numbers `stats --json` reads from the merged session, in text and JSON.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;
namespace ts = embedscope::test_support;

fs::path fixf49_launch_scratch() {
  const fs::path d = fs::temp_directory_path() / fmt::format("es_fixf49_launch_{}", ::getpid());
  fs::create_directories(d);
  return d;
}

std::string fixf49_ms(double ns) { return fmt::format("{:.2f} ms", ns / 1e6); }
}  // namespace

TEST(Fixf49Launch, PrintsTheMergedSessionsStepTimeBesideTheRanksOwnMeans) {
  const fs::path dir = fixf49_launch_scratch();
  const std::string db = (dir / "L.db").string();
  const auto l = ts::run_cli(EMBEDSCOPE_CLI, "launch -n 2 run --preset tiny --steps 3 -o " + db, dir);
  ASSERT_EQ(l.code, 0) << l.out << l.err;
  const auto st = ts::run_cli(EMBEDSCOPE_CLI, "stats --json " + db, dir);
  ASSERT_EQ(st.code, 0) << st.err;
  const nlohmann::json s = nlohmann::json::parse(st.out);
  const double mean = s.at("step_time_ns").at("mean").get<double>();
  const int64_t p50 = s.at("step_time_ns").at("p50").get<int64_t>();
  EXPECT_NE(l.out.find("own step mean"), std::string::npos) << l.out;
  EXPECT_NE(l.out.find(fmt::format("step time    mean {}  p50 {} over the 3 measured steps of the merged session: "
                                   "each step's slowest rank",
                                   fixf49_ms(mean), fixf49_ms(static_cast<double>(p50)))),
            std::string::npos)
      << l.out << "\n" << st.out;
  // --json: the same figure, from the merged session
  const std::string jdb = (dir / "J.db").string();
  const auto j = ts::run_cli(EMBEDSCOPE_CLI, "launch -n 2 run --preset tiny --steps 3 --json -o " + jdb, dir);
  ASSERT_EQ(j.code, 0) << j.err;
  const nlohmann::json lj = nlohmann::json::parse(j.out);
  const nlohmann::json sj = nlohmann::json::parse(ts::run_cli(EMBEDSCOPE_CLI, "stats --json " + jdb, dir).out);
  EXPECT_EQ(lj.at("session_step_time_ns").at("mean"), sj.at("step_time_ns").at("mean")) << j.out;
  EXPECT_EQ(lj.at("session_step_time_ns").at("p50"), sj.at("step_time_ns").at("p50")) << j.out;
  EXPECT_EQ(lj.at("session_step_time_ns").at("steps"), 3) << j.out;
  fs::remove_all(dir);
}

// misc54 (tester54 F7, F10): the report's fitted timeline step is the step `stats` calls slowest
// (per step the slowest rank's own step time), not the widest window across ranks; the Memory
// page's clipped fragmentation axis says what it is scaled to.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"
#include "views/memory_view.h"

using namespace embedscope;

namespace {
namespace fs = std::filesystem;

fs::path misc54_tmp(const std::string& name) {
  return fs::temp_directory_path() / ("es_misc54_" + std::to_string(getpid()) + "_" + name);
}

// Two ranks whose step windows are offset (us): step 0 rank 0 [0, 100), rank 1 [50, 150) - each
// 100 us, a window 150 us wide across ranks; step 1 rank 0 [200, 320), rank 1 [200, 310) - the
// slowest 120 us, 120 us wide; step 2 both [400, 480). `stats`: max 120 us, step 1.
std::string misc54_offset_session() {
  const fs::path path = misc54_tmp("offset.db");
  fs::remove(path);
  sessions::SessionWriter w(path.string());
  w.set_metadata("world_size", "2");
  for (int r = 0; r < 2; ++r) w.add_lane({r, 0, "compute", "thread"});
  const int64_t win[3][2][2] = {{{0, 100}, {50, 150}}, {{200, 320}, {200, 310}}, {{400, 480}, {400, 480}}};
  for (int64_t step = 0; step < 3; ++step)
    for (int r = 0; r < 2; ++r) {
      const int64_t s = win[step][r][0] * 1000, e = win[step][r][1] * 1000;
      w.add_step({step, r, s, e, 0.5, 0, 0});
      w.add_ops({{r, sessions::Lane::compute, sessions::OpCategory::lookup, "lookup", step, s, s + 10'000, 0, 0}});
    }
  w.close("complete");
  return path.string();
}
}  // namespace

TEST(Misc54Report, TheFittedStepIsTheOneStatsCallsSlowest) {
  const std::string session = misc54_offset_session();
  const fs::path scratch = embedscope::test_support::fresh_scratch("es_misc54_report_" + std::to_string(getpid()));
  const auto stats = test_support::run_cli(EMBEDSCOPE_CLI, "stats --json " + session, scratch);
  ASSERT_EQ(stats.code, 0) << stats.err;
  EXPECT_EQ(nlohmann::json::parse(stats.out)["step_time_ns"]["max"].get<int64_t>(), 120'000);
  const fs::path dir = scratch / "report";
  const auto r = test_support::run_cli(EMBEDSCOPE_UI, "--report " + session + " -o " + dir.string(), scratch);
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream f(dir / "index.html");
  const std::string html((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  // the widest window (step 0's 150 us) was fitted before
  EXPECT_NE(html.find("<h2>Timeline: step 1 (the slowest measured step), critical path in magenta</h2>"),
            std::string::npos)
      << html;
  fs::remove_all(scratch);
  fs::remove(session);
}

TEST(Misc54Report, TheClippedFragmentationAxisSaysWhatItIsScaledTo) {
  EXPECT_EQ(ui::clipped_scale_label(9).toStdString(), "MiB (scaled to entries 9 on: entries 0-8, the first 1%, clipped)");
  EXPECT_EQ(ui::clipped_scale_label(1).toStdString(), "MiB (scaled to entries 1 on: entry 0 clipped)");
}

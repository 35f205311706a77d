// tester48 F14.10: memory.compaction runs between steps, and its span lies between the step
// windows: it starts at or after the end of the step it follows and ends at or before the next
// step's start, so no step time includes it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/workload/presets.h"
#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"

TEST(Fix48CompactionSpan, OutsideTheStepWindow) {
  const auto dir = std::filesystem::temp_directory_path() / ("es_fix48_compact_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  nlohmann::json j = nlohmann::json::parse(embedscope::engine::preset_json("tiny"));
  j["memory"]["compaction"] = 1;
  j["steps"] = 3;
  j["warmup_steps"] = 1;
  {
    std::ofstream((dir / "c.json").string()) << j.dump();
  }
  const auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "run " + (dir / "c.json").string() + " --json -o " + (dir / "c.db").string(), dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const embedscope::sessions::SessionReader session((dir / "c.db").string());
  std::map<std::pair<int32_t, int64_t>, std::pair<int64_t, int64_t>> windows;
  for (const auto& s : session.steps()) windows[{s.rank, s.step}] = {s.start_ns, s.end_ns};
  int spans = 0;
  for (const auto& op : session.all_ops()) {
    if (session.name(op.name_id) != "memory_compaction") continue;
    ++spans;
    const auto w = windows.find({op.rank, op.step});
    ASSERT_NE(w, windows.end()) << "rank " << op.rank << " step " << op.step;
    EXPECT_GE(op.start_ns, w->second.second) << "rank " << op.rank << " step " << op.step;  // was inside: ended at the window's end
    const auto next = windows.find({op.rank, op.step + 1});
    if (next != windows.end()) {
      EXPECT_LE(op.end_ns, next->second.first) << "rank " << op.rank << " step " << op.step;
    }
  }
  EXPECT_EQ(spans, 2 * 4);  // 2 ranks, after the warm-up step (-1) and each of the 3 measured steps
  std::filesystem::remove_all(dir);
}

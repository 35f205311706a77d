// tester47 F14 nit 5: a scenario's align_step beyond its runs' steps was accepted and the
// workbench silently aligned on step 1. Now refused naming the field, the run and its steps.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/workload/scenario.h"

namespace {
nlohmann::json fixc48_align_scenario(int64_t align_step, int64_t steps_b) {
  return {{"id", "align"},
          {"title", "t"},
          {"explanation", "e"},
          {"align_step", align_step},
          {"runs",
           {{{"label", "a"}, {"preset", "tiny"}, {"overrides", {{"steps", 4}, {"warmup_steps", 2}}}},
            {{"label", "b"}, {"preset", "tiny"}, {"overrides", {{"steps", steps_b}, {"warmup_steps", 0}}}}}}};
}

std::string fixc48_align_error(const nlohmann::json& j) {
  try {
    embedscope::engine::parse_scenario(j, "al.json");
  } catch (const embedscope::engine::SpecError& e) {
    return e.what();
  }
  return "(accepted)";
}
}  // namespace

TEST(Fixc48ScenarioAlign, AnAlignStepThatIsNotAStepOfEveryRunIsRefused) {
  // run a: steps 0..3, warmup -2..-1; run b: steps 0..1, no warmup
  EXPECT_EQ(fixc48_align_error(fixc48_align_scenario(99, 2)),
            "al.json: /align_step: 99 is not a step of run 0 (\"a\"): its measured steps are 0..3, its warmup steps "
            "-2..-1");
  EXPECT_EQ(fixc48_align_error(fixc48_align_scenario(3, 2)),
            "al.json: /align_step: 3 is not a step of run 1 (\"b\"): its measured steps are 0..1 (it has no warmup "
            "steps)");
  EXPECT_EQ(fixc48_align_error(fixc48_align_scenario(-1, 2)),
            "al.json: /align_step: -1 is not a step of run 1 (\"b\"): its measured steps are 0..1 (it has no warmup "
            "steps)");
  // the last step of the shorter run, and step 0, are every run's
  EXPECT_EQ(embedscope::engine::parse_scenario(fixc48_align_scenario(1, 2), "al.json").align_step, 1);
  EXPECT_EQ(embedscope::engine::parse_scenario(fixc48_align_scenario(0, 2), "al.json").align_step, 0);
  // the built-in scenarios all align on a step of every run
  EXPECT_NO_THROW(embedscope::engine::builtin_scenarios());
}

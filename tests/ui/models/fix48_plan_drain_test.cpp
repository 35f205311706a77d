// tester48 F4: the workbench's Sharding plan counts the ids a rank looked up over the steps that
// stats counts: a semi_sync session's drain steps are left out there too.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "models/sharding_plan_model.h"

TEST(Fix48PlanDrain, IdsOverTheCountedSteps) {
  namespace eng = embedscope::engine;
  namespace ss = embedscope::sessions;
  const eng::WorkloadSpec spec = eng::load_preset("tiny");
  const eng::ShardingPlan plan = eng::plan_sharding(spec);
  const auto path = std::filesystem::temp_directory_path() / ("es_fix48_plan_drain_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  {
    ss::SessionWriter w(path.string());
    w.set_metadata("world_size", "2");
    w.set_metadata(ss::meta::kPipeline, "semi_sync");
    w.set_metadata("workload_json", eng::to_json(spec).dump());
    w.set_metadata("sharding_plan_json", eng::to_json(spec, plan).dump());
    for (int64_t s = -1; s < 6; ++s) {  // 6 measured steps; 4-5 drain semi_sync
      const int64_t t = 1000 + 100 * s;
      for (int32_t r = 0; r < 2; ++r) {
        w.add_ops({{r, ss::Lane::compute, ss::OpCategory::dense, "dense", s, t, t + 100}});
        if (s >= 0) w.add_step({s, r, t, t + 100, 0.5, 0, 0});
        ss::LoadCounter c;
        c.step = s;
        c.rank = r;
        c.ids = s == 5 ? 0 : 100;  // the warm-up holds two batches' lookups in a real run; 100 here
        c.bytes_in = s == 5 ? 0 : 10;
        w.add_load(c);
      }
    }
    w.close("complete");
  }
  ss::SessionReader rd(path.string());
  const ss::RunStats st = ss::analyze(rd);
  ASSERT_EQ(st.drain_steps, 2);
  embedscope::ui::ShardingPlanModel m(rd, st);
  ASSERT_EQ(m.ranks().size(), 2u);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(m.ranks()[static_cast<size_t>(r)].ids, 4 * 100) << r;  // steps 0-3 (with the drain steps 500)
    EXPECT_EQ(m.ranks()[static_cast<size_t>(r)].bytes_in, 4 * 10) << r;
    EXPECT_EQ(st.ranks[static_cast<size_t>(r)].ids_looked_up, 4 * 100) << r;  // the same figure as stats
  }
  std::filesystem::remove(path);
}

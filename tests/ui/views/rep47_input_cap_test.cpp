// tester46 F16: the Load page's "input per feature" of a multi-hot workload regenerated 23 of
// mlperf_dlrm_dcnv2's batches (40.3M ids, 131 s of a 512-rank report): the sample was capped by
// (sample, feature) pairs, the cost is per id. It is capped by ids now (kInputFigureIds).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "core/input_figures.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/engine/workload/spec.h"
#include "embedscope/sessions/store/session.h"

namespace {

embedscope::engine::WorkloadSpec rep47_preset(const std::string& name) {
  return embedscope::engine::parse_workload(nlohmann::json::parse(embedscope::engine::preset_json(name)), name);
}

}  // namespace

// dcnv2: 8192 samples x 214 ids (its pooling factors' sum) = 1,753,088 ids a batch: 5,000,000 /
// 1,753,088 = 2 whole batches (the pair cap took 5,000,000 / (8192 x 26) = 23). criteo_kaggle
// (one id a bag, 26 features, 512 samples: 13,312 ids a batch) keeps the 375 it had.
TEST(Rep47InputCap, TheSampleIsCappedByIdsNotByPairs) {
  const auto dc = rep47_preset("mlperf_dlrm_dcnv2");
  EXPECT_EQ(embedscope::ui::expected_ids_per_batch(dc), 8192 * 214);
  EXPECT_EQ(embedscope::ui::input_figure_batches(dc), 2);
  const auto ck = rep47_preset("criteo_kaggle");
  EXPECT_EQ(embedscope::ui::expected_ids_per_batch(ck), 512 * 26);
  EXPECT_EQ(embedscope::ui::input_figure_batches(ck), 375);
}

// A session of a multi-hot workload (2 features of 500 fixed ids a bag, 1,000 samples a batch:
// 1,000,000 ids a batch; 2 ranks x 20 measured steps = 40 batches): the figures count the first
// 5 batches, exactly 2,500,000 ids a feature, and the caption says so.
TEST(Rep47InputCap, AMultiHotSessionCountsFiveMillionIds) {
  auto spec = rep47_preset("tiny");
  spec.batch_size = 1000;
  spec.devices.count = 2;
  spec.steps = 20;
  spec.warmup_steps = 1;
  spec.features.resize(2);
  for (auto& f : spec.features) f.pooling_factor = {true, 500.0, 500};
  for (auto& t : spec.tables) t.feature_names.clear();
  spec.tables.resize(2);
  spec.tables[0].feature_names = {spec.features[0].name};
  spec.tables[1].feature_names = {spec.features[1].name};
  const auto path = std::filesystem::temp_directory_path() / ("es_rep47_cap_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  {
    embedscope::sessions::SessionWriter w(path.string());
    w.set_metadata("workload_json", embedscope::engine::to_json(spec).dump());
    w.close("complete");
  }
  const auto f = embedscope::ui::input_figures(embedscope::sessions::SessionReader(path.string()));
  std::filesystem::remove(path);
  ASSERT_TRUE(f.unavailable.empty()) << f.unavailable;
  EXPECT_EQ(f.inspection.batches, 5);
  EXPECT_EQ(f.inspection.run_batches, 40);
  EXPECT_EQ(f.inspection.samples, 5000);
  ASSERT_EQ(f.inspection.features.size(), 2u);
  for (const auto& fe : f.inspection.features) EXPECT_EQ(fe.ids, 2'500'000) << fe.feature;
  EXPECT_NE(f.source.find("the first 5 of the 40 batches of the 20 measured steps"), std::string::npos) << f.source;
}

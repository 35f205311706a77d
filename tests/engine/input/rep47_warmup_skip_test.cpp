// tester46 F16: inspect_input(measured_only) generated every warm-up batch of a synthetic run
// before the first one it counts (a simulated 512-rank mlperf_dlrm_dcnv2 run: 1,024 batches,
// 1.8G ids, minutes of the workbench's Load page). The generator makes any batch on its own, so
// the warm-up's are not made now; a file source still reads them (it reads in order).
#include <gtest/gtest.h>

#include <memory>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/engine/input/input_stats.h"
#include "embedscope/engine/input/source.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/engine/workload/spec.h"

namespace {

// The generator, recording each (iteration, rank) asked for.
class Rep47CountingSource : public embedscope::engine::BatchSource {
 public:
  explicit Rep47CountingSource(const embedscope::engine::WorkloadSpec& spec) : inner_(embedscope::engine::make_batch_source(spec)) {}
  embedscope::engine::Batch make(int64_t iteration, int rank) override {
    made.emplace_back(iteration, rank);
    return inner_->make(iteration, rank);
  }
  std::vector<std::pair<int64_t, int>> made;

 private:
  std::unique_ptr<embedscope::engine::BatchSource> inner_;
};

}  // namespace

// tiny (2 ranks), 3 warm-up + 2 measured steps: the 4 measured batches are the only ones made,
// and the figures equal those of the whole run counted from a source asked for every batch.
TEST(Rep47WarmupSkip, ASyntheticRunsWarmupBatchesAreNotMade) {
  auto spec = embedscope::engine::parse_workload(nlohmann::json::parse(embedscope::engine::preset_json("tiny")), "tiny");
  spec.warmup_steps = 3;
  spec.steps = 2;
  Rep47CountingSource source(spec);
  const auto in = embedscope::engine::inspect_batches(spec, source, -1, true);
  const std::vector<std::pair<int64_t, int>> measured{{3, 0}, {3, 1}, {4, 0}, {4, 1}};
  EXPECT_EQ(source.made, measured);
  EXPECT_EQ(in.batches, 4);
  EXPECT_EQ(in.warmup_batches_left_out, 6);
  EXPECT_EQ(in.run_batches, 4);
  // the same batches counted by hand
  embedscope::engine::InputStats by_hand(spec);
  const auto gen = embedscope::engine::make_batch_source(spec);
  for (const auto& [it, r] : measured) by_hand.add(gen->make(it, r).kjt);
  const auto want = by_hand.result();
  ASSERT_EQ(in.features.size(), want.size());
  for (size_t f = 0; f < want.size(); ++f) {
    EXPECT_EQ(in.features[f].ids, want[f].ids) << f;
    EXPECT_EQ(in.features[f].distinct_ids, want[f].distinct_ids) << f;
    EXPECT_EQ(in.features[f].ids_per_bag_max, want[f].ids_per_bag_max) << f;
  }
  // with a cap of 3: the first measured iteration's two batches and one of the next
  Rep47CountingSource capped(spec);
  EXPECT_EQ(embedscope::engine::inspect_batches(spec, capped, 3, true).batches, 3);
  EXPECT_EQ(capped.made.size(), 3u);
  EXPECT_EQ(capped.made.front(), (std::pair<int64_t, int>{3, 0}));
}

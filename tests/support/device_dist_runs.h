#pragma once
// The device-dist parity tests' shared pieces (device_dist55_test, rw_device_dist56_test,
// device_kjt56_test in engine_parity_test): parity_spec with a resident dense part, options for
// the emulated devices, and the bit-for-bit comparison of two runs' training.
#include <gtest/gtest.h>

#include <string>

#include "embedscope/engine/exec/run.h"
#include "engine/parity_check.h"
#include "support/copy_counting_run.h"

namespace embedscope::engine::test_support {

/// parity_spec (4 tables of dims 6, 4, 5 (two features), 16; 5 samples a rank, 3 steps; nodes of
/// 2 ranks at world 4 for the hierarchical types) with a resident dense part, which the device
/// dists need: 3 dense features, bottom {8, 4}, cat (the features' dims need not be equal, as
/// dot's must), top {6, 1}.
inline WorkloadSpec resident_cat_spec(ShardingType type, OptimizerType opt, int world = 4,
                                      Pooling pooling = Pooling::mean) {
  WorkloadSpec s = parity::parity_spec(type, world, pooling, opt);
  DenseSpec d;
  d.num_dense_features = 3;
  d.bottom_mlp = {8, 4};
  d.interaction = Interaction::cat;
  d.top_mlp = {6, 1};
  s.dense = d;
  return s;
}

/// Options keeping the tables, without a trace, on `devices` emulated devices when `emulate`.
inline TrainerOptions emulated_options(bool emulate, int devices) {
  TrainerOptions o;
  o.keep_tables = true;
  o.trace = false;
  o.emulate_device = emulate;
  o.emulated_devices = devices;
  return o;
}

/// `got` completed and trained bit for bit as `want`: every table, the loss, the dense parameters.
inline void expect_same_training(const RunResult& got, const RunResult& want, const std::string& what) {
  ASSERT_EQ(got.ended, RunEnd::complete) << what << ": " << got.error;
  ASSERT_EQ(got.tables.size(), want.tables.size()) << what;
  for (size_t t = 0; t < got.tables.size(); ++t) EXPECT_EQ(got.tables[t], want.tables[t]) << what << ", table " << t;
  EXPECT_EQ(got.loss, want.loss) << what;
  EXPECT_EQ(got.dense_params, want.dense_params) << what;
}

}  // namespace embedscope::engine::test_support

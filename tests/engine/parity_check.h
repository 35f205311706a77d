#pragma once
// The parity check shared by the cpu parity tests (parity_test.cpp: tolerances and why) and the
// cuda executor's (tests/gpu/cuda_executor_test.cpp): a run's forward outputs, tables, dense
// parameters and loss against run_reference.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <tuple>

#include <fmt/format.h>

#include "embedscope/engine/reference/reference.h"
#include "embedscope/engine/exec/run.h"

namespace embedscope::engine::parity {

constexpr double kAbs = 2e-5, kRel = 1e-4;

// Uneven rows and dims: 10 rows x 6 (row-wise over 4, as TorchRec: 3,3,3,1), 1 row, 3 rows (one row-wise
// rank is empty at world 4) shared by two features, 50 rows x 16 with Zipf ids; bag lengths
// vary (Poisson mean 3, max 6), so empty bags happen.
inline WorkloadSpec parity_spec(ShardingType type, int world, Pooling pooling, OptimizerType opt) {
  WorkloadSpec s;
  s.name = "parity";
  s.tables = {
      {"t0", 10, 6, pooling, {"f0"}},
      {"t1", 1, 4, pooling, {"f1"}},
      {"t2", 3, 5, pooling, {"f2a", "f2b"}},
      {"t3", 50, 16, pooling, {"f3"}},
  };
  auto feature = [](std::string n, bool fixed, double mean, int64_t max, bool zipf) {
    FeatureSpec f;
    f.name = std::move(n);
    f.pooling_factor = {fixed, mean, max};
    if (zipf) f.ids.kind = IdDistributionKind::zipf;
    return f;
  };
  s.features = {feature("f0", false, 3, 6, false), feature("f1", true, 2, 2, false),
                feature("f2a", false, 1.5, 4, false), feature("f2b", true, 1, 1, false),
                feature("f3", false, 4, 8, true)};
  s.batch_size = 5;
  s.steps = 3;
  s.seed = 7;
  s.devices.count = world;
  s.devices.memory_bytes = 64 << 20;
  s.optimizer.type = opt;
  s.optimizer.learning_rate = opt == OptimizerType::sgd ? 0.5 : 0.05;
  s.optimizer.dense_learning_rate = s.optimizer.learning_rate;
  s.sharding.default_type = type;
  // nodes of 2 ranks at world 4; the hierarchical types take nodes of 1 rank at worlds 2 and 3
  const bool node_type = type == ShardingType::table_row_wise || type == ShardingType::grid_shard ||
                         type == ShardingType::table_column_wise;
  const bool hierarchical = type == ShardingType::table_row_wise || type == ShardingType::grid_shard;
  s.sharding.local_world_size = node_type && world == 4 ? 2 : (hierarchical ? 1 : 0);
  s.collective_timeout_ms = 20000;
  return s;
}

// Every sharding type at once on 4 ranks in 2 nodes, explicit ranks, mean pooling.
inline WorkloadSpec mixed_spec(OptimizerType opt) {
  WorkloadSpec s = parity_spec(ShardingType::table_wise, 4, Pooling::mean, opt);
  s.sharding.local_world_size = 2;
  s.sharding.per_table["t0"] = {ShardingType::row_wise, {}, -1};
  s.sharding.per_table["t1"] = {ShardingType::data_parallel, {}, -1};
  s.sharding.per_table["t2"] = {ShardingType::table_row_wise, {}, 1};
  s.sharding.per_table["t3"] = {ShardingType::column_wise, {2, 0, 2}, -1};
  return s;
}

// qcomms tolerance term per unit of max|reference| (see the header).
inline double quantized_slack(const WorkloadSpec& spec) {
  auto u = [](CommPrecision p) { return p == CommPrecision::bf16 ? 1.0 / 256 : p == CommPrecision::fp16 ? 1.0 / 2048 : 0.0; };
  return 2.0 * spec.devices.count * std::max(u(spec.qcomms.forward_precision), u(spec.qcomms.backward_precision));
}

// Reduced-precision tables (TableSpec::data_type) tolerance term per unit of max|reference|: the
// reference rounds the updated rows in double, the kernels in fp32 from values that differ by
// rounding, so a value near a rounding boundary may be stored one unit apart (u = 2^-11 fp16,
// 2^-8 bf16, 1/255 of the row's range for int8, 1/15 for int4); twice the largest unit of the spec's tables.
inline double storage_slack(const WorkloadSpec& spec) {
  double u = 0;
  for (const auto& t : spec.tables)
    u = std::max(u, t.data_type == TableDataType::int4   ? 1.0 / 15
                    : t.data_type == TableDataType::int8   ? 1.0 / 255
                    : t.data_type == TableDataType::bf16 ? 1.0 / 256
                    : t.data_type == TableDataType::fp16 ? 1.0 / 2048
                                                         : 0.0);
  // reduced-precision optimizer state (TableSpec::optimizer_state_type): the kernels update it
  // in fp32, the reference in double, so a stored value near a rounding boundary may land one
  // unit apart (2^-11 fp16, 2^-8 bf16 of the value), which changes the next steps of that row
  // by about that fraction of a step (< 1 in the parity specs' units)
  for (const auto& t : spec.tables)
    u = std::max(u, t.optimizer_state_type == OptimizerStateType::bf16   ? 1.0 / 256
                    : t.optimizer_state_type == OptimizerStateType::fp16 ? 1.0 / 2048
                                                                         : 0.0);
  return 2.0 * u;
}

inline void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::string& what,
                  double slack = 0) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double max_ref = 0;
  for (float v : want) max_ref = std::max(max_ref, static_cast<double>(std::abs(v)));
  int reported = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double tol = kAbs + kRel * std::abs(want[i]) + slack * max_ref;
    if (std::abs(got[i] - want[i]) > tol && reported++ < 5)
      ADD_FAILURE() << what << " [" << i << "]: sharded " << got[i] << " vs reference " << want[i];
  }
}

struct Captured {
  std::mutex mu;
  // [iteration][rank][feature]
  std::map<std::tuple<int64_t, int, int>, std::vector<float>> pooled;
};

/// The column groups of the tables a live rebalance changed to or from column_wise, from the
/// run's plan_changes (one row per new shard with its columns; a change to another type: the
/// whole width), for run_reference: from the iteration of the change's first step on.
inline std::vector<ColumnGroupChange> column_group_changes(const WorkloadSpec& spec, const RunResult& run) {
  std::map<std::pair<int64_t, int>, ColumnGroupChange> by;
  for (const auto& c : run.plan_changes) {
    if (c.from_type == c.to_type || (c.from_type != "column_wise" && c.to_type != "column_wise")) continue;
    auto& g = by[{c.step, c.table}];
    g.iteration = spec.warmup_steps + c.step;
    g.table = c.table;
    const int64_t dim = spec.tables[static_cast<size_t>(c.table)].embedding_dim;
    if (c.to_type != "column_wise")
      g.groups = {{0, dim}};
    else
      g.groups.emplace_back(c.col_offset, c.num_cols < 0 ? dim : c.num_cols);
  }
  std::vector<ColumnGroupChange> out;
  for (auto& [key, g] : by) {
    std::sort(g.groups.begin(), g.groups.end());
    out.push_back(std::move(g));
  }
  return out;
}

/// `emulate_device`: TrainerOptions::emulate_device (the cuda executor's device path on the host).
/// `given`: the plan to run (default: plan_sharding(spec)). `emulated_devices`:
/// TrainerOptions::emulated_devices (with emulate_device: the ranks placed on that many
/// emulated devices, the groups of one device on the intra-device communicator).
inline RunResult check_parity(const WorkloadSpec& spec, const std::function<std::optional<Batch>(int64_t, int)>& source = {},
                              bool emulate_device = false, const ShardingPlan* given = nullptr, int emulated_devices = 0) {
  Captured cap;
  TrainerOptions opt;
  opt.emulate_device = emulate_device;
  opt.emulated_devices = emulated_devices;
  opt.keep_tables = true;
  opt.trace = false;
  opt.batch_source = source;
  opt.on_pooled = [&](int rank, int64_t it, int f, const float* p, int64_t B, int64_t dim) {
    std::lock_guard<std::mutex> lock(cap.mu);
    cap.pooled[{it, rank, f}] = std::vector<float>(p, p + B * dim);
  };
  RunResult run = run_training(spec, given ? *given : plan_sharding(spec), opt);
  EXPECT_EQ(run.ended, RunEnd::complete) << run.error;
  if (run.ended != RunEnd::complete) return run;
  ReferenceResult ref = run_reference(spec, spec.steps, &run.plan, source, column_group_changes(spec, run));
  const int F = static_cast<int>(spec.features.size());
  const double slack = quantized_slack(spec) + storage_slack(spec);
  EXPECT_EQ(cap.pooled.size(), static_cast<size_t>(spec.steps * spec.devices.count * F));
  if (cap.pooled.size() != static_cast<size_t>(spec.steps * spec.devices.count * F)) return run;
  for (int64_t it = 0; it < spec.steps; ++it)
    for (int r = 0; r < spec.devices.count; ++r)
      for (int f = 0; f < F; ++f)
        expect_close(cap.pooled[{it, r, f}], ref.pooled[static_cast<size_t>(it)][static_cast<size_t>(r)][static_cast<size_t>(f)],
                     fmt::format("forward step {} rank {} feature {}", it, r, spec.features[static_cast<size_t>(f)].name),
                     slack);
  EXPECT_EQ(run.tables.size(), ref.tables.size());
  if (run.tables.size() != ref.tables.size()) return run;
  double moved = 0;  // training really changed the tables: equality is not the initial weights
  for (size_t t = 0; t < ref.tables.size(); ++t) {
    expect_close(run.tables[t], ref.tables[t], "table " + spec.tables[t].name + " after training", slack);
    const int64_t D = spec.tables[t].embedding_dim;
    for (int64_t r = 0; r < spec.tables[t].rows(); ++r)
      for (int64_t c = 0; c < D; ++c)
        moved += std::abs(ref.tables[t][static_cast<size_t>(r * D + c)] -
                          initial_weight(spec.seed, static_cast<int>(t), r, c, spec.tables[t].rows()));
  }
  EXPECT_GT(moved, 1e-2);
  expect_close(run.dense_params, ref.dense_params, "dense parameters after training", slack);
  EXPECT_EQ(run.loss.size(), ref.loss.size());
  if (run.loss.size() != ref.loss.size()) return run;
  for (size_t i = 0; i < ref.loss.size(); ++i)
    EXPECT_NEAR(run.loss[i], ref.loss[i], slack > 0 ? 1e-3 : 1e-5) << "loss step " << i;
  return run;
}

}  // namespace embedscope::engine::parity

// Ranks on several devices with several ranks per device (issue 14): the device path with host
// memory standing in for the GPUs (TrainerOptions::emulate_device, emulated_devices), every
// group spread over the devices on the hierarchical communicator (comm/hier/: LocalComm within
// a device, a Gloo group of one leader per device across), against the unsharded reference:
// 4 ranks on 2 devices and 6 ranks on 3 (2 per device), every sharding type x optimizer, sum
// and mean pooling (parity_check.h's tolerance).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "parity_check.h"

using namespace embedscope::engine;
using namespace embedscope::engine::parity;

namespace {

using HierParam = std::tuple<ShardingType, OptimizerType>;

auto hier_param_name(const ::testing::TestParamInfo<HierParam>& p) {
  return fmt::format("{}_{}", to_string(std::get<0>(p.param)), to_string(std::get<1>(p.param)));
}

const auto kHierTypes = ::testing::Values(ShardingType::data_parallel, ShardingType::table_wise, ShardingType::row_wise,
                                          ShardingType::column_wise, ShardingType::table_row_wise);
const auto kHierOptimizers = ::testing::Values(OptimizerType::sgd, OptimizerType::rowwise_adagrad, OptimizerType::adam);

// 4 ranks, ranks 0-1 on device 0 and 2-3 on device 1: the world group hierarchical; at
// table_row_wise (nodes of 2) the node groups are on one device each, the cross groups flat.
class TwoRanksOnEachOfTwoDevicesEqualReference : public ::testing::TestWithParam<HierParam> {};

TEST_P(TwoRanksOnEachOfTwoDevicesEqualReference, ForwardAndTablesAfterThreeSteps) {
  const auto [type, opt] = GetParam();
  for (Pooling pooling : {Pooling::sum, Pooling::mean}) check_parity(parity_spec(type, 4, pooling, opt), {}, true, nullptr, 2);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, TwoRanksOnEachOfTwoDevicesEqualReference, ::testing::Combine(kHierTypes, kHierOptimizers),
                         hier_param_name);

// 6 ranks, 2 on each of 3 devices: the world group hierarchical over 3 leaders; at
// table_row_wise (nodes of 1 rank) the cross group is the world's members, hierarchical too.
class TwoRanksOnEachOfThreeDevicesEqualReference : public ::testing::TestWithParam<HierParam> {};

TEST_P(TwoRanksOnEachOfThreeDevicesEqualReference, ForwardAndTablesAfterThreeSteps) {
  const auto [type, opt] = GetParam();
  for (Pooling pooling : {Pooling::sum, Pooling::mean}) check_parity(parity_spec(type, 6, pooling, opt), {}, true, nullptr, 3);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, TwoRanksOnEachOfThreeDevicesEqualReference,
                         ::testing::Combine(kHierTypes, kHierOptimizers), hier_param_name);

// Nodes of 3 ranks over devices of 2: node0 = ranks 0-2 on devices {0, 0, 1} and node1 = 3-5
// on {1, 2, 2} - hierarchical groups with an uneven share per device; the cross groups
// ({0, 3}, {1, 4}, {2, 5}) have one member per device (flat Gloo).
TEST(HierDevicePath, TableRowWiseNodesOfThreeOverDevicesOfTwo) {
  for (OptimizerType opt : {OptimizerType::sgd, OptimizerType::adam}) {
    WorkloadSpec s = parity_spec(ShardingType::table_row_wise, 6, Pooling::sum, opt);
    s.sharding.local_world_size = 3;
    check_parity(s, {}, true, nullptr, 3);
  }
}

// Every sharding type at once (parity_check.h's mixed plan, 4 ranks in nodes of 2), 5 ranks at
// ceil(5 / 2) = 3 per device: devices of 3 and 2 ranks.
TEST(HierDevicePath, MixedPlanOnTwoDevicesOfThreeAndTwoRanks) {
  WorkloadSpec s = parity_spec(ShardingType::row_wise, 5, Pooling::mean, OptimizerType::adam);
  s.sharding.per_table["t1"] = {ShardingType::data_parallel, {}, -1};
  s.sharding.per_table["t2"] = {ShardingType::table_wise, {}, -1};
  s.sharding.per_table["t3"] = {ShardingType::column_wise, {4, 1, 3}, -1};
  check_parity(s, {}, true, nullptr, 2);
}

}  // namespace

#include <gtest/gtest.h>

#include <string>

#include "embedscope/engine/kernels/launch_config.h"

using namespace embedscope::engine;

namespace {
// The message of the LaunchError that check_launch throws for cfg (empty if none).
std::string launch_config_error_of(const LaunchConfig& cfg, const LaunchLimits& limits = {}) {
  try {
    check_launch("tbe_forward", "tables=3 batch_size=4096", cfg, limits);
  } catch (const LaunchError& e) {
    return e.what();
  }
  return {};
}
LaunchConfig cfg(Dim3 grid, Dim3 block, int64_t shared = 0) {
  LaunchConfig c;
  c.grid = grid;
  c.block = block;
  c.shared_bytes = shared;
  return c;
}
}  // namespace

TEST(LaunchConfig, BlocksForIsCeilDivision) {
  EXPECT_EQ(blocks_for(0, 4), 0);
  EXPECT_EQ(blocks_for(-3, 4), 0);
  EXPECT_EQ(blocks_for(1, 4), 1);
  EXPECT_EQ(blocks_for(4, 4), 1);
  EXPECT_EQ(blocks_for(5, 4), 2);
  EXPECT_EQ(blocks_for(12288, 4), 3072);
  EXPECT_THROW(blocks_for(5, 0), std::invalid_argument);
  const LaunchConfig c = launch_1d(12289, 4, 128, 256);
  EXPECT_EQ(c.grid.x, 3073);
  EXPECT_EQ(c.grid.y, 1);
  EXPECT_EQ(c.block.x, 128);
  EXPECT_EQ(c.shared_bytes, 256);
}

TEST(LaunchConfig, ZeroSizeWorkIsSkippedNotLaunched) {
  const LaunchLimits l;
  EXPECT_FALSE(check_launch("k", "", launch_1d(0, 4, 128), l));
  EXPECT_FALSE(check_launch("k", "", cfg({5, 0, 1}, {32, 1, 1}), l));
  EXPECT_TRUE(check_launch("k", "", launch_1d(1, 4, 128), l));
  // an empty grid is skipped, but a bad block is still an error
  EXPECT_NE(launch_config_error_of(cfg({0, 1, 1}, {2048, 1, 1})), "");
}

TEST(LaunchConfig, LimitsAreTheDevicesAndErrorsNameKernelAndShapes) {
  const LaunchLimits l;
  EXPECT_TRUE(check_launch("k", "", cfg({2147483647, 65535, 65535}, {1024, 1, 1}), l));
  EXPECT_EQ(launch_config_error_of(cfg({2147483648, 1, 1}, {128, 1, 1})),
            "tbe_forward (tables=3 batch_size=4096): grid.x = 2147483648 exceeds the device limit 2147483647");
  EXPECT_EQ(launch_config_error_of(cfg({1, 65536, 1}, {128, 1, 1})),
            "tbe_forward (tables=3 batch_size=4096): grid.y = 65536 exceeds the device limit 65535");
  EXPECT_EQ(launch_config_error_of(cfg({1, 1, 70000}, {128, 1, 1})),
            "tbe_forward (tables=3 batch_size=4096): grid.z = 70000 exceeds the device limit 65535");
  EXPECT_EQ(launch_config_error_of(cfg({-1, 1, 1}, {128, 1, 1})),
            "tbe_forward (tables=3 batch_size=4096): grid.x = -1 is negative");
  EXPECT_EQ(launch_config_error_of(cfg({1, 1, 1}, {1025, 1, 1})),
            "tbe_forward (tables=3 batch_size=4096): block.x = 1025 exceeds the device limit 1024");
  EXPECT_EQ(launch_config_error_of(cfg({1, 1, 1}, {0, 1, 1})),
            "tbe_forward (tables=3 batch_size=4096): block.x = 0 (must be >= 1)");
  EXPECT_EQ(launch_config_error_of(cfg({1, 1, 1}, {1, 1, 65})),
            "tbe_forward (tables=3 batch_size=4096): block.z = 65 exceeds the device limit 64");
  EXPECT_EQ(launch_config_error_of(cfg({1, 1, 1}, {32, 32, 2})),
            "tbe_forward (tables=3 batch_size=4096): 2048 threads per block (32 x 32 x 2) exceed the device limit 1024");
  EXPECT_EQ(launch_config_error_of(cfg({1, 1, 1}, {128, 1, 1}, 48 * 1024 + 1)),
            "tbe_forward (tables=3 batch_size=4096): dynamic shared memory 49153 bytes exceeds the device limit 49152 bytes");
  EXPECT_EQ(launch_config_error_of(cfg({1, 1, 1}, {128, 1, 1}, -4)),
            "tbe_forward (tables=3 batch_size=4096): dynamic shared memory -4 bytes is negative");
  // a device with more shared memory (sm_90: 227 KiB opt-in) accepts what the default refuses
  LaunchLimits h200;
  h200.max_shared_bytes = 232448;
  EXPECT_EQ(launch_config_error_of(cfg({1, 1, 1}, {128, 1, 1}, 200 * 1024), h200), "");
}

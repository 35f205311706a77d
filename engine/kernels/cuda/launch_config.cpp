#include "embedscope/engine/kernels/launch_config.h"

#include <fmt/format.h>

namespace embedscope::engine {

int64_t blocks_for(int64_t items, int64_t items_per_block) {
  if (items_per_block <= 0)
    throw std::invalid_argument(fmt::format("blocks_for: items_per_block = {} (must be >= 1)", items_per_block));
  return items <= 0 ? 0 : (items - 1) / items_per_block + 1;
}

LaunchConfig launch_1d(int64_t items, int64_t items_per_block, int64_t threads, int64_t shared_bytes) {
  LaunchConfig c;
  c.grid.x = blocks_for(items, items_per_block);
  c.block.x = threads;
  c.shared_bytes = shared_bytes;
  return c;
}

bool check_launch(std::string_view kernel, std::string_view shapes, const LaunchConfig& cfg,
                  const LaunchLimits& limits) {
  auto fail = [&](const std::string& what) {
    throw LaunchError(fmt::format("{} ({}): {}", kernel, shapes, what));
  };
  const struct {
    const char* name;
    int64_t value, limit;
  } grid[] = {{"grid.x", cfg.grid.x, limits.max_grid_x},
              {"grid.y", cfg.grid.y, limits.max_grid_yz},
              {"grid.z", cfg.grid.z, limits.max_grid_yz}};
  bool empty = false;
  for (const auto& g : grid) {
    if (g.value < 0) fail(fmt::format("{} = {} is negative", g.name, g.value));
    if (g.value > g.limit) fail(fmt::format("{} = {} exceeds the device limit {}", g.name, g.value, g.limit));
    empty |= g.value == 0;
  }
  const struct {
    const char* name;
    int64_t value, limit;
  } block[] = {{"block.x", cfg.block.x, limits.max_threads_per_block},
               {"block.y", cfg.block.y, limits.max_threads_per_block},
               {"block.z", cfg.block.z, limits.max_block_z}};
  for (const auto& b : block) {
    if (b.value < 1) fail(fmt::format("{} = {} (must be >= 1)", b.name, b.value));
    if (b.value > b.limit) fail(fmt::format("{} = {} exceeds the device limit {}", b.name, b.value, b.limit));
  }
  if (cfg.block.count() > limits.max_threads_per_block)
    fail(fmt::format("{} threads per block ({} x {} x {}) exceed the device limit {}", cfg.block.count(),
                     cfg.block.x, cfg.block.y, cfg.block.z, limits.max_threads_per_block));
  if (cfg.shared_bytes < 0) fail(fmt::format("dynamic shared memory {} bytes is negative", cfg.shared_bytes));
  if (cfg.shared_bytes > limits.max_shared_bytes)
    fail(fmt::format("dynamic shared memory {} bytes exceeds the device limit {} bytes", cfg.shared_bytes,
                     limits.max_shared_bytes));
  return !empty;
}

}  // namespace embedscope::engine

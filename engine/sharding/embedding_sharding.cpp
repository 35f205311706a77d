#include "embedding_sharding.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "program/program_sink.h"

namespace embedscope::engine::sharding {

using detail::Layout;

std::vector<std::unique_ptr<EmbeddingSharding>> embedding_shardings(const Layout& layout) {
  std::vector<std::unique_ptr<EmbeddingSharding>> out;
  // table_wise / column_wise slots somewhere (the pooled all-to-all's output and gradient dist)
  if (std::any_of(layout.a2a_slots_to.begin(), layout.a2a_slots_to.end(), [](const auto& v) { return !v.empty(); }))
    out.push_back(pooled_all_to_all_sharding());
  if (!layout.rw_features.empty()) out.push_back(row_wise_sharding());
  if (layout.hierarchical) out.push_back(table_row_wise_sharding());
  if (!layout.dp_tables.empty()) out.push_back(data_parallel_sharding());
  if (!layout.hot_tables.empty()) out.push_back(hot_rows_sharding());
  return out;
}

void unknown_op(const char* module, const ProgramOp& op, const program::OpOwner& tag) {
  throw std::logic_error(fmt::format("sharding module {} has no op kind {} (op {} \"{}\")", module, tag.kind, op.id, op.name));
}

void scale_rows_mean(const std::vector<int64_t>& lengths, int64_t B, int f, float* rows, int64_t dim) {
  for (int64_t s = 0; s < B; ++s) {
    const int64_t len = lengths[static_cast<size_t>(f * B + s)];
    const float sc = len > 0 ? 1.0f / static_cast<float>(len) : 0.0f;
    for (int64_t c = 0; c < dim; ++c) rows[s * dim + c] *= sc;
  }
}

bool is_mean(const WorkloadSpec& spec, const detail::Layout& layout, int feature) {
  return spec.tables[static_cast<size_t>(layout.table_of[static_cast<size_t>(feature)])].pooling == Pooling::mean;
}

std::vector<float> mean_scale(const int64_t* lens, size_t n) {
  std::vector<float> sc(n);
  for (size_t i = 0; i < n; ++i) sc[i] = lens[i] > 0 ? 1.0f / static_cast<float>(lens[i]) : 0.0f;
  return sc;
}

DeviceMeanScales device_mean_scales(RankContext& ctx, const std::vector<int>& features,
                                    const std::vector<int64_t>& lengths) {
  const detail::Layout& L = ctx.layout();
  const int64_t B = L.B;
  DeviceMeanScales out;
  out.at.assign(L.dim.size(), -1);
  std::vector<int> mean;
  for (int f : features)
    if (out.at[static_cast<size_t>(f)] < 0 && is_mean(ctx.spec(), L, f)) {
      out.at[static_cast<size_t>(f)] = static_cast<int64_t>(mean.size()) * B;
      mean.push_back(f);
    }
  if (mean.empty()) return out;
  out.scales = ctx.buffer("comm_buffer", mean.size() * static_cast<size_t>(B));
  for (int f : mean) {
    const std::vector<float> sc = mean_scale(lengths.data() + static_cast<size_t>(f) * static_cast<size_t>(B),
                                             static_cast<size_t>(B));
    std::copy(sc.begin(), sc.end(), out.scales.data() + out.at[static_cast<size_t>(f)]);
  }
  ctx.host_to_device(out.scales.device_data(), out.scales.data(),
                     static_cast<int64_t>(out.scales.size() * sizeof(float)));
  return out;
}

}  // namespace embedscope::engine::sharding

#include "embedscope/engine/input/bucketize.h"

#include <stdexcept>

#include <fmt/format.h>

namespace embedscope::engine {

BucketizedKjt bucketize_kjt(std::span<const int64_t> values, std::span<const int64_t> offsets,
                            int64_t batch_size, std::span<const BucketSlot> slots) {
  if (batch_size < 0) throw std::invalid_argument(fmt::format("bucketize_kjt: batch_size = {}", batch_size));
  if (offsets.empty() || (batch_size > 0 && (offsets.size() - 1) % static_cast<size_t>(batch_size) != 0))
    throw std::invalid_argument(fmt::format("bucketize_kjt: {} offsets do not describe bags of batch_size {}",
                                            offsets.size(), batch_size));
  const int64_t features = batch_size > 0 ? static_cast<int64_t>(offsets.size() - 1) / batch_size : 0;
  if (offsets.front() < 0 || offsets.back() > static_cast<int64_t>(values.size()))
    throw std::invalid_argument(fmt::format("bucketize_kjt: offsets [{}, {}] outside the {} values",
                                            offsets.front(), offsets.back(), values.size()));
  BucketizedKjt out;
  out.lengths.reserve(slots.size() * static_cast<size_t>(batch_size));
  out.splits.reserve(slots.size());
  for (const BucketSlot& sl : slots) {
    if (sl.feature < 0 || (batch_size > 0 && sl.feature >= features))
      throw std::invalid_argument(fmt::format("bucketize_kjt: slot feature {} outside the KJT's {} features",
                                              sl.feature, features));
    int64_t count = 0;
    for (int64_t b = 0; b < batch_size; ++b) {
      const size_t bag = static_cast<size_t>(sl.feature * batch_size + b);
      int64_t len = 0;
      for (int64_t i = offsets[bag]; i < offsets[bag + 1]; ++i) {
        int64_t id = values[static_cast<size_t>(i)];
        if (sl.row_wise) {
          if (id < sl.row_begin || id >= sl.row_begin + sl.num_rows) continue;
          id -= sl.row_begin;
        }
        out.ids.push_back(id);
        ++len;
      }
      out.lengths.push_back(len);
      count += len;
    }
    out.splits.push_back(count);
  }
  return out;
}

}  // namespace embedscope::engine

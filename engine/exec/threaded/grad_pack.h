#pragma once
// The layout of the embedding update's gradient pack on the device path (Rank::
// device_accumulate_update and device_accumulate_update_from_device_ids, rank_train.cpp): one
// int64 buffer that the host fills (or the device, for the ids and offsets of the device input
// dist) and that RankDevice::accumulate_update reads. Internal to the threaded executor.

#include <cstdint>
#include <type_traits>

namespace embedscope::engine::threaded {

/// Where each part of a gradient pack of `bags` bags (the shard's slots' W x B bags each, slot
/// after slot) over `num_ids` ids and rows of `cols` columns lies, in bytes from the buffer's
/// start (int64 words, so the buffer is 8-byte aligned):
///
///     ids      num_ids int64            [0, 8 num_ids)
///     offsets  bags + 1 int64, from 0   [8 num_ids, head_bytes)        head_bytes = 8 (num_ids + bags + 1)
///     scales   bags float (if scaled)   [head_bytes, head_bytes + 4 bags)
///     grads    bags x cols float        [grad_at, grad_at + 4 bags cols)   grad_at = head_bytes + (scaled ? 4 bags : 0)
///
/// floats = bags cols + (scaled ? bags : 0) and words = num_ids + bags + 1 + ceil(floats / 2),
/// the buffer's int64 words (the floats padded to a whole word). The scales exist only where
/// some slot is mean-pooled (`scaled`; a slot without gets 1s, as the CPU's nullptr).
/// Example: 7 ids, 4 bags, 3 columns, scaled: offsets at 56 B, head_bytes 96, scales at 96,
/// grads at 112, 16 floats, 20 words (160 B); unscaled: grads at 96, 12 floats, 18 words.
struct GradPackLayout {
  int64_t num_ids = 0;
  int64_t bags = 0;
  int64_t cols = 0;
  bool scaled = false;

  /// Bytes of the ids and offsets (where the scales, or the gradients, begin).
  int64_t head_bytes() const { return (num_ids + bags + 1) * static_cast<int64_t>(sizeof(int64_t)); }
  /// Byte offset of the gradients.
  int64_t grad_at() const { return head_bytes() + (scaled ? bags * static_cast<int64_t>(sizeof(float)) : 0); }
  /// Byte offset of the gradients' end.
  int64_t grads_end() const { return grad_at() + bags * cols * static_cast<int64_t>(sizeof(float)); }
  /// The scales' and gradients' floats.
  int64_t floats() const { return bags * cols + (scaled ? bags : 0); }
  /// The buffer's int64 words.
  int64_t words() const { return num_ids + bags + 1 + (floats() + 1) / 2; }

  template <class Word>
  Word* ids(Word* base) const {
    return base;
  }
  template <class Word>
  Word* offsets(Word* base) const {
    return base + num_ids;
  }
  /// The scales, or nullptr when the pack has none.
  template <class Word>
  auto* scale(Word* base) const {
    using F = std::conditional_t<std::is_const_v<Word>, const float, float>;
    return scaled ? reinterpret_cast<F*>(base + num_ids + bags + 1) : static_cast<F*>(nullptr);
  }
  template <class Word>
  auto* grad(Word* base) const {
    using F = std::conditional_t<std::is_const_v<Word>, const float, float>;
    return reinterpret_cast<F*>(base + num_ids + bags + 1) + (scaled ? bags : 0);
  }
};

}  // namespace embedscope::engine::threaded

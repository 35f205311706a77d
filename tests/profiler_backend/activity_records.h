#pragma once
// Hand-built CUPTI activity records for the decoder's host tests (cupti_test,
// cupti_drain_test, cupti_rank_test): 8-byte aligned records back to back, as CUPTI hands a completed buffer over.

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace embedscope::test_support {

/// A buffer of activity records of at most 4,096 8-byte words (32 KiB). Fixed capacity, so a
/// reference add() returned stays valid; throws std::length_error when a record does not fit.
class ActivityRecords {
 public:
  ActivityRecords() { words_.reserve(4096); }
  /// A zeroed record of type R (sizeof(R) a multiple of 8, as CUPTI's activity structs are) at the end.
  template <class R>
  R& add() {
    static_assert(sizeof(R) % 8 == 0);
    const size_t at = words_.size();
    if (at + sizeof(R) / 8 > words_.capacity()) throw std::length_error("test buffer full");
    words_.resize(at + sizeof(R) / 8);
    return *reinterpret_cast<R*>(words_.data() + at);
  }
  const uint8_t* data() const { return reinterpret_cast<const uint8_t*>(words_.data()); }
  /// Bytes of records so far.
  size_t size() const { return words_.size() * 8; }

 private:
  std::vector<uint64_t> words_;
};

}  // namespace embedscope::test_support

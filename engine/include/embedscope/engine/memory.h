#pragma once
// DeviceArena: the capacity-limited memory of one CPU device (rank). Every buffer the engine
// keeps for a rank is accounted here under a tag, so a CPU device runs out of memory exactly
// where a GPU of `memory_bytes` would. (The caching / expandable allocators and fragmentation
// come with the memory issue; this arena counts bytes and enforces the capacity.)

#include <cstdint>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace embedscope::engine {

/// An allocation that the device cannot hold. CLI exit code 1; the run ends "oom".
/// what(): "rank 2: out of memory allocating 1.2 GiB for weights: 3.1 GiB of 4.0 GiB in use
/// (weights 2.0 GiB, optimizer_state 1.1 GiB)".
class OomError : public std::runtime_error {
 public:
  OomError(const std::string& msg, int rank, int64_t requested, int64_t in_use, int64_t capacity)
      : std::runtime_error(msg), rank(rank), requested(requested), in_use(in_use), capacity(capacity) {}
  int rank;
  int64_t requested, in_use, capacity;
};

class DeviceArena {
 public:
  DeviceArena(int rank, int64_t capacity_bytes) : rank_(rank), capacity_(capacity_bytes) {}
  /// Accounts `bytes` under `tag`; throws OomError (and accounts nothing) if it does not fit.
  void allocate(const std::string& tag, int64_t bytes);
  void release(const std::string& tag, int64_t bytes);
  int64_t in_use() const;
  int64_t peak() const;
  int64_t capacity() const { return capacity_; }
  std::map<std::string, int64_t> by_tag() const;

 private:
  int rank_;
  int64_t capacity_;
  mutable std::mutex mu_;
  int64_t in_use_ = 0;
  int64_t peak_ = 0;
  std::map<std::string, int64_t> by_tag_;
};

/// A std::vector whose bytes are accounted in a DeviceArena: growing it throws OomError
/// before allocating when the device is full. Shrinking keeps the accounted bytes (as a
/// cache would) until the buffer is destroyed.
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceArena* arena, std::string tag) : arena_(arena), tag_(std::move(tag)) {}
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release_all();
      arena_ = o.arena_;
      tag_ = std::move(o.tag_);
      v_ = std::move(o.v_);
      accounted_ = o.accounted_;
      o.v_ = {};
      o.accounted_ = 0;
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { release_all(); }

  /// Resizes to n elements, all equal to `value`.
  void assign(size_t n, const T& value = T()) {
    const auto bytes = static_cast<int64_t>(n * sizeof(T));
    if (bytes > accounted_) {
      if (arena_) arena_->allocate(tag_, bytes - accounted_);
      accounted_ = bytes;
    }
    v_.assign(n, value);
  }
  T* data() { return v_.data(); }
  const T* data() const { return v_.data(); }
  size_t size() const { return v_.size(); }
  T& operator[](size_t i) { return v_[i]; }
  const T& operator[](size_t i) const { return v_[i]; }
  const std::vector<T>& vec() const { return v_; }

 private:
  void release_all() {
    if (arena_ && accounted_ > 0) arena_->release(tag_, accounted_);
    accounted_ = 0;
    v_ = {};
  }
  DeviceArena* arena_ = nullptr;
  std::string tag_;
  std::vector<T> v_;
  int64_t accounted_ = 0;
};

}  // namespace embedscope::engine

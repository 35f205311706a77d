#include "embedscope/engine/memory/allocator.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "embedscope/sessions/model/units.h"

namespace embedscope::engine {

using sessions::format_bytes;

const char* to_string(AllocatorEvent::Kind k) {
  switch (k) {
    case AllocatorEvent::Kind::alloc: return "alloc";
    case AllocatorEvent::Kind::free: return "free";
    case AllocatorEvent::Kind::segment_alloc: return "segment_alloc";
    case AllocatorEvent::Kind::segment_free: return "segment_free";
    case AllocatorEvent::Kind::oom: return "oom";
  }
  return "alloc";
}

int64_t round_size(int64_t bytes) {
  if (bytes < kMinBlockSize) return kMinBlockSize;
  return (bytes + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

int64_t segment_size_for(int64_t rounded) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return (rounded + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

void fragmentation_of(const std::vector<SegmentInfo>& segments, MemoryStats& out) {
  int64_t free_bytes = 0, largest = 0;
  double gaps2 = 0, seg2 = 0;
  for (const auto& s : segments) {
    seg2 += static_cast<double>(s.size) * static_cast<double>(s.size);
    for (const auto& b : s.blocks)
      if (!b.allocated) {
        free_bytes += b.size;
        largest = std::max(largest, b.size);
        gaps2 += static_cast<double>(b.size) * static_cast<double>(b.size);
      }
  }
  out.free_in_segments = free_bytes;
  out.largest_free_block = largest;
  out.external_fragmentation = free_bytes > 0 ? 1.0 - static_cast<double>(largest) / static_cast<double>(free_bytes) : 0.0;
  out.memviz_fragmentation = seg2 > 0 ? gaps2 / seg2 : 0.0;
}

std::vector<std::pair<std::string, int64_t>> DeviceAllocator::bytes_by_tag() const {
  std::map<std::string, int64_t> by;
  for (const auto& s : snapshot())
    for (const auto& b : s.blocks)
      if (b.allocated) by[b.tag] += b.size;
  std::vector<std::pair<std::string, int64_t>> out(by.begin(), by.end());
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

DeviceOutOfMemory DeviceAllocator::out_of_memory(int64_t bytes, const std::string& tag) const {
  const MemoryStats st = stats();
  const int64_t rounded = round_size(bytes);
  const int64_t free_bytes = st.capacity - st.allocated;
  // the smallest reservation that could hold the request: a caching segment, or expandable pages
  const bool pool = config_.kind == AllocatorKind::cuda_async;  // its layout is hidden: no block sizes
  const int64_t reservation = config_.kind == AllocatorKind::direct || pool ? rounded
                              : config_.kind == AllocatorKind::caching ? segment_size_for(rounded)
                                                                       : (rounded + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
  const bool too_small = reservation > st.capacity;  // no layout of this device could ever hold it
  const bool fragmentation = free_bytes >= rounded && !too_small;
  std::string holders;
  int shown = 0;
  for (const auto& [t, b] : bytes_by_tag()) {
    if (shown++ == 3) break;
    holders += fmt::format("{}{} {}", holders.empty() ? "" : ", ", t, format_bytes(b));
  }
  std::string why, advice;
  if (too_small) {
    why = fmt::format("capacity: the device ({}) is smaller than the {} the {} allocator reserves for this request",
                      format_bytes(st.capacity), format_bytes(reservation), to_string(config_.kind));
    advice = config_.kind == AllocatorKind::direct ? "give the device more memory"
                                                   : fmt::format("give the device at least {}, or use the direct allocator, "
                                                                 "which reserves only what is asked for",
                                                                 format_bytes(reservation));
  } else if (!fragmentation) {
    why = fmt::format("capacity: only {} of the device are free (capacity {} - allocated {})", format_bytes(free_bytes),
                      format_bytes(st.capacity), format_bytes(st.allocated));
    advice = "the live data does not fit this device: spread the largest tables over more devices (row_wise, "
             "column_wise), lower batch_size, or use an optimizer with less state (sgd, rowwise_adagrad)";
  } else if (pool) {
    why = fmt::format("pool fragmentation: {} are free, but the cudaMallocAsync pool (reserved {}) could not place {} in "
                      "one piece, even after trimming it (the pool hides its layout)",
                      format_bytes(free_bytes), format_bytes(st.reserved), format_bytes(bytes));
    advice = "try the expandable allocator (expandable_segments), whose segments grow into freed space at their end, or "
             "the caching allocator, whose blocks this session can show, or allocating the largest long-lived buffers "
             "first";
  } else {
    // The caching allocator serves requests of at most 1 MiB from its small pool (2 MiB
    // segments) and larger ones from the large pool; a free block of the other pool does not count.
    int64_t pool_largest = st.largest_free_block;
    const bool small = rounded <= kSmallSize;
    if (config_.kind == AllocatorKind::caching) {
      pool_largest = 0;
      for (const auto& seg : snapshot())
        if (seg.small_pool == small)
          for (const auto& b : seg.blocks)
            if (!b.allocated) pool_largest = std::max(pool_largest, b.size);
    }
    // tester43 F20: with max_split_size, a request below it never takes a free block of
    // max_split_size or more (find_free, PyTorch's get_free_block): when every free block of the
    // pool large enough is such a block, that rule is the cause, not fragmentation.
    const int64_t max_split = config_.max_split_size;
    int64_t oversize_free = 0;  // the largest free block of the pool the rule keeps from the request
    bool fits_below = false;    // a free block of the pool in [rounded, max_split_size)
    if (max_split > 0 && rounded < max_split)
      for (const auto& seg : snapshot())
        if (seg.small_pool == small)
          for (const auto& b : seg.blocks) {
            if (b.allocated) continue;
            if (b.size >= max_split) oversize_free = std::max(oversize_free, b.size);
            else if (b.size >= rounded) fits_below = true;
          }
    const std::string unreserved = fmt::format(
        "the {} of capacity not reserved cannot hold a new {} {} for it", format_bytes(st.capacity - st.reserved),
        format_bytes(reservation), config_.kind == AllocatorKind::expandable ? "run of pages" : "segment");
    const std::string largest =
        pool_largest == st.largest_free_block
            ? fmt::format("the largest free block is {}", format_bytes(st.largest_free_block))
            : fmt::format("requests {} 1 MiB come from the {} pool, whose largest free block is {} (the largest free block "
                          "of the other pool, {}, cannot serve them)",
                          small ? "up to" : "above", small ? "small" : "large", format_bytes(pool_largest),
                          format_bytes(st.largest_free_block));
    if (oversize_free > 0 && !fits_below) {
      why = fmt::format("max_split_size: {} are free and the largest free block is {}, but the free blocks large "
                        "enough are >= max_split_size ({}), which a {} request does not split (a request below "
                        "max_split_size never takes a block of max_split_size or more, as PyTorch's caching allocator), "
                        "and {}",
                        format_bytes(free_bytes), format_bytes(oversize_free), format_bytes(max_split),
                        format_bytes(bytes), unreserved);
      advice = fmt::format("try without max_split_size, or with one above {} (so that the large free blocks serve "
                           "small requests), or allocating the largest long-lived buffers first",
                           format_bytes(oversize_free));
    } else {
      why = fmt::format("fragmentation: {} are free, but {}, and {}", format_bytes(free_bytes), largest, unreserved);
      std::vector<std::string> tips;
      if (config_.kind != AllocatorKind::expandable)
        tips.push_back("the expandable allocator (expandable_segments), whose segments grow into freed space at their end");
      if (config_.kind != AllocatorKind::direct && config_.max_split_size == 0)
        tips.push_back("a max_split_size, so that large cached blocks are not split by small requests");
      if (config_.kind == AllocatorKind::direct) tips.push_back("the caching allocator, which reuses freed blocks");
      tips.push_back("allocating the largest long-lived buffers first");
      // the layout the device has now, with one more reservation: what more capacity would buy
      // never a capacity the device already has: "at least 8.0 GiB" for 8.0 GiB + 6.0 MiB on 8.0 GiB
      // reads as what it has (tester43 F20); said as the bytes more then
      const int64_t need = st.reserved + reservation;
      const std::string beside = fmt::format("(a new {} {} beside the {} reserved)", format_bytes(reservation),
                                             config_.kind == AllocatorKind::expandable ? "of pages" : "segment",
                                             format_bytes(st.reserved));
      if (need > st.capacity)
        tips.push_back(format_bytes(need) == format_bytes(st.capacity)
                           ? fmt::format("give the device {} more than its {} {}", format_bytes(need - st.capacity),
                                         format_bytes(st.capacity), beside)
                           : fmt::format("give the device at least {} {}", format_bytes(need), beside));
      for (size_t i = 0; i < tips.size(); ++i) advice += (i == 0 ? "" : i + 1 == tips.size() ? ", or " : ", ") + tips[i];
      advice = "try " + advice;
    }
  }
  return DeviceOutOfMemory(
      fmt::format("out of memory allocating {} for {} ({} allocator): {}. Allocated {}, reserved {} of {}; largest "
                  "free block {}; most memory held by {}. Advice: {}",
                  format_bytes(bytes), tag, to_string(config_.kind), why, format_bytes(st.allocated),
                  format_bytes(st.reserved), format_bytes(st.capacity), format_bytes(st.largest_free_block),
                  holders.empty() ? "nothing" : holders, advice),
      fragmentation, bytes, free_bytes, st.largest_free_block);
}

VmmPages::VmmPages(int64_t granularity) : granularity_(granularity) {
  if (granularity <= 0) throw std::invalid_argument(fmt::format("VmmPages: granularity must be > 0, got {}", granularity));
}

std::pair<int64_t, int64_t> VmmPages::grow_to(int64_t bytes) {
  const int64_t need = round_up(std::max<int64_t>(bytes, 0)) / granularity_;
  if (need <= pages_) return {pages_, pages_};
  const std::pair<int64_t, int64_t> r{pages_, need};
  pages_ = need;
  return r;
}

std::pair<int64_t, int64_t> VmmPages::shrink_to(int64_t bytes) {
  const int64_t need = round_up(std::max<int64_t>(bytes, 0)) / granularity_;
  if (need >= pages_) return {pages_, pages_};
  const std::pair<int64_t, int64_t> r{need, pages_};
  pages_ = need;
  return r;
}

namespace {

class HostSegmentSource final : public SegmentSource {
 public:
  const char* name() const override { return "host"; }
  void* map(int64_t bytes) override { return mmap_bytes(bytes, PROT_READ | PROT_WRITE); }
  void unmap(void* p, int64_t bytes) override { munmap(p, page_bytes(bytes)); }
  void* reserve_range(int64_t bytes) override { return mmap_bytes(bytes, PROT_NONE); }
  bool commit(void* base, int64_t from, int64_t to) override {
    return mprotect(static_cast<char*>(base) + from, static_cast<size_t>(to - from), PROT_READ | PROT_WRITE) == 0;
  }
  void decommit(void* base, int64_t from, int64_t to) override {
    madvise(static_cast<char*>(base) + from, static_cast<size_t>(to - from), MADV_DONTNEED);
    mprotect(static_cast<char*>(base) + from, static_cast<size_t>(to - from), PROT_NONE);
  }
  void release_range(void* base, int64_t bytes) override { munmap(base, page_bytes(bytes)); }

 private:
  static size_t page_bytes(int64_t bytes) { return static_cast<size_t>(std::max<int64_t>(bytes, 4096)); }
  static void* mmap_bytes(int64_t bytes, int prot) {
    void* p = mmap(nullptr, page_bytes(bytes), prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
  }
};

}  // namespace

std::shared_ptr<SegmentSource> host_segment_source() {
  static const auto s = std::make_shared<HostSegmentSource>();
  return s;
}

namespace {

// A fragmentation OOM that a free block of another stream's segment could have served: the
// caching and expandable allocators hand a request only the free blocks of its own stream's
// segments (PyTorch's per-stream pools), so "the largest free block is 10 MiB" beside a 10 MiB
// request needs that rule said. `snapshot` is the allocator's layout at the OOM, `rounded` the
// request after rounding, `small` its pool. Returns `e` unchanged when no other stream's free
// block of that pool is large enough; else `e` with, before ". Allocated", e.g. "; the free
// blocks large enough (10.0 MiB) are in stream 0's segments, and a block freed on one stream is
// never handed to a request on another (the per-stream rule, as PyTorch's caching allocator):
// stream 1's largest free block is 0 B".
DeviceOutOfMemory stream_rule_oom(const DeviceOutOfMemory& e, const std::vector<SegmentInfo>& snapshot, int64_t stream,
                                  bool small, int64_t rounded) {
  if (!e.fragmentation) return e;
  int64_t own = 0, other = 0;
  std::set<int64_t> others;
  for (const auto& seg : snapshot) {
    if (seg.small_pool != small) continue;
    for (const auto& b : seg.blocks) {
      if (b.allocated) continue;
      if (seg.stream == stream) {
        own = std::max(own, b.size);
      } else if (b.size >= rounded) {
        other = std::max(other, b.size);
        others.insert(seg.stream);
      }
    }
  }
  if (other == 0) return e;
  std::string streams;
  for (int64_t s : others) streams += fmt::format("{}{}", streams.empty() ? "" : ", ", s);
  const std::string note = fmt::format(
      "; the free blocks large enough ({}) are in stream{} {}'s segments, and a block freed on one stream is never "
      "handed to a request on another (the per-stream rule, as PyTorch's caching allocator): stream {}'s largest free "
      "block is {}",
      format_bytes(other), others.size() > 1 ? "s" : "", streams, stream, format_bytes(own));
  std::string msg = e.what();
  const auto at = msg.find(". Allocated ");
  msg.insert(at == std::string::npos ? msg.size() : at, note);
  return DeviceOutOfMemory(msg, e.fragmentation, e.requested, e.free_bytes, e.largest_free_block);
}

// One allocator for the three kinds: segments of blocks, a best-fit index of free blocks.
class BlockAllocator final : public DeviceAllocator {
 public:
  explicit BlockAllocator(const AllocatorConfig& c) : DeviceAllocator(c) {}
  ~BlockAllocator() override {
    for (auto& [addr, s] : segments_) unmap(s);
  }

  Allocation allocate(int64_t bytes, const std::string& tag) override { return allocate_on(bytes, tag, 0); }
  DeviceOutOfMemory with_stream_rule(const DeviceOutOfMemory& e, int64_t stream, bool small, int64_t rounded) const {
    return config_.kind == AllocatorKind::direct ? e : stream_rule_oom(e, snapshot(), stream, small, rounded);
  }

  Allocation allocate_on(int64_t bytes, const std::string& tag, int64_t stream) override {
    if (bytes <= 0) throw std::invalid_argument(fmt::format("allocate: {} bytes for {}", bytes, tag));
    const int64_t size = round_size(bytes);
    const bool small = size <= kSmallSize;
    int64_t at = -1;
    for (int attempt = 0; attempt < 2 && at < 0; ++attempt) {
      if (attempt == 1) {  // release cached segments and retry, as PyTorch does before an OOM
        ++retries_;
        empty_cache();
      }
      at = find_free(small, stream, size);
      if (at < 0) at = reserve(small, stream, size);
    }
    if (at < 0) {
      ++ooms_;
      notify(AllocatorEvent::Kind::oom, config_.capacity_bytes - reserved_, size, bytes, tag);
      throw with_stream_rule(out_of_memory(bytes, tag), stream, small, size);
    }
    Segment& seg = segment_of(at);
    Block& b = seg.blocks.at(at);
    free_.erase({small, seg.stream, b.size, at});
    if (should_split(small, b.size, size)) {
      seg.blocks[at + size] = Block{b.size - size, 0, false, {}};
      free_.insert({small, seg.stream, b.size - size, at + size});
      b.size = size;
    }
    b.allocated = true;
    b.requested = bytes;
    b.tag = tag;
    allocated_ += b.size;
    requested_ += bytes;
    peak_allocated_ = std::max(peak_allocated_, allocated_);
    notify(AllocatorEvent::Kind::alloc, at, b.size, bytes, tag);
    return Allocation{seg.base ? seg.base + (at - seg.addr) : nullptr, at, b.size, bytes, ++next_id_};
  }

  void free(const Allocation& a) override {
    Segment& seg = segment_of(a.address);
    auto it = seg.blocks.find(a.address);
    if (it == seg.blocks.end() || !it->second.allocated)
      throw std::logic_error(fmt::format("free of an address that is not allocated: {:#x}", a.address));
    Block& b = it->second;
    notify(AllocatorEvent::Kind::free, a.address, b.size, b.requested, b.tag);
    allocated_ -= b.size;
    requested_ -= b.requested;
    b = Block{b.size, 0, false, {}};
    if (config_.kind == AllocatorKind::direct) {
      release(seg.addr);
      return;
    }
    // coalesce with free neighbours in the segment
    auto next = std::next(it);
    if (next != seg.blocks.end() && !next->second.allocated) {
      free_.erase({seg.small, seg.stream, next->second.size, next->first});
      it->second.size += next->second.size;
      seg.blocks.erase(next);
    }
    if (it != seg.blocks.begin()) {
      auto prev = std::prev(it);
      if (!prev->second.allocated) {
        free_.erase({seg.small, seg.stream, prev->second.size, prev->first});
        prev->second.size += it->second.size;
        seg.blocks.erase(it);
        it = prev;
      }
    }
    free_.insert({seg.small, seg.stream, it->second.size, it->first});
  }

  void empty_cache() override {
    std::vector<int64_t> empty;
    for (auto& [addr, s] : segments_) {
      if (s.blocks.size() == 1 && !s.blocks.begin()->second.allocated) {
        empty.push_back(addr);
      } else if (config_.kind == AllocatorKind::expandable) {
        shrink_tail(s);
      }
    }
    for (int64_t addr : empty) release(addr);
  }

  MemoryStats stats() const override {
    MemoryStats st;
    st.capacity = config_.capacity_bytes;
    st.allocated = allocated_;
    st.requested = requested_;
    st.rounding_loss = allocated_ - requested_;
    st.reserved = reserved_;
    st.peak_allocated = peak_allocated_;
    st.peak_reserved = peak_reserved_;
    st.segments = static_cast<int64_t>(segments_.size());
    st.alloc_retries = retries_;
    st.ooms = ooms_;
    fragmentation_of(snapshot(), st);
    return st;
  }

  int64_t allocated_bytes() const override { return allocated_; }
  int64_t reserved_bytes() const override { return reserved_; }

  std::vector<SegmentInfo> snapshot() const override {
    std::vector<SegmentInfo> out;
    for (const auto& [addr, s] : segments_) {
      SegmentInfo si{addr, s.size, s.small, {}, s.stream};
      for (const auto& [baddr, b] : s.blocks) si.blocks.push_back({baddr, b.size, b.requested, b.allocated, b.tag});
      out.push_back(std::move(si));
    }
    return out;
  }

 private:
  struct Block {
    int64_t size = 0;
    int64_t requested = 0;
    bool allocated = false;
    std::string tag;
  };
  struct Segment {
    int64_t addr = 0;
    int64_t size = 0;
    bool small = false;
    int64_t stream = 0;          // the stream whose requests it serves
    char* base = nullptr;        // host memory (nullptr: bookkeeping only)
    int64_t reserved_range = 0;  // expandable: the mapped address range
    std::map<int64_t, Block> blocks;
  };

  Segment& segment_of(int64_t address) {
    auto it = segments_.upper_bound(address);
    if (it == segments_.begin()) throw std::logic_error(fmt::format("address {:#x} is in no segment", address));
    --it;
    if (address >= it->first + it->second.size)
      throw std::logic_error(fmt::format("address {:#x} is in no segment", address));
    return it->second;
  }

  // Best fit in the pool of `stream`, honouring max_split_size as PyTorch's get_free_block does.
  int64_t find_free(bool small, int64_t stream, int64_t size) const {
    const int64_t max_split = config_.max_split_size;
    for (auto it = free_.lower_bound({small, stream, size, INT64_MIN});
         it != free_.end() && std::get<0>(*it) == small && std::get<1>(*it) == stream; ++it) {
      const int64_t bsize = std::get<2>(*it);
      if (max_split > 0 && size < max_split && bsize >= max_split) return -1;  // do not split oversize blocks
      if (max_split > 0 && size >= max_split && bsize >= size + kLargeBuffer) return -1;  // too much waste
      return std::get<3>(*it);
    }
    return -1;
  }

  bool should_split(bool small, int64_t block_size, int64_t size) const {
    if (config_.kind == AllocatorKind::direct) return false;
    const int64_t remaining = block_size - size;
    if (small) return remaining >= kMinBlockSize;
    const bool oversize = config_.max_split_size > 0 && block_size >= config_.max_split_size;
    return !oversize && remaining > kSmallSize;
  }

  // Reserves capacity for a request; returns the address of a free block that fits, or -1.
  int64_t reserve(bool small, int64_t stream, int64_t size) {
    if (config_.kind == AllocatorKind::expandable) return grow(small, stream, size);
    const int64_t seg_size = config_.kind == AllocatorKind::direct ? size : segment_size_for(size);
    if (reserved_ + seg_size > config_.capacity_bytes) return -1;
    Segment s;
    s.size = seg_size;
    s.small = small;
    s.stream = stream;
    if (!map(s, seg_size)) return -1;
    s.blocks[s.addr] = Block{seg_size, 0, false, {}};
    free_.insert({small, stream, seg_size, s.addr});
    reserved_ += seg_size;
    peak_reserved_ = std::max(peak_reserved_, reserved_);
    notify(AllocatorEvent::Kind::segment_alloc, s.addr, seg_size, 0, {});
    const int64_t addr = s.addr;
    segments_.emplace(addr, std::move(s));
    return addr;
  }

  // expandable: the pool's one segment (per stream) grows at its end by whole 2 MiB pages.
  int64_t grow(bool small, int64_t stream, int64_t size) {
    Segment* seg = nullptr;
    for (auto& [addr, s] : segments_)
      if (s.small == small && s.stream == stream) seg = &s;
    if (seg == nullptr) {
      Segment s;
      s.small = small;
      s.stream = stream;
      if (!map(s, 0)) return -1;
      const int64_t addr = s.addr;
      seg = &segments_.emplace(addr, std::move(s)).first->second;
    }
    int64_t tail_free = 0, tail_addr = seg->addr + seg->size;
    if (!seg->blocks.empty() && !seg->blocks.rbegin()->second.allocated) {
      tail_addr = seg->blocks.rbegin()->first;
      tail_free = seg->blocks.rbegin()->second.size;
    }
    // A free tail that already holds the request (find_free refused it: a max_split_size
    // oversize block) is handed out as it is, as PyTorch's try_allocate_expandable_block maps
    // nothing when its candidate is large enough; it is not split (should_split), so a small
    // request takes the whole oversize block and the next large one maps new pages: the
    // reserved growth of max_split_size with expandable_segments (issue 20, defect 5).
    if (tail_free >= size) return tail_addr;
    const int64_t grow_by = (size - tail_free + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
    if (reserved_ + grow_by > config_.capacity_bytes) return -1;
    if (!commit(*seg, seg->size + grow_by)) return -1;
    if (tail_free > 0) {
      free_.erase({small, stream, tail_free, tail_addr});
      seg->blocks[tail_addr].size += grow_by;
    } else {
      seg->blocks[tail_addr] = Block{grow_by, 0, false, {}};
    }
    free_.insert({small, stream, seg->blocks[tail_addr].size, tail_addr});
    notify(AllocatorEvent::Kind::segment_alloc, seg->addr + seg->size, grow_by, 0, {});  // the pages added
    seg->size += grow_by;
    reserved_ += grow_by;
    peak_reserved_ = std::max(peak_reserved_, reserved_);
    return tail_addr;
  }

  void shrink_tail(Segment& s) {
    if (s.blocks.empty() || s.blocks.rbegin()->second.allocated) return;
    const int64_t tail_addr = s.blocks.rbegin()->first;
    const int64_t tail = s.blocks.rbegin()->second.size;
    const int64_t cut = tail / kRoundLarge * kRoundLarge;
    if (cut == 0) return;
    free_.erase({s.small, s.stream, tail, tail_addr});
    if (cut == tail) {
      s.blocks.erase(tail_addr);
    } else {
      s.blocks[tail_addr].size -= cut;
      free_.insert({s.small, s.stream, tail - cut, tail_addr});
    }
    s.size -= cut;
    reserved_ -= cut;
    notify(AllocatorEvent::Kind::segment_free, s.addr + s.size, cut, 0, {});  // the pages returned
    if (s.base) source_->decommit(s.base, s.size, s.size + cut);
  }

  void release(int64_t addr) {
    Segment& s = segments_.at(addr);
    for (const auto& [baddr, b] : s.blocks)
      if (!b.allocated) free_.erase({s.small, s.stream, b.size, baddr});
    reserved_ -= s.size;
    if (s.size > 0) notify(AllocatorEvent::Kind::segment_free, addr, s.size, 0, {});
    unmap(s);
    segments_.erase(addr);
  }

  // Memory of a segment, from the config's SegmentSource. Expandable segments reserve the
  // whole capacity as an address range and commit pages as they grow.
  bool map(Segment& s, int64_t size) {
    const bool expandable = config_.kind == AllocatorKind::expandable;
    const int64_t range = expandable ? (config_.capacity_bytes + kRoundLarge - 1) / kRoundLarge * kRoundLarge : size;
    if (back_memory_) {
      void* p = expandable ? source_->reserve_range(range) : source_->map(range);
      if (p == nullptr) return false;
      s.base = static_cast<char*>(p);
      s.addr = reinterpret_cast<int64_t>(p);
    } else {
      s.addr = next_fake_address_;
      next_fake_address_ += std::max<int64_t>(range, 4096) + kRoundLarge;
    }
    s.reserved_range = range;
    return true;
  }

  bool commit(Segment& s, int64_t new_size) {
    if (!s.base || new_size == s.size) return true;
    if (new_size > s.size) return source_->commit(s.base, s.size, new_size);
    source_->decommit(s.base, new_size, s.size);  // shrinking: give the pages back
    return true;
  }

  void unmap(Segment& s) {
    if (s.base) {
      if (config_.kind == AllocatorKind::expandable) {
        if (s.size > 0) source_->decommit(s.base, 0, s.size);
        source_->release_range(s.base, s.reserved_range);
      } else {
        source_->unmap(s.base, s.reserved_range);
      }
    }
    s.base = nullptr;
  }

 public:
  bool back_memory_ = true;
  std::shared_ptr<SegmentSource> source_;

 private:
  std::map<int64_t, Segment> segments_;
  std::set<std::tuple<bool, int64_t, int64_t, int64_t>> free_;  // (small pool, stream, size, address)
  int64_t allocated_ = 0, requested_ = 0, reserved_ = 0, peak_allocated_ = 0, peak_reserved_ = 0;
  int64_t retries_ = 0, ooms_ = 0, next_id_ = 0;
  int64_t next_fake_address_ = int64_t{1} << 32;
};

}  // namespace

std::unique_ptr<DeviceAllocator> DeviceAllocator::create(const AllocatorConfig& config,
                                                         std::shared_ptr<SegmentSource> source) {
  if (config.capacity_bytes <= 0) throw std::invalid_argument("allocator capacity must be > 0");
  if (config.kind == AllocatorKind::cuda_async)
    throw std::invalid_argument("the cuda_async allocator (cudaMallocAsync pools) runs on the cuda backend only");
  auto a = std::make_unique<BlockAllocator>(config);
  a->back_memory_ = config.back_with_memory;
  a->source_ = source ? std::move(source) : host_segment_source();
  return a;
}

}  // namespace embedscope::engine

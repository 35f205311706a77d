// The device allocators' rules (allocator.h): one block allocator for caching, expandable and
// direct, following PyTorch's DeviceCachingAllocator; their OOM explanation is allocator_oom.cpp.
#include "embedscope/engine/memory/allocator.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "allocator_oom.h"
#include "embedscope/sessions/model/units.h"

namespace embedscope::engine {

using sessions::format_bytes;
using detail::stream_rule_oom;

namespace {

// One allocator for the three kinds: segments of blocks, a best-fit index of free blocks. The
// rules are those of PyTorch's DeviceCachingAllocator (c10/cuda/CUDACachingAllocator.cpp); the
// comments name the function of it each part follows.
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

  // PyTorch's malloc: a cached free block (get_free_block), else new memory (alloc_block: a
  // segment, or expandable pages), else the cache released (release_cached_blocks) and new
  // memory tried once more, else OOM. (release_available_cached_blocks, which frees only
  // oversize segments first, is not modelled: release_cached_blocks frees them too.) With a
  // garbage_collection_threshold, get_free_block counts its calls per pool (the blocks' ages)
  // and a request no cached block serves first garbage-collects (garbage_collect_cached_blocks).
  Allocation allocate_on(int64_t bytes, const std::string& tag, int64_t stream) override {
    if (bytes <= 0) throw std::invalid_argument(fmt::format("allocate: {} bytes for {}", bytes, tag));
    const int64_t size = round_size(bytes, config_.roundup_power2_divisions);
    const bool small = size <= kSmallSize;
    if (config_.garbage_collection_threshold > 0) ++free_block_calls_[small ? 1 : 0];  // get_free_block's count
    int64_t at = find_free(small, stream, size);
    if (at < 0) {
      garbage_collect();
      at = reserve(small, stream, size);
    }
    if (at < 0) {
      ++retries_;
      empty_cache();
      at = reserve(small, stream, size);
    }
    if (at < 0) {
      ++ooms_;
      notify(AllocatorEvent::Kind::oom, config_.capacity_bytes - reserved_, size, bytes, tag);
      throw with_stream_rule(out_of_memory(bytes, tag, refused_), stream, small, size);
    }
    Segment& seg = segment_of(at);
    Block& b = seg.blocks.at(at);
    free_.erase({small, seg.stream, b.size, at});
    if (should_split(small, b.size, size)) {
      seg.blocks[at + size] = Block{b.size - size, 0, false, true, {}};
      insert_free(seg, at + size);
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

  // PyTorch's free_block: the block merges with its free neighbours (try_merge_blocks: mapped
  // ones only, an unmapped hole stays apart).
  void free(const Allocation& a) override {
    Segment& seg = segment_of(a.address);
    auto it = seg.blocks.find(a.address);
    if (it == seg.blocks.end() || !it->second.allocated)
      throw std::logic_error(fmt::format("free of an address that is not allocated: {:#x}", a.address));
    Block& b = it->second;
    notify(AllocatorEvent::Kind::free, a.address, b.size, b.requested, b.tag);
    allocated_ -= b.size;
    requested_ -= b.requested;
    b = Block{b.size, 0, false, true, {}};
    if (config_.kind == AllocatorKind::direct) {
      release(seg.addr);
      return;
    }
    auto next = std::next(it);
    if (next != seg.blocks.end() && free_mapped(next->second)) {
      free_.erase({seg.small, seg.stream, next->second.size, next->first});
      it->second.size += next->second.size;
      seg.blocks.erase(next);
    }
    if (it != seg.blocks.begin()) {
      auto prev = std::prev(it);
      if (free_mapped(prev->second)) {
        free_.erase({seg.small, seg.stream, prev->second.size, prev->first});
        prev->second.size += it->second.size;
        seg.blocks.erase(it);
        it = prev;
      }
    }
    insert_free(seg, it->first);
  }

  // PyTorch's release_cached_blocks (release_blocks): caching, every segment that is one free
  // block goes back; expandable, every whole page inside a free block is unmapped (unmap_block),
  // and a range left with no page mapped goes back (release_expandable_segment).
  void empty_cache() override {
    std::vector<int64_t> empty;
    for (auto& [addr, s] : segments_) {
      if (config_.kind == AllocatorKind::expandable) {
        std::vector<int64_t> free_blocks;
        for (const auto& [baddr, b] : s.blocks)
          if (free_mapped(b)) free_blocks.push_back(baddr);
        for (int64_t baddr : free_blocks) unmap_block(s, baddr);
        if (s.mapped == 0) empty.push_back(addr);
      } else if (s.blocks.size() == 1 && !s.blocks.begin()->second.allocated) {
        empty.push_back(addr);
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
    st.alloc_retries = retries_;
    st.ooms = ooms_;
    const std::vector<SegmentInfo> snap = snapshot();
    st.segments = static_cast<int64_t>(snap.size());
    fragmentation_of(snap, st);
    return st;
  }

  int64_t allocated_bytes() const override { return allocated_; }
  int64_t reserved_bytes() const override { return reserved_; }

  // Expandable: one segment per run of mapped pages, as PyTorch's snapshot() reports them.
  std::vector<SegmentInfo> snapshot() const override {
    std::vector<SegmentInfo> out;
    for (const auto& [addr, s] : segments_) {
      size_t run = SIZE_MAX;  // index in `out` of the run being filled
      for (const auto& [baddr, b] : s.blocks) {
        if (!b.mapped) {
          run = SIZE_MAX;
          continue;
        }
        if (run == SIZE_MAX) {
          run = out.size();
          out.push_back(SegmentInfo{baddr, 0, s.small, {}, s.stream});
        }
        out[run].size += b.size;
        out[run].blocks.push_back({baddr, b.size, b.requested, b.allocated, b.tag});
      }
    }
    return out;
  }

 private:
  struct Block {
    int64_t size = 0;
    int64_t requested = 0;
    bool allocated = false;
    bool mapped = true;  // expandable: false for pages not mapped (a hole, or the range's unused end)
    std::string tag;
    int64_t gc_base = 0;  // free blocks: its pool's get_free_block count when it became free (gc_count_base)
  };
  struct Segment {
    int64_t addr = 0;
    int64_t size = 0;    // caching / direct: the segment; expandable: the whole address range
    int64_t mapped = 0;  // bytes mapped: what the segment adds to reserved
    int64_t page = 0;    // expandable: the page mapped at once (expandable_page_size)
    bool small = false;
    int64_t stream = 0;          // the stream whose requests it serves
    char* base = nullptr;        // host memory (nullptr: bookkeeping only)
    int64_t reserved_range = 0;  // the address range mapped (expandable) or the segment's bytes
    std::map<int64_t, Block> blocks;  // covering [addr, addr + size); expandable: mapped and unmapped
    std::set<int64_t> unmapped;       // expandable: the unmapped blocks' addresses (PyTorch's pool->unmapped)
  };

  static bool free_mapped(const Block& b) { return !b.allocated && b.mapped; }

  // PyTorch's BlockPool::insert_into_blocks: the free block at `addr` of `s` enters the index of
  // free blocks, its age counted from now (gc_count_base = the pool's get_free_block count).
  void insert_free(Segment& s, int64_t addr) {
    Block& b = s.blocks.at(addr);
    b.gc_base = free_block_calls_[s.small ? 1 : 0];
    free_.insert({s.small, s.stream, b.size, addr});
  }

  // PyTorch's garbage_collect_cached_blocks (c10/cuda/CUDACachingAllocator.cpp), called by malloc
  // when no cached block serves a request, before new memory is reserved. With reserved bytes
  // above garbage_collection_threshold x capacity (PyTorch: x allowed_memory_maximum, the memory
  // set_per_process_memory_fraction allows; it collects only when a fraction is set, and the
  // device capacity is that allowed memory here) it releases unsplit free blocks of the large
  // pool - whole free segments - until the bytes released reach reserved - threshold x capacity:
  // each pass takes the average age of those blocks (age = the large pool's get_free_block calls
  // since the block became free: gc_count) and releases every one whose age is at least that
  // average, in the pool's order (stream, size, address), not stopping at the target within a
  // pass; the next pass averages the ages of those left. The small pool is never collected, and an
  // expandable range always borders unmapped pages (its range is 1 1/8 of the capacity), so it has
  // no unsplit block: nothing is collected there either.
  void garbage_collect() {
    const double t = config_.garbage_collection_threshold;
    if (t <= 0) return;
    const auto gc_threshold = static_cast<int64_t>(t * static_cast<double>(config_.capacity_bytes));
    if (reserved_ <= gc_threshold) return;
    const int64_t target = reserved_ - gc_threshold;
    struct Freeable {
      int64_t addr, size, age;
      bool released;
    };
    std::vector<Freeable> blocks;  // the large pool's order: free_ is (small, stream, size, address)
    int64_t total_age = 0;
    for (auto it = free_.lower_bound({false, INT64_MIN, INT64_MIN, INT64_MIN});
         it != free_.end() && !std::get<0>(*it); ++it) {
      const Segment& s = segment_of(std::get<3>(*it));
      if (s.blocks.size() != 1) continue;  // split: part of a segment (PyTorch's is_split)
      const int64_t age = free_block_calls_[0] - s.blocks.begin()->second.gc_base;
      blocks.push_back({std::get<3>(*it), std::get<2>(*it), age, false});
      total_age += age;
    }
    auto count = static_cast<int64_t>(blocks.size());
    int64_t reclaimed = 0;
    for (bool freed = true; reclaimed < target && freed && count > 0;) {
      const double age_threshold = static_cast<double>(total_age) / static_cast<double>(count);
      freed = false;
      for (auto& b : blocks) {
        if (b.released || static_cast<double>(b.age) < age_threshold) continue;
        freed = b.released = true;
        reclaimed += b.size;
        total_age -= b.age;
        --count;
        release(b.addr);
      }
    }
  }

  const Segment& segment_of(int64_t address) const {
    auto it = segments_.upper_bound(address);
    if (it == segments_.begin()) throw std::logic_error(fmt::format("address {:#x} is in no segment", address));
    --it;
    if (address >= it->first + it->second.size)
      throw std::logic_error(fmt::format("address {:#x} is in no segment", address));
    return it->second;
  }
  Segment& segment_of(int64_t address) {
    return const_cast<Segment&>(static_cast<const BlockAllocator*>(this)->segment_of(address));
  }

  // PyTorch's get_free_block: best fit in the pool of `stream`; with expandable segments a block
  // followed by unmapped pages counts as the size it can expand to, so blocks that cannot grow
  // are preferred to it; then the max_split_size rules: a request below max_split_size never
  // takes a block of max_split_size or more, and one of max_split_size or more no block of
  // size + kLargeBuffer or more. Only the best-fit block is considered (-1 when it is refused).
  int64_t find_free(bool small, int64_t stream, int64_t size) const {
    const auto same_pool = [&](auto i) {
      return i != free_.end() && std::get<0>(*i) == small && std::get<1>(*i) == stream;
    };
    auto it = free_.lower_bound({small, stream, size, INT64_MIN});
    if (!same_pool(it)) return -1;
    // (a block not followed by unmapped pages counts as its size, which no later block of the
    // size order undercuts: the walk only starts from one that is)
    if (config_.kind == AllocatorKind::expandable) {
      int64_t it_size = expandable_size(*it);
      for (auto next = std::next(it); it_size > std::get<2>(*it) && same_pool(next); ++next) {
        const int64_t next_size = expandable_size(*next);
        if (next_size >= it_size) break;
        it = next;
        it_size = next_size;
      }
    }
    const int64_t bsize = std::get<2>(*it);
    const int64_t max_split = config_.max_split_size;
    if (max_split > 0 && size < max_split && bsize >= max_split) return -1;             // do not split oversize blocks
    if (max_split > 0 && size >= max_split && bsize >= size + kLargeBuffer) return -1;  // too much waste
    return std::get<3>(*it);
  }

  // get_free_block's expandable_size: the block's size plus the unmapped pages right after it.
  int64_t expandable_size(const std::tuple<bool, int64_t, int64_t, int64_t>& key) const {
    const Segment& s = segment_of(std::get<3>(key));
    const auto next = std::next(s.blocks.find(std::get<3>(key)));
    return std::get<2>(key) + (next != s.blocks.end() && !next->second.mapped ? next->second.size : 0);
  }

  // PyTorch's should_split: the small pool and expandable segments split when 512 B or more
  // remain; the caching allocator's large pool when the request is below max_split_size (the
  // request decides, not the block) and more than 1 MiB (kSmallSize) remains.
  bool should_split(bool small, int64_t block_size, int64_t size) const {
    if (config_.kind == AllocatorKind::direct) return false;
    const int64_t remaining = block_size - size;
    if (small || config_.kind == AllocatorKind::expandable) return remaining >= kMinBlockSize;
    const bool below_max_split = config_.max_split_size == 0 || size < config_.max_split_size;
    return below_max_split && remaining > kSmallSize;
  }

  // PyTorch's alloc_block: reserves capacity for a request; returns the address of a free block
  // that holds it, or -1 (refused_ says why when the source refused what the capacity allowed).
  int64_t reserve(bool small, int64_t stream, int64_t size) {
    refused_.clear();
    if (config_.kind == AllocatorKind::expandable) return grow(small, stream, size);
    const int64_t seg_size = config_.kind == AllocatorKind::direct ? size : segment_size_for(size);
    if (reserved_ + seg_size > config_.capacity_bytes) return -1;
    Segment s;
    s.size = seg_size;
    s.mapped = seg_size;
    s.small = small;
    s.stream = stream;
    if (!map(s, seg_size)) {
      refused_ = fmt::format("{} refused a new {} segment", source_->name(), format_bytes(seg_size));
      return -1;
    }
    s.blocks[s.addr] = Block{seg_size, 0, false, true, {}};
    insert_free(s, s.addr);
    reserved_ += seg_size;
    peak_reserved_ = std::max(peak_reserved_, reserved_);
    notify(AllocatorEvent::Kind::segment_alloc, s.addr, seg_size, 0, {});
    const int64_t addr = s.addr;
    segments_.emplace(addr, std::move(s));
    return addr;
  }

  // PyTorch's try_allocate_expandable_block. find_expandable_block: the lowest unmapped range of
  // the pool and stream (a hole, or the unused end of a range) that, starting at the free block
  // just before it, has `size` bytes of free or unmapped blocks in a row; a new address range
  // when none has. Then map_block maps pages there until the free block holds the request.
  // Returns the free block's address, or -1 when the capacity cannot hold the pages (pages
  // mapped before the failing one stay mapped, as PyTorch leaves them).
  int64_t grow(bool small, int64_t stream, int64_t size) {
    Segment* seg = nullptr;
    int64_t at = -1;
    for (auto& [addr, s] : segments_) {
      if (s.small != small || s.stream != stream) continue;
      for (auto u = s.unmapped.begin(); u != s.unmapped.end() && at < 0; ++u) {
        auto c = s.blocks.find(*u);
        if (c != s.blocks.begin() && free_mapped(std::prev(c)->second)) c = std::prev(c);
        int64_t bytes = 0;  // has_available_address_space
        for (auto k = c; k != s.blocks.end() && bytes < size && !k->second.allocated; ++k) bytes += k->second.size;
        if (bytes >= size) at = c->first;
      }
      if (at >= 0) {
        seg = &s;
        break;
      }
    }
    if (seg == nullptr) {
      Segment s;
      s.small = small;
      s.stream = stream;
      s.page = expandable_page_size(small);
      if (!map(s, 0)) {
        refused_ = fmt::format("{} refused the {} pool's address range", source_->name(), small ? "small" : "large");
        return -1;
      }
      s.size = s.reserved_range;
      s.blocks[s.addr] = Block{s.size, 0, false, false, {}};
      s.unmapped.insert(s.addr);
      at = s.addr;
      seg = &segments_.emplace(at, std::move(s)).first->second;
    }
    Segment& s = *seg;
    if (!s.blocks.at(at).mapped) at = map_block(s, at, std::min(s.blocks.at(at).size, size));
    while (at >= 0 && s.blocks.at(at).size < size) {
      const auto next = std::next(s.blocks.find(at));  // unmapped: a free mapped one would have merged
      if (next == s.blocks.end() || next->second.mapped || next->second.allocated)
        throw std::logic_error("expandable segment: no unmapped pages after the candidate block");
      at = map_block(s, next->first, std::min(size - s.blocks.at(at).size, next->second.size));
    }
    if (at < 0 && s.mapped == 0) release(s.addr);  // a new range that got no page
    return at;
  }

  // PyTorch's map_block: maps the pages holding [addr, addr + bytes) of the unmapped block at
  // `addr` (page-aligned, as every unmapped block is), the rest of it staying unmapped, and
  // merges them with the free blocks beside them. Returns the merged free block's address, or
  // -1 when the capacity (or the source) cannot hold the pages.
  int64_t map_block(Segment& s, int64_t addr, int64_t bytes) {
    Block& b = s.blocks.at(addr);
    const int64_t len = std::min(b.size, (bytes + s.page - 1) / s.page * s.page);
    if (reserved_ + len > config_.capacity_bytes) return -1;
    if (s.base) {
      bool ok = false;
      try {
        ok = source_->commit(s.base, addr - s.addr, addr - s.addr + len);
      } catch (const HostMemoryError& e) {
        throw HostMemoryError(fmt::format("expandable allocator, {} of pages for the {} pool: {}", format_bytes(len),
                                          s.small ? "small" : "large", e.what()));
      }
      if (!ok) {
        refused_ = fmt::format("{} refused to map {} of pages", source_->name(), format_bytes(len));
        return -1;
      }
    }
    if (len < b.size) {
      s.blocks[addr + len] = Block{b.size - len, 0, false, false, {}};
      s.unmapped.insert(addr + len);
    }
    s.unmapped.erase(addr);
    b.size = len;
    b.mapped = true;
    s.mapped += len;
    reserved_ += len;
    peak_reserved_ = std::max(peak_reserved_, reserved_);
    notify(AllocatorEvent::Kind::segment_alloc, addr, len, 0, {});  // PyTorch's segment_map
    auto it = s.blocks.find(addr);
    if (auto next = std::next(it); next != s.blocks.end() && free_mapped(next->second)) {
      free_.erase({s.small, s.stream, next->second.size, next->first});
      it->second.size += next->second.size;
      s.blocks.erase(next);
    }
    if (it != s.blocks.begin()) {
      if (auto prev = std::prev(it); free_mapped(prev->second)) {
        free_.erase({s.small, s.stream, prev->second.size, prev->first});
        prev->second.size += it->second.size;
        s.blocks.erase(it);
        it = prev;
      }
    }
    insert_free(s, it->first);
    return it->first;
  }

  // PyTorch's unmap_block (ExpandableSegment::unmap): unmaps the whole pages inside the free
  // block at `addr`; the bytes before the first and after the last stay free blocks, and the
  // unmapped pages merge with unmapped neighbours.
  void unmap_block(Segment& s, int64_t addr) {
    const int64_t size = s.blocks.at(addr).size;
    const int64_t off = addr - s.addr;
    const int64_t first = (off + s.page - 1) / s.page * s.page;  // segmentRight
    const int64_t last = (off + size) / s.page * s.page;         // segmentLeft
    if (first >= last) return;
    free_.erase({s.small, s.stream, size, addr});
    const int64_t before = first - off, after = off + size - last;
    if (before > 0) {
      s.blocks.at(addr).size = before;
      insert_free(s, addr);
    } else {
      s.blocks.erase(addr);
    }
    if (after > 0) {
      s.blocks[s.addr + last] = Block{after, 0, false, true, {}};
      insert_free(s, s.addr + last);
    }
    auto it = s.blocks.emplace(s.addr + first, Block{last - first, 0, false, false, {}}).first;
    s.unmapped.insert(it->first);
    if (auto next = std::next(it); next != s.blocks.end() && !next->second.mapped) {
      it->second.size += next->second.size;
      s.unmapped.erase(next->first);
      s.blocks.erase(next);
    }
    if (it != s.blocks.begin()) {
      if (auto prev = std::prev(it); !prev->second.mapped) {
        prev->second.size += it->second.size;
        s.unmapped.erase(it->first);
        s.blocks.erase(it);
      }
    }
    s.mapped -= last - first;
    reserved_ -= last - first;
    notify(AllocatorEvent::Kind::segment_free, s.addr + first, last - first, 0, {});  // PyTorch's segment_unmap
    if (s.base) source_->decommit(s.base, first, last);
  }

  // A segment goes back: caching / direct, its memory (segment_free); expandable, a range with
  // no page mapped any more (its pages' segment_free came with their unmapping).
  void release(int64_t addr) {
    Segment& s = segments_.at(addr);
    for (const auto& [baddr, b] : s.blocks)
      if (free_mapped(b)) free_.erase({s.small, s.stream, b.size, baddr});
    reserved_ -= s.mapped;
    if (s.mapped > 0) notify(AllocatorEvent::Kind::segment_free, addr, s.mapped, 0, {});
    unmap(s);
    segments_.erase(addr);
  }

  // Memory of a segment, from the config's SegmentSource. An expandable segment reserves an
  // address range of 1 1/8 of the capacity in whole pages (ExpandableSegment reserves 1 1/8 of
  // the device's memory, so that holes unmapped earlier leave room at the end) and maps pages
  // as requests need them.
  bool map(Segment& s, int64_t size) {
    const bool expandable = config_.kind == AllocatorKind::expandable;
    const int64_t cap = config_.capacity_bytes + config_.capacity_bytes / 8;
    const int64_t range = expandable ? (cap + s.page - 1) / s.page * s.page : size;
    if (back_memory_) {
      void* p = nullptr;
      try {
        p = expandable ? source_->reserve_range(range) : source_->map(range);
      } catch (const HostMemoryError& e) {  // what was being reserved, and why so much
        throw HostMemoryError(
            expandable ? fmt::format("expandable allocator, the {} pool's address range of {} for stream {} (1 1/8 of "
                                     "the device's {}, as PyTorch's expandable segments reserve): {}",
                                     s.small ? "small" : "large", format_bytes(range), s.stream,
                                     format_bytes(config_.capacity_bytes), e.what())
                       : fmt::format("{} allocator, a new {} segment: {}", to_string(config_.kind), format_bytes(range),
                                     e.what()));
      }
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

  void unmap(Segment& s) {
    if (s.base) {
      if (config_.kind == AllocatorKind::expandable) {
        int64_t from = -1;  // the start of the run of mapped pages being walked
        for (auto it = s.blocks.begin(); it != s.blocks.end(); ++it) {
          if (it->second.mapped && from < 0) from = it->first - s.addr;
          const auto next = std::next(it);
          if (from >= 0 && (next == s.blocks.end() || !next->second.mapped)) {
            source_->decommit(s.base, from, it->first - s.addr + it->second.size);
            from = -1;
          }
        }
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
  std::set<std::tuple<bool, int64_t, int64_t, int64_t>> free_;  // (small pool, stream, size, address): mapped free blocks
  int64_t allocated_ = 0, requested_ = 0, reserved_ = 0, peak_allocated_ = 0, peak_reserved_ = 0;
  int64_t retries_ = 0, ooms_ = 0, next_id_ = 0;
  int64_t free_block_calls_[2] = {0, 0};  // get_free_block calls per pool (large, small): the ages' clock
  std::string refused_;  // the last reserve()'s source refusal ("" when none): out_of_memory's cause
  int64_t next_fake_address_ = int64_t{1} << 32;
};

}  // namespace

std::unique_ptr<DeviceAllocator> DeviceAllocator::create(const AllocatorConfig& config,
                                                         std::shared_ptr<SegmentSource> source) {
  if (config.capacity_bytes <= 0) throw std::invalid_argument("allocator capacity must be > 0");
  if (config.garbage_collection_threshold != 0 &&
      !(config.garbage_collection_threshold > 0 && config.garbage_collection_threshold < 1))
    throw std::invalid_argument(fmt::format("garbage_collection_threshold must be > 0 and < 1 (0: off), got {}",
                                            config.garbage_collection_threshold));
  if (config.kind == AllocatorKind::cuda_async)
    throw std::invalid_argument("the cuda_async allocator (cudaMallocAsync pools) runs on the cuda backend only");
  auto a = std::make_unique<BlockAllocator>(config);
  a->back_memory_ = config.back_with_memory;
  a->source_ = source ? std::move(source) : host_segment_source();
  return a;
}

}  // namespace embedscope::engine

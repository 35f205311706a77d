#include "embedscope/engine/memory/allocator.h"

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
  double gaps2 = 0, seg_total = 0;
  for (const auto& s : segments) {
    seg_total += static_cast<double>(s.size);
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
  // PyTorch MemoryViz.js calculate_fragmentation: sum of squared free gaps / (sum of segment sizes)^2
  out.memviz_fragmentation = seg_total > 0 ? gaps2 / (seg_total * seg_total) : 0.0;
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

DeviceOutOfMemory DeviceAllocator::out_of_memory(int64_t bytes, const std::string& tag, const std::string& refused) const {
  const MemoryStats st = stats();
  const int64_t rounded = round_size(bytes);
  const int64_t free_bytes = st.capacity - st.allocated;
  // the smallest reservation that could hold the request: a caching segment, or expandable pages
  // (2 MiB in the small pool, 20 MiB in the large: expandable_page_size)
  const bool pool = config_.kind == AllocatorKind::cuda_async;  // its layout is hidden: no block sizes
  const int64_t page = expandable_page_size(rounded <= kSmallSize);
  const int64_t reservation = config_.kind == AllocatorKind::direct || pool ? rounded
                              : config_.kind == AllocatorKind::caching ? segment_size_for(rounded)
                                                                       : (rounded + page - 1) / page * page;
  const bool too_small = reservation > st.capacity;  // no layout of this device could ever hold it
  // the source refused a reservation the capacity had room for: its refusal is the cause, not
  // fragmentation (which says the unreserved capacity could not hold it)
  const bool refused_with_room = !refused.empty() && !too_small && st.capacity - st.reserved >= reservation;
  const bool fragmentation = free_bytes >= rounded && !too_small && !refused_with_room;
  const char* unit = config_.kind == AllocatorKind::expandable ? "run of pages" : "segment";
  std::string holders;
  int shown = 0;
  for (const auto& [t, b] : bytes_by_tag()) {
    if (shown++ == 3) break;
    holders += fmt::format("{}{} {}", holders.empty() ? "" : ", ", t, format_bytes(b));
  }
  // "allocating the largest long-lived buffers first" helps only where the live blocks of the
  // request's pool differ in size: with one size every order makes the same layout
  const bool small_request = rounded <= kSmallSize;
  bool sizes_differ = false;
  {
    int64_t first = -1;
    for (const auto& seg : snapshot())
      if (config_.kind == AllocatorKind::direct || pool || seg.small_pool == small_request)
        for (const auto& b : seg.blocks)
          if (b.allocated) {
            if (first >= 0 && b.size != first) sizes_differ = true;
            first = b.size;
          }
  }
  const std::string order_tip = "allocating the largest long-lived buffers first";
  std::string why, advice, setting_advice, other_advice;
  if (too_small) {
    why = fmt::format("capacity: the device ({}) is smaller than the {} the {} allocator reserves for this request",
                      format_bytes(st.capacity), format_bytes(reservation), to_string(config_.kind));
    if (config_.kind == AllocatorKind::direct) {
      other_advice = advice = "give the device more memory";
    } else {
      other_advice = fmt::format("give the device at least {}", format_bytes(reservation));
      setting_advice = "use the direct allocator, which reserves only what is asked for";
      advice = other_advice + ", or " + setting_advice;
    }
  } else if (refused_with_room) {
    why = fmt::format("the device's memory: the {} of capacity not reserved would hold a new {} {} for it, but {}: "
                      "the memory this capacity counts on is not free (another process or context holds it)",
                      format_bytes(st.capacity - st.reserved), format_bytes(reservation), unit, refused);
    other_advice = advice = "give the device a capacity (devices.memory_bytes) of at most the memory it has free, or "
                            "free what else holds its memory";
  } else if (!fragmentation) {
    why = fmt::format("capacity: only {} of the device are free (capacity {} - allocated {})", format_bytes(free_bytes),
                      format_bytes(st.capacity), format_bytes(st.allocated));
    other_advice = advice = "the live data does not fit this device: spread the largest tables over more devices "
                            "(row_wise, column_wise), lower batch_size, or use an optimizer with less state (sgd, "
                            "rowwise_adagrad)";
  } else if (pool) {
    why = fmt::format("pool fragmentation: {} are free, but the cudaMallocAsync pool (reserved {}) could not place {} in "
                      "one piece, even after trimming it (the pool hides its layout)",
                      format_bytes(free_bytes), format_bytes(st.reserved), format_bytes(bytes));
    setting_advice = "the expandable allocator (expandable_segments), whose one range per pool maps pages beside freed "
                     "space instead of stranding it, or the caching allocator, whose blocks this session can show";
    if (sizes_differ) other_advice = order_tip;
    advice = "try " + setting_advice + (other_advice.empty() ? "" : ", or " + other_advice);
  } else {
    // The caching allocator serves requests of at most 1 MiB from its small pool (2 MiB
    // segments or, expandable, pages) and larger ones from the large pool; a free block of the
    // other pool does not count.
    int64_t pool_largest = st.largest_free_block;
    const bool small = rounded <= kSmallSize;
    if (config_.kind == AllocatorKind::caching || config_.kind == AllocatorKind::expandable) {
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
        format_bytes(reservation), unit);
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
      setting_advice = fmt::format("without max_split_size, or with one above {} (so that the large free blocks "
                                   "serve small requests)",
                                   format_bytes(oversize_free));
      if (sizes_differ) other_advice = order_tip;
      advice = "try " + setting_advice + (other_advice.empty() ? "" : ", or " + other_advice);
    } else {
      why = fmt::format("fragmentation: {} are free, but {}, and {}", format_bytes(free_bytes), largest, unreserved);
      std::vector<std::string> tips, others;
      if (config_.kind != AllocatorKind::expandable)
        tips.push_back("the expandable allocator (expandable_segments), whose one range per pool maps pages beside "
                       "freed space instead of stranding it");
      // PyTorch applies max_split_size to large-pool blocks only (small-pool blocks are < 1 MiB,
      // far below the 20 MiB it must be at least): no advice for a small-pool request
      if (config_.kind != AllocatorKind::direct && config_.max_split_size == 0 && !small)
        tips.push_back("a max_split_size, so that large cached blocks are not split by small requests");
      if (config_.kind == AllocatorKind::direct) tips.push_back("the caching allocator, which reuses freed blocks");
      if (sizes_differ) others.push_back(order_tip);
      // the layout the device has now, with one more reservation: what more capacity would buy
      // never a capacity the device already has: "at least 8.0 GiB" for 8.0 GiB + 6.0 MiB on 8.0 GiB
      // reads as what it has (tester43 F20); said as the bytes more then
      const int64_t need = st.reserved + reservation;
      const std::string beside = fmt::format("(a new {} {} beside the {} reserved)", format_bytes(reservation),
                                             config_.kind == AllocatorKind::expandable ? "of pages" : "segment",
                                             format_bytes(st.reserved));
      if (need > st.capacity)
        others.push_back(format_bytes(need) == format_bytes(st.capacity)
                           ? fmt::format("give the device {} more than its {} {}", format_bytes(need - st.capacity),
                                         format_bytes(st.capacity), beside)
                           : fmt::format("give the device at least {} {}", format_bytes(need), beside));
      auto join = [](const std::vector<std::string>& v) {
        std::string out;
        for (size_t i = 0; i < v.size(); ++i) out += (i == 0 ? "" : i + 1 == v.size() ? ", or " : ", ") + v[i];
        return out;
      };
      setting_advice = join(tips);
      other_advice = join(others);
      std::vector<std::string> all = tips;
      all.insert(all.end(), others.begin(), others.end());
      advice = "try " + join(all);
    }
  }
  const std::string explanation =
      fmt::format("out of memory allocating {} for {} ({} allocator): {}. Allocated {}, reserved {} of {}; largest "
                  "free block {}; most memory held by {}.",
                  format_bytes(bytes), tag, to_string(config_.kind), why, format_bytes(st.allocated),
                  format_bytes(st.reserved), format_bytes(st.capacity), format_bytes(st.largest_free_block),
                  holders.empty() ? "nothing" : holders);
  DeviceOutOfMemory e(explanation + " Advice: " + advice, fragmentation, bytes, free_bytes, st.largest_free_block);
  e.explanation = explanation;
  e.setting_advice = setting_advice;
  e.other_advice = other_advice;
  return e;
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
  std::string msg = e.what(), explanation = e.explanation;
  const auto at = msg.find(". Allocated ");
  msg.insert(at == std::string::npos ? msg.size() : at, note);
  const auto at_e = explanation.find(". Allocated ");
  explanation.insert(at_e == std::string::npos ? explanation.size() : at_e, note);
  DeviceOutOfMemory out(msg, e.fragmentation, e.requested, e.free_bytes, e.largest_free_block);
  out.explanation = explanation;
  out.setting_advice = e.setting_advice;
  out.other_advice = e.other_advice;
  return out;
}

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
  // oversize segments first, is not modelled: release_cached_blocks frees them too.)
  Allocation allocate_on(int64_t bytes, const std::string& tag, int64_t stream) override {
    if (bytes <= 0) throw std::invalid_argument(fmt::format("allocate: {} bytes for {}", bytes, tag));
    const int64_t size = round_size(bytes);
    const bool small = size <= kSmallSize;
    int64_t at = find_free(small, stream, size);
    if (at < 0) at = reserve(small, stream, size);
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
    free_.insert({seg.small, seg.stream, it->second.size, it->first});
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
    free_.insert({small, stream, seg_size, s.addr});
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
    free_.insert({s.small, s.stream, it->second.size, it->first});
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
      free_.insert({s.small, s.stream, before, addr});
    } else {
      s.blocks.erase(addr);
    }
    if (after > 0) {
      s.blocks[s.addr + last] = Block{after, 0, false, true, {}};
      free_.insert({s.small, s.stream, after, s.addr + last});
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
  std::string refused_;  // the last reserve()'s source refusal ("" when none): out_of_memory's cause
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

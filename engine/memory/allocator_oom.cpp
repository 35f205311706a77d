// The figures and the out-of-memory explanation of the device allocators (allocator.h): the
// rounding and segment-size rules, the fragmentation measures, and the OOM's cause and advice.
#include "allocator_oom.h"

#include <algorithm>
#include <bit>
#include <map>
#include <set>

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

int64_t round_size(int64_t bytes, const std::vector<int64_t>& divisions) {
  if (bytes < kMinBlockSize || divisions.empty()) return round_size(bytes);
  const auto u = static_cast<uint64_t>(bytes);
  const int log_size = 63 - std::countl_zero(u);
  constexpr int kIntervalStart = 20;  // 1 MiB
  const size_t index = std::min<size_t>(log_size > kIntervalStart ? static_cast<size_t>(log_size - kIntervalStart) : 0,
                                        divisions.size() - 1);
  const int64_t d = divisions[index];
  if (d <= 1 || bytes <= kMinBlockSize * d) return round_size(bytes);
  // roundup_power2_next_division
  if (std::has_single_bit(u)) return bytes;
  const uint64_t floor = std::bit_floor(u);
  const uint64_t step = floor >> (63 - std::countl_zero(static_cast<uint64_t>(d)));
  if (step == 0) return static_cast<int64_t>(floor << 1);
  const uint64_t down = u & ~(step - 1);
  return static_cast<int64_t>(down == u ? u : down + step);
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

namespace detail {

// allocator_oom.h: the per-stream rule said where it explains the OOM
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

}  // namespace detail

}  // namespace embedscope::engine

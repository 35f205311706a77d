// walk_timeline: the layout of a device's memory after every entry of its trace (import.h).

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "embedscope/sessions/importers/torch_memory_snapshot/import.h"
#include "embedscope/sessions/model/torch_allocator.h"

namespace embedscope::sessions::torch_snapshot {

namespace {

int64_t round512(int64_t n) { return std::max<int64_t>(512, (n + 511) / 512 * 512); }

struct Live {
  int64_t size = 0;
  bool pending = false;  // free_requested, not yet free_completed
  int64_t stream = 0;
};

// Segments and live blocks, with the free-gap figures kept per segment so that one entry
// costs the blocks of one segment, not of the device.
class Layout {
 public:
  std::map<uint64_t, int64_t> segs;  // address -> bytes
  std::map<uint64_t, Live> blocks;

  void start_figures() {
    gaps_.clear();
    largest_.clear();
    free_ = 0;
    gap_sq_ = 0;
    reserved_ = allocated_ = active_ = 0;
    for (const auto& [a, s] : segs) {
      reserved_ += s;
      refresh(a);
    }
    for (const auto& [a, b] : blocks) {
      active_ += b.size;
      if (!b.pending) allocated_ += b.size;
    }
  }

  /// The segment holding `addr`, or segs.end().
  std::map<uint64_t, int64_t>::iterator segment_of(uint64_t addr) {
    auto it = segs.upper_bound(addr);
    if (it == segs.begin()) return segs.end();
    --it;
    return addr < it->first + static_cast<uint64_t>(it->second) ? it : segs.end();
  }

  void add_segment(uint64_t a, int64_t s) {
    segs[a] = s;
    reserved_ += s;
    refresh(a);
  }
  void remove_segment(uint64_t a) {
    const int64_t s = segs.at(a);
    forget(a);
    segs.erase(a);
    reserved_ -= s;
  }
  void add_block(uint64_t a, Live b) {
    blocks[a] = b;
    active_ += b.size;
    if (!b.pending) allocated_ += b.size;
    touch(a);
  }
  void remove_block(uint64_t a) {
    const Live b = blocks.at(a);
    blocks.erase(a);
    active_ -= b.size;
    if (!b.pending) allocated_ -= b.size;
    touch(a);
  }
  void set_pending(uint64_t a, bool pending) {
    Live& b = blocks.at(a);
    if (b.pending == pending) return;
    b.pending = pending;
    allocated_ += pending ? -b.size : b.size;
  }

  MemoryTimelinePoint point() const {
    MemoryTimelinePoint p;
    p.allocated = allocated_;
    p.reserved = reserved_;
    p.active = active_;
    p.largest_free_block = largest_.empty() ? 0 : *largest_.rbegin();
    p.external_fragmentation = free_ > 0 ? 1.0 - static_cast<double>(p.largest_free_block) / static_cast<double>(free_) : 0.0;
    // MemoryViz.js calculate_fragmentation: squared free gaps over the squared sum of the segments
    const double total = static_cast<double>(reserved_);
    p.memviz_fragmentation = total > 0 ? std::max(0.0, gap_sq_) / (total * total) : 0.0;
    return p;
  }

 private:
  struct Gaps {
    int64_t free = 0, largest = 0;
    double sq = 0;
  };
  void touch(uint64_t addr) {
    auto it = segment_of(addr);
    if (it != segs.end()) refresh(it->first);
  }
  void forget(uint64_t seg) {
    auto g = gaps_.find(seg);
    if (g == gaps_.end()) return;
    free_ -= g->second.free;
    gap_sq_ -= g->second.sq;
    largest_.erase(largest_.find(g->second.largest));
    gaps_.erase(g);
  }
  void refresh(uint64_t seg) {
    forget(seg);
    const uint64_t end = seg + static_cast<uint64_t>(segs.at(seg));
    Gaps g;
    uint64_t at = seg;
    auto gap = [&](uint64_t to) {
      if (to > at) {
        const auto n = static_cast<int64_t>(to - at);
        g.free += n;
        g.largest = std::max(g.largest, n);
        g.sq += static_cast<double>(n) * static_cast<double>(n);
      }
    };
    for (auto it = blocks.lower_bound(seg); it != blocks.end() && it->first < end; ++it) {
      gap(it->first);
      at = std::max(at, it->first + static_cast<uint64_t>(it->second.size));
    }
    gap(end);
    gaps_[seg] = g;
    free_ += g.free;
    gap_sq_ += g.sq;
    largest_.insert(g.largest);
  }

  std::map<uint64_t, Gaps> gaps_;
  std::multiset<int64_t> largest_;
  int64_t free_ = 0, reserved_ = 0, allocated_ = 0, active_ = 0;
  double gap_sq_ = 0;
};

// The segment that ends at `addr` (segment_map grows it there), or end().
std::map<uint64_t, int64_t>::iterator ending_at(Layout& l, uint64_t addr) {
  auto it = l.segs.lower_bound(addr);
  if (it == l.segs.begin()) return l.segs.end();
  --it;
  return it->first + static_cast<uint64_t>(it->second) == addr ? it : l.segs.end();
}

// An expandable segment's mapped pages: PyTorch's snapshot() reports "one segment for each
// contiguous mapped range of memory" (c10/cuda/CUDACachingAllocator.cpp), and map_block may map
// pages at the end of a range, into a hole that unmap_block left at its start or in its middle
// (release_cached_blocks unmaps every free page of a block, wherever it lies), or alone. Maps
// [a, a + size), joined with the range that ends at a and the one that starts at a + size (as
// sessions/analysis/memory_history.cpp's add_range). False, changing nothing, when the pages
// overlap a segment already there.
bool map_range(Layout& l, uint64_t a, int64_t size) {
  const uint64_t end = a + static_cast<uint64_t>(size);
  if (l.segment_of(a) != l.segs.end()) return false;
  if (auto next = l.segs.lower_bound(a); next != l.segs.end() && next->first < end) return false;
  uint64_t start = a;
  int64_t bytes = size;
  if (auto before = ending_at(l, a); before != l.segs.end()) {
    start = before->first;
    bytes += before->second;
    l.remove_segment(before->first);
  }
  if (auto after = l.segs.find(end); after != l.segs.end()) {
    bytes += after->second;
    l.remove_segment(end);
  }
  l.add_segment(start, bytes);
  return true;
}

// Unmaps [a, a + size) from the range holding it (unmap_block): its end, its start or a hole in
// its middle that splits it in two. False, changing nothing, when no one segment holds it.
bool unmap_range(Layout& l, uint64_t a, int64_t size) {
  auto it = l.segment_of(a);
  if (it == l.segs.end()) return false;
  const uint64_t start = it->first, end = start + static_cast<uint64_t>(it->second);
  const uint64_t cut_end = a + static_cast<uint64_t>(size);
  if (cut_end > end) return false;
  l.remove_segment(start);
  if (a > start) l.add_segment(start, static_cast<int64_t>(a - start));
  if (cut_end < end) l.add_segment(cut_end, static_cast<int64_t>(end - cut_end));
  return true;
}

}  // namespace

TimelineWalk walk_timeline(const MemorySnapshotFile& snap, int64_t device, int64_t t0_us) {
  TimelineWalk out;
  static const std::vector<TraceEntry> none;
  const auto& trace = device < static_cast<int64_t>(snap.device_traces.size()) ? snap.device_traces[static_cast<size_t>(device)] : none;
  Layout l;
  for (const auto& s : snap.segments) {
    if (s.device != device) continue;
    l.segs[s.address] = s.total_size;
    for (const auto& b : s.blocks)
      if (b.state != BlockState::inactive) l.blocks[b.address] = {b.size, b.state == BlockState::active_pending_free, s.stream};
  }
  auto problem = [&](size_t i, const std::string& why) {
    static const std::map<TraceAction, const char*> names{
        {TraceAction::alloc, "alloc_block_not_live"},
        {TraceAction::free_requested, "free_requested_block_not_pending"},
        {TraceAction::free_completed, "free_completed_block_still_live"},
        {TraceAction::segment_alloc, "segment_alloc_segment_missing"},
        {TraceAction::segment_free, "segment_free_segment_still_there"},
        {TraceAction::segment_map, "segment_map_no_segment_end"}};
    out.problems.push_back(fmt::format("device {} entry {} ({}): {}", device, i, to_string(trace[i].action), why));
    auto n = names.find(trace[i].action);
    out.problem_names.push_back(n == names.end() ? "memory_entry_contradicts_layout" : n->second);
  };
  // back from the dump: undo every entry; remember the size of each block an alloc made
  std::vector<int64_t> size_of(trace.size(), 0);
  std::vector<bool> skip(trace.size(), false), exact(trace.size(), false);
  std::set<uint64_t> rounded;  // live blocks (walking back) whose size is a rounded request, not the dump's
  // a free_completed at no block, completing a free_requested whose completion is missing: the
  // block it frees (free_addr) is the requested one (torch_misaddressed_frees)
  std::vector<uint64_t> free_addr(trace.size());
  std::vector<int64_t> completes;
  {
    std::vector<TorchFreeStep> steps(trace.size());
    for (size_t i = 0; i < trace.size(); ++i) {
      free_addr[i] = trace[i].addr;
      steps[i] = {trace[i].action == TraceAction::free_requested   ? TorchFreeStep::free_requested
                  : trace[i].action == TraceAction::free_completed ? TorchFreeStep::free_completed
                                                                   : TorchFreeStep::other,
                  trace[i].addr, trace[i].size};
    }
    completes = torch_misaddressed_frees(steps);
  }
  for (size_t i = trace.size(); i-- > 0;) {
    const TraceEntry& e = trace[i];
    const uint64_t a = e.addr;
    auto blk = l.blocks.find(a);
    switch (e.action) {
      case TraceAction::alloc:
        if (blk == l.blocks.end() || blk->second.pending) {
          problem(i, fmt::format("block {:#x} is not live after it", a));
          skip[i] = true;
        } else {
          size_of[i] = blk->second.size;
          exact[i] = rounded.erase(a) == 0;
          if (exact[i] && e.size > size_of[i]) {  // the dump's block: a request never exceeds it
            out.oversized[i] = size_of[i];
            out.problems.push_back(fmt::format(
                "device_traces[{}][{}].size = {} disagrees with the block at {:#x} in the dump ({} bytes); its "
                "request is taken as the block's size",
                device, i, e.size, a, size_of[i]));
            out.problem_names.push_back("trace_size_disagrees_with_dump");
          }
          l.blocks.erase(blk);
        }
        break;
      case TraceAction::free_requested:
        if (blk == l.blocks.end() || !blk->second.pending) {
          problem(i, fmt::format("block {:#x} is not pending after it", a));
          skip[i] = true;
        } else {
          blk->second.pending = false;
        }
        break;
      case TraceAction::free_completed:
        if (blk != l.blocks.end()) {
          problem(i, fmt::format("block {:#x} is live after its free completed", a));
          skip[i] = true;
        } else if (const int64_t r = completes[i];
                   r >= 0 && !l.blocks.count(trace[static_cast<size_t>(r)].addr)) {
          const uint64_t x = trace[static_cast<size_t>(r)].addr;
          out.problems.push_back(fmt::format(
              "device {} entry {} (free_completed): address {:#x} is the start of no block; it is taken as the "
              "completion of the free of block {:#x} ({} B) requested at entry {}, which has no other completion",
              device, i, a, x, e.size, r));
          out.problem_names.push_back("free_completed_address_not_a_block");
          free_addr[i] = x;
          out.misaddressed[i] = x;
          l.blocks[x] = {round512(e.size), true, e.stream};
          rounded.insert(x);
        } else {
          l.blocks[a] = {round512(e.size), true, e.stream};
          rounded.insert(a);
        }
        break;
      case TraceAction::segment_alloc:
        if (!l.segs.count(a)) {
          problem(i, fmt::format("segment {:#x} is not there after it", a));
          skip[i] = true;
        } else {
          l.segs.erase(a);
        }
        break;
      case TraceAction::segment_free:
        if (l.segs.count(a)) {
          problem(i, fmt::format("segment {:#x} is still there after it", a));
          skip[i] = true;
        } else {
          l.segs[a] = e.size;
        }
        break;
      case TraceAction::segment_map:  // undo: the pages were not mapped before it
        if (!unmap_range(l, a, e.size)) {
          problem(i, fmt::format("no segment holds [{:#x}, {:#x}) after it", a, a + static_cast<uint64_t>(e.size)));
          skip[i] = true;
        }
        break;
      case TraceAction::segment_unmap:  // undo: mapped before it, beside the pages around them
        if (!map_range(l, a, e.size)) {
          problem(i, fmt::format("[{:#x}, {:#x}) overlaps a segment after it", a, a + static_cast<uint64_t>(e.size)));
          skip[i] = true;
        }
        break;
      default: break;
    }
  }
  // found walking back: put them in entry order
  std::reverse(out.problems.begin(), out.problems.end());
  std::reverse(out.problem_names.begin(), out.problem_names.end());
  out.starts_empty = l.segs.empty() && l.blocks.empty();
  out.initial_blocks = static_cast<int64_t>(l.blocks.size());
  out.initial_segments = static_cast<int64_t>(l.segs.size());
  for (const auto& [a, b] : l.blocks) out.initial_live.push_back({a, b.size, b.stream, b.pending});
  // forward from the first entry
  l.start_figures();
  out.points.reserve(trace.size());
  for (size_t i = 0; i < trace.size(); ++i) {
    const TraceEntry& e = trace[i];
    const uint64_t a = e.addr;
    if (!skip[i]) switch (e.action) {
        case TraceAction::alloc: {
          // a block freed before the dump: its rounded request, or the whole free gap it was
          // placed in when PyTorch would not split that (as analysis/memory_history.cpp does)
          int64_t size = size_of[i];
          if (!exact[i]) {
            if (auto seg = l.segment_of(a); seg != l.segs.end()) {
              uint64_t gap_end = seg->first + static_cast<uint64_t>(seg->second);
              if (auto next = l.blocks.upper_bound(a); next != l.blocks.end() && next->first < gap_end) gap_end = next->first;
              size = torch_block_bytes(size, static_cast<int64_t>(gap_end - a), seg->second);
            }
            // snap54 (tester54 F4): a request larger than the block the trace gives it (its free's
            // rounded size, in the room its segment leaves there: 50 MiB in a 40 MiB segment) is
            // a wrong entry; its block's size is taken as its request, as for a block of the dump
            // (trace_size_disagrees_with_dump), so stats and replay-memory use one figure
            if (e.size > size) {
              out.oversized[i] = size;
              out.problems.push_back(fmt::format(
                  "device {} entry {} (alloc): asks {} B at {:#x}, but the block it gets there holds {} B (its free "
                  "in the trace and the room its segment leaves at that address say so); a request never exceeds its "
                  "block: the block's size is taken as its request",
                  device, i, e.size, a, size));
              out.problem_names.push_back("alloc_larger_than_block");
            }
          }
          l.add_block(a, {size, false, e.stream});
          break;
        }
        case TraceAction::free_requested: l.set_pending(a, true); break;
        case TraceAction::free_completed: l.remove_block(free_addr[i]); break;
        case TraceAction::segment_alloc: l.add_segment(a, e.size); break;
        case TraceAction::segment_free: l.remove_segment(a); break;
        case TraceAction::segment_map: map_range(l, a, e.size); break;
        case TraceAction::segment_unmap: unmap_range(l, a, e.size); break;
        default: break;
      }
    MemoryTimelinePoint p = l.point();
    p.rank = static_cast<int32_t>(device);
    p.entry = static_cast<int64_t>(i);
    p.time_ns = e.time_us > 0 ? (e.time_us - t0_us) * 1000 : 0;
    out.points.push_back(p);
  }
  return out;
}

}  // namespace embedscope::sessions::torch_snapshot

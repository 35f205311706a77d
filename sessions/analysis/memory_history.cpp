// MemoryHistory: the allocator state of a rank at any entry of its memory events (memory_history.h).

#include "embedscope/sessions/analysis/memory_history.h"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>

#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/model/torch_allocator.h"

namespace embedscope::sessions {

namespace {

int64_t round512(int64_t n) { return std::max<int64_t>(512, (n + 511) / 512 * 512); }

MemoryEntryKind kind_of(const std::string& action, bool imported) {
  if (action == "alloc") return MemoryEntryKind::alloc;
  if (action == "free_requested") return MemoryEntryKind::free_requested;
  if (action == "free_completed" || action == "free") return MemoryEntryKind::free_completed;
  // the engine's expandable allocator reports its growth as segment_alloc at the segment's end
  if (action == "segment_alloc") return imported ? MemoryEntryKind::segment_alloc : MemoryEntryKind::segment_grow;
  if (action == "segment_map") return MemoryEntryKind::segment_grow;
  if (action == "segment_free") return MemoryEntryKind::segment_free;
  if (action == "segment_unmap") return MemoryEntryKind::segment_shrink;
  if (action == "oom") return MemoryEntryKind::oom;
  return MemoryEntryKind::other;
}

// The segment that ends exactly at `end`, or segs.end().
std::map<uint64_t, int64_t>::iterator ending_at(std::map<uint64_t, int64_t>& segs, uint64_t end) {
  auto it = segs.lower_bound(end);
  if (it == segs.begin()) return segs.end();
  --it;
  return it->first + static_cast<uint64_t>(it->second) == end ? it : segs.end();
}

// Adds the mapped range [a, a + size) to `segs`, joined with the segment that ends at a and the
// one that starts at a + size: pages mapped at the end of a run, or into a hole between two runs
// (PyTorch's map_block; the engine's expandable allocator alike).
void add_range(std::map<uint64_t, int64_t>& segs, uint64_t a, int64_t size) {
  uint64_t start = a;
  int64_t bytes = size;
  if (auto before = ending_at(segs, a); before != segs.end()) {
    start = before->first;
    bytes += before->second;
  }
  if (auto after = segs.find(a + static_cast<uint64_t>(size)); after != segs.end()) {
    bytes += after->second;
    segs.erase(after);
  }
  segs[start] = bytes;
}

// The segment that holds all of [a, a + size), or segs.end().
std::map<uint64_t, int64_t>::iterator holding(std::map<uint64_t, int64_t>& segs, uint64_t a, int64_t size) {
  auto it = segs.upper_bound(a);
  if (it == segs.begin()) return segs.end();
  --it;
  return a + static_cast<uint64_t>(size) <= it->first + static_cast<uint64_t>(it->second) ? it : segs.end();
}

// Removes the unmapped range [a, a + size) from `segs` (PyTorch's unmap_block): the end of the
// segment that ends at a + size (at most all of it), else a part of the segment that holds it -
// its start, or a hole in its middle that splits it in two. Returns the bytes removed (0: no
// segment has them).
int64_t cut_range(std::map<uint64_t, int64_t>& segs, uint64_t a, int64_t size) {
  if (auto it = ending_at(segs, a + static_cast<uint64_t>(size)); it != segs.end()) {
    const int64_t cut = std::min(it->second, size);
    if (it->second == cut) segs.erase(it);
    else it->second -= cut;
    return cut;
  }
  auto it = holding(segs, a, size);
  if (it == segs.end()) return 0;
  const uint64_t end = it->first + static_cast<uint64_t>(it->second);
  const auto head = static_cast<int64_t>(a - it->first);
  if (head > 0) it->second = head;
  else segs.erase(it);
  segs[a + static_cast<uint64_t>(size)] = static_cast<int64_t>(end - a - static_cast<uint64_t>(size));
  return size;
}

// A block live while the dump is walked back: its bytes, request and whether its free is pending.
struct BackBlock {
  int64_t size = 0, requested = 0, stream = 0;
  int32_t stack = 0;
  std::string tag;
  bool pending = false;
  bool exact = false;  // its size is the dump's, not a rounded request
};


}  // namespace

// PyTorch splits a free block only when the rest is worth keeping (> 1 MiB in the large pool):
// a block placed at the start of a free gap that leaves at most 1 MiB takes the whole gap
// (CUDACachingAllocator should_split). The trace records only the request; the layout at the
// alloc (segments, live blocks) says how large the gap was.
int64_t MemoryHistory::unsplit_size(const MemoryState& st, uint64_t a, int64_t rounded) {
  auto seg = st.segments.upper_bound(a);
  if (seg == st.segments.begin()) return rounded;
  --seg;
  const uint64_t seg_end = seg->first + static_cast<uint64_t>(seg->second);
  if (a >= seg_end) return rounded;
  uint64_t gap_end = seg_end;
  if (auto next = st.blocks.upper_bound(a); next != st.blocks.end() && next->first < gap_end) gap_end = next->first;
  return torch_block_bytes(rounded, static_cast<int64_t>(gap_end - a), seg->second);
}

MemoryHistory MemoryHistory::build(std::vector<MemoryEvent> events, const std::vector<MemoryBlockRecord>* dump,
                                   int64_t checkpoint_every) {
  if (checkpoint_every < 1)
    throw std::invalid_argument(fmt::format("MemoryHistory: checkpoint_every must be >= 1, got {}", checkpoint_every));
  MemoryHistory h;
  h.every_ = checkpoint_every;
  const bool imported = dump != nullptr;
  const size_t n = events.size();
  h.entries_.reserve(n);
  for (auto& ev : events) {
    MemoryEntry e;
    e.kind = kind_of(ev.action, imported);
    e.address = static_cast<uint64_t>(ev.address);
    e.size = ev.size;
    e.requested = ev.requested;
    e.stream = ev.stream;
    e.time_ns = ev.time_ns;
    e.step = ev.step;
    e.stack_id = ev.stack_id;
    e.action = std::move(ev.action);
    h.entries_.push_back(std::move(e));
  }
  std::vector<std::string> tags(n);
  for (size_t i = 0; i < n; ++i) tags[i] = std::move(events[i].tag);
  auto problem = [&](size_t i, const std::string& why) {
    h.problems_.push_back(fmt::format("entry {} ({}): {}", i, h.entries_[i].action, why));
    h.entries_[i].kind = MemoryEntryKind::other;
  };

  // 1. imported: walk back from the dump to the layout at the first entry, learning each
  //    alloc's block size (its size at the dump, or its request rounded up to 512 B)
  std::vector<int64_t> block_size(n, 0);
  std::vector<bool> exact(n, false);
  std::map<uint64_t, int64_t> segs;
  std::map<uint64_t, BackBlock> live;
  // a free_completed at no block, completing a free_requested whose completion is missing: the
  // block it frees (free_addr) is the requested one (torch_misaddressed_frees)
  std::vector<uint64_t> free_addr(n);
  for (size_t i = 0; i < n; ++i) free_addr[i] = h.entries_[i].address;
  if (imported) {
    std::vector<TorchFreeStep> steps(n);
    for (size_t i = 0; i < n; ++i) {
      const MemoryEntry& e = h.entries_[i];
      steps[i] = {e.kind == MemoryEntryKind::free_requested   ? TorchFreeStep::free_requested
                  : e.kind == MemoryEntryKind::free_completed ? TorchFreeStep::free_completed
                                                              : TorchFreeStep::other,
                  e.address, e.size};
    }
    const std::vector<int64_t> completes = torch_misaddressed_frees(steps);
    for (const auto& b : *dump) {
      segs[static_cast<uint64_t>(b.segment_address)] = b.segment_size;
      if (b.allocated)
        live[static_cast<uint64_t>(b.address)] = {b.size, b.requested, b.stream, b.stack_id, b.tag, b.pending_free, true};
    }
    for (size_t i = n; i-- > 0;) {
      MemoryEntry& e = h.entries_[i];
      const uint64_t a = e.address;
      auto blk = live.find(a);
      switch (e.kind) {
        case MemoryEntryKind::alloc:
          if (blk == live.end() || blk->second.pending) {
            problem(i, fmt::format("block {:#x} is not live after it", a));
          } else {
            block_size[i] = blk->second.size;
            exact[i] = blk->second.exact;
            live.erase(blk);
          }
          break;
        case MemoryEntryKind::free_requested:
          if (blk == live.end() || !blk->second.pending) problem(i, fmt::format("block {:#x} is not pending after it", a));
          else blk->second.pending = false;
          break;
        case MemoryEntryKind::free_completed:
          if (blk != live.end()) {
            problem(i, fmt::format("block {:#x} is live after its free completed", a));
          } else if (const int64_t r = completes[i]; r >= 0 && !live.count(h.entries_[static_cast<size_t>(r)].address)) {
            const MemoryEntry& q = h.entries_[static_cast<size_t>(r)];
            h.problems_.push_back(fmt::format(
                "entry {} ({}): address {:#x} is the start of no block; it is taken as the completion of the free of "
                "block {:#x} ({} B) requested at entry {}, which has no other completion",
                i, e.action, a, q.address, e.size, r));
            free_addr[i] = q.address;
            live[q.address] = {round512(q.size), q.size, q.stream, q.stack_id, tags[static_cast<size_t>(r)], true, false};
          } else {
            live[a] = {round512(e.size), e.size, e.stream, e.stack_id, tags[i], true, false};
          }
          break;
        case MemoryEntryKind::segment_alloc:
          if (!segs.count(a)) problem(i, fmt::format("segment {:#x} is not there after it", a));
          else segs.erase(a);
          break;
        case MemoryEntryKind::segment_free:
          if (segs.count(a)) problem(i, fmt::format("segment {:#x} is still there after it", a));
          else segs[a] = e.size;
          break;
        case MemoryEntryKind::segment_grow:  // undo: the pages are not mapped before it
          if (holding(segs, a, e.size) == segs.end())
            problem(i, fmt::format("no segment holds [{:#x}, {:#x}) after it", a, a + static_cast<uint64_t>(e.size)));
          else cut_range(segs, a, e.size);
          break;
        case MemoryEntryKind::segment_shrink: add_range(segs, a, e.size); break;  // undo: mapped before it
        default: break;
      }
    }
  }

  // 2. the layout at the first entry (the blocks walked back to, pending or not)
  MemoryState& st = h.initial_;
  st.segments = segs;
  for (const auto& [a, b] : live) {
    MemoryAllocation al;
    al.address = a;
    al.size = b.size;
    al.requested = b.requested;
    al.stream = b.stream;
    al.stack_id = b.stack;
    al.tag = b.tag;
    al.pending_at_start = b.pending;
    st.blocks[a] = static_cast<int32_t>(h.allocations_.size());
    st.active += b.size;
    st.requested += b.pending ? 0 : b.requested;
    st.allocated += b.pending ? 0 : b.size;
    h.allocations_.push_back(std::move(al));
  }
  for (const auto& [a, s] : segs) st.reserved += s;

  // 3. forward: link each alloc to its frees, drop what contradicts the layout, checkpoint
  MemoryState cur = st;
  h.allocated_.resize(n);
  h.active_.resize(n);
  h.requested_.resize(n);
  h.reserved_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    MemoryEntry& e = h.entries_[i];
    const uint64_t a = e.address;
    auto blk = cur.blocks.find(a);
    switch (e.kind) {
      case MemoryEntryKind::alloc:
        if (blk != cur.blocks.end()) {
          problem(i, fmt::format("block {:#x} is already live", a));
          break;
        }
        {
          MemoryAllocation al;
          al.address = a;
          al.size = imported ? block_size[i] : e.size;
          if (imported && !exact[i]) al.size = unsplit_size(cur, a, al.size);
          al.requested = e.requested > 0 ? e.requested : e.size;
          al.stream = e.stream;
          al.stack_id = e.stack_id;
          al.tag = tags[i];
          al.alloc_entry = static_cast<int64_t>(i);
          e.allocation = static_cast<int32_t>(h.allocations_.size());
          e.size = al.size;
          h.allocations_.push_back(std::move(al));
        }
        break;
      case MemoryEntryKind::free_requested:
        if (blk == cur.blocks.end() || h.pending(cur, blk->second)) problem(i, fmt::format("block {:#x} is not live", a));
        else e.allocation = blk->second;
        break;
      case MemoryEntryKind::free_completed:
        blk = cur.blocks.find(free_addr[i]);
        if (blk == cur.blocks.end()) problem(i, fmt::format("block {:#x} is not live", a));
        else e.allocation = blk->second;
        break;
      case MemoryEntryKind::segment_alloc:
        if (cur.segments.count(a)) problem(i, fmt::format("segment {:#x} already exists", a));
        break;
      case MemoryEntryKind::segment_free:
        if (!cur.segments.count(a) && ending_at(cur.segments, a + static_cast<uint64_t>(e.size)) == cur.segments.end() &&
            holding(cur.segments, a, e.size) == cur.segments.end())
          problem(i, fmt::format("no segment {:#x}", a));
        break;
      case MemoryEntryKind::segment_shrink:
        if (ending_at(cur.segments, a + static_cast<uint64_t>(e.size)) == cur.segments.end() &&
            holding(cur.segments, a, e.size) == cur.segments.end())
          problem(i, fmt::format("no segment holds [{:#x}, {:#x})", a, a + static_cast<uint64_t>(e.size)));
        break;
      default: break;
    }
    if (e.allocation >= 0) {
      MemoryAllocation& al = h.allocations_[static_cast<size_t>(e.allocation)];
      if (e.kind == MemoryEntryKind::free_requested) al.free_requested_entry = static_cast<int64_t>(i);
      if (e.kind == MemoryEntryKind::free_completed) al.free_entry = static_cast<int64_t>(i);
    }
    h.apply(cur, static_cast<int64_t>(i));
    h.allocated_[i] = cur.allocated;
    h.active_[i] = cur.active;
    h.requested_[i] = cur.requested;
    h.reserved_[i] = cur.reserved;
    if ((static_cast<int64_t>(i) + 1) % h.every_ == 0) h.checkpoints_.push_back(cur);
  }
  return h;
}

bool MemoryHistory::pending(const MemoryState& st, int32_t a) const {
  const MemoryAllocation& al = allocations_[static_cast<size_t>(a)];
  const bool requested = al.pending_at_start || (al.free_requested_entry >= 0 && al.free_requested_entry <= st.entry);
  const bool completed = al.free_entry >= 0 && al.free_entry <= st.entry;
  return requested && !completed;
}

void MemoryHistory::apply(MemoryState& st, int64_t i) const {
  const MemoryEntry& e = entries_[static_cast<size_t>(i)];
  const uint64_t a = e.address;
  switch (e.kind) {
    case MemoryEntryKind::alloc: {
      const MemoryAllocation& al = allocations_[static_cast<size_t>(e.allocation)];
      st.blocks[a] = e.allocation;
      st.allocated += al.size;
      st.active += al.size;
      st.requested += al.requested;
      break;
    }
    case MemoryEntryKind::free_requested: {
      const MemoryAllocation& al = allocations_[static_cast<size_t>(e.allocation)];
      st.allocated -= al.size;
      st.requested -= al.requested;
      break;
    }
    case MemoryEntryKind::free_completed: {
      const MemoryAllocation& al = allocations_[static_cast<size_t>(e.allocation)];
      const bool was_pending = al.pending_at_start || (al.free_requested_entry >= 0 && al.free_requested_entry < i);
      st.blocks.erase(al.address);  // a free_completed at a corrupt address frees its block (build)
      st.active -= al.size;
      if (!was_pending) {
        st.allocated -= al.size;
        st.requested -= al.requested;
      }
      break;
    }
    case MemoryEntryKind::segment_alloc:
      st.segments[a] = e.size;
      st.reserved += e.size;
      break;
    case MemoryEntryKind::segment_grow:
      add_range(st.segments, a, e.size);
      st.reserved += e.size;
      break;
    case MemoryEntryKind::segment_free: {
      // a whole segment; the engine's expandable segments return their unmapped pages this way
      // too (a part of a run of pages: its end, its start or a hole in it)
      auto it = st.segments.find(a);
      if (it != st.segments.end() && it->second <= e.size) {
        st.reserved -= it->second;
        st.segments.erase(it);
        break;
      }
      [[fallthrough]];
    }
    case MemoryEntryKind::segment_shrink:
      st.reserved -= cut_range(st.segments, a, e.size);
      break;
    default: break;
  }
  st.entry = i;
}

void MemoryHistory::step(MemoryState& st) const { apply(st, st.entry + 1); }

MemoryState MemoryHistory::state_at(int64_t i) const {
  if (i < -1 || i >= size())
    throw std::out_of_range(fmt::format("MemoryHistory::state_at: entry {} is outside [-1, {})", i, size()));
  const int64_t k = (i + 1) / every_;  // checkpoints at or before i
  MemoryState st = k == 0 ? initial_ : checkpoints_[static_cast<size_t>(k - 1)];
  while (st.entry < i) apply(st, st.entry + 1);
  return st;
}

MemoryStateFigures MemoryHistory::figures(const MemoryState& st) const {
  MemoryStateFigures f;
  f.allocated = st.allocated;
  f.active = st.active;
  f.requested = st.requested;
  f.reserved = st.reserved;
  f.segments = static_cast<int64_t>(st.segments.size());
  f.blocks = static_cast<int64_t>(st.blocks.size());
  double gaps2 = 0, seg_total = 0;
  for (const auto& [sa, ss] : st.segments) {
    seg_total += static_cast<double>(ss);
    const uint64_t end = sa + static_cast<uint64_t>(ss);
    uint64_t at = sa;
    int64_t& pool_largest = ss == kSmallPoolSegment ? f.largest_free_small_pool : f.largest_free_large_pool;
    auto gap = [&](uint64_t to) {
      if (to <= at) return;
      const auto g = static_cast<int64_t>(to - at);
      f.free_in_segments += g;
      f.largest_free_block = std::max(f.largest_free_block, g);
      pool_largest = std::max(pool_largest, g);
      gaps2 += static_cast<double>(g) * static_cast<double>(g);
    };
    for (auto it = st.blocks.lower_bound(sa); it != st.blocks.end() && it->first < end; ++it) {
      gap(it->first);
      at = std::max(at, it->first + static_cast<uint64_t>(allocations_[static_cast<size_t>(it->second)].size));
    }
    gap(end);
  }
  f.external_fragmentation = f.free_in_segments > 0 ? 1.0 - static_cast<double>(f.largest_free_block) /
                                                                static_cast<double>(f.free_in_segments)
                                                    : 0.0;
  // PyTorch MemoryViz.js calculate_fragmentation: the gaps between blocks, squared, over the
  // squared sum of the segments' sizes
  f.memviz_fragmentation = seg_total > 0 ? gaps2 / (seg_total * seg_total) : 0.0;
  return f;
}

std::vector<MemoryBlockRecord> MemoryHistory::blocks_of(const MemoryState& st) const {
  std::vector<MemoryBlockRecord> out;
  for (const auto& seg : st.segments) {
    const uint64_t sa = seg.first;  // not a structured binding: the lambda captures it (clang 14)
    const auto ss = seg.second;
    const uint64_t end = sa + static_cast<uint64_t>(ss);
    uint64_t at = sa;
    auto gap = [&](uint64_t to) {
      if (to <= at) return;
      MemoryBlockRecord r;
      r.segment_address = static_cast<int64_t>(sa);
      r.segment_size = ss;
      r.address = static_cast<int64_t>(at);
      r.size = static_cast<int64_t>(to - at);
      out.push_back(std::move(r));
    };
    int64_t stream = 0;
    const size_t first = out.size();
    for (auto it = st.blocks.lower_bound(sa); it != st.blocks.end() && it->first < end; ++it) {
      gap(it->first);
      const MemoryAllocation& al = allocations_[static_cast<size_t>(it->second)];
      MemoryBlockRecord r;
      r.segment_address = static_cast<int64_t>(sa);
      r.segment_size = ss;
      r.address = static_cast<int64_t>(it->first);
      r.size = std::min<int64_t>(al.size, static_cast<int64_t>(end - it->first));
      r.requested = al.requested;
      r.allocated = true;
      r.tag = al.tag;
      r.stream = stream = al.stream;
      r.stack_id = al.stack_id;
      r.pending_free = pending(st, it->second);
      out.push_back(std::move(r));
      at = std::max(at, it->first + static_cast<uint64_t>(r.size));
    }
    gap(end);
    for (size_t k = first; k < out.size(); ++k) out[k].stream = stream;  // the segment's stream: its blocks'
  }
  return out;
}

int32_t MemoryHistory::allocation_at(const MemoryState& st, uint64_t address) const {
  auto it = st.blocks.upper_bound(address);
  if (it == st.blocks.begin()) return -1;
  --it;
  const MemoryAllocation& al = allocations_[static_cast<size_t>(it->second)];
  return address < it->first + static_cast<uint64_t>(al.size) ? it->second : -1;
}

MemoryHistory MemoryHistory::load(const SessionReader& session, int32_t rank, int64_t checkpoint_every) {
  std::vector<MemoryEvent> events;
  for (auto& e : session.memory_events())
    if (e.rank == rank) events.push_back(std::move(e));
  std::vector<MemoryBlockRecord> dump;
  const bool imported = session.meta(meta::kImportFormat) == "torch_memory_snapshot";
  if (imported)
    for (const auto& s : session.memory_snapshots())
      if (s.rank == rank && s.reason == "dump") dump = session.memory_blocks(s.id);
  return build(std::move(events), imported ? &dump : nullptr, checkpoint_every);
}

std::vector<int32_t> MemoryHistory::ranks_with_history(const SessionReader& session) {
  std::set<int32_t> ranks;
  for (const auto& e : session.memory_events()) ranks.insert(e.rank);
  return {ranks.begin(), ranks.end()};
}

std::string snapshot_label(const MemorySnapshot& s, int64_t warmup_steps, bool imported) {
  std::string when;
  if (imported || s.reason == "dump") when = "at the dump";
  else if (s.step < 0 && warmup_steps > 0) when = fmt::format("warm-up step {} of {}", warmup_steps + s.step + 1, warmup_steps);
  else if (s.step < 0) when = "warm-up";
  else when = fmt::format("step {}", s.step);
  std::string why;
  if (s.reason == "oom") why = ", at the OOM";
  else if (s.reason == "step") why = ", end of step";
  else if (s.reason != "dump" && !s.reason.empty()) why = ", " + s.reason;
  return fmt::format("rank {}, {}{}", s.rank, when, why);
}

}  // namespace embedscope::sessions

// The segment timeline of a memory history (segment_timeline.h).

#include "embedscope/sessions/analysis/segment_timeline.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

namespace embedscope::sessions {

namespace {

constexpr int64_t kSmallBuffer = int64_t{2} << 20;  // CUDACachingAllocator: the small pool's segments

// The key (base address) of the segment of `segs` that holds byte `x`, or nothing.
bool containing(const std::map<uint64_t, int64_t>& segs, uint64_t x, uint64_t* key) {
  auto it = segs.upper_bound(x);
  if (it == segs.begin()) return false;
  --it;
  if (x >= it->first + static_cast<uint64_t>(it->second)) return false;
  *key = it->first;
  return true;
}

bool changes_segments(MemoryEntryKind k) {
  return k == MemoryEntryKind::segment_alloc || k == MemoryEntryKind::segment_free ||
         k == MemoryEntryKind::segment_grow || k == MemoryEntryKind::segment_shrink;
}

}  // namespace

bool segment_live_at(const SegmentLife& s, int64_t entry) {
  return s.start_entry <= entry && (s.end_entry < 0 || entry < s.end_entry);
}

SegmentTimeline segment_timeline(const MemoryHistory& h, int64_t columns) {
  SegmentTimeline out;
  const int64_t n = h.size();
  const auto& allocs = h.allocations();
  MemoryState st = h.initial();
  std::map<uint64_t, int32_t> life_of;  // a live segment's base address -> its index in out.segments
  std::set<int32_t> live;               // live segments in the order they were made
  std::vector<int64_t> current;         // each segment's bytes now
  auto begin_life = [&](uint64_t address, int64_t bytes, int64_t entry) {
    SegmentLife s;
    s.address = address;
    s.size = s.first_size = bytes;
    s.small_pool = bytes == kSmallBuffer;
    s.start_entry = entry;
    if (entry >= 0) {
      s.stream = h.entries()[static_cast<size_t>(entry)].stream;
      s.stack_id = h.entries()[static_cast<size_t>(entry)].stack_id;
    }
    const auto idx = static_cast<int32_t>(out.segments.size());
    out.segments.push_back(s);
    current.push_back(bytes);
    life_of[address] = idx;
    live.insert(idx);
  };
  for (const auto& [a, bytes] : st.segments) begin_life(a, bytes, -1);
  for (const auto& [a, alloc] : st.blocks) {  // the stream of a segment made before the trace
    uint64_t key = 0;
    if (!containing(st.segments, a, &key)) continue;
    SegmentLife& s = out.segments[static_cast<size_t>(life_of[key])];
    if (s.stream < 0) s.stream = allocs[static_cast<size_t>(alloc)].stream;
  }

  // the columns' spans and the entry each draws: the one of most reserved bytes in its span
  if (columns > 0 && n > 0) {
    columns = std::min(columns, n);
    out.columns.resize(static_cast<size_t>(columns));
    for (int64_t c = 0; c < columns; ++c) {
      SegmentColumn& col = out.columns[static_cast<size_t>(c)];
      col.first_entry = c * n / columns;
      col.last_entry = (c + 1) * n / columns - 1;
      col.entry = col.first_entry;
      for (int64_t i = col.first_entry; i <= col.last_entry; ++i)
        if (h.reserved_after(i) > h.reserved_after(col.entry)) col.entry = i;
    }
  }

  size_t next = 0;
  std::vector<uint64_t> touched;
  std::unordered_map<uint64_t, int64_t> active;
  for (int64_t i = 0; i < n; ++i) {
    const MemoryEntry& e = h.entries()[static_cast<size_t>(i)];
    touched.clear();
    if (changes_segments(e.kind)) {
      // the segments this entry can make, grow, shrink or release: the one at its address, the
      // one ending just below it (grown at its end), the one holding its last byte (shrunk) and
      // the one starting just after it (pages unmapped inside a run split it there; pages mapped
      // into that hole join the two again: memory_history.h)
      touched.push_back(e.address);
      if (e.size > 0) touched.push_back(e.address + static_cast<uint64_t>(e.size));
      uint64_t key = 0;
      if (e.address > 0 && containing(st.segments, e.address - 1, &key)) touched.push_back(key);
      if (e.size > 0 && containing(st.segments, e.address + static_cast<uint64_t>(e.size) - 1, &key))
        touched.push_back(key);
    }
    h.step(st);
    for (uint64_t k : touched) {
      const auto had = life_of.find(k);
      const auto now = st.segments.find(k);
      if (had != life_of.end() && now == st.segments.end()) {
        out.segments[static_cast<size_t>(had->second)].end_entry = i;
        live.erase(had->second);
        life_of.erase(had);
      } else if (had == life_of.end() && now != st.segments.end()) {
        begin_life(k, now->second, i);
      } else if (had != life_of.end()) {
        SegmentLife& s = out.segments[static_cast<size_t>(had->second)];
        int64_t& was = current[static_cast<size_t>(had->second)];
        s.resized = s.resized || now->second != was;
        was = now->second;
        s.size = std::max(s.size, now->second);
      }
    }
    while (next < out.columns.size() && out.columns[next].entry == i) {
      SegmentColumn& col = out.columns[next++];
      active.clear();
      for (const auto& [a, alloc] : st.blocks) {
        uint64_t key = 0;
        if (containing(st.segments, a, &key)) active[key] += allocs[static_cast<size_t>(alloc)].size;
      }
      int64_t offset = 0;
      col.bands.reserve(live.size());
      for (int32_t s : live) {
        const uint64_t a = out.segments[static_cast<size_t>(s)].address;
        const int64_t bytes = st.segments.at(a);
        const auto act = active.find(a);
        const int64_t act_bytes = act == active.end() ? 0 : std::min(bytes, act->second);
        col.bands.push_back({s, offset, bytes, act_bytes});
        offset += bytes;
        col.active += act_bytes;
      }
      col.reserved = offset;
      out.peak_reserved = std::max(out.peak_reserved, offset);
    }
  }
  if (!out.columns.empty()) out.peak_reserved = std::max<int64_t>(1, out.peak_reserved);
  return out;
}

int32_t segment_band_at(const SegmentColumn& column, int64_t bytes) {
  const auto& b = column.bands;
  if (bytes < 0) return -1;
  auto it = std::upper_bound(b.begin(), b.end(), bytes, [](int64_t v, const SegmentColumn::Band& x) { return v < x.offset; });
  if (it == b.begin()) return -1;
  --it;
  return bytes < it->offset + it->size ? static_cast<int32_t>(it - b.begin()) : -1;
}

}  // namespace embedscope::sessions

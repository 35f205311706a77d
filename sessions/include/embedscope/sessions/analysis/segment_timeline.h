#pragma once
// The segment timeline of a rank's memory history (memory_history.h), as PyTorch memory_viz's
// "Active Cached Segment Timeline": every reserved segment is a band from the entry that made
// it (segment_alloc, or the segment_map of an expandable segment's first pages) to the entry
// that released it (segment_free, or the segment_unmap of its last pages), its height the
// segment's bytes at that entry; the segments live at an entry are stacked in the order they
// were made (the oldest at the bottom, as memory_viz stacks them), and each band carries the
// bytes of its active blocks (allocated or pending free) so the view can shade that share.
// Qt-free: the workbench's chart (app/ui/charts/segment_timeline_chart.h) only draws it.
//
// Segments live before the first entry (a trace that starts mid-way) start at entry -1; those
// live after the last entry end at -1. A segment's pool is not in the trace: it is inferred as
// CUDACachingAllocator makes segments - the small pool's are exactly kSmallBuffer (2 MiB), the
// large pool's are 20 MiB (kLargeBuffer) or a request rounded up to 2 MiB (>= 12 MiB).
//
// Cost: segment_timeline is one forward walk, O(n log s) for n entries and s segments, plus
// O(C x b log s) for C columns of b live blocks each (the active share per band).

#include <cstdint>
#include <vector>

#include "embedscope/sessions/analysis/memory_history.h"

namespace embedscope::sessions {

/// One segment's life. Bytes, entries index MemoryHistory::entries().
struct SegmentLife {
  uint64_t address = 0;      ///< the segment's base address (uint64: PyTorch addresses above 2^63 stay exact)
  int64_t size = 0;          ///< its largest bytes over its life (an expandable segment grows and shrinks)
  int64_t first_size = 0;    ///< its bytes when made (the segment_alloc / first segment_map)
  int64_t stream = -1;       ///< the CUDA stream of the entry that made it; segments live before the trace: the
                             ///< stream of a block in it at the first entry, -1 when none is known
  int32_t stack_id = 0;      ///< memory_stacks.stack_id of the entry that made it; 0: none (before the trace)
  bool small_pool = false;   ///< inferred: its bytes are 2 MiB (see the file comment)
  bool resized = false;      ///< it grew or shrank (segment_map / segment_unmap): an expandable segment
  int64_t start_entry = -1;  ///< the entry that made it; -1: live before the first entry
  int64_t end_entry = -1;    ///< the entry that released it; -1: live after the last entry
};

/// One pixel column of the segment timeline: the segments live after `entry`, the entry of the
/// column's span where the reserved bytes peak (so a peak is never skipped), stacked bottom up.
struct SegmentColumn {
  int64_t first_entry = 0, last_entry = 0;  ///< the entries the column spans, inclusive
  int64_t entry = 0;                        ///< the one drawn
  struct Band {
    int32_t segment = 0;  ///< SegmentTimeline::segments index
    int64_t offset = 0;   ///< bytes below it
    int64_t size = 0;     ///< the segment's bytes after `entry`
    int64_t active = 0;   ///< bytes of its active blocks (allocated or pending free) after `entry`
  };
  std::vector<Band> bands;  ///< bottom to top, in the order the segments were made
  int64_t reserved = 0;     ///< sum of the bands' sizes
  int64_t active = 0;       ///< sum of the bands' active bytes
};

/// The segments of a history and the columns that draw them.
struct SegmentTimeline {
  std::vector<SegmentLife> segments;  ///< in the order they were made (those before the trace first, address order)
  std::vector<SegmentColumn> columns;
  int64_t peak_reserved = 0;          ///< the largest reserved bytes of any column (>= 1 when there are columns)
};

/// The segment timeline of `h` in `columns` columns (fewer when there are fewer entries; no
/// columns, but the segments, for columns <= 0): column c spans entries [c n / C, (c + 1) n / C).
/// Entries that MemoryHistory dropped as contradicting the layout (kind other) change nothing.
SegmentTimeline segment_timeline(const MemoryHistory& h, int64_t columns);

/// The index in `column.bands` of the band at height `bytes` (0 at the bottom), or -1 above the
/// top or below 0. Binary search.
int32_t segment_band_at(const SegmentColumn& column, int64_t bytes);

/// Whether segment `s` is live after entry `entry` (entry -1: before the first).
bool segment_live_at(const SegmentLife& s, int64_t entry);

}  // namespace embedscope::sessions

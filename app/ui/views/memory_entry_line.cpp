#include "views/memory_entry_line.h"

#include "embedscope/sessions/model/units.h"


namespace embedscope::ui {

namespace {
QString entry_bytes(int64_t b) { return QString::fromStdString(sessions::format_bytes(b)); }
}  // namespace

QString memory_entry_line(const sessions::MemoryHistory& h, int64_t entry, const sessions::MemoryState& state,
                          const std::vector<sessions::MemoryOom>& ooms) {
  const sessions::MemoryEntry& e = h.entries()[static_cast<size_t>(entry)];
  QString what = QString("entry %1 of %2: %3").arg(entry).arg(h.size()).arg(QString::fromStdString(e.action));
  if (e.allocation >= 0) {
    const auto& al = h.allocations()[static_cast<size_t>(e.allocation)];
    what += QString(" %1 (requested %2) %3").arg(entry_bytes(al.size), entry_bytes(al.requested), QString::fromStdString(al.tag));
  } else if (e.kind == sessions::MemoryEntryKind::oom) {
    what += QString(" of %1").arg(entry_bytes(e.requested > 0 ? e.requested : e.size));
  } else if (e.size > 0) {
    what += QString(" %1").arg(entry_bytes(e.size));
  }
  const sessions::MemoryStateFigures f = h.figures(state);
  // "1 segment", not "1 segments" (tester60a)
  // the free bytes the fragmentation is of: those in the reserved segments (tester63a F12: "fragmentation
  // 0.0%" beside an OOM message blaming fragmentation over the device's free memory, reserved or not)
  what += QString(" at %1 ms, stream %2 | allocated %3, reserved %4, %5 segment%6, %9 free in segments, largest free "
                  "block %7, fragmentation %8%")
              .arg(static_cast<double>(e.time_ns) / 1e6, 0, 'f', 3)
              .arg(e.stream)
              .arg(entry_bytes(f.allocated), entry_bytes(f.reserved))
              .arg(f.segments)
              .arg(f.segments == 1 ? "" : "s")
              .arg(entry_bytes(f.largest_free_block))
              .arg(100 * f.external_fragmentation, 0, 'f', 1)
              .arg(entry_bytes(f.free_in_segments));
  if (e.kind == sessions::MemoryEntryKind::oom)
    what += " (of the reserved segments; the out-of-memory message counts the device's memory not yet reserved too)";
  if (e.kind == sessions::MemoryEntryKind::oom)  // the pool that serves the request, where it is not the largest's
    for (const auto& o : ooms)
      if (o.entry == entry && o.largest_free_in_pool != f.largest_free_block)
        what += QString(" (in another pool: requests %1 1 MiB come from the %2 pool, whose largest free block is %3)")
                    .arg(o.small_pool ? "up to" : "above", o.small_pool ? "small" : "large", entry_bytes(o.largest_free_in_pool));
  return what;
}

}  // namespace embedscope::ui

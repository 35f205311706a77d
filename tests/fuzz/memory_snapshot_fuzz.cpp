// libFuzzer target: the PyTorch CUDA memory snapshot model
// (sessions/importers/torch_memory_snapshot/snapshot.h) and what is derived from it, on
// arbitrary pickles: parse_snapshot, then the import into a temp session (per device the
// timeline walk, walk_timeline) and per device the replay of `embedscope replay-memory x.pickle` (replay_snapshot under
// the recorded settings, caching and expandable). The model either loads or throws
// PickleError / SnapshotError naming the key path; what it loads must walk and replay without
// any error (entries that contradict the layout are counted as problems, not thrown).
// Seeds: tests/data/memory_snapshots/*.pickle*.
#include "embedscope/engine/memory/snapshot_replay.h"
#include "embedscope/engine/workload/spec.h"
#include "embedscope/sessions/importers/torch_memory_snapshot/import.h"
#include "embedscope/sessions/importers/torch_memory_snapshot/pickle.h"
#include "embedscope/sessions/importers/torch_memory_snapshot/snapshot.h"
#include "fuzz_support.h"

#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace es = embedscope::engine;
  namespace sp = embedscope::sessions::pickle;
  namespace ts = embedscope::sessions::torch_snapshot;
  if (size > (size_t{1} << 20)) return -1;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  sp::PickleLimits limits;
  limits.max_inflated = int64_t{64} << 20;
  ts::MemorySnapshotFile snap;
  try {
    std::string inflated;
    std::string_view text = bytes;
    if (sp::is_gzip(bytes)) {
      inflated = sp::gunzip(bytes, "fuzz", limits.max_inflated);
      text = inflated;
    }
    snap = ts::parse_snapshot(sp::loads(text, "fuzz", limits), "fuzz");
  } catch (const embedscope::sessions::SessionError&) {  // PickleError, SnapshotError
    return 0;
  }
  // `embedscope import x.pickle`: every device's timeline walk, written to a session.
  const std::string db = embedscope::fuzz::TempFile::make_path("memory_snapshot", ".db");
  try {
    embedscope::sessions::SessionWriter w(db, /*overwrite=*/true);
    (void)ts::import_torch_memory_snapshot(snap, "fuzz", w);
    w.close("complete");
  } catch (const ts::SnapshotError&) {  // nothing to import (every device unused: snap54): exit 2, no session
  }
  embedscope::fuzz::TempFile::remove(db);
  // `embedscope replay-memory x.pickle` without --capacity.
  const int64_t devices = snap.device_count();
  for (int64_t d = 0; d < devices; ++d) {
    const int64_t known = es::snapshot_capacity(snap, d);
    const int64_t cap = known > 0 ? known : es::kMaxMemoryBytes;  // as the CLI without --capacity
    const std::vector<es::AllocatorConfig> settings{es::recorded_config(snap, cap),
                                                    {es::AllocatorKind::caching, cap, 0, false},
                                                    {es::AllocatorKind::expandable, cap, 0, false}};
    try {
      (void)es::replay_snapshot(snap, d, settings, "fuzz");
    } catch (const es::SpecError&) {  // an entry the allocator model cannot replay: bad input, exit 2 (snap54)
    }
  }
  return 0;
}

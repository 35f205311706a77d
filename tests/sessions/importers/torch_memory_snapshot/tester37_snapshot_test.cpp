// tester37 #8: a memory snapshot dumped without _record_memory_history (segments, no trace
// entries) is said to be one, not "a trace that starts mid-way"; an empty snapshot is refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "embedscope/sessions/importers/torch_memory_snapshot/import.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"

using namespace embedscope::sessions;
using namespace embedscope::sessions::torch_snapshot;

namespace {
std::string t37_snap_scratch(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("es_t37snap_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}
}  // namespace

TEST(Tester37Snapshot, SegmentsWithoutTraceEntriesSayTheHistoryWasNotRecorded) {
  MemorySnapshotFile s;
  s.stacks.push_back({});
  Segment seg;
  seg.total_size = 2 << 20;
  seg.small = true;
  seg.blocks = {{0, 2 << 20, 0, BlockState::inactive, 0, {}}};
  s.segments.push_back(seg);
  s.device_traces = {{}};
  const std::string path = t37_snap_scratch("onlyseg.db");
  ImportSummary sum;
  {
    SessionWriter w(path, true);
    sum = import_torch_memory_snapshots({{&s, "onlyseg.pickle"}}, w);
    w.close("complete");
  }
  EXPECT_EQ(sum.devices, 1);
  EXPECT_EQ(sum.trace_entries, 0);
  EXPECT_TRUE(sum.starts_at_process_start);  // not "a ring buffer dropped its oldest entries"
  ASSERT_EQ(sum.import_stats.size(), 1u);
  EXPECT_EQ(sum.import_stats[0].name, "no_memory_history");
  EXPECT_EQ(sum.import_stats[0].example,
            "device 0 has no trace entries: memory history was not recorded (call "
            "torch.cuda.memory._record_memory_history() before the workload, then _dump_snapshot()); only the segments "
            "and blocks at the dump are imported");
  const SessionReader r(path);
  EXPECT_EQ(r.meta(meta::kMemoryTraceStart), "not_recorded");
  ASSERT_EQ(r.memory_counters().size(), 1u);
  EXPECT_EQ(r.memory_counters()[0].reserved, 2 << 20);  // what stats and the Replay box show
  EXPECT_EQ(r.memory_counters()[0].largest_free_block, 2 << 20);
}

TEST(Tester37Snapshot, AnEmptySnapshotIsRefusedNamingTheFile) {
  MemorySnapshotFile s;  // segments [] and device_traces []
  const std::string path = t37_snap_scratch("empty.db");
  SessionWriter w(path, true);
  try {
    import_torch_memory_snapshots({{&s, "empty_snap.pickle"}}, w);
    FAIL() << "an empty snapshot was imported";
  } catch (const SnapshotError& e) {
    EXPECT_NE(std::string(e.what()).find("empty_snap.pickle: the memory snapshot holds no segment and no trace entry"),
              std::string::npos) << e.what();
  }
  // device_traces [[]]: one device, still nothing in it
  s.device_traces = {{}};
  EXPECT_THROW(import_torch_memory_snapshots({{&s, "empty2.pickle"}}, w), SnapshotError);
  w.close("failed");
}

// libFuzzer target: SessionReader on mutated session files (sessions/store).
// Input: the bytes of a session file. The target writes them to a temp file, opens it and reads
// every table (and every lane's ops, all ops lane by lane, every snapshot's blocks); the reader either answers or
// throws SessionError naming the file.
// Seeds: tests/data/sessions/*.db (schema 1-4), tests/fuzz/seeds/session_reader/ (schema 5, and
// tiny_run_v12.db with packed op_blocks) and the sessions the fuzz script imports from the trace
// and snapshot fixtures (the build's schema).
#include <limits>

#include "embedscope/sessions/store/op_stream.h"
#include "embedscope/sessions/store/session.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace ss = embedscope::sessions;
  if (size > (size_t{4} << 20)) return -1;
  embedscope::fuzz::TempFile file("session_reader", ".db", data, size);
  try {
    const ss::SessionReader r(file.path());
    (void)r.schema_version();
    (void)r.meta("ended");
    (void)r.status();
    for (const auto& s : r.strings()) (void)s.size();
    (void)r.name(-1);
    (void)r.ranks();
    for (const auto& lane : r.lanes()) {
      (void)r.ops(lane.rank, lane.lane, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
      (void)r.lane_ops(lane.rank, lane.lane);  // the packed copy (op_blocks, schema 12) where the file has one
    }
    for (const auto& op : r.all_ops()) (void)r.name(op.name_id);  // op_blocks where the file has the marker
    ss::for_each_lane_ops(r, [&](std::vector<ss::OpRecord>& lane) { (void)r.name(lane.back().name_id); });
    (void)r.op_count();
    (void)r.steps();
    (void)r.load();
    (void)r.collectives();
    (void)r.memory_counters();
    (void)r.memory_events();
    for (const auto& snap : r.memory_snapshots()) (void)r.memory_blocks(snap.id);
    (void)r.memory_frames();
    (void)r.memory_stacks();
    (void)r.memory_timeline();
    (void)r.id_histogram();
    (void)r.shards();
    (void)r.import_stats();
  } catch (const ss::SessionError&) {
  }
  return 0;
}

// snap54 (tester54 F2, F4, F9): PyTorch memory snapshots of a multi-GPU node (one device_traces
// list per visible GPU), entries that contradict their block, sizes no device holds, the one
// replay verdict of replay-memory and the workbench, and stats --json of a session without
// memory. The snapshots are written here by a small pickle writer (protocol 2, the opcodes
// Python's pickle module emits for dicts, lists, ints and strs), shaped as
// make_fixtures.py's fragmented_oom_p4: a 40 MiB segment; entries segment_alloc, alloc 40 MiB
// (entry 1), free_requested, free_completed, alloc 2 MiB (entry 4), oom of 40 MiB with 20 MiB
// device_free (entry 5). Each test failed before its fix.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "import_test_support.h"
#include "support/cli_run.h"

using namespace embedscope::sessions::testing;

namespace {

constexpr int64_t kSnap54MiB = int64_t{1} << 20;
constexpr uint64_t kSnap54Base = 0x7F3A00000000ull;

embedscope::test_support::CliResult snap54_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, import_scratch());
}

/// A protocol 2 pickle of dicts, lists, ints and strs, as Python's pickle.dumps writes them.
class Snap54Pickle {
 public:
  Snap54Pickle() { out_ += "\x80\x02"; }
  Snap54Pickle& i(int64_t v) {
    if (v >= INT32_MIN && v <= INT32_MAX) {  // BININT
      out_ += 'J';
      le(static_cast<uint64_t>(v), 4);
    } else {  // LONG1 of 8 bytes, two's complement
      out_ += '\x8a';
      out_ += '\x08';
      le(static_cast<uint64_t>(v), 8);
    }
    return *this;
  }
  Snap54Pickle& s(const std::string& v) {  // BINUNICODE
    out_ += 'X';
    le(v.size(), 4);
    out_ += v;
    return *this;
  }
  Snap54Pickle& dict() { return op("}(");  }  // EMPTY_DICT MARK ... SETITEMS
  Snap54Pickle& end_dict() { return op("u"); }
  Snap54Pickle& list() { return op("]("); }  // EMPTY_LIST MARK ... APPENDS
  Snap54Pickle& end_list() { return op("e"); }
  Snap54Pickle& key(const std::string& k, int64_t v) { return s(k).i(v); }
  Snap54Pickle& key(const std::string& k, const std::string& v) { return s(k).s(v); }
  std::string bytes() const { return out_ + "."; }

 private:
  Snap54Pickle& op(const char* o) {
    out_ += o;
    return *this;
  }
  void le(uint64_t v, int n) {
    for (int k = 0; k < n; ++k) out_ += static_cast<char>((v >> (8 * k)) & 0xff);
  }
  std::string out_;
};

struct Snap54Shape {
  int64_t first_alloc = 40 * kSnap54MiB;  ///< entry 1's size
  int64_t segment_size = 40 * kSnap54MiB;
  int empty_lists = 0;                    ///< device_traces lists after device 0's
  bool segment_on_device_1 = false;       ///< a 2 MiB segment of device 1, which has no trace list entry
};

/// Writes the snapshot of `shape` to the scratch folder as `name`; returns its path.
std::string snap54_write(const std::string& name, const Snap54Shape& shape) {
  Snap54Pickle p;
  const auto entry = [&](const std::string& action, uint64_t addr, int64_t size, int64_t t) {
    p.dict().key("action", action).s(action == "oom" ? "device_free" : "addr").i(static_cast<int64_t>(addr));
    p.key("size", size).key("stream", 0).key("time_us", 1'000'000 + t).end_dict();
  };
  const auto block = [&](uint64_t addr, int64_t size, int64_t requested, const std::string& state) {
    p.dict().key("address", static_cast<int64_t>(addr)).key("size", size).key("requested_size", requested);
    p.key("state", state).end_dict();
  };
  p.dict().s("segments").list();
  p.dict().key("device", 0).key("address", static_cast<int64_t>(kSnap54Base)).key("total_size", shape.segment_size);
  p.key("allocated_size", 2 * kSnap54MiB).key("active_size", 2 * kSnap54MiB).key("stream", 0);
  p.key("segment_type", "large").s("blocks").list();
  block(kSnap54Base, 2 * kSnap54MiB, 2 * kSnap54MiB, "active_allocated");
  block(kSnap54Base + 2 * kSnap54MiB, shape.segment_size - 2 * kSnap54MiB, 0, "inactive");
  p.end_list().end_dict();
  if (shape.segment_on_device_1) {
    const uint64_t a = 0x7F9C00000000ull;
    p.dict().key("device", 1).key("address", static_cast<int64_t>(a)).key("total_size", 2 * kSnap54MiB);
    p.key("segment_type", "small").s("blocks").list();
    block(a, 2 * kSnap54MiB, 0, "inactive");
    p.end_list().end_dict();
  }
  p.end_list();
  p.s("device_traces").list().list();
  entry("segment_alloc", kSnap54Base, shape.segment_size, 7);
  entry("alloc", kSnap54Base, shape.first_alloc, 14);
  entry("free_requested", kSnap54Base, 40 * kSnap54MiB, 21);
  entry("free_completed", kSnap54Base, 40 * kSnap54MiB, 28);
  entry("alloc", kSnap54Base, 2 * kSnap54MiB, 35);
  entry("oom", 20 * kSnap54MiB, 40 * kSnap54MiB, 42);
  p.end_list();
  for (int k = 0; k < shape.empty_lists; ++k) p.list().end_list();
  p.end_list().end_dict();
  const std::string path = (import_scratch() / name).string();
  std::ofstream(path, std::ios::binary) << p.bytes();
  return path;
}

}  // namespace

// F2: 7 empty lists after device 0's (a one-GPU process on an 8-GPU node): one rank, no error.
// Before: "8 device(s)", world size 8 and 7 no_memory_history errors.
TEST(Snap54Snapshot, EmptyTraceListsOfUnusedGpusAreNoRanks) {
  Snap54Shape shape;
  shape.empty_lists = 7;
  const std::string f = snap54_write("snap54_8gpu.pickle", shape);
  const std::string db = scratch_db("snap54_8gpu.db");
  auto r = snap54_cli("import " + f + " -o " + db + " --force-overwrite --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["devices"], 1);
  r = snap54_cli("stats " + db + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto st = nlohmann::json::parse(r.out);
  EXPECT_EQ(st["world_size"], 1);
  r = snap54_cli("stats " + db);
  EXPECT_EQ(r.out.find("no_memory_history"), std::string::npos) << r.out;
  // replay-memory replays the device that holds anything, not 8
  r = snap54_cli("replay-memory " + f + " --allocator caching --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto rep = nlohmann::json::parse(r.out);
  ASSERT_EQ(rep["devices"].size(), 1u);
  EXPECT_EQ(rep["devices"][0]["device"], 0);
}

// F2: a device WITH segments but no trace entry still is a rank, and still said to lack a history.
TEST(Snap54Snapshot, AGpuWithSegmentsButNoEntriesIsARankWithoutHistory) {
  Snap54Shape shape;
  shape.empty_lists = 7;
  shape.segment_on_device_1 = true;
  const std::string f = snap54_write("snap54_dev1.pickle", shape);
  const std::string db = scratch_db("snap54_dev1.db");
  auto r = snap54_cli("import " + f + " -o " + db + " --force-overwrite");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("PyTorch memory snapshot, 2 device(s), 2 segments (42.0 MiB reserved)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("error              1  no_memory_history"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("device 1 has no trace entries"), std::string::npos) << r.out;
}

// F2: more device lists than device indices may be (kMaxDevices 1024) are refused naming the
// file and the field, not imported as that many ranks.
TEST(Snap54Snapshot, MoreDeviceListsThanDevicesAreRefusedNamingTheField) {
  Snap54Shape shape;
  shape.empty_lists = 1024;  // 1025 lists
  const std::string f = snap54_write("snap54_many.pickle", shape);
  auto r = snap54_cli("import " + f + " -o " + scratch_db("snap54_many.db") + " --force-overwrite");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find(f + ": device_traces: 1025 device lists: PyTorch writes one per visible GPU (fewer than 128); "
                           "at most 1024 here"),
            std::string::npos)
      << r.err;
  shape.empty_lists = 1023;  // 1024 lists: the most, imported as 1 rank
  const std::string ok = snap54_write("snap54_1024.pickle", shape);
  r = snap54_cli("import " + ok + " -o " + scratch_db("snap54_1024.db") + " --force-overwrite --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["devices"], 1);
}

// F4: entry 1 asks 50 MiB of a 40 MiB segment (its free says 40 MiB): an import problem, and
// stats and replay-memory both use the block's 40 MiB (before: no problem, stats 40 MiB with
// requested 50 MiB, replay-memory a 50 MiB peak and "ok" for a recording that ran out of memory).
TEST(Snap54Snapshot, AnAllocLargerThanItsBlockIsAProblemAndOneFigure) {
  Snap54Shape shape;
  shape.first_alloc = 50 * kSnap54MiB;
  const std::string f = snap54_write("snap54_alloc50.pickle", shape);
  const std::string db = scratch_db("snap54_alloc50.db");
  auto r = snap54_cli("import " + f + " -o " + db + " --force-overwrite");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("error              1  alloc_larger_than_block"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("device 0 entry 1 (alloc): asks 52428800 B at 0x7f3a00000000, but the block it gets there holds "
                       "41943040 B"),
            std::string::npos)
      << r.out;
  r = snap54_cli("stats " + db + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto m = nlohmann::json::parse(r.out)["memory"][0];
  EXPECT_EQ(m["peak_allocated_bytes"], 40 * kSnap54MiB);
  EXPECT_EQ(m["at_peak"]["requested_bytes"], 40 * kSnap54MiB);  // was 50 MiB, beside 40 MiB reserved
  r = snap54_cli("replay-memory " + f + " --allocator caching --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto d = nlohmann::json::parse(r.out)["devices"][0];
  EXPECT_EQ(d["results"][0]["peak_allocated_bytes"], 40 * kSnap54MiB);  // as stats
  EXPECT_EQ(d["results"][0]["result"], "OOM at action 5");             // the recorded OOM recurs
  ASSERT_EQ(d["problems"].size(), 1u);
  EXPECT_NE(d["problems"][0].get<std::string>().find("device 0 entry 1 (alloc): asks 52428800 B"), std::string::npos);
  r = snap54_cli("replay-memory " + f + " --allocator caching");
  EXPECT_NE(r.out.find("1 entry contradicts the dump or their block"), std::string::npos) << r.out;
}

// F4: sizes no device holds are refused by import and replay-memory alike, exit 2, naming the
// file and the field (before: imported silently as "4194304.0 TiB reserved"; replay-memory's
// "error: address 0x100000000 is in no segment", exit 1, naming nothing).
TEST(Snap54Snapshot, SizesNoDeviceHoldsAreRefusedNamingTheField) {
  Snap54Shape huge_alloc;
  huge_alloc.first_alloc = INT64_MAX;
  const std::string a = snap54_write("snap54_hugealloc.pickle", huge_alloc);
  for (const std::string& cmd : {"replay-memory " + a, "import " + a + " -o " + scratch_db("snap54_ha.db") + " --force-overwrite"}) {
    const auto r = snap54_cli(cmd);
    EXPECT_EQ(r.code, 2) << cmd << "\n" << r.out;
    EXPECT_NE(r.err.find(a + ": device_traces[0][1].size: 9223372036854775807 B is larger than any device's memory"),
              std::string::npos)
        << r.err;
  }
  Snap54Shape huge_segment;
  huge_segment.segment_size = int64_t{1} << 62;
  const std::string s = snap54_write("snap54_hugeseg.pickle", huge_segment);
  const auto r = snap54_cli("import " + s + " -o " + scratch_db("snap54_hs.db") + " --force-overwrite");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find(s + ": segments[0].total_size: 4611686018427387904 B is larger than any device's memory"),
            std::string::npos)
      << r.err;
}

// F9: replay-memory says whether the replay of the recorded settings reproduces the recording
// with the workbench's sentence (engine recorded_replay_verdict): at --capacity 100 MiB the
// recorded OOM does not recur and the replay ends with the OOM's request cached in a second
// segment. Before: "(differs)" on the dump alone, while the workbench said "reproduces".
TEST(Snap54Snapshot, ReplayMemorySaysTheWorkbenchsVerdict) {
  const std::string f = snap54_write("snap54_plain.pickle", Snap54Shape{});
  auto r = snap54_cli("replay-memory " + f + " --allocator caching");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("The replay of the recorded settings (caching) reproduces the recording: peak reserved 40.0 MiB, "
                       "0.0% at peak reserved, the OOM at entry 5, the dump's 1 segment (40.0 MiB reserved).\n"),
            std::string::npos)
      << r.out;
  r = snap54_cli("replay-memory " + f + " --allocator caching --capacity 104857600 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto d = nlohmann::json::parse(r.out)["devices"][0];
  EXPECT_EQ(d["recorded_settings_reproduce_the_recording"], false);
  EXPECT_EQ(d["recorded_settings_verdict"],
            "The replay of the recorded settings (caching) does not reproduce the recording: the recorded OOM (entry 5) "
            "did not recur: at the capacity offered, 100.0 MiB, the replay served that request, reserving up to 80.0 MiB "
            "(the recording 40.0 MiB); the replay ends with 2 segments, 80.0 MiB reserved; the dump has 1 segment, 40.0 "
            "MiB reserved.");
}

// F9: stats --json of a session that recorded no memory gives null, as its text ("none
// recorded") and compare --json do (before: peak_allocated_bytes 0).
TEST(Snap54Snapshot, StatsJsonOfATraceWithoutMemoryGivesNull) {
  const std::string db = scratch_db("snap54_trace.db");
  auto r = snap54_cli("import " + trace_fixture("hta_small") + " -o " + db + " --force-overwrite");
  ASSERT_EQ(r.code, 0) << r.err;
  r = snap54_cli("stats " + db + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["peak_allocated_bytes"].is_null()) << j["peak_allocated_bytes"];
  EXPECT_TRUE(j["peak_reserved_bytes"].is_null()) << j["peak_reserved_bytes"];
  ASSERT_EQ(j["ranks"].size(), 2u);
  EXPECT_TRUE(j["ranks"][0]["peak_allocated_bytes"].is_null());
  EXPECT_TRUE(j["ranks"][0]["fragmentation"].is_null());
  // a snapshot's session keeps its figures
  const std::string snap = scratch_db("snap54_snapdb.db");
  r = snap54_cli("import " + snap54_write("snap54_plain2.pickle", Snap54Shape{}) + " -o " + snap + " --force-overwrite");
  ASSERT_EQ(r.code, 0) << r.err;
  r = snap54_cli("stats " + snap + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["peak_allocated_bytes"], 40 * kSnap54MiB);
}

// mem59 (tester59 F2, F9): a range of a memory snapshot that runs past 2^64 is refused naming the
// file and the field (a segment that wrapped was imported with "problems: none" and stats lost its
// free block: 33.3 % -> 0.0 % at peak allocated); a pickle that is no snapshot, found in an imported
// directory, is refused with the directory hint. Fixtures: memory_snapshots/make_tester59.py.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/importers/torch_memory_snapshot/snapshot.h"
#include "import_test_support.h"
#include "support/cli_run.h"

using namespace embedscope::sessions::testing;
namespace ts = embedscope::sessions::torch_snapshot;
namespace fs = std::filesystem;

namespace {
std::string m59_snap(const std::string& name) {
  return std::string(EMBEDSCOPE_TEST_DATA) + "/memory_snapshots/" + name;
}
std::string m59_load_error(const std::string& path) {
  try {
    ts::load_snapshot(path);
  } catch (const ts::SnapshotError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Mem59SnapshotInput, RangesPastTwoToTheSixtyFourAreRefusedNamingTheField) {
  // segment B at 0xfffffffffff00000 with 2 MiB: it would end 1 MiB past 2^64
  const std::string seg = m59_snap("tester59_wrap_segment.pickle");
  EXPECT_EQ(m59_load_error(seg), seg + ": segments[1]: address 0xfffffffffff00000 + total_size 2097152 B wraps past "
                                       "2^64 (the range would end at 0x100000 of the next 2^64): not a range of memory");
  // a block at 2^64 - 512 of 1024 B
  const std::string blk = m59_snap("tester59_wrap_block.pickle");
  EXPECT_EQ(m59_load_error(blk), blk + ": segments[1].blocks[1]: address 0xfffffffffffffe00 + size 1024 B wraps past "
                                       "2^64 (the range would end at 0x200 of the next 2^64): not a range of memory");
  // entry 6's alloc of 1000 B at 2^64 - 512
  const std::string ent = m59_snap("tester59_wrap_entry.pickle");
  EXPECT_EQ(m59_load_error(ent), ent + ": device_traces[0][6]: address 0xfffffffffffffe00 + size 1000 B wraps past "
                                       "2^64 (the range would end at 0x1e8 of the next 2^64): not a range of memory");
  // the good file loads; its figures are in RIGHT of the tester's list
  EXPECT_EQ(m59_load_error(m59_snap("tester59_mine.pickle")), "");
  // and the CLI refuses it, exit 2, nothing written
  const std::string db = scratch_db("mem59_wrap.db");
  fs::remove(db);
  const auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "import " + seg + " -o " + db, import_scratch());
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("segments[1]: address 0xfffffffffff00000 + total_size 2097152 B wraps past 2^64"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(db));
}

TEST(Mem59SnapshotInput, ANonSnapshotPickleInADirectoryGetsTheDirectoryHint) {
  const fs::path dir = import_scratch() / "mem59_dir";
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(m59_snap("tester59_mine.pickle"), dir / "a.pickle");
  fs::copy_file(m59_snap("tester59_notsnap.pickle"), dir / "b.pickle");
  const std::string db = scratch_db("mem59_dir.db");
  fs::remove(db);
  const auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "import " + dir.string() + " -o " + db, import_scratch());
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find((dir / "b.pickle").string() + ": segments: missing"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("; every .pickle / .pickle.gz file of a directory (" + dir.string() +
                       ") is imported as one rank: remove it from there, or import the snapshots by name"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(db));
  // named on its own, the file is refused without the hint (it was named)
  const auto named = embedscope::test_support::run_cli(
      EMBEDSCOPE_CLI, "import " + (dir / "b.pickle").string() + " -o " + db, import_scratch());
  EXPECT_EQ(named.code, 2);
  EXPECT_EQ(named.err.find("every .pickle"), std::string::npos) << named.err;
}

// tester59 F3: "at peak reserved" folds the segment_alloc that sets the peak (entry 5, the small
// segment) into the alloc it was made for (entry 6), as docs/output.md says; the figures there
// are the hand ones: free 4 MiB + (2 MiB - 1 KiB) = 6,290,432 B, fragmentation 1 - 4 MiB /
// 6,290,432 = 0.3332248, memviz (4 MiB^2 + 2,096,128^2) / 22 MiB^2 = 0.0413142.
TEST(Mem59SnapshotInput, PeakReservedIsTheAllocTheSegmentWasReservedFor) {
  const std::string db = scratch_db("mem59_mine.db");
  fs::remove(db);
  const auto imp = embedscope::test_support::run_cli(
      EMBEDSCOPE_CLI, "import " + m59_snap("tester59_mine.pickle") + " -o " + db, import_scratch());
  ASSERT_EQ(imp.code, 0) << imp.out << imp.err;
  const auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "stats " + db + " --json", import_scratch());
  ASSERT_EQ(r.code, 0) << r.err;
  const auto m = nlohmann::json::parse(r.out)["memory"][0];
  EXPECT_EQ(m["peak_reserved_bytes"], 23068672);
  EXPECT_EQ(m["peak_reserved_entry"], 6);
  EXPECT_EQ(m["peak_allocated_bytes"], 16778240);
  EXPECT_EQ(m["peak_entry"], 6);
  EXPECT_EQ(m["at_peak_reserved"]["free_in_segments_bytes"], 6290432);
  EXPECT_NEAR(m["at_peak_reserved"]["external_fragmentation"].get<double>(), 1.0 - 4194304.0 / 6290432.0, 1e-12);
  EXPECT_NEAR(m["at_peak_reserved"]["memviz_fragmentation"].get<double>(),
              (4194304.0 * 4194304.0 + 2096128.0 * 2096128.0) / (23068672.0 * 23068672.0), 1e-12);
}

// mem59 (tester59 F2, F9): a range of a memory snapshot that runs past 2^64 is refused naming the
// file and the field (a segment that wrapped was imported with "problems: none" and stats lost its
// free block: 33.3 % -> 0.0 % at peak allocated); a pickle that is no snapshot, found in an imported
// directory, is refused with the directory hint. Fixtures: memory_snapshots/make_tester59.py.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

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

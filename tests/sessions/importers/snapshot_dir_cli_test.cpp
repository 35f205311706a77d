// `embedscope import DIR` of PyTorch memory snapshots (tester43 F22): every .pickle / .pickle.gz
// of the directory is a rank or an error. A file of random bytes named .pickle beside a real
// snapshot was left out without a word (exit 0, one rank missing) while a truncated one stopped
// the import; now both refuse it, exit 2, naming the file and why. And an import whose output
// exists says `embedscope import --force-overwrite`, not `run`.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "embedscope/sessions/importers/importer.h"
#include "import_test_support.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;
using embedscope::sessions::testing::import_scratch;
using embedscope::sessions::testing::scratch_db;

embedscope::test_support::CliResult f22_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, import_scratch());
}

// A fresh directory scratch/<name> with the fixture training_p2.pickle as a.pickle.
fs::path f22_dir(const std::string& name) {
  const fs::path dir = import_scratch() / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(std::string(EMBEDSCOPE_TEST_DATA) + "/memory_snapshots/training_p2.pickle", dir / "a.pickle");
  return dir;
}
}  // namespace

TEST(SnapshotDirImport, APickleThatIsNotASnapshotIsRefusedNamingIt) {
  const fs::path dir = f22_dir("f22_mix");
  { std::ofstream(dir / "b.pickle", std::ios::binary) << std::string("\x3f\xa1 not a pickle at all", 22); }
  { std::ofstream(dir / "c.json") << "{\"lr\": 0.1}\n"; }  // a non-trace .json is still left out with a problem
  const std::string b = (dir / "b.pickle").string();
  const std::string why = b + ": not a PyTorch memory snapshot (a pickle starts with byte 0x80 and a protocol 2-5; "
                              "this file starts 0x3f 0xa1); every .pickle / .pickle.gz file of a directory (" +
                          dir.string() + ") is imported as one rank: remove it from there, or import the snapshots by name";
  try {
    embedscope::sessions::importers::select_inputs({dir.string()});
    ADD_FAILURE() << "b.pickle was left out or kept";
  } catch (const embedscope::sessions::importers::ImportError& e) {
    EXPECT_EQ(std::string(e.what()), why);
  }
  const std::string db = scratch_db("f22_mix.db");
  fs::remove(db);
  auto r = f22_cli("import " + dir.string() + " -o " + db);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(why), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(db));
  // the same with a truncated snapshot: refused too, naming the file (the reader's own error)
  fs::remove(dir / "b.pickle");
  fs::copy_file(std::string(EMBEDSCOPE_TEST_DATA) + "/memory_snapshots/truncated.pickle", dir / "r1.pickle");
  fs::remove(db);
  r = f22_cli("import " + dir.string() + " -o " + db);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find((dir / "r1.pickle").string() + ": byte "), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(db));
}

TEST(SnapshotDirImport, AnOldProtocolOrGzippedNonPickleIsNamedToo) {
  const fs::path dir = f22_dir("f22_old");
  { std::ofstream(dir / "b.pickle", std::ios::binary) << "(dp0\n."; }  // protocol 0
  try {
    embedscope::sessions::importers::select_inputs({dir.string()});
    ADD_FAILURE() << "a protocol-0 pickle was accepted";
  } catch (const embedscope::sessions::importers::ImportError& e) {
    EXPECT_EQ(std::string(e.what()).rfind((dir / "b.pickle").string() + ": a pickle of protocol 0; PyTorch memory "
                                                                        "snapshots are read in protocols 2-5", 0), 0u)
        << e.what();
  }
  fs::remove(dir / "b.pickle");
  { std::ofstream(dir / "e.pickle.gz", std::ios::binary); }  // empty
  try {
    embedscope::sessions::importers::select_inputs({dir.string()});
    ADD_FAILURE() << "an empty .pickle.gz was accepted";
  } catch (const embedscope::sessions::importers::ImportError& e) {
    EXPECT_EQ(std::string(e.what()).rfind((dir / "e.pickle.gz").string() + ": not a PyTorch memory snapshot (empty or "
                                                                           "unreadable); every", 0), 0u)
        << e.what();
  }
  fs::remove(dir / "e.pickle.gz");
  // only real snapshots: one rank, as before
  EXPECT_EQ(embedscope::sessions::importers::select_inputs({dir.string()}).files,
            (std::vector<std::string>{(dir / "a.pickle").string()}));
}

TEST(SnapshotDirImport, TheOverwriteHintNamesImport) {
  const std::string db = scratch_db("f22_exists.db");
  { std::ofstream(db) << "x"; }
  const auto r = f22_cli("import " + std::string(EMBEDSCOPE_TEST_DATA) + "/memory_snapshots/training_p2.pickle -o " + db);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(db + ": already exists; choose another name (-o) or allow overwriting it (embedscope import "
                            "--force-overwrite)"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("embedscope run"), std::string::npos) << r.err;
}

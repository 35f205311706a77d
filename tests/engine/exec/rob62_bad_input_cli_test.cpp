// Bad input files are said the same way by every command: a folder, an empty file and a missing
// file name the file and say what it is, as `stats` says it of a session. Before: `calibrate`
// answered with CLI11's "sessions: File does not exist: x.db" / "File is actually a directory"
// and "Run with --help", workload and plan files gave libc's "cannot read: Is a directory" and an
// empty one JSON's "line 1, column 1: syntax error ... unexpected end of input", and a memory
// snapshot that could not be opened said only "cannot open".
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "embedscope/sessions/importers/torch_memory_snapshot/pickle.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;

struct Rob62Files {
  fs::path dir, folder, empty_db, empty_json, blank_json;
};

Rob62Files rob62_files(const std::string& name) {
  Rob62Files f;
  f.dir = embedscope::test_support::fresh_scratch("es_rob62_" + name + "_" + std::to_string(getpid()));
  f.folder = f.dir / "adir";
  fs::create_directories(f.folder);
  f.empty_db = f.dir / "empty.db";
  f.empty_json = f.dir / "empty.json";
  f.blank_json = f.dir / "blank.json";
  std::ofstream(f.empty_db).flush();
  std::ofstream(f.empty_json).flush();
  std::ofstream(f.blank_json) << "\n  \n";
  return f;
}

}  // namespace

TEST(Rob62BadInput, CalibrateNamesABadSessionAsStatsDoes) {
  const Rob62Files f = rob62_files("calibrate");
  const std::string missing = (f.dir / "missing.db").string();
  struct Case {
    std::string args, said;
  };
  const Case cases[] = {
      {missing, "error: " + missing + ": cannot open: No such file or directory"},
      {f.folder.string(), "error: " + f.folder.string() + ": is a directory, not a session file"},
      {f.empty_db.string(), "error: " + f.empty_db.string() + ": the file is empty (not a session)"},
      // a held-out session is checked before the fit too, and -o's folder is not made
      {f.empty_db.string() + " --check " + missing + " -o " + (f.dir / "out" / "p.json").string(),
       "error: " + f.empty_db.string() + ": the file is empty (not a session)"},
  };
  for (const Case& c : cases) {
    const auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "calibrate " + c.args, f.dir);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.err;
    EXPECT_EQ(r.err, c.said + "\n") << c.args;
    // stats says the same of the same file
    const std::string first = c.args.substr(0, c.args.find(' '));
    const auto s = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "stats " + first, f.dir);
    EXPECT_EQ(s.err, c.said + "\n") << first;
  }
  EXPECT_FALSE(fs::exists(f.dir / "out"));
}

TEST(Rob62BadInput, WorkloadAndPlanFilesThatAreAFolderOrEmpty) {
  const Rob62Files f = rob62_files("workload");
  struct Case {
    std::string args, said;
  };
  const std::string db = (f.dir / "x.db").string();
  const Case cases[] = {
      {"run " + f.folder.string() + " -o " + db, f.folder.string() + ": is a directory, not a workload file"},
      {"plan " + f.empty_json.string(), f.empty_json.string() + ": the file is empty (not a workload file)"},
      {"run " + f.blank_json.string() + " -o " + db,
       f.blank_json.string() + ": the file holds only blanks (4 bytes; not a workload file)"},
      {"run --preset tiny --steps 1 --plan " + f.empty_json.string() + " -o " + db,
       f.empty_json.string() + ": the file is empty (not a sharding plan)"},
      {"run --preset tiny --steps 1 --simulate " + f.empty_json.string() + " -o " + db,
       f.empty_json.string() + ": the file is empty (not a hardware profile)"},
  };
  for (const Case& c : cases) {
    const auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, c.args, f.dir);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.said), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(r.err.find("unexpected end of input"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(db));
}

TEST(Rob62BadInput, AMemorySnapshotThatCannotBeOpenedSaysWhy) {
  const Rob62Files f = rob62_files("pickle");
  const std::string missing = (f.dir / "missing.pickle").string();
  try {
    embedscope::sessions::pickle::load_file(missing);
    ADD_FAILURE() << "no error";
  } catch (const embedscope::sessions::pickle::PickleError& e) {
    EXPECT_EQ(std::string(e.what()), missing + ": cannot open: No such file or directory");
  }
}

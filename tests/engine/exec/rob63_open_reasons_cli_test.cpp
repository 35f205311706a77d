// A file the user names that cannot be opened is said with the reason, by every command: the
// system's text ("No such file or directory", "Too many levels of symbolic links", "Permission
// denied") or what stands at the name ("is a directory"). Before: replay-memory and scenario said
// "cannot open" alone, a scenario folder given by path read as a JSON syntax error, import and
// merge said "no such file" of a symbolic link loop (replay-memory: std::filesystem's raw
// "filesystem error: status: ..."), import read a file it may not read as empty, and
// `--simulate DIR` said "unknown hardware profile" (a missing profile path listed no built-ins).
// A symbolic link to itself gives ELOOP whoever runs the tests (root reads a chmod 000 file; the
// permission cases run only for another user).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;
namespace ts = embedscope::test_support;

struct Rob63Files {
  fs::path dir, folder, loop, missing_json, secret;
};

Rob63Files rob63_files(const std::string& name) {
  Rob63Files f;
  f.dir = ts::fresh_scratch("es_rob63_" + name + "_" + std::to_string(getpid()));
  f.folder = f.dir / "adir";
  fs::create_directories(f.folder);
  f.loop = f.dir / "loop";
  fs::create_symlink("loop", f.loop);  // a link to itself: ELOOP
  f.missing_json = f.dir / "missing.json";
  f.secret = f.dir / "secret.json";
  std::ofstream(f.secret) << "{}\n";
  ::chmod(f.secret.c_str(), 0);
  return f;
}

constexpr const char* kLoop = "Too many levels of symbolic links";
constexpr const char* kProfiles = "(built in: a100_sxm_80gb, h100_sxm, h200_sxm; or give a profile JSON file)";

}  // namespace

TEST(Rob63OpenReasons, EveryCommandSaysWhyItCannotOpenAFile) {
  const Rob63Files f = rob63_files("cmds");
  const std::string L = f.loop.string(), M = f.missing_json.string(), D = f.folder.string();
  struct Case {
    std::string args, said;
  };
  const Case cases[] = {
      {"replay-memory " + M, M + ": cannot open: No such file or directory"},
      {"replay-memory " + L, L + ": cannot open: " + kLoop},
      {"scenario " + M + " -o " + (f.dir / "sc").string(),
       M + ": cannot open the scenario file: No such file or directory"},
      {"scenario " + D + " -o " + (f.dir / "sc").string(), D + ": is a directory, not a scenario file"},
      {"import " + L + " -o " + (f.dir / "i.db").string(), L + ": cannot open: " + kLoop},
      {"merge " + L + " " + M + " -o " + (f.dir / "m.db").string(), L + ": cannot open: " + kLoop},
      {"stats " + L, L + ": cannot open: " + kLoop},
      {"tokenize --vocab-size 40 --input " + M + " -o " + (f.dir / "t.bin").string(),
       "--input " + M + ": cannot open the text file: No such file or directory"},
      {"tokenize --vocab-size 40 --input " + D + " -o " + (f.dir / "t.bin").string(),
       "--input " + D + ": is a directory, not a text file"},
      {"plan --preset tiny --simulate " + M,
       "--simulate " + M + ": \"" + M + "\" cannot be opened as a hardware profile file: No such file or directory " +
           kProfiles},
      {"plan --preset tiny --simulate " + D + "/",
       "--simulate " + D + "/: \"" + D + "/\" is a directory, not a hardware profile file " + kProfiles},
  };
  for (const Case& c : cases) {
    const auto r = ts::run_cli(EMBEDSCOPE_CLI, c.args, f.dir);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.err;
    EXPECT_EQ(r.err, "error: " + c.said + "\n") << c.args;
  }
  EXPECT_FALSE(fs::exists(f.dir / "i.db"));
  EXPECT_FALSE(fs::exists(f.dir / "m.db"));
  EXPECT_FALSE(fs::exists(f.dir / "t.bin"));
}

// Names without a '/' that are neither a built-in nor a file: what stands there is said.
TEST(Rob63OpenReasons, ANameThatIsAFolderOrALoopIsSaidAsSuch) {
  const Rob63Files f = rob63_files("names");
  // run in f.dir: "adir" and "loop" are the folder and the link there
  const std::string in_dir = "cd " + f.dir.string() + " && " + EMBEDSCOPE_CLI;
  auto sim = ts::run_cli(in_dir, "plan --preset tiny --simulate adir", f.dir);
  EXPECT_EQ(sim.code, 2) << sim.err;
  EXPECT_EQ(sim.err, std::string("error: --simulate adir: \"adir\" is a directory, not a hardware profile file ") +
                         kProfiles + "\n");
  sim = ts::run_cli(in_dir, "plan --preset tiny --simulate loop", f.dir);
  EXPECT_EQ(sim.code, 2) << sim.err;
  EXPECT_EQ(sim.err, std::string("error: --simulate loop: \"loop\" cannot be opened as a hardware profile file: ") +
                         kLoop + " " + kProfiles + "\n");
  // a name that is nothing at all is still an unknown profile
  sim = ts::run_cli(in_dir, "plan --preset tiny --simulate b200", f.dir);
  EXPECT_EQ(sim.err, std::string("error: --simulate b200: unknown hardware profile \"b200\" ") + kProfiles + "\n");
  auto sc = ts::run_cli(in_dir, "scenario adir -o sc", f.dir);
  EXPECT_EQ(sc.code, 2) << sc.err;
  EXPECT_NE(sc.err.find(") and a directory of that name, not a scenario file\n"), std::string::npos) << sc.err;
  sc = ts::run_cli(in_dir, "scenario loop -o sc", f.dir);
  EXPECT_EQ(sc.code, 2) << sc.err;
  EXPECT_NE(sc.err.find(std::string(") and no file: ") + kLoop + "\n"), std::string::npos) << sc.err;
  sc = ts::run_cli(in_dir, "scenario nothing_here -o sc", f.dir);
  EXPECT_NE(sc.err.find(") and no such file\n"), std::string::npos) << sc.err;
}

// A file this user may not read: "Permission denied", not SQLite's "unable to open database
// file", a bare "cannot open" or import's "the file is empty (3 bytes)". Root reads it: skipped.
TEST(Rob63OpenReasons, AFileWithoutReadPermissionSaysPermissionDenied) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads a file of mode 000";
  const Rob63Files f = rob63_files("perm");
  const std::string S = f.secret.string();
  for (const std::string& cmd : {"replay-memory " + S, "import " + S + " -o " + (f.dir / "i.db").string(), "stats " + S,
                                 "scenario " + S + " -o " + (f.dir / "sc").string()}) {
    const auto r = ts::run_cli(EMBEDSCOPE_CLI, cmd, f.dir);
    EXPECT_EQ(r.code, 2) << cmd << "\n" << r.err;
    EXPECT_NE(r.err.find(": Permission denied\n"), std::string::npos) << cmd << "\n" << r.err;
  }
}

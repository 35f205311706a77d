// tester46 F19: `embedscope-ui DIR` (and `embedscope import DIR`) on the folder `scaling -o DIR`
// writes said "a directory without .json, ... files": what it lacks, not what it holds. A folder of
// sessions now says so and how to open them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "embedscope/sessions/importers/importer.h"
#include "import_test_support.h"

namespace {
namespace fs = std::filesystem;
namespace si = embedscope::sessions::importers;

// What expand_inputs throws for `dir`, or "" when it throws nothing.
std::string fix47_expand_error(const fs::path& dir) {
  try {
    si::expand_inputs({dir.string()});
  } catch (const si::ImportError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(SessionDirF19, AFolderOfSessionsIsSaidToHoldSessions) {
  const fs::path dir = embedscope::sessions::testing::import_scratch() / "fix47_scdir";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* name : {"table_wise_2.db", "row_wise_1.db"}) {
    std::ofstream f(dir / name, std::ios::binary);
    f << std::string("SQLite format 3\0", 16) << std::string(84, '\0');  // an SQLite file's header
  }
  { std::ofstream(dir / "notes.db") << "not SQLite"; }  // a .db that is no SQLite file is not counted
  const std::string d = dir.string();
  EXPECT_EQ(fix47_expand_error(dir), d + " holds 2 sessions (.db), not traces to import: open them by name (embedscope-ui " +
                                         d + "/row_wise_1.db ..., or embedscope-ui --compare " + d + "/row_wise_1.db " + d +
                                         "/table_wise_2.db; embedscope stats " + d + "/row_wise_1.db)");
  fs::remove(dir / "table_wise_2.db");
  EXPECT_EQ(fix47_expand_error(dir), d + " holds 1 session (.db), not traces to import: open them by name (embedscope-ui " +
                                         d + "/row_wise_1.db; embedscope stats " + d + "/row_wise_1.db)");
  fs::remove(dir / "row_wise_1.db");  // nothing but the text file: what it lacks, as before
  EXPECT_EQ(fix47_expand_error(dir), d + ": a directory without .json, .json.gz, .sqlite, .pickle or .pickle.gz files");
}

// The table descriptors: FORMAT.md's schema section is their rendering, the DDL they generate
// is the DDL every earlier writer used for the tables it had, and they are consistent.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "embedscope/sessions/schema/tables.h"
#include "embedscope/sessions/store/session.h"

using namespace embedscope::sessions;
namespace fs = std::filesystem;

namespace {

const std::string kFormatMd = std::string(EMBEDSCOPE_TEST_DATA) + "/../../sessions/schema/FORMAT.md";

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// FORMAT.md between the markers is render_markdown(). To regenerate it after changing a table:
// EMBEDSCOPE_UPDATE_FORMAT_MD=1 ./sessions_test --gtest_filter=SchemaTables.FormatMdMatches*
TEST(SchemaTables, FormatMdMatchesTheDescriptors) {
  std::string md = read_file(kFormatMd);
  ASSERT_FALSE(md.empty()) << kFormatMd;
  const auto begin = md.find(schema::kMarkdownBegin);
  const auto end = md.find(schema::kMarkdownEnd);
  ASSERT_NE(begin, std::string::npos) << "FORMAT.md lacks " << schema::kMarkdownBegin;
  ASSERT_NE(end, std::string::npos) << "FORMAT.md lacks " << schema::kMarkdownEnd;
  const std::string end_marker = std::string(schema::kMarkdownEnd) + "\n";
  const std::string section = md.substr(begin, end + end_marker.size() - begin);
  const std::string expected = schema::render_markdown();
  if (section != expected && std::getenv("EMBEDSCOPE_UPDATE_FORMAT_MD")) {
    md.replace(begin, section.size(), expected);
    std::ofstream(kFormatMd) << md;
    GTEST_SKIP() << "rewrote " << kFormatMd;
  }
  EXPECT_EQ(section, expected) << "FORMAT.md's schema section differs from schema::render_markdown(); regenerate "
                                  "it with EMBEDSCOPE_UPDATE_FORMAT_MD=1";
}

struct Db {
  sqlite3* db = nullptr;
  explicit Db(const std::string& path) { sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr); }
  ~Db() { sqlite3_close(db); }
  std::vector<std::string> rows(const std::string& sql) const {
    std::vector<std::string> out;
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sql;
    while (sqlite3_step(st) == SQLITE_ROW) {
      std::string row;
      for (int i = 0; i < sqlite3_column_count(st); ++i) {
        const unsigned char* t = sqlite3_column_text(st, i);
        if (i) row += "|";
        row += t ? reinterpret_cast<const char*>(t) : "NULL";
      }
      out.push_back(row);
    }
    sqlite3_finalize(st);
    return out;
  }
  // Columns (name, type, not null, default, key position), indexes and rowid-ness of a table.
  std::vector<std::string> shape(const std::string& table) const {
    auto s = rows("SELECT name, type, \"notnull\", dflt_value, pk FROM pragma_table_info('" + table + "')");
    for (const auto& ix : rows("SELECT name, origin, \"unique\" FROM pragma_index_list('" + table + "') ORDER BY name"))
      s.push_back("index " + ix);
    for (const auto& w : rows("SELECT wr FROM pragma_table_list WHERE name = '" + table + "'")) s.push_back("wr " + w);
    return s;
  }
};

// A new file's tables have the shapes of the tables in the version-3 file, which was made with
// the version-3 writer's hand-written DDL (tests/data/sessions/make_old_sessions.py).
TEST(SchemaTables, GeneratedDdlEqualsTheDdlOfEarlierWriters) {
  const auto dir = fs::temp_directory_path() / ("es_schema_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string fresh = (dir / "fresh.db").string();
  {
    SessionWriter w(fresh);
    w.close("complete");
  }
  Db now(fresh), old(std::string(EMBEDSCOPE_TEST_DATA) + "/sessions/v3.db");
  const auto old_tables = old.rows("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name");
  ASSERT_EQ(old_tables.size(), 14u);
  for (const auto& t : old_tables) {
    // columns added later (since > 3, e.g. schema 5's memory_events.stream) are not in the old file
    std::vector<std::string> now_shape;
    for (const auto& row : now.shape(t)) {
      const auto* c = schema::table(t).column(row.substr(0, row.find('|')));
      if (!c || c->since <= 3) now_shape.push_back(row);
    }
    EXPECT_EQ(now_shape, old.shape(t)) << t;
    EXPECT_EQ(schema::table(t).since <= 3, true) << t;
  }
  EXPECT_EQ(now.rows("SELECT sql FROM sqlite_schema WHERE name = 'op_view'"),
            old.rows("SELECT sql FROM sqlite_schema WHERE name = 'op_view'"));
  // and the new file has exactly the described tables
  std::vector<std::string> described;
  for (const auto& t : schema::tables()) described.push_back(t.name);
  std::sort(described.begin(), described.end());
  EXPECT_EQ(now.rows("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name"), described);
  EXPECT_EQ(now.rows("PRAGMA user_version"), std::vector<std::string>{std::to_string(kSchemaVersion)});
  fs::remove_all(dir);
}

TEST(SchemaTables, DescriptorsAreConsistent) {
  for (const auto& t : schema::tables()) {
    EXPECT_FALSE(t.summary.empty()) << t.name;
    EXPECT_GE(t.since, 1) << t.name;
    EXPECT_LE(t.since, kSchemaVersion) << t.name;
    for (const auto& k : t.primary_key) EXPECT_NE(t.column(k), nullptr) << t.name << "." << k;
    for (const auto& ix : t.indexes)
      for (const auto& k : ix.columns) EXPECT_NE(t.column(k), nullptr) << ix.name << "." << k;
    for (const auto& c : t.columns) {
      EXPECT_FALSE(c.meaning.empty()) << t.name << "." << c.name;
      EXPECT_GE(c.since, t.since) << t.name << "." << c.name;
    }
  }
  EXPECT_EQ(schema::table("shards").since, 4);
  EXPECT_EQ(schema::table("steps").column("loss")->type, schema::SqlType::real);
  EXPECT_EQ(schema::create_sql(schema::table("steps")),
            "CREATE TABLE steps (step INTEGER NOT NULL, rank INTEGER NOT NULL, start_ns INTEGER NOT NULL, end_ns "
            "INTEGER NOT NULL, loss REAL NOT NULL, memory_in_use_bytes INTEGER NOT NULL, memory_peak_bytes INTEGER NOT "
            "NULL, PRIMARY KEY (step, rank)) WITHOUT ROWID;\n");
  EXPECT_EQ(schema::create_sql(schema::table("memory_snapshots")),
            "CREATE TABLE memory_snapshots (id INTEGER PRIMARY KEY, rank INTEGER NOT NULL, step INTEGER NOT NULL, "
            "time_ns INTEGER NOT NULL, reason TEXT NOT NULL);\n");
  try {
    schema::table("nope");
    ADD_FAILURE() << "an unknown table was found";
  } catch (const std::out_of_range& e) {
    EXPECT_STREQ(e.what(), "the session schema has no table 'nope'");
  }
}

}  // namespace

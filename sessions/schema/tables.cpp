#include "embedscope/sessions/schema/tables.h"

#include <cctype>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "schema/definitions.h"

namespace embedscope::sessions::schema {

const char* to_string(SqlType t) {
  switch (t) {
    case SqlType::integer: return "INTEGER";
    case SqlType::real: return "REAL";
    case SqlType::text: return "TEXT";
    case SqlType::blob: return "BLOB";
  }
  return "INTEGER";
}

const ColumnInfo* TableInfo::column(std::string_view n) const {
  for (const auto& c : columns)
    if (c.name == n) return &c;
  return nullptr;
}

const std::vector<TableInfo>& tables() {
  using namespace detail;
  static const std::vector<TableInfo> all{
      metadata_table(),          strings_table(),         categories_table(),         ranks_table().info,
      lanes_table().info,        ops_table(),             collectives_table().info,   load_counters_table().info,
      steps_table().info,        memory_counters_table().info, memory_events_table().info,
      memory_snapshots_table().info, memory_blocks_table().info, id_histogram_table().info, shards_table().info,
      import_stats_table().info,
      memory_frames_table().info, memory_stacks_table().info, memory_timeline_table().info,
      rebalances_table().info,   plan_changes_table().info, flight_recorder_table().info, op_blocks_table()};
  return all;
}

const TableInfo& table(std::string_view name) {
  for (const auto& t : tables())
    if (t.name == name) return t;
  throw std::out_of_range(fmt::format("the session schema has no table '{}'", name));
}

namespace {
// A rowid table whose key is one INTEGER column: that column is the rowid alias.
bool rowid_alias(const TableInfo& t, const ColumnInfo& c) {
  return !t.without_rowid && t.primary_key.size() == 1 && t.primary_key[0] == c.name && c.type == SqlType::integer;
}
}  // namespace

std::string create_sql(const TableInfo& t) {
  std::string s = "CREATE TABLE " + t.name + " (";
  bool inline_key = false;
  for (size_t i = 0; i < t.columns.size(); ++i) {
    const auto& c = t.columns[i];
    s += (i ? ", " : "") + c.name + " " + to_string(c.type);
    const bool single_key = t.primary_key.size() == 1 && t.primary_key[0] == c.name;
    if (single_key && (rowid_alias(t, c) || t.without_rowid)) {
      s += " PRIMARY KEY";
      inline_key = true;
      if (!rowid_alias(t, c) && c.not_null) s += " NOT NULL";
    } else if (c.not_null) {
      s += " NOT NULL";
    }
    if (!c.default_sql.empty()) s += " DEFAULT " + c.default_sql;
  }
  if (!t.primary_key.empty() && !inline_key) s += fmt::format(", PRIMARY KEY ({})", fmt::join(t.primary_key, ", "));
  s += t.without_rowid ? ") WITHOUT ROWID;\n" : ");\n";
  for (const auto& ix : t.indexes) s += fmt::format("CREATE INDEX {} ON {} ({});\n", ix.name, t.name, fmt::join(ix.columns, ", "));
  return s;
}

std::string schema_sql() {
  std::string s;
  for (const auto& t : tables()) s += create_sql(t);
  return s + detail::kOpViewSql + "\n";
}

std::string render_markdown() {
  std::string s = std::string(kMarkdownBegin) + "\n";
  for (const auto& t : tables()) {
    std::string summary = t.summary;
    if (!summary.empty()) summary[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(summary[0])));
    s += fmt::format("\n### `{}`{}\n\n{}.\n\n", t.name, t.since > 1 ? fmt::format(" (version {})", t.since) : "",
                     summary);
    s += "| column | type | meaning |\n| --- | --- | --- |\n";
    for (const auto& c : t.columns) {
      std::string type = to_string(c.type);
      if (c.not_null && !rowid_alias(t, c)) type += " NOT NULL";
      if (!c.default_sql.empty()) type += " DEFAULT " + c.default_sql;
      const std::string since = c.since > t.since ? fmt::format(" (version {})", c.since) : "";
      s += fmt::format("| `{}` | {} | {}{} |\n", c.name, type, c.meaning, since);
    }
    s += fmt::format("\nKey: ({}){}", fmt::join(t.primary_key, ", "), t.without_rowid ? ", clustered (WITHOUT ROWID)" : "");
    for (const auto& ix : t.indexes) s += fmt::format("; index `{}` ({})", ix.name, fmt::join(ix.columns, ", "));
    s += ".\n";
    if (!t.notes.empty()) s += "\n" + t.notes + "\n";
  }
  return s + "\n" + kMarkdownEnd + "\n";
}

}  // namespace embedscope::sessions::schema

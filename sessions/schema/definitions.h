#pragma once
// The session tables, each described ONCE (private to the sessions library). A record table
// ties every column to the member of its record that it stores, so the writer's INSERT and its
// binds, and the reader's SELECT list and its reads, are generated from one entry:
//
//   field<&StepMetric::loss>("loss", "global mean loss of the step (the same on every rank)")
//
// adds a REAL NOT NULL column `loss`, bound from and read into StepMetric::loss. Columns that
// no record member holds (ops: the lane key, the interned name id; lanes.max_duration_ns) are
// described with `column` and written by hand in the writer. schema::tables() (tables.cpp)
// lists all of them in creation order; FORMAT.md's schema section is rendered from it.
//
// A column added in version v takes `since = v`: readers of an older file leave its member at
// the record's default (they never select a column the file's version does not have).

#include <sqlite3.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "embedscope/sessions/model/events.h"
#include "embedscope/sessions/model/flight_record.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/schema/tables.h"

namespace embedscope::sessions::schema::detail {

// --- binding and reading one value (sqlite parameters are 1-based, result columns 0-based) --
inline void bind_value(sqlite3_stmt* st, int i, int32_t v) { sqlite3_bind_int(st, i, v); }
inline void bind_value(sqlite3_stmt* st, int i, int64_t v) { sqlite3_bind_int64(st, i, v); }
inline void bind_value(sqlite3_stmt* st, int i, uint64_t v) { sqlite3_bind_int64(st, i, static_cast<int64_t>(v)); }
inline void bind_value(sqlite3_stmt* st, int i, bool v) { sqlite3_bind_int(st, i, v ? 1 : 0); }
inline void bind_value(sqlite3_stmt* st, int i, double v) { sqlite3_bind_double(st, i, v); }
inline void bind_value(sqlite3_stmt* st, int i, const std::string& v) {
  sqlite3_bind_text(st, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
}
inline void read_value(sqlite3_stmt* st, int i, int32_t& v) { v = sqlite3_column_int(st, i); }
inline void read_value(sqlite3_stmt* st, int i, int64_t& v) { v = sqlite3_column_int64(st, i); }
inline void read_value(sqlite3_stmt* st, int i, uint64_t& v) { v = static_cast<uint64_t>(sqlite3_column_int64(st, i)); }
inline void read_value(sqlite3_stmt* st, int i, bool& v) { v = sqlite3_column_int(st, i) != 0; }
inline void read_value(sqlite3_stmt* st, int i, double& v) { v = sqlite3_column_double(st, i); }
/// Text, "" for NULL (a damaged or hand-edited file must not crash the reader).
inline void read_value(sqlite3_stmt* st, int i, std::string& v) {
  const unsigned char* t = sqlite3_column_text(st, i);
  v = t ? reinterpret_cast<const char*>(t) : "";
}

template <class T>
constexpr SqlType sql_type_of() {
  if constexpr (std::is_same_v<T, std::string>) return SqlType::text;
  else if constexpr (std::is_floating_point_v<T>) return SqlType::real;
  else return SqlType::integer;
}

/// A problem in one row that is not SQLite's (a bad JSON list); the reader prefixes the file.
class RowError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// What the reader accepts in a record column besides its SQL type (robust55: tester54 F6, retest54
/// R7): an integer column must hold an integer (not text, a real or NULL: SQLite's affinity keeps
/// a hand-edited 'abc' as text, read as 0), within [lo, hi] (hi: the member's type; lo: 0 for
/// bytes, counts and durations), and a rank id below the session's world size.
struct ValueRule {
  int64_t lo = std::numeric_limits<int64_t>::min();
  int64_t hi = std::numeric_limits<int64_t>::max();
  bool rank = false;  ///< a rank id: in [0, world_size) (metadata world_size; kMaxWorldSize without it)
};

/// What the reader knows when it checks a row: the world size, and how to name a row whose
/// primary key is not among the columns read.
struct ReadContext {
  int64_t world_size = -1;  ///< metadata world_size; -1 (absent) or 0: ranks below kMaxWorldSize
  const char* order = "";   ///< the query's tail after SELECT ... FROM t ("ORDER BY id")
  int64_t row = 0;          ///< 0-based position of the row in that order
};

/// The RowError of a value the reader refuses: "table T, row (k1 v1, k2 v2), column C: WHY: the
/// session file is damaged or was edited", the row named by the primary-key columns of `st`'s
/// result where all are there, else by its position ("row 5 (ORDER BY id)").
RowError refused_value(sqlite3_stmt* st, const TableInfo& table, const std::string& column, const std::string& why,
                       const ReadContext& ctx);
/// Why the value in result column `n` of `st` breaks `rule` for a column of `type`, or "" when it
/// does not (definitions.cpp).
std::string value_problem(sqlite3_stmt* st, int n, SqlType type, const ValueRule& rule, const ReadContext& ctx);

/// The largest rank id + 1 that `ctx` accepts.
inline int64_t rank_bound(const ReadContext& ctx) { return ctx.world_size > 0 ? ctx.world_size : meta::kMaxWorldSize; }

/// Whether the value in result column `n` of `st` passes `rule` for a column of `type` (the fast
/// path of every value read; value_problem says why not): integers must be integers in range,
/// reals integers, reals or NULL (SQLite stores a NaN as NULL), text and blobs anything.
inline bool value_ok(sqlite3_stmt* st, int n, SqlType type, const ValueRule& rule, const ReadContext& ctx) {
  const int t = sqlite3_column_type(st, n);
  if (type == SqlType::integer) {
    if (t != SQLITE_INTEGER) return false;
    if (rule.lo == std::numeric_limits<int64_t>::min() && rule.hi == std::numeric_limits<int64_t>::max()) return true;
    const int64_t v = sqlite3_column_int64(st, n);
    return v >= rule.lo && v <= rule.hi && (!rule.rank || v < rank_bound(ctx));
  }
  if (type == SqlType::real) return t != SQLITE_TEXT && t != SQLITE_BLOB;
  return true;
}

/// How one column is written from and read into a record of type R; null = not by the record.
template <class R>
struct Codec {
  void (*put)(sqlite3_stmt*, int, const R&) = nullptr;
  void (*get)(sqlite3_stmt*, int, R&) = nullptr;
};

template <class R>
struct Col {
  ColumnInfo info;
  Codec<R> codec;
  ValueRule rule;
  /// Values below `v` are refused (0: bytes, counts, durations; -1: a -1 sentinel).
  Col at_least(int64_t v) && {
    rule.lo = std::max(rule.lo, v);
    return std::move(*this);
  }
  /// A rank id: in [0, world_size).
  Col rank_id() && {
    rule.rank = true;
    return std::move(*this).at_least(0);
  }
};

/// The range of an integer member of type T (int32 members are read with sqlite3_column_int).
template <class T>
ValueRule rule_of() {
  ValueRule r;
  if constexpr (std::is_same_v<T, int32_t>) {
    r.lo = std::numeric_limits<int32_t>::min();
    r.hi = std::numeric_limits<int32_t>::max();
  }
  return r;
}

template <class R, class T>
R record_of(T R::*);
template <class R, class T>
T value_of(T R::*);

/// A NOT NULL column stored from record member M (type from the member's type).
template <auto M>
Col<decltype(record_of(M))> field(const char* name, const char* meaning, int since = 1) {
  using R = decltype(record_of(M));
  using T = decltype(value_of(M));
  Col<R> c;
  c.info = {name, sql_type_of<T>(), true, "", meaning, since};
  c.rule = rule_of<T>();
  c.codec.put = [](sqlite3_stmt* st, int i, const R& r) { bind_value(st, i, r.*M); };
  c.codec.get = [](sqlite3_stmt* st, int i, R& r) { read_value(st, i, r.*M); };
  return c;
}

/// A NOT NULL column stored from member M of member O of the record (r.*O).*M.
template <auto O, auto M>
Col<decltype(record_of(O))> nested(const char* name, const char* meaning, int since = 1) {
  using R = decltype(record_of(O));
  using T = decltype(value_of(M));
  Col<R> c;
  c.info = {name, sql_type_of<T>(), true, "", meaning, since};
  c.rule = rule_of<T>();
  c.codec.put = [](sqlite3_stmt* st, int i, const R& r) { bind_value(st, i, (r.*O).*M); };
  c.codec.get = [](sqlite3_stmt* st, int i, R& r) { read_value(st, i, (r.*O).*M); };
  return c;
}

/// (`since` = 1 for the columns a table was created with: they take the table's version.)

/// A column no record member holds (written by hand, or by SQLite: a rowid alias, a default).
template <class R = void>
Col<R> column(const char* name, SqlType type, const char* meaning, bool not_null = true, const char* default_sql = "",
              int since = 1) {
  return {{name, type, not_null, default_sql, meaning, since}, {}};
}

/// The header of a table: everything but its columns.
struct TableHead {
  const char* name;
  const char* summary;
  std::vector<std::string> primary_key;
  bool without_rowid;
  int since = 1;
  const char* notes = "";
  std::vector<IndexInfo> indexes = {};
};

/// A check across the columns of a read row (a step ending before it starts): "" when the row is
/// fine, else the column it blames and why.
template <class R>
struct RowRule {
  const char* column;
  std::string (*problem)(const R&);
};

/// A table whose rows are records R.
template <class R>
struct RecordTable {
  TableInfo info;
  std::vector<Codec<R>> codecs;  // parallel to info.columns
  std::vector<ValueRule> rules;  // parallel to info.columns
  std::vector<RowRule<R>> row_rules;

  RecordTable(TableHead h, std::vector<Col<R>> cols, std::vector<RowRule<R>> row_checks = {})
      : row_rules(std::move(row_checks)) {
    info.name = h.name;
    info.summary = h.summary;
    info.primary_key = std::move(h.primary_key);
    info.without_rowid = h.without_rowid;
    info.since = h.since;
    info.notes = h.notes;
    info.indexes = std::move(h.indexes);
    for (auto& c : cols) {
      if (c.info.since < info.since) c.info.since = info.since;  // a column is as old as its table at least
      info.columns.push_back(std::move(c.info));
      codecs.push_back(c.codec);
      rules.push_back(c.rule);
    }
  }

  /// INSERT [OR REPLACE] INTO t (the columns a record holds) VALUES (?1, ...).
  std::string insert_sql(bool or_replace) const {
    std::string cols, params;
    int n = 0;
    for (size_t i = 0; i < codecs.size(); ++i)
      if (codecs[i].put) {
        if (n++) {
          cols += ", ";
          params += ", ";
        }
        cols += info.columns[i].name;
        params += '?';
        params += std::to_string(n);
      }
    return std::string(or_replace ? "INSERT OR REPLACE INTO " : "INSERT INTO ") + info.name + " (" + cols + ") VALUES (" +
           params + ")";
  }
  /// Binds every column the record holds, in insert_sql's order.
  void bind(sqlite3_stmt* st, const R& r) const {
    int n = 0;
    for (const auto& c : codecs)
      if (c.put) c.put(st, ++n, r);
  }
  /// Whether a file of `version` that has this table has column i: the columns the table was
  /// created with always, later ones from their version on.
  bool has_column(size_t i, int version) const { return info.columns[i].since <= std::max(version, info.since); }
  /// "SELECT a, b, ... FROM t" over the record's columns that a file of `version` has.
  std::string select_sql(int version) const {
    std::string cols;
    for (size_t i = 0; i < codecs.size(); ++i)
      if (codecs[i].get && has_column(i, version)) {
        if (!cols.empty()) cols += ", ";
        cols += info.columns[i].name;
      }
    return "SELECT " + cols + " FROM " + info.name;
  }
  /// Reads a row of select_sql(version) into `r`. Throws RowError (refused_value) for a value its
  /// column's ValueRule or a RowRule refuses.
  void read(sqlite3_stmt* st, int version, R& r, const ReadContext& ctx = {}) const {
    int n = 0;
    for (size_t i = 0; i < codecs.size(); ++i)
      if (codecs[i].get && has_column(i, version)) {
        if (!value_ok(st, n, info.columns[i].type, rules[i], ctx))
          throw refused_value(st, info, info.columns[i].name,
                              value_problem(st, n, info.columns[i].type, rules[i], ctx), ctx);
        codecs[i].get(st, n++, r);
      }
    for (const auto& rr : row_rules)
      if (const std::string why = rr.problem(r); !why.empty()) throw refused_value(st, info, rr.column, why, ctx);
  }
};

/// A memory_blocks row: the block and the snapshot that holds it.
struct BlockRow {
  int64_t snapshot_id = 0;
  MemoryBlockRecord block;
};

// The tables (definitions.cpp). Untyped ones are written by hand in the writer.
const TableInfo& metadata_table();
const TableInfo& strings_table();
const TableInfo& categories_table();
const RecordTable<RankInfo>& ranks_table();
const RecordTable<LaneInfo>& lanes_table();
const TableInfo& ops_table();
const RecordTable<CollectiveRecord>& collectives_table();
const RecordTable<LoadCounter>& load_counters_table();
const RecordTable<StepMetric>& steps_table();
const RecordTable<MemoryCounter>& memory_counters_table();
const RecordTable<MemoryEvent>& memory_events_table();
const RecordTable<MemorySnapshot>& memory_snapshots_table();
const RecordTable<BlockRow>& memory_blocks_table();
const RecordTable<IdHistogramBucket>& id_histogram_table();
const RecordTable<ShardRecord>& shards_table();
const RecordTable<ImportStat>& import_stats_table();
const RecordTable<RebalanceRecord>& rebalances_table();
const RecordTable<PlanChangeRecord>& plan_changes_table();
const RecordTable<MemoryFrame>& memory_frames_table();
const RecordTable<MemoryStackFrame>& memory_stacks_table();
const RecordTable<MemoryTimelinePoint>& memory_timeline_table();
const RecordTable<FlightRecord>& flight_recorder_table();
const TableInfo& op_blocks_table();

/// The view over ops with names resolved (part of every new file).
extern const char* const kOpViewSql;

}  // namespace embedscope::sessions::schema::detail

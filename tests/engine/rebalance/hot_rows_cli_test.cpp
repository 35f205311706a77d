// `embedscope rebalance SESSION` hot-row advice end to end (issue 17, rebalance/hot_rows.h): a
// run with a row_wise table under Zipf ids; the advice in --json recounted independently from
// the session's id_histogram and load_counters tables with SQL, and its text form.
#include <gtest/gtest.h>

#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "support/cli_run.h"

using nlohmann::json;

namespace {
std::filesystem::path hot_rows_scratch() {
  static const auto dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("es_hot_rows_cli_" + std::to_string(getpid()));
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}
embedscope::test_support::CliResult hot_rows_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, hot_rows_scratch());
}

// 4 ranks; "zr" row_wise, 200 rows x 8 (one histogram bucket a row), 20 Zipf(1.2) ids a bag;
// "tw" table_wise, uniform. rowwise_adagrad: a row with its state is 8 x 4 + 4 = 36 bytes.
json hot_rows_workload() {
  return {{"name", "hot_rows_cli"},
          {"batch_size", 16},
          {"steps", 3},
          {"seed", 5},
          {"devices", {{"count", 4}, {"memory_bytes", 64 << 20}}},
          {"optimizer", {{"type", "rowwise_adagrad"}}},
          {"dense", {{"num_dense_features", 4}, {"bottom_mlp", {8}}, {"interaction", "cat"}, {"top_mlp", {8, 1}}}},
          {"tables",
           {{{"name", "zr"}, {"num_embeddings", 200}, {"embedding_dim", 8}, {"feature_names", {"f_zr"}}},
            {{"name", "tw"}, {"num_embeddings", 300}, {"embedding_dim", 8}, {"feature_names", {"f_tw"}}}}},
          {"features",
           {{{"name", "f_zr"}, {"pooling_factor", 20}, {"ids", {{"distribution", "zipf"}, {"alpha", 1.2}}}},
            {{"name", "f_tw"}, {"pooling_factor", 2}}}},
          {"sharding", {{"default", "table_wise"}, {"tables", {{"zr", {{"type", "row_wise"}}}}}}}};
}

/// Rows of `sql` as int64 columns.
std::vector<std::vector<int64_t>> hot_rows_query(const std::filesystem::path& db, const std::string& sql) {
  sqlite3* h = nullptr;
  std::vector<std::vector<int64_t>> out;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) return out;
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(h, sql.c_str(), -1, &st, nullptr) == SQLITE_OK) {
    while (sqlite3_step(st) == SQLITE_ROW) {
      std::vector<int64_t> row;
      for (int c = 0; c < sqlite3_column_count(st); ++c) row.push_back(sqlite3_column_int64(st, c));
      out.push_back(std::move(row));
    }
  }
  sqlite3_finalize(st);
  sqlite3_close(h);
  return out;
}
}  // namespace

TEST(HotRowsCli, AdviceMatchesTheSessionsHistogramRecountedWithSql) {
  const auto wl = hot_rows_scratch() / "zipf.json";
  std::ofstream(wl) << hot_rows_workload().dump(2);
  const auto db = hot_rows_scratch() / "zipf.db";
  auto r = hot_rows_cli("run " + wl.string() + " -o " + db.string() + " --force-overwrite");
  ASSERT_EQ(r.code, 0) << r.err;
  r = hot_rows_cli("rebalance " + db.string() + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json p = json::parse(r.out);
  ASSERT_TRUE(p["hot_rows"].is_array()) << r.out;
  ASSERT_EQ(p["hot_rows"].size(), 1u) << r.out;  // tw is table_wise: no advice
  const json& a = p["hot_rows"][0];
  EXPECT_EQ(a["table"], "zr");
  EXPECT_EQ(a["type"], "row_wise");
  EXPECT_EQ(a["threshold_ids_per_row_step"], 4 * (8 + 1));

  // the reference: rows of table 0 with more than steps x 36 ids over all ranks
  const auto steps = hot_rows_query(db, "SELECT COUNT(DISTINCT step) FROM load_counters WHERE step >= 0");
  ASSERT_EQ(steps.size(), 1u);
  const int64_t S = steps[0][0];
  ASSERT_EQ(S, 3);
  const auto rows = hot_rows_query(
      db, "SELECT row_begin, SUM(ids) FROM id_histogram WHERE table_index = 0 GROUP BY row_begin HAVING SUM(ids) > " +
              std::to_string(S * 36) + " ORDER BY row_begin");
  ASSERT_FALSE(rows.empty());  // Zipf(1.2) over 200 rows: the hottest rows take far more than 36 ids a step
  ASSERT_EQ(a["blocks"].size(), rows.size()) << a.dump();
  int64_t ids = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(a["blocks"][i]["row_begin"], rows[i][0]);
    EXPECT_EQ(a["blocks"][i]["row_end"], rows[i][0] + 1);
    EXPECT_EQ(a["blocks"][i]["ids"], rows[i][1]);
    ids += rows[i][1];
  }
  EXPECT_EQ(a["rows"], static_cast<int64_t>(rows.size()));
  EXPECT_EQ(a["ids"], ids);
  EXPECT_EQ(a["bytes_replicated_per_rank"], static_cast<int64_t>(rows.size()) * 36);
  EXPECT_DOUBLE_EQ(a["ids_saved_per_step"].get<double>(), static_cast<double>(ids) / 3.0);
  EXPECT_DOUBLE_EQ(a["sync_values_per_step"].get<double>(), static_cast<double>(rows.size()) * 36.0);

  r = hot_rows_cli("rebalance " + db.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("hot rows     replicate on every rank"), std::string::npos) << r.out;
  ASSERT_LT(rows.size() * 36, 1024u);  // printed in B (format_bytes)
  EXPECT_NE(r.out.find(std::to_string(rows.size()) + " rows (" + std::to_string(rows.size()) + " blocks), " +
                           std::to_string(rows.size() * 36) + " B per rank"),
            std::string::npos)
      << r.out;
}

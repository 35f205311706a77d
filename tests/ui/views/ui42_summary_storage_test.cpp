// tester42 F11: the workbench Summary shows how the tables are stored, as `embedscope stats`.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QAbstractItemModelTester>
#include <QTableView>

#include <filesystem>
#include <string>

#include "embedscope/sessions/analysis/table_storage.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "jobs/analysis_job.h"
#include "models/table_storage_model.h"
#include "views/summary_view.h"

using namespace embedscope;
using namespace embedscope::ui;

namespace {
// t0: int8, stochastic rounding, hashed into 100 rows, 60 collisions over the session's 2 steps;
// t1: fp32 low rank 4 in host_cached placement, 30 hits of 40 rows looked up.
const char* kUi42Storage =
    R"([{"table":"t0","data_type":"int8","stochastic_rounding":true,"optimizer_state_type":"fp32","placement":"device",)"
    R"("hash_size":100,"low_rank_dim":0,"weight_bytes":[4000,0],"optimizer_state_bytes":[0,1600],"master_copy_bytes":16000,)"
    R"("max_abs_error":0.0123,"relative_error":0.05,"hash_collisions":60,"cache_policy":null},)"
    R"({"table":"t1","data_type":"fp32","stochastic_rounding":false,"optimizer_state_type":"fp32","placement":"host_cached",)"
    R"("hash_size":0,"low_rank_dim":4,"weight_bytes":[2048,2048],"optimizer_state_bytes":[0,0],"master_copy_bytes":0,)"
    R"("max_abs_error":null,"relative_error":null,"hash_collisions":null,"cache_hits":30,"cache_misses":10}])";

std::string ui42_storage_session() {
  const auto path = std::filesystem::temp_directory_path() / ("es_ui42_storage_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  sessions::SessionWriter w(path.string());
  w.set_metadata("world_size", "1");
  w.set_metadata(sessions::meta::kTableStorageJson, kUi42Storage);
  w.add_lane({0, 0, "compute", "thread"});
  for (int64_t s = 0; s < 2; ++s) {
    w.add_step({s, 0, s * 1'000'000, (s + 1) * 1'000'000, 0.5, 0, 0});
    w.add_ops({{0, sessions::Lane::compute, sessions::OpCategory::lookup, "lookup", s, s * 1'000'000, s * 1'000'000 + 500'000, 0, 0}});
  }
  w.close("complete");
  return path.string();
}
}  // namespace

TEST(Ui42TableStorage, RowsFromTheMetadata) {
  const auto rows = sessions::table_storage_rows(kUi42Storage, 2);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].rounding, "stochastic");
  EXPECT_EQ(rows[0].weight_bytes, 4000);
  EXPECT_EQ(rows[0].optimizer_state_bytes, 1600);
  EXPECT_DOUBLE_EQ(*rows[0].collisions_per_step, 30.0);
  EXPECT_FALSE(rows[0].cache_hit_rate.has_value());
  EXPECT_EQ(rows[1].rounding, "-");
  EXPECT_FALSE(rows[1].max_abs_error.has_value());
  EXPECT_DOUBLE_EQ(*rows[1].cache_hit_rate, 0.75);
  EXPECT_TRUE(sessions::table_storage_rows("not json", 2).empty());
  EXPECT_FALSE(sessions::stored_differently(sessions::TableStorageRow{}));
}

TEST(Ui42TableStorage, SummaryShowsTheBlock) {
  SummaryView view(std::make_shared<const sessions::SessionReader>(ui42_storage_session()));
  ASSERT_TRUE(wait_for_analyses(&view));
  QTableView* table = nullptr;
  for (auto* t : view.findChildren<QTableView*>())
    if (t->objectName() == "table_storage") table = t;
  ASSERT_NE(table, nullptr) << "no table-storage block on the Summary";
  QAbstractItemModel* m = table->model();
  QAbstractItemModelTester tester(m, QAbstractItemModelTester::FailureReportingMode::Fatal);
  ASSERT_EQ(m->rowCount(), 2);
  auto text = [m](int r, int c) { return m->data(m->index(r, c)).toString().toStdString(); };
  using M = TableStorageModel;
  EXPECT_EQ(text(0, M::Table), "t0");
  EXPECT_EQ(text(0, M::DataType), "int8");
  EXPECT_EQ(text(0, M::Rounding), "stochastic");
  EXPECT_EQ(text(0, M::HashSize), "100");
  EXPECT_EQ(text(0, M::LowRank), "-");
  EXPECT_EQ(text(0, M::Weights), "3.9 KiB");
  EXPECT_EQ(text(0, M::MaxAbsError), "0.0123");
  EXPECT_EQ(text(0, M::RelativeError), "0.05");
  EXPECT_EQ(text(0, M::Collisions), "30.0");
  EXPECT_EQ(text(0, M::CacheHitRate), "-");
  EXPECT_EQ(text(1, M::Placement), "host_cached");
  EXPECT_EQ(text(1, M::LowRank), "4");
  EXPECT_EQ(text(1, M::MaxAbsError), "-");
  EXPECT_EQ(text(1, M::CacheHitRate), "75.0 %");
  EXPECT_DOUBLE_EQ(m->data(m->index(1, M::CacheHitRate), Qt::UserRole).toDouble(), 0.75);
  EXPECT_FALSE(m->data(m->index(1, M::MaxAbsError), Qt::UserRole).isValid());
  EXPECT_EQ(m->headerData(M::Collisions, Qt::Horizontal).toString().toStdString(), "collisions/step");
}

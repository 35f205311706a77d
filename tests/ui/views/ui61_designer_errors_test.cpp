// The designer marks every bad field of a workload at once, each with its own message (tester60a
// F8: with /tables/2/embedding_dim 0 and /batch_size -1 it marked the first only; fixing it
// revealed the next), and at 1280x800 its tables' grid shows more than 2.5 rows.
#include <gtest/gtest.h>

#include <QApplication>
#include <QHeaderView>
#include <QTableView>

#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "core/workload_errors.h"
#include "embedscope/engine/workload/presets.h"
#include "models/workload_model.h"
#include "views/workload_designer.h"

namespace {
using nlohmann::json;

// criteo_kaggle's 26 tables (the tester's dlrm26 in shape) with table 2's dim 0 and batch -1
json ui61_bad_workload() {
  json w = json::parse(embedscope::engine::preset_json("criteo_kaggle"));
  w["tables"][2]["embedding_dim"] = 0;
  w["batch_size"] = -1;
  return w;
}
}  // namespace

TEST(Ui61WorkloadErrors, EveryProblemInTheValidatorsOrder) {
  const auto errors = embedscope::ui::every_workload_error(ui61_bad_workload(), "workload");
  ASSERT_EQ(errors.size(), 2u);
  std::set<std::string> pointers{errors[0].pointer, errors[1].pointer};
  EXPECT_EQ(pointers, (std::set<std::string>{"/tables/2/embedding_dim", "/batch_size"}));
  for (const auto& e : errors) {
    if (e.pointer == "/batch_size") EXPECT_EQ(e.message, "/batch_size: must be > 0, got -1");
    else EXPECT_EQ(e.message, "/tables/2/embedding_dim: must be > 0, got 0");
  }
  // a valid workload: none; one problem: one
  EXPECT_TRUE(embedscope::ui::every_workload_error(json::parse(embedscope::engine::preset_json("tiny")), "workload").empty());
  json one = json::parse(embedscope::engine::preset_json("tiny"));
  one["steps"] = 0;
  const auto e1 = embedscope::ui::every_workload_error(one, "workload");
  ASSERT_EQ(e1.size(), 1u);
  EXPECT_EQ(e1[0].pointer, "/steps");
}

TEST(Ui61DesignerErrors, BothBadFieldsAreMarkedWithTheirMessages) {
  embedscope::ui::WorkloadDesigner d("tiny");
  d.resize(1280, 800);
  d.model()->set_workload(ui61_bad_workload());
  d.show();
  QApplication::processEvents();
  const auto& errors = d.model()->errors();
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(d.message_at("/batch_size").toStdString(), "/batch_size: must be > 0, got -1");
  EXPECT_EQ(d.message_at("/tables").toStdString(), "/tables/2/embedding_dim: must be > 0, got 0");
  const QModelIndex dim = d.model()->index(2, embedscope::ui::WorkloadModel::EmbeddingDim);
  EXPECT_TRUE(dim.data(Qt::BackgroundRole).isValid());  // red
  EXPECT_EQ(dim.data(Qt::ToolTipRole).toString().toStdString(), "/tables/2/embedding_dim: must be > 0, got 0");
  EXPECT_FALSE(d.model()->index(1, embedscope::ui::WorkloadModel::EmbeddingDim).data(Qt::BackgroundRole).isValid());
  // fixing one leaves the other said
  d.model()->set_value("/tables/2/embedding_dim", 16);
  QApplication::processEvents();
  ASSERT_EQ(d.model()->errors().size(), 1u);
  EXPECT_EQ(d.message_at("/batch_size").toStdString(), "/batch_size: must be > 0, got -1");
  EXPECT_EQ(d.message_at("/tables").toStdString(), "");
}

// 26 tables at 1280x800: at least 10 rows of the grid in view (2.5 before; 5.5 with the taller rows)
TEST(Ui61DesignerErrors, TheTablesGridShowsTenRowsAt1280x800) {
  embedscope::ui::WorkloadDesigner d("criteo_kaggle");
  d.resize(1280, 800);
  d.show();
  QApplication::processEvents();
  QTableView* t = d.table_view();
  const int rows_in_view = t->viewport()->height() / t->verticalHeader()->defaultSectionSize();
  EXPECT_GE(rows_in_view, 10) << "viewport " << t->viewport()->height() << " px, rows of "
                              << t->verticalHeader()->defaultSectionSize() << " px";
  EXPECT_LE(d.height(), 800);  // nothing grew the designer past the window
}

// tester42 F13: the Compare head says per table what moved between the plans, and keeps the raw
// list of differing JSON pointers behind a toggle. Hand-made sessions: one measured step each.
#include <gtest/gtest.h>

#include <QApplication>
#include <QCheckBox>
#include <QLabel>
#include <QtTest/QtTest>

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "jobs/analysis_job.h"
#include "views/compare_view.h"
#include "embedscope/sessions/model/metadata_keys.h"

using namespace embedscope;
using namespace embedscope::ui;

namespace {
std::string ux43_ui_session(const char* file, int hot_rank, const std::string& overrides) {
  const auto path = std::filesystem::temp_directory_path() / (std::to_string(getpid()) + file);
  std::filesystem::remove(path);
  sessions::SessionWriter w(path.string());
  w.set_metadata("world_size", "4");
  w.set_metadata("workload_name", "hot_table_straggler");
  w.set_metadata("backend", "cpu");
  w.set_metadata(sessions::meta::kWorkloadJson,
                 R"({"steps":1,"sharding":{"default":"table_wise","tables":{)" + overrides + "}}}");
  w.set_metadata(sessions::meta::kShardingPlanJson,
                 R"({"tables":[{"name":"hot_1","sharding_type":"table_wise","shards":[{"rank":)" +
                     std::to_string(hot_rank) + "}]}]}");
  for (int r = 0; r < 4; ++r) {
    w.add_rank({r, "h", "cpu (thread)", 1 << 30});
    w.add_lane({r, 0, "compute", "thread"});
    w.add_step({0, r, 0, 1'000'000, 0.5, 0, 0});
  }
  w.add_ops({{0, sessions::Lane::compute, sessions::OpCategory::lookup, "lookup", 0, 100'000, 200'000, 0, 0}});
  w.close("complete");
  return path.string();
}
}  // namespace

TEST(Ux43CompareUi, TheHeadSaysWhatMovedAndTheRawListIsBehindAToggle) {
  const std::string a = ux43_ui_session("_ux43_greedy.db", 3, "");
  const std::string b = ux43_ui_session("_ux43_moved.db", 0, R"("hot_1":{"type":"table_wise","ranks":[0]})");
  CompareView view({{"A", std::make_shared<sessions::SessionReader>(a)}, {"B", std::make_shared<sessions::SessionReader>(b)}});
  ASSERT_TRUE(wait_for_analyses(&view));
  auto* head = view.findChild<QLabel*>("compare_head");
  ASSERT_NE(head, nullptr);
  const QString t = head->text();
  EXPECT_TRUE(t.contains("<i>plan 1 table_wise</i>")) << t.toStdString();
  EXPECT_TRUE(t.contains("<i>plan vs the baseline: hot_1: rank 3 -&gt; rank 0 (table_wise)</i>")) << t.toStdString();
  EXPECT_FALSE(t.contains("sharding/tables")) << t.toStdString();
  auto* toggle = view.findChild<QCheckBox*>("compare_settings_details_toggle");
  auto* details = view.findChild<QLabel*>("compare_settings_details");
  ASSERT_NE(toggle, nullptr);
  ASSERT_NE(details, nullptr);
  EXPECT_FALSE(toggle->isChecked());
  EXPECT_TRUE(details->isHidden());
  EXPECT_TRUE(details->text().contains("sharding/tables/hot_1/ranks/0 0")) << details->text().toStdString();
  EXPECT_TRUE(details->text().contains("sharding/tables/hot_1/ranks/0 (none)")) << details->text().toStdString();
  toggle->setChecked(true);
  EXPECT_FALSE(details->isHidden());
  std::filesystem::remove(a);
  std::filesystem::remove(b);
}

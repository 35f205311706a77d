// The Summary page for a first-time user (tester63a F4, F5, F14):
//   - the `stats` figures that say why a step is slow - the time by op category, the lookup-time
//     imbalance, the held-out AUC and loss, the critical path's total - on the page, each cell as
//     `embedscope stats --json` gives it (a 3-step tiny run on 2 cpu ranks);
//   - at 1280x800 the page scrolls inside its tab, its critical path and collectives showing at
//     least 8 rows (they got 2.5), the rank table every rank;
//   - the report of a 4-rank row_wise criteo_kaggle run shows the whole sharding plan (4 ranks x
//     (1 + 26 tables) = 108 rows; 64 were shown, ranks 2 and 3 missing).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <QApplication>
#include <QHeaderView>
#include <QImage>
#include <QLabel>
#include <QScrollArea>
#include <QScrollBar>
#include <QTableView>
#include <QTreeView>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/model/units.h"
#include "embedscope/sessions/store/session.h"
#include "jobs/analysis_job.h"
#include "support/cli_run.h"
#include "views/summary_view.h"

namespace {
namespace fs = std::filesystem;
using nlohmann::json;

struct Ui63Run {
  fs::path dir, db;
  json stats;
};

// `embedscope run ARGS -o DIR/s.db` and its `stats --json`
Ui63Run ui63_run(const std::string& args, const std::string& name) {
  Ui63Run out;
  out.dir = embedscope::test_support::fresh_scratch("ui63_" + name);
  out.db = out.dir / "s.db";
  auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "run " + args + " -o '" + out.db.string() + "'", out.dir);
  EXPECT_EQ(r.code, 0) << r.err;
  r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "stats --json '" + out.db.string() + "'", out.dir);
  EXPECT_EQ(r.code, 0) << r.err;
  out.stats = json::parse(r.out, nullptr, false);
  return out;
}

std::string ui63_ms(double ns) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f ms", ns / 1e6);
  return buf;
}

std::string ui63_read(const fs::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
}  // namespace

TEST(Ui63Summary, WhyIsItSlowFiguresEqualStatsJson) {
  const Ui63Run run = ui63_run("--preset tiny --steps 3", "tiny");
  ASSERT_TRUE(run.stats.is_object());
  embedscope::ui::SummaryView view(std::make_shared<const embedscope::sessions::SessionReader>(run.db.string()));
  view.resize(1600, 1200);
  view.show();
  ASSERT_TRUE(embedscope::ui::wait_for_analyses(&view));
  QApplication::processEvents();
  auto* text = view.findChild<QLabel*>("summary_text");
  ASSERT_NE(text, nullptr);
  const std::string t = text->text().toStdString();
  // the lookup-time imbalance beside the ids'
  const double lt = run.stats["imbalance"]["lookup_time_max_over_mean"].get<double>();
  char lt_text[64];
  std::snprintf(lt_text, sizeof lt_text, "lookup time max/mean %.2f", lt);
  EXPECT_NE(t.find(lt_text), std::string::npos) << t;
  // the held-out line, from stats --json's held_out
  const json& h = run.stats["held_out"];
  ASSERT_TRUE(h.is_object()) << run.stats.dump();
  char held[256];
  std::snprintf(held, sizeof held, "held-out AUC %.4f, loss %.4f on %lld samples (%lld positive) of %lld generated batches",
                h["auc"].get<double>(), h["loss"].get<double>(), static_cast<long long>(h["samples"].get<int64_t>()),
                static_cast<long long>(h["positives"].get<int64_t>()), static_cast<long long>(h["batches"].get<int64_t>()));
  EXPECT_NE(t.find(held), std::string::npos) << t;
  // the critical path's total over the counted steps
  auto* cp = view.findChild<QLabel*>("critical_path_caption");
  ASSERT_NE(cp, nullptr);
  const int64_t steps = run.stats["steps"].get<int64_t>() - run.stats["drain_steps"].get<int64_t>();
  ASSERT_EQ(steps, 3);
  const std::string total = ui63_ms(static_cast<double>(run.stats["critical_path"]["total_ns"].get<int64_t>())) + " over 3 steps";
  EXPECT_NE(cp->text().toStdString().find(total), std::string::npos) << cp->text().toStdString();
  // time by op category: summed over ranks, and per rank and step
  auto* cats = view.findChild<QTableView*>("category_times");
  ASSERT_NE(cats, nullptr);
  EXPECT_TRUE(cats->isVisibleTo(&view));
  std::map<std::string, int64_t> sums;
  for (const auto& r : run.stats["ranks"])
    for (const auto& [k, v] : r["by_category_ns"].items()) sums[k] += v.get<int64_t>();
  int expected_rows = 0;
  const int64_t rank_steps = static_cast<int64_t>(run.stats["ranks"].size()) * steps;
  ASSERT_EQ(rank_steps, 6);
  for (const auto& [k, v] : sums) {
    if (v <= 0) continue;
    ++expected_rows;
    bool found = false;
    for (int row = 0; row < cats->model()->rowCount(); ++row) {
      if (cats->model()->index(row, 0).data().toString().toStdString() != k) continue;
      found = true;
      EXPECT_EQ(cats->model()->index(row, 1).data().toString().toStdString(), ui63_ms(static_cast<double>(v))) << k;
      EXPECT_EQ(cats->model()->index(row, 2).data().toString().toStdString(),
                embedscope::sessions::format_duration(v / rank_steps))
          << k;
    }
    EXPECT_TRUE(found) << k;
  }
  EXPECT_EQ(cats->model()->rowCount(), expected_rows);
  EXPECT_GE(expected_rows, 4);  // input, lookup, comm, dense, optimizer on a cpu run
  auto* cap = view.findChild<QLabel*>("category_times_caption");
  ASSERT_NE(cap, nullptr);
  EXPECT_NE(cap->text().toStdString().find("summed over 2 ranks x 3 measured steps, and per rank and step"), std::string::npos)
      << cap->text().toStdString();
  // every row of the small table on the page, none scrolled away
  EXPECT_EQ(cats->verticalScrollBar()->maximum(), 0);
}

TEST(Ui63Summary, ScrollsAtALaptopSizeInsteadOfSqueezingItsTables) {
  const Ui63Run run = ui63_run(
      "--preset criteo_kaggle --simulate h100_sxm --nodes 1 --gpus-per-node 4 --sharding row_wise --steps 3", "sim_rw");
  embedscope::ui::SummaryView view(std::make_shared<const embedscope::sessions::SessionReader>(run.db.string()));
  view.resize(1280, 680);  // the tab's page in a 1280x800 window (menu, toolbar, two tab bars)
  view.show();
  ASSERT_TRUE(embedscope::ui::wait_for_analyses(&view));
  QApplication::processEvents();
  auto* scroll = view.findChild<QScrollArea*>("summary_page_scroll");
  ASSERT_NE(scroll, nullptr);
  EXPECT_GT(scroll->verticalScrollBar()->maximum(), 0);  // it scrolls: the panes keep their rows
  int most_rows = 0;
  for (const char* name : {"critical_path", "collectives"}) {
    auto* v = view.findChild<QTableView*>(name);
    ASSERT_NE(v, nullptr) << name;
    const int rows = v->model()->rowCount();
    most_rows = std::max(most_rows, rows);
    const int row_px = v->verticalHeader()->defaultSectionSize();
    EXPECT_GE(v->viewport()->height(), std::min(rows, 8) * row_px) << name << ": " << v->viewport()->height() / row_px
                                                                    << " rows of " << rows;
  }
  EXPECT_GE(most_rows, 9);  // a row_wise step's collectives (and their split checks): more than 8 rows
  auto* plan = view.findChild<QTreeView*>();
  ASSERT_NE(plan, nullptr);
  EXPECT_GE(plan->viewport()->height(), 10 * plan->fontMetrics().height()) << plan->viewport()->height();
}

TEST(Ui63Summary, ReportShowsTheWholeShardingPlanOfFourRanks) {
  const Ui63Run run = ui63_run(
      "--preset criteo_kaggle --simulate h100_sxm --nodes 1 --gpus-per-node 4 --sharding row_wise --steps 3", "sim_rw_rep");
  const fs::path out = run.dir / "report";
  const std::string cmd = "QT_QPA_PLATFORM=offscreen '" + std::string(EMBEDSCOPE_UI) + "' --report '" + run.db.string() +
                          "' -o '" + out.string() + "' 2>'" + (run.dir / "ui_err.txt").string() + "'";
  const int rc = std::system(cmd.c_str());
  ASSERT_EQ(WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, 0) << ui63_read(run.dir / "ui_err.txt");
  const std::string said = ui63_read(run.dir / "ui_err.txt");
  // no pane of the Summary was cut: the plan's 108 rows (4 x (1 + 26)) are all on the image
  EXPECT_EQ(said.find("note: Summary"), std::string::npos) << said;
  const QImage summary(QString::fromStdString((out / "summary.png").string()));
  ASSERT_FALSE(summary.isNull());
  EXPECT_GT(summary.height(), 108 * 16) << summary.height();  // every plan row, 16 px at least each
  EXPECT_NE(summary.pixelColor(2, 2), QColor(0xff, 0xf4, 0xc2));  // no cut note's strip on top
}

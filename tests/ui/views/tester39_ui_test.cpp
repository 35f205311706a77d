// tester39: the compare charts pick their unit from the data (F9: 13-hour steps were "(ms)" with
// ticks 1e7..5e7), a throughput below one a second is not "0 samples/s", and the report of a
// 7-session comparison shows every column of the figures table (F14: the differences were cut).
#include <gtest/gtest.h>

#include <QApplication>
#include <QLabel>
#include <QImage>
#include <QTabWidget>
#include <QVBoxLayout>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "jobs/analysis_job.h"
#include "models/compare_model.h"
#include "shell/report_layout.h"
#include "views/compare_view.h"
#include "views/summary_view.h"
#include "ui/support/ui_fixtures.h"

using namespace embedscope;
using namespace embedscope::ui;
using namespace embedscope::ui::fixtures;

TEST(Tester39Ui, CompareChartsOfHourLongStepsReadInHours) {
  const int64_t step = 46'974'990'650'000;  // 13.05 h
  auto slow = open_reader(step_session("es_t39_slow", 0, {step, step}));
  auto fast = open_reader(step_session("es_t39_fast", 0, {1'000'000, 1'000'000}));
  CompareView view({{"A", fast}, {"B", slow}});
  ASSERT_TRUE(wait_for_analyses(&view));
  ASSERT_NE(view.step_plot(), nullptr);
  EXPECT_EQ(view.step_plot()->yAxis->label(), "step time (h)");
  ASSERT_EQ(view.step_plot()->graphCount(), 2);
  const auto* b = view.step_plot()->graph(1)->data().data();
  ASSERT_EQ(b->size(), 2);
  EXPECT_NEAR(b->at(0)->value, 13.0486, 1e-4);  // 46974990.65 ms / 3,600,000
  EXPECT_NEAR(view.step_plot()->graph(0)->data()->at(0)->value, 1e6 / 3600e9, 1e-12);
  EXPECT_NEAR(view.step_plot()->yAxis->range().upper, 13.0486 * 1.1, 1e-3);
  // exposed communication: rank 0's 250 us a step, 2 steps: 500 us, in us
  EXPECT_EQ(view.exposed_plot()->yAxis->label(), "exposed comm (us)");
  // the throughput of 8 samples a 13.05-hour step
  const auto* m = view.model();
  EXPECT_EQ(m->data(m->index(CompareModel::Throughput, 2)).toString(), "0.000170 samples/s");
  EXPECT_EQ(m->data(m->index(CompareModel::Throughput, 1)).toString(), "8000 samples/s");
  EXPECT_EQ(m->data(m->index(CompareModel::StepMean, 2)).toString(), "13.05 h");

  // the Summary page of the slow session says the same
  SummaryView summary(slow);
  ASSERT_TRUE(wait_for_analyses(&summary));
  const auto* text = summary.findChild<QLabel*>("summary_text");
  ASSERT_NE(text, nullptr);
  EXPECT_TRUE(text->text().contains("step time mean 13.05 h, p50 13.05 h, p99 13.05 h; 0.000170 samples/s"))
      << text->text().toStdString();

  // 1 ms steps alone: ms
  CompareView ms_view({{"A", fast}, {"B", fast}});
  ASSERT_TRUE(wait_for_analyses(&ms_view));
  EXPECT_EQ(ms_view.step_plot()->yAxis->label(), "step time (ms)");
  EXPECT_NEAR(ms_view.step_plot()->graph(0)->data()->at(0)->value, 1.0, 1e-12);
}

TEST(Tester39Ui, ASevenSessionReportWidensToShowEveryColumn) {
  auto s = open_reader(fixture_session());
  std::vector<LabelledSession> sessions;
  for (const char* l : {"A", "B", "C", "D", "E", "F", "G"}) sessions.push_back({l, s});
  QWidget window;
  auto* layout = new QVBoxLayout(&window);
  auto* view = new CompareView(sessions, 0, &window);
  layout->addWidget(view);
  window.resize(1600, 900);
  window.show();
  ASSERT_TRUE(wait_for_analyses(view));
  QApplication::processEvents();
  QWidget* figures = view->pages()->widget(0);
  EXPECT_GT(columns_cut(figures), 0);  // 14 columns do not fit 1600 px
  show_every_row(&window, figures);
  EXPECT_EQ(columns_cut(figures), 0);
  EXPECT_GT(window.width(), 1600);
  EXPECT_LE(window.width(), kReportMaxWidth);
  // the report as a user writes it: figures.png as wide as the table needs, the other pages 1600
  const auto dir = std::filesystem::temp_directory_path() / ("es_t39_seven_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::string files;
  for (const char* l : {"a", "b", "c", "d", "e", "f", "g"}) {
    std::filesystem::copy_file(s->path(), dir / (std::string(l) + ".db"));
    files.append(" ").append((dir / (std::string(l) + ".db")).string());  // not " " + string&&: GCC 12 -Wrestrict
  }
  const std::string cmd = "QT_QPA_PLATFORM=offscreen " + std::string(EMBEDSCOPE_UI) + " --compare" + files + " --report -o " +
                          (dir / "rep").string() + " 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const QImage fig(QString::fromStdString((dir / "rep" / "figures.png").string()));
  EXPECT_GT(fig.width(), 1600);  // the main window has other chrome: not exactly the window above
  EXPECT_LE(fig.width(), kReportMaxWidth);
  EXPECT_EQ(QImage(QString::fromStdString((dir / "rep" / "timelines.png").string())).width(), 1600);
  if (!std::getenv("EMBEDSCOPE_KEEP_T39")) std::filesystem::remove_all(dir);
}

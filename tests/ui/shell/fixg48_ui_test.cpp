// tester48's workbench findings:
// F10   `embedscope-ui --report TRACE -o DIR` wrote an imported TRACE.db / TRACE-N.db beside the
//       trace without a word; it says "report: importing X into Y" as --compare says its imports.
// F13   the Compare view's figures had no HTA comm/comp overlap for imported traces; a row now,
//       hidden where no session is an imported trace.
// F14.6 the Compare view drew a semi_sync session's drain steps unmarked and had no drain note.
// F14.7 the Trade-offs table cut its step-time column at the default width: columns wrap at 130 px.
// F14.11 `embedscope-ui S --screenshot F.png --report -o DIR` ignored --screenshot: refused now.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <QApplication>
#include <QHeaderView>
#include <QLabel>
#include <QTableView>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <qcustomplot.h>

#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "jobs/analysis_job.h"
#include "models/tradeoffs_model.h"
#include "ui/support/tradeoff_sessions.h"
#include "views/compare_view.h"
#include "views/tradeoffs_view.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;
using embedscope::test_support::run_merged;

fs::path g48_ui_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("es_fixg48_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string g48_ui(const std::string& args) {
  return std::string("QT_QPA_PLATFORM=offscreen '") + EMBEDSCOPE_UI + "' " + args;
}

// One rank, `pipeline`, 6 measured steps of 100 ns (the last two 40 ns: semi_sync drains them)
std::string g48_pipeline_session(const fs::path& dir, const std::string& pipeline) {
  const fs::path p = dir / (pipeline + ".db");
  embedscope::sessions::SessionWriter w(p.string());
  w.set_metadata(embedscope::sessions::meta::kPipeline, pipeline);
  w.set_metadata(embedscope::sessions::meta::kWorldSize, "1");
  w.set_metadata(embedscope::sessions::meta::kSamplesPerStep, "100");
  for (int64_t s = 0; s < 6; ++s) {
    const int64_t t = 100 * s, len = s < 4 ? 100 : 40;
    w.add_ops({{0, embedscope::sessions::Lane::compute, embedscope::sessions::OpCategory::dense, "dense", s, t, t + len}});
    w.add_step({s, 0, t, t + len, 0.5, 0, 0});
  }
  w.close("complete");
  return p.string();
}
}  // namespace

// F10: the import of a trace given to --report is said, naming where its session goes (foo.db is
// taken by another file: foo-2.db); a second report reuses that import and says nothing of it.
TEST(Fixg48Ui, AReportOfATraceSaysWhereItImportsIt) {
  const fs::path dir = g48_ui_dir("report_import");
  fs::copy_file(std::string(EMBEDSCOPE_TEST_DATA) + "/traces/hta_small/rank0.json", dir / "foo.json");
  std::ofstream(dir / "foo.db") << "not a session of this trace";
  auto r = run_merged(g48_ui("--report '" + (dir / "foo.json").string() + "' -o '" + (dir / "rep").string() + "'"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("report: importing " + (dir / "foo.json").string() + " into " + (dir / "foo-2.db").string() + "\n"),
            std::string::npos)
      << r.out;
  EXPECT_TRUE(fs::exists(dir / "foo-2.db"));
  r = run_merged(g48_ui("--report '" + (dir / "foo.json").string() + "' -o '" + (dir / "rep").string() + "'"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("importing"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir / "foo-3.db"));
  fs::remove_all(dir);
}

// F14.11: two outputs asked of one run: refused before anything is written.
TEST(Fixg48Ui, AScreenshotBesideAReportIsRefused) {
  const fs::path dir = g48_ui_dir("shot_report");
  const std::string s = g48_pipeline_session(dir, "base");
  const auto r = run_merged(g48_ui("'" + s + "' --screenshot '" + (dir / "s3.png").string() + "' --report -o '" +
                                       (dir / "r11").string() + "'"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("error: --screenshot " + (dir / "s3.png").string() +
                       " and --report write different outputs (one window image; every page as PNG + index.html): "
                       "give one of them"),
            std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(dir / "s3.png"));
  EXPECT_FALSE(fs::exists(dir / "r11"));
  fs::remove_all(dir);
}

// F14.6: a semi_sync session beside a base one: its drain steps 4-5 are named in the head and
// drawn as a graph of their own (2 points), the steady line holds steps 0-3 only.
TEST(Fixg48Ui, TheCompareViewMarksAndSaysDrainSteps) {
  const fs::path dir = g48_ui_dir("drain");
  const std::string base = g48_pipeline_session(dir, "base"), semi = g48_pipeline_session(dir, "semi_sync");
  embedscope::ui::CompareView view({{"A", std::make_shared<embedscope::sessions::SessionReader>(base)},
                                    {"B", std::make_shared<embedscope::sessions::SessionReader>(semi)}});
  ASSERT_TRUE(embedscope::ui::wait_for_analyses(&view));
  auto* head = view.findChild<QLabel*>("compare_head");
  ASSERT_NE(head, nullptr);
  EXPECT_TRUE(head->text().contains("<b>B</b>: (steps 4-5 drain the semi_sync pipeline")) << head->text().toStdString();
  EXPECT_FALSE(head->text().contains("<b>A</b>: (steps")) << head->text().toStdString();
  QCPGraph *steady = nullptr, *drain = nullptr;
  for (auto* plot : view.findChildren<QCustomPlot*>())
    for (int g = 0; g < plot->graphCount(); ++g) {
      if (plot->graph(g)->name() == "B") steady = plot->graph(g);
      if (plot->graph(g)->name() == "B: drain (left out)") drain = plot->graph(g);
    }
  ASSERT_NE(steady, nullptr);
  ASSERT_NE(drain, nullptr);
  EXPECT_EQ(steady->data()->size(), 4);
  ASSERT_EQ(drain->data()->size(), 2);
  EXPECT_DOUBLE_EQ(drain->data()->at(0)->key, 4.0);
  EXPECT_DOUBLE_EQ(drain->data()->at(1)->key, 5.0);
  fs::remove_all(dir);
}

// F13: two imported traces show HTA's overlap row (the value `embedscope compare` prints); two
// engine sessions hide it.
TEST(Fixg48Ui, TheCompareViewShowsHtasOverlapForImportedTraces) {
  const fs::path dir = g48_ui_dir("hta_row");
  for (const char* r : {"rank0", "rank1"}) {
    const std::string cmd = std::string("'") + EMBEDSCOPE_CLI + "' import '" + EMBEDSCOPE_TEST_DATA + "/traces/hta_small/" +
                            r + ".json' -o '" + (dir / (std::string(r) + ".db")).string() + "'";
    ASSERT_EQ(run_merged(cmd).code, 0) << cmd;
  }
  const auto cli = run_merged(std::string("'") + EMBEDSCOPE_CLI + "' compare '" + (dir / "rank0.db").string() + "' '" +
                                  (dir / "rank1.db").string() + "'");
  ASSERT_EQ(cli.code, 0) << cli.out;
  const size_t at = cli.out.find("GPU kernels overlap % (HTA's comm/comp overlap)");
  ASSERT_NE(at, std::string::npos) << cli.out;
  const std::string row = cli.out.substr(at, cli.out.find('\n', at) - at);
  embedscope::ui::CompareView view({{"A", std::make_shared<embedscope::sessions::SessionReader>((dir / "rank0.db").string())},
                                    {"B", std::make_shared<embedscope::sessions::SessionReader>((dir / "rank1.db").string())}});
  ASSERT_TRUE(embedscope::ui::wait_for_analyses(&view));
  QTableView* table = nullptr;
  for (auto* t : view.findChildren<QTableView*>())
    if (qobject_cast<embedscope::ui::CompareModel*>(t->model())) table = t;
  ASSERT_NE(table, nullptr);
  EXPECT_FALSE(table->isRowHidden(embedscope::ui::CompareModel::HtaOverlap));
  const auto* m = table->model();
  const QString a = m->data(m->index(embedscope::ui::CompareModel::HtaOverlap, 1)).toString();
  const QString b = m->data(m->index(embedscope::ui::CompareModel::HtaOverlap, 2)).toString();
  EXPECT_TRUE(a.endsWith(" %")) << a.toStdString();
  EXPECT_NE(row.find(a.toStdString()), std::string::npos) << row << " / " << a.toStdString();
  EXPECT_NE(row.find(b.toStdString()), std::string::npos) << row << " / " << b.toStdString();
  // engine sessions: no HTA figure, the row hidden
  const std::string x = g48_pipeline_session(dir, "base"), y = g48_pipeline_session(dir, "sparse_dist");
  embedscope::ui::CompareView runs({{"A", std::make_shared<embedscope::sessions::SessionReader>(x)},
                                    {"B", std::make_shared<embedscope::sessions::SessionReader>(y)}});
  ASSERT_TRUE(embedscope::ui::wait_for_analyses(&runs));
  QTableView* t2 = nullptr;
  for (auto* t : runs.findChildren<QTableView*>())
    if (qobject_cast<embedscope::ui::CompareModel*>(t->model())) t2 = t;
  ASSERT_NE(t2, nullptr);
  EXPECT_TRUE(t2->isRowHidden(embedscope::ui::CompareModel::HtaOverlap));
  fs::remove_all(dir);
}

// F14.7: a run label wider than a column may grow ("fp16 rows, stochastic rounding") wraps onto
// a second line: no column is wider than 130 px, and that run's row is taller than fp32's.
TEST(Fixg48Ui, TradeoffsColumnsWrapRatherThanWiden) {
  const std::vector<std::string> paths = embedscope::ui::tradeoff_fixtures::tradeoff_study();
  const std::vector<QString> labels = {"fp16 rows, stochastic rounding", "fp32", "hash", "shared"};
  std::vector<embedscope::ui::LabelledSession> runs;
  for (size_t i = 0; i < paths.size(); ++i)
    runs.push_back({labels[i], std::make_shared<const embedscope::sessions::SessionReader>(paths[i])});
  embedscope::ui::TradeoffsView view(runs);
  view.resize(1200, 800);
  view.show();
  ASSERT_TRUE(embedscope::ui::wait_for_analyses(&view));
  QApplication::processEvents();
  auto* table = view.findChild<QTableView*>();
  ASSERT_NE(table, nullptr);
  table->resizeColumnsToContents();
  table->resizeRowsToContents();
  for (int c = 0; c < embedscope::ui::TradeoffsModel::ColumnCount; ++c)
    EXPECT_LE(table->horizontalHeader()->sectionSize(c), 130) << "column " << c;
  EXPECT_EQ(table->horizontalHeader()->sectionSize(embedscope::ui::TradeoffsModel::Run), 130);
  EXPECT_GT(table->rowHeight(0), table->rowHeight(1));  // the long label wrapped; fp32's did not
}

// The scenario view's "Trade-offs" page (views/tradeoffs_view.h, models/tradeoffs_model.h): the
// model's texts and raw values, the chart's points, and which scenarios get the page; sessions
// with known bytes and losses from support/tradeoff_sessions.h.
#include <gtest/gtest.h>

#include <QAbstractItemModelTester>
#include <QApplication>
#include <QLabel>
#include <QTabWidget>
#include <qcustomplot.h>

#include "jobs/analysis_job.h"
#include "models/tradeoffs_model.h"
#include "views/compare_view.h"
#include "views/scenario_view.h"
#include "views/tradeoffs_view.h"
#include "ui/support/tradeoff_sessions.h"

using namespace embedscope;
using namespace embedscope::ui;

namespace {
std::vector<LabelledSession> tradeoffs_view_sessions() {
  const std::vector<std::string> paths = tradeoff_fixtures::tradeoff_study();
  const std::vector<QString> labels = {"fp16 rows", "fp32", "hash", "shared"};
  std::vector<LabelledSession> out;
  for (size_t i = 0; i < paths.size(); ++i) out.push_back({labels[i], std::make_shared<const sessions::SessionReader>(paths[i])});
  return out;
}
std::string tradeoffs_view_text(TradeoffsModel* m, int row, int column) {
  return m->data(m->index(row, column)).toString().toStdString();
}
}  // namespace

TEST(TradeoffsModel, TextsAndRawValuesOfEveryRun) {
  std::vector<TradeoffRun> runs;
  const auto sessions = tradeoffs_view_sessions();
  for (const auto& s : sessions) runs.push_back(tradeoff_run(s.label.toStdString(), *s.session));
  TradeoffsModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
  model.set_comparison(compare_tradeoffs(std::move(runs)));
  ASSERT_EQ(model.rowCount(), 4);
  ASSERT_EQ(model.columnCount(), TradeoffsModel::ColumnCount);
  using M = TradeoffsModel;
  EXPECT_EQ(model.headerData(M::Loss, Qt::Horizontal).toString().toStdString(), "loss after\n2 steps");
  EXPECT_EQ(model.headerData(M::TableBytesRatio, Qt::Horizontal).toString().toStdString(), "of\nfp32");
  // fp16 rows: 40 MB of 48 MB, loss 0.61 after 2 steps against fp32's 0.60
  EXPECT_EQ(tradeoffs_view_text(&model, 0, M::Technique), "fp16 rows");
  EXPECT_EQ(tradeoffs_view_text(&model, 0, M::TableBytes), "38.1 MiB");
  EXPECT_EQ(model.data(model.index(0, M::TableBytes), Qt::UserRole).toLongLong(), 40'000'000);
  EXPECT_EQ(model.data(model.index(0, M::TableBytes), Qt::ToolTipRole).toString().toStdString(), "7.6 MiB weights + 30.5 MiB optimizer state");
  EXPECT_EQ(tradeoffs_view_text(&model, 0, M::TableBytesRatio), "83.3 %");
  EXPECT_DOUBLE_EQ(model.data(model.index(0, M::TableBytesRatio), Qt::UserRole).toDouble(), 40.0 / 48.0);
  EXPECT_EQ(tradeoffs_view_text(&model, 0, M::Loss), "0.6100");
  EXPECT_EQ(tradeoffs_view_text(&model, 0, M::LossDelta), "+0.01 (+1.67 %)");
  EXPECT_NEAR(model.data(model.index(0, M::LossDelta), Qt::UserRole).toDouble(), 0.01, 1e-12);
  EXPECT_EQ(tradeoffs_view_text(&model, 0, M::StepTime), "10.00 ms");
  EXPECT_EQ(tradeoffs_view_text(&model, 0, M::StepTimeRatio), "71.4 %");
  EXPECT_EQ(tradeoffs_view_text(&model, 0, M::MaxAbsError), "0.002");
  EXPECT_EQ(tradeoffs_view_text(&model, 0, M::RelativeError), "0.03");
  EXPECT_EQ(tradeoffs_view_text(&model, 0, M::PeakAllocated), "42.0 MiB");
  EXPECT_EQ(model.data(model.index(0, M::PeakAllocated), Qt::ToolTipRole).toString().toStdString(), "rank 0");
  EXPECT_EQ(tradeoffs_view_text(&model, 0, M::Weights), "7.6 MiB");
  EXPECT_EQ(tradeoffs_view_text(&model, 0, M::OptimizerState), "30.5 MiB");
  // held-out AUC 0.72 against fp32's 0.725
  EXPECT_EQ(model.headerData(M::HeldOutAuc, Qt::Horizontal).toString().toStdString(), "held-out\nAUC");
  // tester42 F5: +- the Hanley-McNeil SE of 16 positives and 48 negatives (0.0793 at 0.72, 0.0789
  // at 0.725; the difference's sqrt(0.0793^2 + 0.0789^2) = 0.1119, 2 SE 0.2237): within noise
  EXPECT_EQ(tradeoffs_view_text(&model, 0, M::HeldOutAuc), "0.7200 \u00b1 0.0793");
  EXPECT_EQ(model.data(model.index(0, M::HeldOutAuc), Qt::ToolTipRole).toString().toStdString(),
            "on 64 held-out samples; \u00b1 its standard error (Hanley & McNeil 1982, from the held-out set's positives "
            "and negatives)");
  EXPECT_EQ(tradeoffs_view_text(&model, 0, M::HeldOutAucDelta), "-0.0050 (within noise)");
  EXPECT_EQ(model.data(model.index(0, M::HeldOutAucDelta), Qt::ToolTipRole).toString().toStdString(),
            "-0.0050 (within noise: 2 SE = 0.2237): the held-out sample alone could make this difference");
  EXPECT_NEAR(model.data(model.index(0, M::HeldOutAucDelta), Qt::UserRole).toDouble(), -0.005, 1e-12);
  EXPECT_EQ(tradeoffs_view_text(&model, 0, M::HeldOutLoss), "0.5200");
  EXPECT_EQ(tradeoffs_view_text(&model, 1, M::HeldOutAucDelta), "reference");
  EXPECT_EQ(tradeoffs_view_text(&model, 2, M::HeldOutAuc), "-");  // AUC null: one class only
  EXPECT_FALSE(model.data(model.index(2, M::HeldOutAucDelta), Qt::UserRole).isValid());
  // the reference, in bold
  EXPECT_EQ(tradeoffs_view_text(&model, 1, M::LossDelta), "reference");
  EXPECT_TRUE(model.data(model.index(1, M::Run), Qt::FontRole).value<QFont>().bold());
  EXPECT_FALSE(model.data(model.index(0, M::Run), Qt::FontRole).isValid());
  EXPECT_EQ(model.data(model.index(1, M::PeakAllocated), Qt::ToolTipRole).toString().toStdString(), "rank 1");
  // hashing: collisions per measured step, a lower loss
  EXPECT_EQ(tradeoffs_view_text(&model, 2, M::Technique), "hash 1,000 rows (1 of 2 tables)");
  EXPECT_EQ(tradeoffs_view_text(&model, 2, M::CollisionsPerStep), "15.0");
  EXPECT_EQ(tradeoffs_view_text(&model, 2, M::LossDelta), "-0.02 (-3.33 %)");
  // the crashed run: its storage, no step figures
  EXPECT_EQ(tradeoffs_view_text(&model, 3, M::TableBytes), "22.9 MiB");
  EXPECT_EQ(tradeoffs_view_text(&model, 3, M::Loss), "-");
  EXPECT_FALSE(model.data(model.index(3, M::Loss), Qt::UserRole).isValid());
  EXPECT_EQ(tradeoffs_view_text(&model, 3, M::StepTime), "-");
  EXPECT_EQ(model.data(model.index(3, M::Run), Qt::ToolTipRole).toString().toStdString(), "the run ended crashed");
}

TEST(TradeoffsView, ChartsMemoryAgainstLossWithStepTimeAsPointSize) {
  TradeoffsView view(tradeoffs_view_sessions());
  view.resize(1200, 800);
  view.show();
  ASSERT_TRUE(wait_for_analyses(&view));
  QApplication::processEvents();
  ASSERT_EQ(view.model()->rowCount(), 4);
  QCustomPlot* plot = view.plot();
  ASSERT_EQ(plot->graphCount(), 3);  // shared has no loss
  const double mib = 1024.0 * 1024.0;
  const std::vector<std::pair<QString, std::pair<double, double>>> want = {
      {"fp16 rows", {40e6 / mib, 0.61}}, {"fp32", {48e6 / mib, 0.60}}, {"hash", {41e6 / mib, 0.58}}};
  // drawn largest first (tester42 F3: a small point on a large one stays visible): find by name
  auto graph_named = [plot](const QString& name) -> QCPGraph* {
    for (int g = 0; g < plot->graphCount(); ++g)
      if (plot->graph(g)->name() == name) return plot->graph(g);
    return nullptr;
  };
  for (const auto& [name, point] : want) {
    QCPGraph* g = graph_named(name);
    ASSERT_NE(g, nullptr) << name.toStdString();
    ASSERT_EQ(g->data()->size(), 1);
    EXPECT_DOUBLE_EQ(g->data()->at(0)->key, point.first);
    EXPECT_DOUBLE_EQ(g->data()->at(0)->value, point.second);
  }
  EXPECT_EQ(plot->graph(0)->name().toStdString(), "fp32");  // 24 px, under the others
  // step time 10 / 14 / 12 ms: 8 px for the fastest, 24 px for the slowest, 16 px half-way
  EXPECT_DOUBLE_EQ(view.point_size(0), 8);
  EXPECT_DOUBLE_EQ(view.point_size(1), 24);
  EXPECT_DOUBLE_EQ(view.point_size(2), 16);
  EXPECT_DOUBLE_EQ(graph_named("fp32")->scatterStyle().size(), 24);
  EXPECT_TRUE(view.caption()->text().contains("Not on the chart: shared (ended crashed, 0 measured steps)"))
      << view.caption()->text().toStdString();
  EXPECT_TRUE(view.caption()->text().contains("<b>fp32</b>"));
  EXPECT_TRUE(view.caption()->text().contains("the held-out AUC"));
  // the labels name the run and its step time, and do not cover each other
  std::vector<QRectF> rects;
  for (int i = 0; i < plot->itemCount(); ++i)
    if (auto* t = qobject_cast<QCPItemText*>(plot->item(i))) {
      const QFontMetricsF fm(t->font());
      rects.emplace_back(t->position->pixelPosition(), QSizeF(fm.horizontalAdvance(t->text()), fm.height()));
      if (t->text().startsWith("fp32")) {
        EXPECT_EQ(t->text().toStdString(), "fp32  14.00 ms");
      }
    }
  ASSERT_EQ(rects.size(), 3u);
  for (size_t a = 0; a < rects.size(); ++a)
    for (size_t b = a + 1; b < rects.size(); ++b) EXPECT_FALSE(rects[a].intersects(rects[b])) << a << " " << b;
  // memory as the busiest rank's peak
  view.set_memory_axis(TradeoffsView::Memory::peak_allocated);
  ASSERT_EQ(plot->graphCount(), 3);
  EXPECT_DOUBLE_EQ(graph_named("fp32")->data()->at(0)->key, 50e6 / mib);
  EXPECT_DOUBLE_EQ(view.memory_mib(3), 5e6 / mib);
}

TEST(TradeoffsView, TheScenarioViewShowsItForStorageScenariosOnly) {
  const std::vector<std::string> paths = tradeoff_fixtures::tradeoff_study();
  for (const Scenario& sc : builtin_scenarios()) {
    if (sc.id == "compression") {
      ScenarioView view(sc);
      view.resize(1280, 800);
      view.show();
      EXPECT_EQ(view.tradeoffs(), nullptr);  // nothing open yet
      ASSERT_TRUE(view.open_run_session(1, QString::fromStdString(paths[0])).isEmpty());  // "fp16 rows"
      ASSERT_TRUE(view.open_run_session(0, QString::fromStdString(paths[1])).isEmpty());  // "fp32"
      ASSERT_NE(view.tradeoffs(), nullptr);
      EXPECT_EQ(view.compare()->pages()->currentWidget(), view.tradeoffs());
      EXPECT_EQ(view.compare()->pages()->tabText(view.compare()->pages()->currentIndex()), "Trade-offs");
      ASSERT_TRUE(wait_for_analyses(&view));
      TradeoffsModel* m = view.tradeoffs()->model();
      ASSERT_EQ(m->rowCount(), 2);  // in run order, labelled as the scenario labels them
      EXPECT_EQ(m->data(m->index(0, TradeoffsModel::Run)).toString().toStdString(), "fp32");
      EXPECT_EQ(m->data(m->index(1, TradeoffsModel::Run)).toString().toStdString(), "fp16 rows");
      EXPECT_EQ(m->comparison().reference, 0u);
      EXPECT_EQ(m->data(m->index(1, TradeoffsModel::TableBytesRatio)).toString().toStdString(), "83.3 %");
      // both runs measured 3 steps: 0.51 against 0.50
      EXPECT_EQ(m->comparison().loss_steps, 3);
      EXPECT_EQ(m->data(m->index(1, TradeoffsModel::LossDelta)).toString().toStdString(), "+0.01 (+2.00 %)");
    }
    if (sc.id == "communication_storm") {
      ScenarioView view(sc);
      ASSERT_TRUE(view.open_run_session(0, QString::fromStdString(paths[1])).isEmpty());
      EXPECT_EQ(view.tradeoffs(), nullptr);
      EXPECT_EQ(view.compare()->pages()->count(), 3);
      ASSERT_TRUE(wait_for_analyses(&view));
    }
  }
}

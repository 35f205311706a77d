// carry54 left the workbench behind: `stats` and `compare` of an import of an Embedscope export say
// how the exported run ended ("source run   the exported run (...) ended crashed after 6 measured
// steps: ...; this import completed", "complete (an export of a run that ended crashed)"), while
// the Summary page and the Compare view said only the import's own "complete". They now say it in
// the same words.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QApplication>
#include <QLabel>
#include <QTabWidget>

#include <filesystem>
#include <fstream>
#include <string>

#include "embedscope/sessions/exporters/export.h"
#include "embedscope/sessions/importers/importer.h"
#include "embedscope/sessions/importers/kineto_json/kineto_json.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "shell/main_window.h"
#include "ui/support/ui_fixtures.h"
#include "views/compare_view.h"

using namespace embedscope;
using namespace embedscope::ui;

namespace {
namespace fs = std::filesystem;

fs::path c55_dir() {
  const fs::path d = fs::temp_directory_path() / ("es_carry55_" + std::to_string(getpid()));
  fs::create_directories(d);
  return d;
}

// 2 ranks, semi_sync, 7 planned steps of which it holds 0..5 (each 2 ms on rank 0, 1 ms on rank
// 1), ended `crashed` with `message`: written, exported to chrome and imported here. Returns
// {the run, its import}.
std::pair<std::string, std::string> c55_run_and_import(const std::string& message) {
  const fs::path dir = c55_dir();
  const std::string run = (dir / "run.db").string(), json = (dir / "run.json").string(), back = (dir / "back.db").string();
  {
    sessions::SessionWriter w(run, true);
    w.set_metadata(sessions::meta::kWorldSize, "2");
    w.set_metadata(sessions::meta::kSamplesPerStep, "16");
    w.set_metadata(sessions::meta::kBackend, "cpu");
    w.set_metadata(sessions::meta::kWorkloadName, "crafted");
    w.set_metadata(sessions::meta::kPipeline, "semi_sync");
    w.set_metadata(sessions::meta::kWorkloadJson, R"({"name":"crafted","pipeline":"semi_sync","steps":7})");
    for (int32_t r : {0, 1}) {
      w.add_lane({r, 0, "compute", "thread"});
      for (int64_t s = 0; s < 6; ++s) {
        const int64_t b = 20'000'000 * s, d = r == 0 ? 2'000'000 : 1'000'000;
        w.add_ops({sessions::OpEvent{r, sessions::Lane::compute, sessions::OpCategory::dense, "dense_forward_backward", s,
                                     b, b + d, 0, 0}});
        w.add_step({s, r, b, b + d, 0.5, 0, 0});
      }
    }
    w.close("crashed", message);
  }
  {
    std::ofstream out(json);
    sessions::export_chrome_trace(sessions::SessionReader(run), out);
  }
  sessions::SessionWriter w(back, true);
  sessions::importers::import_kineto_json(sessions::importers::expand_inputs({json}), w, {});
  w.close("complete");
  return {run, back};
}
}  // namespace

// The Summary page of the import: the import's own end stays "complete", and a "source run" line
// gives the exported run's end, its pipeline, planned steps and message, as `stats` does.
TEST(Carry55ExportedRun, SummaryOfTheImportSaysHowTheExportedRunEnded) {
  const auto [run, back] = c55_run_and_import("rank 1: lookup failed");
  MainWindow w;
  ASSERT_EQ(w.open_session(QString::fromStdString(back), true), QString());
  auto* views = qobject_cast<QTabWidget*>(w.tabs()->widget(0));
  ASSERT_NE(views, nullptr);
  views->setCurrentIndex(1);  // Summary, built when first shown
  ASSERT_TRUE(wait_for_analyses(views->widget(1)));
  QString said;
  for (auto* label : views->widget(1)->findChildren<QLabel*>()) said += label->text() + "\n";
  EXPECT_TRUE(said.contains("source run: the exported run (semi_sync pipeline, 7 planned steps) ended crashed after 6 "
                            "measured steps: rank 1: lookup failed; this import completed<br>"))
      << said.toStdString();
  EXPECT_TRUE(said.contains("<b>complete</b>")) << said.toStdString();  // the import's own end
}

// A session that is not such an import (the run itself) has no "source run" line.
TEST(Carry55ExportedRun, SummaryOfTheRunItselfHasNoSourceRunLine) {
  const auto [run, back] = c55_run_and_import("");
  MainWindow w;
  ASSERT_EQ(w.open_session(QString::fromStdString(run), true), QString());
  auto* views = qobject_cast<QTabWidget*>(w.tabs()->widget(0));
  ASSERT_NE(views, nullptr);
  views->setCurrentIndex(1);
  ASSERT_TRUE(wait_for_analyses(views->widget(1)));
  QString said;
  for (auto* label : views->widget(1)->findChildren<QLabel*>()) said += label->text() + "\n";
  EXPECT_FALSE(said.contains("source run")) << said.toStdString();
  EXPECT_TRUE(said.contains("<b>crashed")) << said.toStdString();
}

// The Compare view's head line of the import says "complete (an export of a run that ended
// crashed)", as `compare` does; the run's own line says "crashed".
TEST(Carry55ExportedRun, CompareHeadSaysTheImportIsAnExportOfACrashedRun) {
  const auto [run, back] = c55_run_and_import("");
  CompareView view({{"run", fixtures::open_reader(run)}, {"import", fixtures::open_reader(back)}});
  view.resize(1200, 800);
  view.show();
  ASSERT_TRUE(wait_for_analyses(&view));
  QApplication::processEvents();
  QString said;
  for (const QLabel* l : view.findChildren<QLabel*>()) said += l->text() + "\n";
  EXPECT_TRUE(said.contains("back.db: imported PyTorch profiler (Kineto) trace, complete (an export of a run that ended "
                            "crashed) on 2 ranks"))
      << said.toStdString();
  EXPECT_TRUE(said.contains("run.db: crafted, crashed on 2 ranks")) << said.toStdString();
}

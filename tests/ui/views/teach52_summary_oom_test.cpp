// tester52 F9: the Summary of an imported memory snapshot whose program ran out of memory headed
// it "complete" (the import's state) with a red "out of memory recorded" line below, where
// `stats` says "the recorded program ran out of memory: rank 0 at entry 5 of 6". The Summary
// now heads it with stats' words (sessions memory_analysis.h recorded_oom_text), and so does the
// Compare view's header (it said "complete on 1 rank" as the CLI's compare did). Fixtures:
// data/memory_snapshots: fragmented_oom_p4 (OOM at entry 5 of 6), training_p4 (none). And F11:
// embedscope-ui --help lists --screenshot with --scenario.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QLabel>

#include <filesystem>
#include <memory>
#include <string>

#include "embedscope/sessions/store/session.h"
#include "jobs/analysis_job.h"
#include "support/cli_run.h"
#include "views/compare_view.h"
#include "views/summary_view.h"

namespace {

std::filesystem::path teach52_ui_dir() {
  static const auto d = [] {
    auto p = std::filesystem::temp_directory_path() / ("es_teach52_ui_" + std::to_string(getpid()));
    std::filesystem::create_directories(p);
    return p;
  }();
  return d;
}

// The snapshot imported by the CLI into DIR/NAME.db.
std::string teach52_import(const std::string& pickle, const std::string& name) {
  const std::string db = (teach52_ui_dir() / (name + ".db")).string();
  const auto r = embedscope::test_support::run_cli(
      EMBEDSCOPE_CLI, "import " + std::string(EMBEDSCOPE_TEST_DATA) + "/memory_snapshots/" + pickle + " -o " + db + " --force-overwrite",
      teach52_ui_dir());
  EXPECT_EQ(r.code, 0) << r.err;
  return db;
}

QString teach52_summary_text(const std::string& path) {
  embedscope::ui::SummaryView view(std::make_shared<embedscope::sessions::SessionReader>(path));
  if (!embedscope::ui::wait_for_analyses(&view)) return "analysis did not end";
  auto* label = view.findChild<QLabel*>("summary_text");
  return label ? label->text() : QString("no summary_text label");
}

}  // namespace

TEST(Teach52SummaryOom, TheSummaryHeadsARecordedOomAsStatsDoes) {
  const std::string oom = teach52_import("fragmented_oom_p4.pickle", "oom");
  const auto stats = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "stats " + oom, teach52_ui_dir());
  const std::string phrase = "the recorded program ran out of memory: rank 0 at entry 5 of 6";
  ASSERT_NE(stats.out.find("(" + phrase + ";"), std::string::npos) << stats.out;
  const QString t = teach52_summary_text(oom);
  EXPECT_TRUE(t.contains(QString("<b>%1</b>").arg(QString::fromStdString(phrase)))) << t.toStdString();
  EXPECT_FALSE(t.contains("<b>complete</b>")) << t.toStdString();
  EXPECT_TRUE(t.contains("<b>out of memory</b> recorded on rank 0")) << t.toStdString();  // the red line stays
  // a snapshot without an OOM: complete, as stats says
  const QString ok = teach52_summary_text(teach52_import("training_p4.pickle", "ok"));
  EXPECT_TRUE(ok.contains("<b>complete</b>")) << ok.toStdString();
  EXPECT_FALSE(ok.contains("ran out of memory")) << ok.toStdString();
}

TEST(Teach52SummaryOom, TheCompareHeaderSaysTheSame) {
  const std::string oom = teach52_import("fragmented_oom_p4.pickle", "cmp_oom");
  const std::string ok = teach52_import("training_p4.pickle", "cmp_ok");
  embedscope::ui::CompareView view({{"A", std::make_shared<const embedscope::sessions::SessionReader>(ok)},
                                    {"B", std::make_shared<const embedscope::sessions::SessionReader>(oom)}});
  ASSERT_TRUE(embedscope::ui::wait_for_analyses(&view));
  QString head;
  for (const auto* l : view.findChildren<QLabel*>())
    if (l->text().contains("&#9632;")) head = l->text();
  EXPECT_TRUE(head.contains("cmp_oom.db: imported memory snapshot fragmented_oom_p4.pickle, the recorded program ran out of "
                            "memory: rank 0 at entry 5 of 6; 1 rank"))
      << head.toStdString();
  EXPECT_TRUE(head.contains("cmp_ok.db: imported memory snapshot training_p4.pickle, complete on 2 ranks")) << head.toStdString();
}

// tester52 F11: embedscope-ui --help did not list --screenshot with --scenario, which the error
// "--scenario needs a window; add --screenshot FILE.png" asks for.
TEST(Teach52UiHelp, TheHelpListsTheScenarioScreenshot) {
  const auto r = embedscope::test_support::run_cli(EMBEDSCOPE_UI, "--help", teach52_ui_dir());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("embedscope-ui --scenario ID|FILE.json [--scenario-sessions DIR] [--screenshot FILE.png]"),
            std::string::npos)
      << r.out;
}

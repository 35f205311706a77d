// tester43 F8: a workload file given to the workbench (argument, File > Open, drop) opens in a
// designer tab, so that `embedscope-ui tiny.json --screenshot x.png` renders the designer headless
// (it was taken for a trace: "not a format embedscope import reads", exit 2).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <QComboBox>
#include <QImage>
#include <QTabWidget>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "embedscope/engine/workload/lm_spec.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/engine/workload/spec.h"
#include "models/workload_model.h"
#include "shell/main_window.h"
#include "views/workload_designer.h"

namespace {
namespace fs = std::filesystem;

fs::path fix46_ui_dir() {
  static const fs::path d = [] {
    const auto p = fs::temp_directory_path() / ("es_fix46_ui_" + std::to_string(getpid()));
    fs::create_directories(p);
    return p;
  }();
  return d;
}

QString fix46_ui_write(const std::string& name, const nlohmann::json& j) {
  const fs::path p = fix46_ui_dir() / name;
  std::ofstream(p) << j.dump(1);
  return QString::fromStdString(p.string());
}
}  // namespace

TEST(Fix46WorkloadOpen, WorkloadFilesAreToldFromPlansScenariosAndTraces) {
  using embedscope::ui::is_workload_file;
  EXPECT_TRUE(is_workload_file(fix46_ui_write("w_tiny.json", embedscope::engine::to_json(embedscope::engine::load_preset("tiny")))));
  EXPECT_TRUE(is_workload_file(
      fix46_ui_write("w_lm.json", embedscope::engine::to_json(embedscope::engine::load_lm_preset("gpt2_small_embedding")))));
  // a plan (tables with sharding_type), a scenario (runs), a Kineto trace, a missing file: not workloads
  EXPECT_FALSE(is_workload_file(fix46_ui_write(
      "w_plan.json", {{"batch_size", 8}, {"tables", {{{"name", "t"}, {"sharding_type", "table_wise"}}}}})));
  EXPECT_FALSE(is_workload_file(fix46_ui_write("w_scn.json", {{"runs", nlohmann::json::array()}, {"tables", nlohmann::json::array()}, {"batch_size", 8}})));
  EXPECT_FALSE(is_workload_file(QString(EMBEDSCOPE_TEST_DATA) + "/traces/hta_small/rank0.json"));
  EXPECT_FALSE(is_workload_file(QString::fromStdString((fix46_ui_dir() / "absent.json").string())));
}

TEST(Fix46WorkloadOpen, OpenPathOpensADesignerOnTheFile) {
  embedscope::ui::MainWindow w;
  const QString tiny = fix46_ui_write("w_open_tiny.json", embedscope::engine::to_json(embedscope::engine::load_preset("tiny")));
  const int before = w.tabs()->count();
  ASSERT_EQ(w.open_path(tiny, true), QString());
  EXPECT_EQ(w.tabs()->count(), before + 1);
  auto* designer = qobject_cast<embedscope::ui::WorkloadDesigner*>(w.tabs()->currentWidget());
  ASSERT_NE(designer, nullptr);
  EXPECT_EQ(designer->model()->value("/name"), "tiny");
  EXPECT_EQ(designer->preset_box()->placeholderText(), "(file w_open_tiny.json)");
  // an lm_embedding workload: the designer's refusal, and no tab left behind
  const QString lm =
      fix46_ui_write("w_open_lm.json", embedscope::engine::to_json(embedscope::engine::load_lm_preset("gpt2_small_embedding")));
  const QString err = w.open_path(lm, true);
  EXPECT_TRUE(err.startsWith(lm + ": an lm_embedding workload")) << err.toStdString();
  EXPECT_EQ(w.tabs()->count(), before + 1);
}

TEST(Fix46WorkloadOpen, ScreenshotOfAWorkloadFileHeadless) {
  const QString tiny = fix46_ui_write("w_shot_tiny.json", embedscope::engine::to_json(embedscope::engine::load_preset("tiny")));
  const std::string png = (fix46_ui_dir() / "designer.png").string();
  fs::remove(png);
  const std::string cmd = "QT_QPA_PLATFORM=offscreen '" + std::string(EMBEDSCOPE_UI) + "' '" + tiny.toStdString() +
                          "' --screenshot '" + png + "' > '" + (fix46_ui_dir() / "shot.txt").string() + "' 2>&1";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  const QImage image(QString::fromStdString(png));
  EXPECT_FALSE(image.isNull());
  // without --screenshot and without a display: no report of a session, the way to render it
  const std::string out = (fix46_ui_dir() / "noshot.txt").string();
  const int rc = std::system(("QT_QPA_PLATFORM=offscreen '" + std::string(EMBEDSCOPE_UI) + "' '" + tiny.toStdString() +
                              "' > '" + out + "' 2>&1").c_str());
  ASSERT_TRUE(WIFEXITED(rc));
  EXPECT_EQ(WEXITSTATUS(rc), 2);
  std::ifstream in(out);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find(tiny.toStdString() + ": a workload: it opens in a designer, which needs a window; render it "
                      "with embedscope-ui " + tiny.toStdString() + " --screenshot FILE.png"),
            std::string::npos) << text;
}

// tester45 F12.12: a scaling study (or a workload) given to --compare was "imported" into a session
// that never came ("--compare: .../sc.db: cannot open"); it is refused saying what it is.
TEST(Fix46WorkloadOpen, CompareRefusesAScalingStudyAndAWorkloadSayingWhatTheyAre) {
  const QString study = fix46_ui_write("w_study.json", {{"batch_size_per_gpu", 8}, {"points", nlohmann::json::array()}});
  const QString tiny = fix46_ui_write("w_cmp_tiny.json", embedscope::engine::to_json(embedscope::engine::load_preset("tiny")));
  const std::string out = (fix46_ui_dir() / "cmp.txt").string(), dir = (fix46_ui_dir() / "cmp_report").string();
  auto run = [&](const QString& first) {
    const int rc = std::system(("QT_QPA_PLATFORM=offscreen '" + std::string(EMBEDSCOPE_UI) + "' --compare '" +
                                first.toStdString() + "' absent.db --report -o '" + dir + "' > '" + out + "' 2>&1")
                                   .c_str());
    std::ifstream in(out);
    return std::make_pair(WIFEXITED(rc) ? WEXITSTATUS(rc) : -1,
                          std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()));
  };
  auto [rc, text] = run(study);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(text.find("error: --compare: " + study.toStdString() +
                      ": a scaling study (embedscope scaling --json), not a session: it opens on its own page"),
            std::string::npos) << text;
  EXPECT_EQ(text.find("importing"), std::string::npos) << text;
  std::tie(rc, text) = run(tiny);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(text.find("error: --compare: " + tiny.toStdString() + ": a workload, not a session: run it"),
            std::string::npos) << text;
}

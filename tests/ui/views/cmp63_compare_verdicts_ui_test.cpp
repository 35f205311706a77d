// The workbench's Compare > Figures page says the step-time verdicts `embedscope compare` prints,
// from the same functions (sessions/analysis/compare.h): two 10-step runs 2.3x apart are told
// apart by Welch's t on the steps, not called "within noise" (tester63a F2), a dense part 2.3x
// slower in one run says the machine differed (tester63a F6), and two simulated sessions read as
// the model's exact difference, without "run the baseline twice" (tester63a F9).
#include <gtest/gtest.h>
#include <unistd.h>

#include <QLabel>

#include <filesystem>
#include <string>

#include "embedscope/sessions/model/metadata_keys.h"
#include "jobs/analysis_job.h"
#include "models/compare_model.h"
#include "views/compare_view.h"
#include "ui/support/ui_fixtures.h"

using namespace embedscope;
using namespace embedscope::ui;
using namespace embedscope::ui::fixtures;

namespace {
// One rank, 10 steps whose whole window is the dense MLP: base_ms + 1 ms on even steps, - 1 on odd.
std::string cmp63_session(const std::string& name, int64_t base_ms, const std::string& sharding, bool simulated,
                          const std::string& other_runnable) {
  const auto path = std::filesystem::temp_directory_path() / (name + "_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  sessions::SessionWriter w(path.string());
  w.set_metadata(sessions::meta::kWorldSize, "1");
  w.set_metadata(sessions::meta::kBackend, simulated ? "simulated" : "cpu");
  w.set_metadata(sessions::meta::kSimulated, simulated ? "1" : "0");
  w.set_metadata(sessions::meta::kWorkloadName, "hand");
  w.set_metadata(sessions::meta::kWorkloadJson,
                 R"({"name": "hand", "batch_size": 8, "sharding": {"default": ")" + sharding + R"("}})");
  w.set_metadata(sessions::meta::kCpuOtherRunnable, other_runnable);
  w.set_metadata("samples_per_step", "8");
  w.add_lane({0, 0, "compute", "thread"});
  int64_t t = 0;
  for (int s = 0; s < 10; ++s) {
    const int64_t ns = (base_ms + (simulated ? 0 : s % 2 ? -1 : 1)) * 1'000'000;
    sessions::OpEvent o;
    o.category = sessions::OpCategory::dense;
    o.name = "dense_forward_backward";
    o.step = s;
    o.start_ns = t;
    o.end_ns = t + ns;
    w.add_ops({o});
    w.add_step({s, 0, t, t + ns, 0.5, 0, 0});
    t += ns;
  }
  w.close("complete");
  return path.string();
}

QString cmp63_noise_text(CompareView& view) {
  for (const auto* l : view.findChildren<QLabel*>())
    if (l->objectName() == "compare_run_to_run_noise") return l->text();
  return {};
}
}  // namespace

// A: 101/99 ms a step (mean 100, sd sqrt(10 / 9) ms, lag-1 -0.9); B: 231/229 (mean 230): Welch's
// t 130 / sqrt(2 x 10 / 90) = 275.77, df 18 (2.101); the dense part (the whole step) 2.30x.
TEST(Cmp63CompareUi, TheFiguresPageSaysTheStepVerdictAndThatTheMachineDiffered) {
  auto a = open_reader(cmp63_session("es_cmp63_tw", 100, "table_wise", false, "5.049"));
  auto b = open_reader(cmp63_session("es_cmp63_rw", 230, "row_wise", false, "13.033"));
  CompareView view({{"A", a}, {"B", b}});
  ASSERT_TRUE(wait_for_analyses(&view));
  const QString text = cmp63_noise_text(view);
  EXPECT_TRUE(text.contains("step times B vs A (Welch's t on the steps, 95 %; lag-1 autocorrelation -0.90 and -0.90, "
                            "within +-0.62): +130.00 ms (+130.0 %), t 275.77, df 18.0, critical 2.101: they differ"))
      << text.toStdString();
  EXPECT_TRUE(text.contains("the machine differed between the runs: the dense part (the same MLPs on the same batch, "
                            "which no sharding changes) took 2.30x as long a step in B (B 230.00 ms, A 100.00 ms per "
                            "rank and step"))
      << text.toStdString();
  EXPECT_TRUE(text.contains("other processes' runnable threads 13.033 in B vs 5.049 in A")) << text.toStdString();
  const auto* m = view.model();
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->data(m->index(CompareModel::StepMean, 3)).toString(), "+130.00 ms (+130.0 %)");
}

// Two simulated sessions, 200 and 210 ms every step: the model's difference, exact; no t, no advice
// to run the baseline twice.
TEST(Cmp63CompareUi, SimulatedSessionsReadAsTheModelsExactDifference) {
  auto a = open_reader(cmp63_session("es_cmp63_stw", 200, "table_wise", true, "0"));
  auto b = open_reader(cmp63_session("es_cmp63_srw", 210, "row_wise", true, "0"));
  CompareView view({{"A", a}, {"B", b}});
  ASSERT_TRUE(wait_for_analyses(&view));
  const QString text = cmp63_noise_text(view);
  EXPECT_TRUE(text.contains("run-to-run noise: none (every session is simulated")) << text.toStdString();
  EXPECT_TRUE(text.contains("step times B vs A: both simulated: +10.00 ms (+5.0 %) is the cost model's difference, "
                            "exact"))
      << text.toStdString();
  EXPECT_FALSE(text.contains("twice")) << text.toStdString();
  EXPECT_FALSE(text.contains("inf")) << text.toStdString();
  EXPECT_FALSE(text.contains("machine differed")) << text.toStdString();
  const auto* m = view.model();
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->data(m->index(CompareModel::StepMean, 3)).toString(), "+10.00 ms (+5.0 %), exact (simulated)");
}

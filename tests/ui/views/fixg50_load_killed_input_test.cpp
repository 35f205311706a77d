// retest49 R6: the Load page of a killed run regenerated the input statistics of its planned steps
// ("the first 1775 of the 6000 batches of the 3000 measured steps" for a session of 346): the
// batches of the measured steps the session holds are counted now, and the caption says so. A
// complete run's caption and figures are as they were.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QLabel>
#include <QString>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "core/input_figures.h"
#include "embedscope/engine/input/input_stats.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/engine/workload/spec.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "jobs/analysis_job.h"
#include "models/input_stats_model.h"
#include "views/load_view.h"

namespace {

namespace fs = std::filesystem;
using embedscope::sessions::SessionReader;
using embedscope::sessions::SessionWriter;

// The tiny preset (2 ranks, 8 samples a rank, 30 planned steps, no warm-up) in a session that
// ended `ended` holding measured steps 0..measured-1 (step rows and load counters of table t_a).
std::string g50k_session(const std::string& name, const std::string& ended, int measured) {
  const fs::path path = fs::temp_directory_path() / ("es_fixg50_input_" + name + "_" + std::to_string(getpid()) + ".db");
  fs::remove(path);
  SessionWriter w(path.string());
  w.set_metadata("world_size", "2");
  w.set_metadata(embedscope::sessions::meta::kWorkloadJson, embedscope::engine::preset_json("tiny"));
  for (int s = 0; s < measured; ++s)
    for (int r = 0; r < 2; ++r) {
      embedscope::sessions::LoadCounter c;
      c.step = s;
      c.rank = r;
      c.table = 1;
      c.ids = 16;
      w.add_step_records({s, r, 1'000'000 * (s + 1), 1'000'000 * (s + 2), 0.6, 0, 0}, {c}, {});
    }
  w.close(ended, ended == "complete" ? "" : "killed by the test");
  return path.string();
}

// The figures of `steps` measured steps of the tiny preset, counted by the engine (the reference).
embedscope::engine::InputInspection g50k_reference(int64_t steps) {
  auto spec = embedscope::engine::parse_workload(nlohmann::json::parse(embedscope::engine::preset_json("tiny")), "tiny");
  spec.steps = steps;
  return embedscope::engine::inspect_input(spec, -1, true);
}

}  // namespace

// A run killed after 3 of its 30 steps: 3 steps x 2 ranks = 6 batches, 48 samples; f_small (one
// id a bag) 48 ids, f_a (two a bag) 96 - not the 60 batches of the 30 planned steps.
TEST(Fixg50LoadKilledInput, TheBatchesOfTheStepsTheSessionHolds) {
  const std::string path = g50k_session("killed", "crashed", 3);
  const auto f = embedscope::ui::input_figures(SessionReader(path));
  ASSERT_TRUE(f.unavailable.empty()) << f.unavailable;
  EXPECT_EQ(f.inspection.batches, 6);
  EXPECT_EQ(f.inspection.run_batches, 6);
  EXPECT_EQ(f.inspection.samples, 48);
  EXPECT_EQ(f.source, "synthetic input (seed 1), regenerated: the 6 batches of the 3 measured steps the session holds "
                      "(the run ended crashed; 30 were planned), 48 samples");
  // on the page: the model holds the same figures, the note the same caption
  embedscope::ui::LoadView view(std::make_shared<const SessionReader>(path));
  ASSERT_TRUE(embedscope::ui::wait_for_analyses(&view));
  EXPECT_EQ(view.input_note()->text().toStdString(), "input per feature (as embedscope inspect-input counts it) - " + f.source);
  const auto ref = g50k_reference(3);
  const auto& shown = view.input_model()->features();
  ASSERT_EQ(shown.size(), 5u);
  ASSERT_EQ(ref.features.size(), 5u);
  EXPECT_EQ(shown[0].feature, "f_small");
  EXPECT_EQ(shown[0].ids, 48);
  EXPECT_EQ(shown[1].ids, 96);  // f_a: 2 ids a bag
  EXPECT_EQ(shown[4].ids, 96);  // f_c: 2 ids a bag
  for (size_t i = 0; i < shown.size(); ++i) {
    EXPECT_EQ(shown[i].bags, 48) << shown[i].feature;
    EXPECT_EQ(shown[i].ids, ref.features[i].ids) << shown[i].feature;
    EXPECT_EQ(shown[i].distinct_ids, ref.features[i].distinct_ids) << shown[i].feature;
  }
  fs::remove(path);
}

// A complete run: its 30 planned steps' 60 batches, the caption as before; a run cancelled in
// its last step holds every planned step: the same figures and caption.
TEST(Fixg50LoadKilledInput, ACompleteRunCountsItsPlannedSteps) {
  for (const char* ended : {"complete", "cancelled"}) {
    SCOPED_TRACE(ended);
    const std::string path = g50k_session(std::string("all_") + ended, ended, 30);
    const auto f = embedscope::ui::input_figures(SessionReader(path));
    ASSERT_TRUE(f.unavailable.empty()) << f.unavailable;
    EXPECT_EQ(f.inspection.batches, 60);
    EXPECT_EQ(f.inspection.samples, 480);
    EXPECT_EQ(f.source, "synthetic input (seed 1), regenerated: the 60 batches of the 30 measured steps, 480 samples");
    EXPECT_EQ(f.inspection.features.at(0).ids, 480);
    fs::remove(path);
  }
}

// No measured step (the 0-step case of tester49 F15, asked directly): no figures, said why.
TEST(Fixg50LoadKilledInput, NoMeasuredStepCountsNothing) {
  const std::string path = g50k_session("none", "crashed", 0);
  const auto f = embedscope::ui::input_figures(SessionReader(path));
  EXPECT_EQ(f.unavailable, "no measured step (the run ended crashed before its first measured step): no batch of the "
                           "workload's input was trained on");
  EXPECT_EQ(f.inspection.batches, 0);
  fs::remove(path);
}

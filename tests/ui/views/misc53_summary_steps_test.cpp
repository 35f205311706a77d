// misc53 (tester53 F10): (a) the workbench's Summary of a session whose ranks hold different steps
// (a merged launch with a killed rank) left out the note `embedscope stats` prints under its
// figures; it shows the same sentence now, from the same function
// (sessions::unequal_rank_steps_note). (b) The Load page's input caption read "(the 2 warm-up
// steps' left out, as above)", a stray apostrophe.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QLabel>

#include <filesystem>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "core/input_figures.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/engine/workload/spec.h"
#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "jobs/analysis_job.h"
#include "views/summary_view.h"

namespace {
namespace fs = std::filesystem;

// 3 ranks of a crashed merged launch: rank 1 holds steps 0-2, ranks 0 and 2 steps 0-4 (1 ms each)
std::string misc53_unequal_session() {
  const fs::path p = fs::temp_directory_path() / ("es_misc53_uneq_" + std::to_string(getpid()) + ".db");
  fs::remove(p);
  embedscope::sessions::SessionWriter w(p.string());
  w.set_metadata(embedscope::sessions::meta::kWorldSize, "3");
  w.set_metadata(embedscope::sessions::meta::kSamplesPerStep, "12");
  for (int32_t r = 0; r < 3; ++r)
    for (int64_t s = 0; s < (r == 1 ? 3 : 5); ++s) {
      const int64_t t0 = 1000000 * s;
      w.add_step_records({s, r, t0, t0 + 500000, 0.5, 0, 0}, {{s, r, 0, r, 10, 0, 0, 0, 100}}, {});
    }
  w.close("crashed", "rank 1 was killed by signal 9 (Killed) (seen by launch)");
  return p.string();
}

QString misc53_summary_text(const std::string& path) {
  embedscope::ui::SummaryView view(std::make_shared<embedscope::sessions::SessionReader>(path));
  if (!embedscope::ui::wait_for_analyses(&view)) return "analysis did not end";
  auto* label = view.findChild<QLabel*>("summary_text");
  return label ? label->text() : QString("no summary_text label");
}
}  // namespace

TEST(Misc53SummarySteps, TheSummarySaysTheRanksHoldDifferentStepsAsStatsDoes) {
  const std::string db = misc53_unequal_session();
  const auto st = embedscope::sessions::analyze(embedscope::sessions::SessionReader(db));
  const std::string note = embedscope::sessions::unequal_rank_steps_note(st);
  // stats' line is "steps" and this sentence
  EXPECT_EQ(embedscope::sessions::unequal_rank_steps_text(st), "steps        " + note + "\n");
  EXPECT_EQ(note,
            "the ranks hold different steps (a rank stopped early; a killed process loses the steps it had not "
            "committed): rank 1 3 steps (through step 2); ranks 0, 2 5 steps (through step 4). The imbalance is over "
            "the steps through step 2, which every rank holds; each rank's row sums its own steps, and the per-step "
            "figures divide by the 5 counted steps");
  const QString t = misc53_summary_text(db);
  EXPECT_TRUE(t.contains(QString::fromStdString(note).toHtmlEscaped())) << t.toStdString();
  fs::remove(db);

  // a session whose ranks hold the same steps says nothing of it
  const fs::path even = fs::temp_directory_path() / ("es_misc53_even_" + std::to_string(getpid()) + ".db");
  fs::remove(even);
  {
    embedscope::sessions::SessionWriter w(even.string());
    w.set_metadata(embedscope::sessions::meta::kWorldSize, "2");
    w.set_metadata(embedscope::sessions::meta::kSamplesPerStep, "8");
    for (int32_t r = 0; r < 2; ++r)
      for (int64_t s = 0; s < 4; ++s)
        w.add_step_records({s, r, 1000000 * s, 1000000 * s + 500000, 0.5, 0, 0}, {{s, r, 0, r, 10, 0, 0, 0, 100}}, {});
    w.close("complete");
  }
  const QString e = misc53_summary_text(even.string());
  EXPECT_FALSE(e.contains("different steps")) << e.toStdString();
  EXPECT_TRUE(e.contains("4 measured steps")) << e.toStdString();
  fs::remove(even);
}

TEST(Misc53SummarySteps, TheLoadCaptionSaysTheWarmUpStepsAreLeftOut) {
  for (const int warmup : {1, 2}) {
    embedscope::engine::WorkloadSpec spec =
        embedscope::engine::parse_workload(nlohmann::json::parse(embedscope::engine::preset_json("tiny")), "tiny");
    spec.warmup_steps = warmup;
    spec.steps = 3;
    const fs::path path = fs::temp_directory_path() / ("es_misc53_input_" + std::to_string(getpid()) + ".db");
    fs::remove(path);
    {
      embedscope::sessions::SessionWriter w(path.string());
      w.set_metadata("workload_json", embedscope::engine::to_json(spec).dump());
      w.close("complete");
    }
    const embedscope::ui::InputFigures f = embedscope::ui::input_figures(embedscope::sessions::SessionReader(path.string()));
    fs::remove(path);
    ASSERT_TRUE(f.unavailable.empty()) << f.unavailable;
    const std::string said = warmup == 1 ? "(the warm-up step is left out, as above)"
                                         : "(the 2 warm-up steps are left out, as above)";
    EXPECT_NE(f.source.find(said), std::string::npos) << f.source;
    EXPECT_EQ(f.source.find("'"), std::string::npos) << f.source;  // no stray apostrophe
  }
}

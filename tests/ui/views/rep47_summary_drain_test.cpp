// tester46 F21 (rest): the workbench's Summary said nothing of a pipelined run's drain steps,
// which `stats` leaves out of its figures and says so; it says the same line now.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QLabel>

#include <filesystem>
#include <memory>
#include <string>

#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "jobs/analysis_job.h"
#include "views/summary_view.h"

namespace {

// One rank, `pipeline`, 6 measured steps of 100 ns (the last two 40 ns), a dense op in each.
std::string rep47_summary_session(const std::string& pipeline) {
  const auto p = std::filesystem::temp_directory_path() / ("es_rep47_sum_" + pipeline + "_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(p);
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

QString rep47_summary_text(const std::string& path) {
  embedscope::ui::SummaryView view(std::make_shared<embedscope::sessions::SessionReader>(path));
  if (!embedscope::ui::wait_for_analyses(&view)) return "analysis did not end";
  auto* label = view.findChild<QLabel*>("summary_text");
  return label ? label->text() : QString("no summary_text label");
}

}  // namespace

TEST(Rep47SummaryDrain, TheSummarySaysWhichStepsDrainThePipeline) {
  const std::string semi = rep47_summary_session("semi_sync");
  const QString t = rep47_summary_text(semi);
  EXPECT_TRUE(t.contains("(steps 4-5 drain the semi_sync pipeline: recorded, not in the step times, throughput, overlap, "
                         "exposed communication, critical path or collective times; 4 of 6 measured steps counted)"))
      << t.toStdString();
  std::filesystem::remove(semi);
  const std::string base = rep47_summary_session("base");
  EXPECT_FALSE(rep47_summary_text(base).contains("drain")) << rep47_summary_text(base).toStdString();
  std::filesystem::remove(base);
}

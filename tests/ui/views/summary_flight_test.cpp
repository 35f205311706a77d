// The summary page of a hung run (issue 18): the flight recorder's finding in red under the
// run's figures, naming both ranks, groups and sequence numbers; no such paragraph without dumps.
#include <gtest/gtest.h>

#include <QApplication>
#include <QLabel>
#include <QtTest/QtTest>

#include <unistd.h>

#include <filesystem>

#include "jobs/analysis_job.h"
#include "views/summary_view.h"

using namespace embedscope;
using namespace embedscope::ui;

namespace {
// Two ranks, one measured step; with `dumps`, each rank's ring as the two groups entered in
// opposite orders left it: rank 0 waits in a#2, rank 1 in b#2, each having completed a#1, b#1.
std::string summary_flight_session(const char* file, bool dumps) {
  const auto path = std::filesystem::temp_directory_path() / (std::to_string(getpid()) + file);
  std::filesystem::remove(path);
  sessions::SessionWriter w(path.string());
  w.set_metadata("world_size", "2");
  w.set_metadata("workload_name", "opposite");
  for (int r = 0; r < 2; ++r) {
    w.add_lane({r, 0, "compute", "thread"});
    w.add_step({0, r, 0, 1'000'000, 0.5, 0, 0});
  }
  w.add_ops({{0, sessions::Lane::compute, sessions::OpCategory::lookup, "lookup", 0, 100'000, 200'000, 0, 0}});
  if (dumps) {
    std::vector<sessions::FlightRecord> recs;
    for (int r = 0; r < 2; ++r) {
      const char* waits_group = r == 0 ? "a" : "b";
      int64_t id = 0;
      for (const char* g : {"a", "b", waits_group}) {
        sessions::FlightRecord e;
        e.rank = r;
        e.reason = "collective timeout";
        e.record_id = id++;
        e.group = g;
        e.members = "0,1";
        e.sequence = id == 3 ? 2 : 1;
        e.op = "all_reduce";
        e.name = id == 3 ? std::string("grad_") + g : std::string("warm_") + g;
        e.dtype = "float32";
        e.state = id == 3 ? "started" : "completed";
        recs.push_back(e);
      }
    }
    w.add_flight_records(recs);
  }
  w.close(dumps ? "hang" : "complete");
  return path.string();
}

QLabel* flight_label(SummaryView& view) { return view.findChild<QLabel*>("flight_recorder"); }
}  // namespace

TEST(SummaryFlightRecorder, AHungRunShowsWhichRanksWaitForEachOtherInWhichGroups) {
  SummaryView view(std::make_shared<sessions::SessionReader>(summary_flight_session("_summary_fr.db", true)));
  QTRY_VERIFY_WITH_TIMEOUT(!view.job()->busy(), 20000);
  QLabel* label = flight_label(view);
  ASSERT_NE(label, nullptr);
  const QString t = label->text();
  EXPECT_TRUE(t.contains("collective timeout")) << t.toStdString();
  EXPECT_TRUE(t.contains("ranks 0 and 1 entered process groups a and b in opposite orders: rank 0 waits in all_reduce "
                         "&#x27;grad_a&#x27; (group a, sequence 2) and has not reached group b&#x27;s sequence 2") ||
              t.contains("ranks 0 and 1 entered process groups a and b in opposite orders: rank 0 waits in all_reduce "
                         "'grad_a' (group a, sequence 2) and has not reached group b's sequence 2"))
      << t.toStdString();
  EXPECT_TRUE(t.contains("color:#d01010")) << t.toStdString();
  EXPECT_TRUE(t.contains("rank 1 in all_reduce")) << t.toStdString();
}

TEST(SummaryFlightRecorder, ARunWithoutDumpsHasNoFlightRecorderParagraph) {
  SummaryView view(std::make_shared<sessions::SessionReader>(summary_flight_session("_summary_nofr.db", false)));
  QTRY_VERIFY_WITH_TIMEOUT(!view.job()->busy(), 20000);
  EXPECT_EQ(flight_label(view), nullptr);
}

// Tester35 D13: an empty critical-path or collectives table says why instead of showing bare
// headers: "none in the measured steps" beside a measured step, "no measured step" for a run that
// ended in its warm-up (an OOM there).
TEST(SummaryFlightRecorder, EmptyTablesSayWhyInsteadOfShowingBareHeaders) {
  SummaryView measured(std::make_shared<sessions::SessionReader>(summary_flight_session("_summary_nocoll.db", false)));
  QTRY_VERIFY_WITH_TIMEOUT(!measured.job()->busy(), 20000);
  auto caption = [](SummaryView& v, const char* name) {
    auto* l = v.findChild<QLabel*>(name);
    return l ? l->text().toStdString() : std::string("(no caption)");
  };
  EXPECT_EQ(caption(measured, "critical_path_caption").find("<i>none"), std::string::npos);
  EXPECT_NE(caption(measured, "collectives_caption").find("<i>none in the measured steps</i>"), std::string::npos)
      << caption(measured, "collectives_caption");

  const auto path = std::filesystem::temp_directory_path() / (std::to_string(getpid()) + "_summary_warmup_oom.db");
  std::filesystem::remove(path);
  {
    sessions::SessionWriter w(path.string());
    w.set_metadata("world_size", "1");
    w.add_lane({0, 0, "compute", "thread"});
    w.close("oom", "rank 0: out of memory in warm-up step -2");
  }
  SummaryView oom(std::make_shared<sessions::SessionReader>(path.string()));
  QTRY_VERIFY_WITH_TIMEOUT(!oom.job()->busy(), 20000);
  for (const char* name : {"critical_path_caption", "collectives_caption"})
    EXPECT_NE(caption(oom, name).find("<i>none: the session has no measured step</i>"), std::string::npos)
        << name << ": " << caption(oom, name);
}

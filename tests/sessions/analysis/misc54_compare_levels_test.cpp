// misc54 (tester54 F5, F7): compare computes no difference between figures of two levels (GPU
// streams against host threads), its "not the same measure" note says when no row compares them
// like for like; RunStats::slowest_step is the step whose slowest rank's own step time is `stats`'
// max, not the widest window across ranks. Hand-made sessions and RunStats, figures by hand.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/analysis/compare.h"
#include "embedscope/sessions/store/session.h"

namespace {
namespace ss = embedscope::sessions;
using ss::CompareFigure;

std::string misc54_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("es_misc54_" + name + "_" + std::to_string(getpid()) + ".db"))
      .string();
}

// A session of 2 ranks whose step windows (us) are offset: `windows[step][rank]` = {start, end}.
std::string offset_steps_session(const std::string& path, const std::vector<std::vector<std::pair<int64_t, int64_t>>>& windows,
                                 const std::string& pipeline = "") {
  std::filesystem::remove(path);
  ss::SessionWriter w(path);
  w.set_metadata("world_size", "2");
  if (!pipeline.empty()) w.set_metadata("pipeline", pipeline);
  for (int r = 0; r < 2; ++r) w.add_lane({r, 0, "compute", "thread"});
  for (size_t step = 0; step < windows.size(); ++step)
    for (int r = 0; r < 2; ++r) {
      const auto [s, e] = windows[step][static_cast<size_t>(r)];
      w.add_step({static_cast<int64_t>(step), r, s * 1000, e * 1000, 0.5, 0, 0});
      w.add_ops({{r, ss::Lane::compute, ss::OpCategory::lookup, "lookup", static_cast<int64_t>(step), s * 1000,
                  s * 1000 + 10'000, 0, 0}});
    }
  w.close("complete");
  return path;
}

// The cpu / trace / cuda shapes of compare's sessions as RunStats (compare_test.cpp's way).
ss::ComparedSession cpu_session(int64_t exposed_ns) {
  ss::ComparedSession s;
  s.stats.steps = 2;
  s.stats.exposed_comm_ns = exposed_ns;
  s.stats.overlap_pct = 10;
  s.rate = {100, "samples"};
  return s;
}
ss::ComparedSession trace_session(int64_t exposed_ns) {
  ss::ComparedSession s = cpu_session(exposed_ns);
  s.imported = true;
  s.rate = {0, ""};
  s.stats.stream_ranks = true;
  s.stats.overlap_pct = 40;
  s.stats.ranks.push_back({});
  s.stats.ranks.back().window_ns = 1000;
  s.stats.ranks.back().gpu_busy_pct = 12.5;
  return s;
}
ss::ComparedSession cuda_session(int64_t exposed_ns, int64_t host_exposed_ns) {
  ss::ComparedSession s = trace_session(exposed_ns);
  s.imported = false;
  s.rate = {100, "samples"};
  s.stats.ranks.back().host_exposed_comm_ns = host_exposed_ns;
  return s;
}
}  // namespace

// stats' max is per step the slowest rank's own step time: step 0's ranks take 100 us each in an
// offset window 150 us wide, step 1's slowest takes 120 us in a window 120 us wide. stats says
// max 120 us: step 1 is the slowest, not step 0 (the widest window, which the report took).
TEST(Misc54SlowestStep, IsTheStepOfTheSlowestRanksOwnStepTime) {
  const std::string path = offset_steps_session(misc54_path("offset"), {{{0, 100}, {50, 150}}, {{200, 320}, {200, 310}}});
  const ss::RunStats st = ss::analyze(ss::SessionReader(path));
  EXPECT_EQ(st.step_time_ns.max, 120'000);
  ASSERT_TRUE(st.slowest_step.has_value());
  EXPECT_EQ(*st.slowest_step, 1);
  EXPECT_EQ(ss::analyze_step_times(ss::SessionReader(path)).slowest_step, std::optional<int64_t>(1));
  // a tie: the lower step
  offset_steps_session(path, {{{0, 100}, {0, 90}}, {{100, 200}, {120, 150}}});
  EXPECT_EQ(ss::analyze_step_times(ss::SessionReader(path)).slowest_step, std::optional<int64_t>(0));
  std::filesystem::remove(path);
}

// A drain step is left out of stats' step times, so it is never the slowest: sparse_dist's last
// step (1 drain step of a complete run), 500 us, is longer than any counted one.
TEST(Misc54SlowestStep, LeavesThePipelinesDrainStepsOut) {
  const std::string path = offset_steps_session(
      misc54_path("drain"), {{{0, 100}, {0, 100}}, {{100, 230}, {100, 200}}, {{230, 730}, {230, 300}}}, "sparse_dist");
  const ss::RunStats st = ss::analyze_step_times(ss::SessionReader(path));
  EXPECT_EQ(st.drain_steps, 1);
  EXPECT_EQ(st.step_time_ns.max, 130'000);
  EXPECT_EQ(st.slowest_step, std::optional<int64_t>(1));
  // no measured step: none
  offset_steps_session(path, {});
  EXPECT_FALSE(ss::analyze_step_times(ss::SessionReader(path)).slowest_step.has_value());
  std::filesystem::remove(path);
}

// A cpu run (host threads) against an imported trace (GPU streams): exposed communication and
// overlap are printed, their difference is not computed; the step times still are.
TEST(Misc54CompareLevels, StreamsAgainstThreadsAreNotComparable) {
  const auto cpu = cpu_session(600'000), trace = trace_session(200'000);
  EXPECT_EQ(ss::compare_cell_text(cpu, CompareFigure::ExposedComm), "300.0 us");
  EXPECT_EQ(ss::compare_cell_text(trace, CompareFigure::ExposedComm), "100.0 us");
  for (const auto f : {CompareFigure::ExposedComm, CompareFigure::Overlap}) {
    const ss::CompareDelta d = ss::compare_delta(cpu, trace, f);
    EXPECT_FALSE(d.diff.has_value()) << ss::compare_figure_name(f);
    EXPECT_FALSE(d.percent.has_value()) << ss::compare_figure_name(f);
    EXPECT_EQ(d.not_comparable, "GPU streams vs host threads");
    EXPECT_EQ(d.text, "not comparable (GPU streams vs host threads)");
    EXPECT_EQ(ss::compare_delta(trace, cpu, f).text, "not comparable (host threads vs GPU streams)");
  }
  EXPECT_EQ(ss::figure_level(cpu, CompareFigure::Overlap), "host threads");
  EXPECT_EQ(ss::figure_level(trace, CompareFigure::ExposedComm), "GPU streams");
  EXPECT_EQ(ss::figure_level(trace, CompareFigure::StepMean), "");
  // the same level: differences as before (two traces; two cpu runs)
  EXPECT_EQ(ss::compare_delta(trace, trace_session(400'000), CompareFigure::ExposedComm).text, "+100.0 us (+100.0 %)");
  EXPECT_EQ(ss::compare_delta(cpu, cpu_session(300'000), CompareFigure::ExposedComm).text, "-150.0 us (-50.0 %)");
  // figures of one measure in every session keep their difference
  EXPECT_EQ(ss::compare_delta(cpu, trace, CompareFigure::StepMean).not_comparable, "");
  EXPECT_EQ(ss::compare_delta(cpu, trace, CompareFigure::HostExposedComm).text, "-");  // the trace has none
  // a cuda run's host threads against a cpu run's: like for like (300 -> 200 us a step)
  const auto cuda = cuda_session(100'000, 400'000);
  EXPECT_EQ(ss::compare_delta(cpu, cuda, CompareFigure::HostExposedComm).text, "-100.0 us (-33.3 %)");
  EXPECT_EQ(ss::compare_delta(cpu, cuda, CompareFigure::ExposedComm).text, "not comparable (GPU streams vs host threads)");
  // a simulation's ranks against a cpu run's threads: compared, as before
  auto sim = cpu_session(300'000);
  sim.stats.simulated = true;
  EXPECT_EQ(ss::figure_level(sim, CompareFigure::ExposedComm), "simulated ranks");
  EXPECT_EQ(ss::compare_delta(cpu, sim, CompareFigure::ExposedComm).text, "-150.0 us (-50.0 %)");
  EXPECT_EQ(ss::compare_delta(sim, trace, CompareFigure::Overlap).text, "not comparable (GPU streams vs simulated ranks)");
}

// The note names the host-threads row only where it compares something: a cuda run fills it, an
// imported trace does not (tester54 F5: the note sent the reader to a row of "-").
TEST(Misc54CompareLevels, TheNoteSaysWhenNoRowComparesLikeForLike) {
  const auto cpu = cpu_session(600'000), trace = trace_session(200'000), cuda = cuda_session(100'000, 400'000);
  const std::string lead =
      "not the same measure: the communication, overlap and idle figures of B are its GPU streams' (kernels and "
      "copies), those of A its host threads' spans; differences between GPU-stream figures and the others are not computed (not comparable); ";
  EXPECT_EQ(ss::measure_note({cpu, cuda}, {"A", "B"}),
            lead + "the row 'exposed communication, host threads' compares the host threads of all");
  EXPECT_EQ(ss::measure_note({cpu, trace}, {"A", "B"}),
            lead + "no row compares B like for like with A: B has no host-thread figures (an imported trace's "
                   "host threads are not analysed; the row 'exposed communication, host threads' is - for it)");
  EXPECT_EQ(ss::measure_note({cpu, trace, cuda, trace}, {"A", "B", "C", "D"}),
            "not the same measure: the communication, overlap and idle figures of B, C, D are its GPU streams' (kernels "
            "and copies), those of A its host threads' spans; differences between GPU-stream figures and the others are not computed (not "
            "comparable); no row compares B, D like for like with A: B, D have no host-thread figures (an "
            "imported trace's host threads are not analysed; the row 'exposed communication, host threads' is - for "
            "them); that row compares the host threads of A, C");
  EXPECT_EQ(ss::measure_note({cpu, cpu_session(1)}, {"A", "B"}), "");  // one level
  EXPECT_EQ(ss::measure_note({trace, trace}, {"A", "B"}), "");
}

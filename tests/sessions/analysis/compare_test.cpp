// The comparison's figures (sessions/analysis/compare.h: `embedscope compare` and the workbench's
// Compare view print them both), a GPU run's busy / host figures (gpu_run.h) and how a run ended
// (run_end.h): ux41 #2, #6, #9. Hand-made sessions (support/gpu_run_session.h) and RunStats.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/analysis/compare.h"
#include "embedscope/sessions/analysis/gpu_run.h"
#include "embedscope/sessions/analysis/run_end.h"
#include "embedscope/sessions/model/held_out_key.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "support/gpu_run_session.h"

namespace {
namespace ss = embedscope::sessions;
using ss::CompareFigure;

std::string ux41_scratch(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("es_ux41_" + name + "_" + std::to_string(getpid()) + ".db")).string();
}

ss::ComparedSession ux41_compared(const std::string& path) {
  const ss::SessionReader r(path);
  ss::RunStats st = ss::analyze(r);
  const double rate = st.samples_per_s;
  return {std::move(st), {rate, "samples"}, false};
}
}  // namespace

// A: the default shape (host exposed 400 and 200 us, GPU busy 20 and 40 %); B: the host waits
// 200 and 100 us, rank 1's gemm runs 600 us (busy 60 %).
TEST(Ux41Compare, GpuRunsCompareTheirHostThreadsAndGpuBusyBesideTheStreams) {
  const std::string a_path = embedscope::test_support::gpu_run_session(ux41_scratch("a"));
  const std::string b_path = embedscope::test_support::gpu_run_session(ux41_scratch("b"), {800, 600, 600});
  const auto a = ux41_compared(a_path), b = ux41_compared(b_path);
  const auto g = ss::gpu_busy_figures(a.stats);
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->ranks, 2);
  EXPECT_DOUBLE_EQ(g->mean_pct, 30.0);
  EXPECT_EQ(g->least_rank, 0);
  EXPECT_DOUBLE_EQ(g->least_pct, 20.0);
  EXPECT_EQ(g->most_rank, 1);
  EXPECT_EQ(g->host_exposed_comm_ns, 300'000);  // (400 + 200) / 2 us
  // the streams' exposed communication: rank 0's copy [200, 300) us under nothing, rank 1 none
  EXPECT_DOUBLE_EQ(*ss::compare_value(a, CompareFigure::ExposedComm), 50'000);
  EXPECT_DOUBLE_EQ(*ss::compare_value(a, CompareFigure::HostExposedComm), 300'000);
  EXPECT_DOUBLE_EQ(*ss::compare_value(b, CompareFigure::HostExposedComm), 150'000);
  EXPECT_DOUBLE_EQ(*ss::compare_value(b, CompareFigure::GpuBusy), 40.0);  // (20 + 60) / 2
  EXPECT_DOUBLE_EQ(*ss::compare_value(a, CompareFigure::Throughput), 8000);
  EXPECT_EQ(ss::compare_cell_text(a, CompareFigure::HostExposedComm), "300.0 us");
  EXPECT_EQ(ss::compare_cell_text(a, CompareFigure::GpuBusy), "30.0 %");
  EXPECT_EQ(ss::compare_cell_text(a, CompareFigure::Throughput), "8000 samples/s");
  EXPECT_EQ(ss::compare_delta(a, b, CompareFigure::HostExposedComm).text, "-150.0 us (-50.0 %)");
  EXPECT_DOUBLE_EQ(*ss::compare_delta(a, b, CompareFigure::HostExposedComm).percent, -50.0);
  EXPECT_EQ(ss::compare_delta(a, b, CompareFigure::GpuBusy).text, "+10.0 points");
  EXPECT_FALSE(ss::compare_delta(a, b, CompareFigure::GpuBusy).percent.has_value());
  EXPECT_EQ(ss::compare_delta(a, b, CompareFigure::ExposedComm).text, "0 ns (0.0 %)");
  EXPECT_EQ(ss::compare_delta(a, b, CompareFigure::StepMean).text, "0 ns (0.0 %)");
  // the lines `stats` prints, from the same figures
  EXPECT_EQ(ss::gpu_busy_text(a.stats, false),
            "GPU busy     30.0% of the measured steps, mean over ranks (a kernel or copy running on the rank's streams; "
            "least rank 0 20.0%, most rank 1 40.0%): host-bound: the host's work between GPU ops bounds the step, not "
            "the GPU\nhost         the ranks' threads waited in collectives 0.30 ms per rank (0.30 ms per step): "
            "exposed communication of the host spans (thread level); the rank figures below are the GPU streams'\n");
  EXPECT_EQ(ss::gpu_busy_text(a.stats, true).find("host "), std::string::npos);  // a trace: no host line
  std::filesystem::remove(a_path);
  std::filesystem::remove(b_path);
}

// A cpu run's host threads are its figures: its host row is its exposed communication; it has no
// GPU busy; an imported GPU trace has no host row; a run without a measured step only its peaks.
TEST(Ux41Compare, WhatEachKindOfSessionMeasures) {
  ss::ComparedSession cpu;
  cpu.stats.steps = 2;
  cpu.stats.exposed_comm_ns = 600'000;
  cpu.stats.has_memory = true;
  cpu.stats.peak_allocated_bytes = 3 << 20;
  cpu.rate = {100, "samples"};
  EXPECT_DOUBLE_EQ(*ss::compare_value(cpu, CompareFigure::HostExposedComm), 300'000);
  EXPECT_FALSE(ss::compare_value(cpu, CompareFigure::GpuBusy).has_value());
  EXPECT_EQ(ss::compare_cell_text(cpu, CompareFigure::GpuBusy), "-");
  EXPECT_EQ(ss::compare_cell_text(cpu, CompareFigure::PeakAllocated), "3.0 MiB");
  ss::ComparedSession trace = cpu;
  trace.imported = true;
  trace.rate = {0, ""};
  trace.stats.stream_ranks = true;
  trace.stats.ranks.push_back({});
  trace.stats.ranks.back().window_ns = 1000;
  trace.stats.ranks.back().gpu_busy_pct = 12.5;
  EXPECT_FALSE(ss::compare_value(trace, CompareFigure::HostExposedComm).has_value());
  EXPECT_FALSE(ss::compare_value(trace, CompareFigure::Throughput).has_value());
  EXPECT_EQ(ss::compare_cell_text(trace, CompareFigure::GpuBusy), "12.5 %");
  EXPECT_EQ(ss::compare_delta(cpu, trace, CompareFigure::GpuBusy).text, "-");
  ss::ComparedSession lm = cpu;
  lm.rate = {50, "tokens"};
  EXPECT_EQ(ss::compare_delta(cpu, lm, CompareFigure::Throughput).text, "units differ (tokens/s vs samples/s)");
  ss::ComparedSession crashed = cpu;
  crashed.stats.steps = 0;
  EXPECT_EQ(ss::compare_cell_text(crashed, CompareFigure::StepMean), "-");
  EXPECT_EQ(ss::compare_cell_text(crashed, CompareFigure::PeakAllocated), "3.0 MiB");
  crashed.stats.peak_allocated_bytes = 1 << 20;
  EXPECT_EQ(ss::compare_delta(cpu, crashed, CompareFigure::PeakAllocated).text, "-2.0 MiB (-66.7 %)");
  EXPECT_STREQ(ss::compare_figure_key(CompareFigure::HostExposedComm), "host_exposed_comm_ns_per_rank_step");
  EXPECT_STREQ(ss::compare_figure_name(CompareFigure::GpuBusy), "GPU busy (mean over ranks)");
}

TEST(Ux41Compare, DistinctFileNamesShowTheShortestTailThatDiffers) {
  using V = std::vector<std::string>;
  EXPECT_EQ(ss::distinct_file_names({"a/x.db", "b/y.db"}), (V{"x.db", "y.db"}));
  EXPECT_EQ(ss::distinct_file_names({"run1/criteo.db", "run3/criteo.db"}), (V{"run1/criteo.db", "run3/criteo.db"}));
  EXPECT_EQ(ss::distinct_file_names({"/t/a/run/s.db", "/t/b/run/s.db", "/t/a/other.db"}),
            (V{"a/run/s.db", "b/run/s.db", "other.db"}));
  EXPECT_EQ(ss::distinct_file_names({"d/s.db", "d/./s.db"}), (V{"s.db", "s.db"}));  // one file twice
  EXPECT_EQ(ss::distinct_file_names({"s.db", "/x/s.db"}), (V{"s.db", "x/s.db"}));
}

// ux41 #9: how a run ended agrees with its steps
TEST(Ux41Compare, EndedTextSaysWhereARunStopped) {
  ss::RunStats st;
  st.ended = "complete";
  EXPECT_EQ(ss::ended_text(st), "complete");
  st.ended = "crashed";
  EXPECT_EQ(ss::ended_text(st), "crashed before its first measured step");
  st.critical_paths.push_back({});
  st.critical_paths.back().step = 3;
  EXPECT_EQ(ss::ended_text(st), "crashed in step 3; no step completed");
  st.steps = 3;
  for (int64_t s = 0; s < 3; ++s) st.per_step.push_back({s, 0});
  st.ended = "oom";
  EXPECT_EQ(ss::ended_text(st), "oom in step 3, after 3 measured steps");
  st.critical_paths.back().step = 2;
  st.ended = "cancelled";
  EXPECT_EQ(ss::ended_text(st), "cancelled after 3 measured steps");
}

// ux41 #11: two ranks sharing one GPU: the device's busy share is the union of both ranks'
// streams, rank 0's [0, 100) + [200, 300) us and rank 1's [0, 150) us: 250 of 1000 us (not the
// ranks' mean 17.5 %, their sum 35 % or the busiest rank's 20 %)
TEST(Ux41Compare, ASharedGpuIsBusyAsTheUnionOfItsRanksStreams) {
  const std::string path = embedscope::test_support::gpu_run_session(ux41_scratch("device"), {600, 700, 150});
  const ss::SessionReader r(path);
  const ss::RunStats st = ss::analyze(r);
  const auto d = ss::device_gpu_busy(r, st);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].device, "NVIDIA H200 (cuda:0)");
  EXPECT_EQ(d[0].ranks, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(d[0].window_ns, 1'000'000);
  EXPECT_EQ(d[0].busy_ns, 250'000);
  EXPECT_DOUBLE_EQ(d[0].busy_pct, 25.0);
  EXPECT_EQ(ss::device_gpu_busy_text(d),
            "GPU busy     per GPU: NVIDIA H200 (cuda:0) 25.0% (ranks 0, 1 together: the union of their streams' kernels "
            "and copies over the measured steps; the figure above is each rank's own streams)\n");
  const std::string all = ss::gpu_run_text(r, st);
  EXPECT_EQ(all.find("GPU busy     17.5%"), 0u) << all;
  EXPECT_NE(all.find("GPU busy     per GPU: NVIDIA H200 (cuda:0) 25.0%"), std::string::npos) << all;
  std::filesystem::remove(path);
}

// tester41 #2: three runs of one workload (base, sparse_dist, row_wise by --plan) and a placement
// change read the same in the comparison's header; the settings that differ now say which is which.
namespace {
std::string settings_session(const std::string& name, const std::string& pipeline, const std::string& plan_json,
                             const std::string& steps, bool imported = false) {
  const std::string path = ux41_scratch(name);
  std::filesystem::remove(path);
  ss::SessionWriter w(path);
  w.set_metadata(ss::meta::kWorkloadName, "criteo_kaggle");
  w.set_metadata(ss::meta::kWorkloadJson, R"({"name":"criteo_kaggle","pipeline":")" + pipeline +
                                              R"(","steps":20,"tables":[{"name":"a","dim":16},{"name":"b","dim":16}]})");
  w.set_metadata(ss::meta::kShardingPlanJson, plan_json);
  w.set_metadata(ss::meta::kSteps, steps);
  if (imported) w.set_metadata(ss::meta::kImported, "1");
  for (int64_t s = 0; s < std::stoll(steps); ++s) w.add_step({s, 0, s * 1000, s * 1000 + 500, 0.5, 0, 0});  // measured steps
  w.close("complete");
  return path;
}
const char* kTw01 = R"({"tables":[{"name":"a","sharding_type":"table_wise","shards":[{"rank":0}]},
                                 {"name":"b","sharding_type":"table_wise","shards":[{"rank":1}]}]})";
const char* kTw10 = R"({"tables":[{"name":"a","sharding_type":"table_wise","shards":[{"rank":1}]},
                                 {"name":"b","sharding_type":"table_wise","shards":[{"rank":0}]}]})";
const char* kRwTw = R"({"tables":[{"name":"a","sharding_type":"row_wise","shards":[{"rank":0},{"rank":1}]},
                                 {"name":"b","sharding_type":"table_wise","shards":[{"rank":1}]}]})";
}  // namespace

TEST(DifferingSettings, NamesWhatTellsComparedRunsApart) {
  const std::string base = settings_session("set_base", "base", kTw01, "20");
  const std::string sparse = settings_session("set_sparse", "sparse_dist", kTw01, "17");
  const std::string rw = settings_session("set_rw", "base", kRwTw, "20");
  const std::string moved = settings_session("set_moved", "base", kTw10, "20");
  const std::string trace = settings_session("set_trace", "other", kRwTw, "3", true);
  const ss::SessionReader a(base), b(sparse), c(rw), d(moved), t(trace);
  EXPECT_EQ(ss::differing_settings({&a, &b, &c}),
            (std::vector<std::string>{"pipeline base, plan 2 table_wise, measured steps 20",
                                      "pipeline sparse_dist, plan as the baseline's, measured steps 17",
                                      "pipeline base, plan vs the baseline: a: table_wise on rank 0 -> row_wise on ranks 0, 1, "
                                      "measured steps 20"}));
  // the same types placed differently: what moved (tester42 F13); the imported trace is not compared
  EXPECT_EQ(ss::differing_settings({&a, &d, &t}),
            (std::vector<std::string>{"plan 2 table_wise",
                                      "plan vs the baseline: a: rank 0 -> rank 1 (table_wise); b: rank 1 -> rank 0 (table_wise)",
                                      ""}));
  // --verbose: the raw list, numbered placements
  EXPECT_EQ(ss::differing_settings({&a, &b, &c}, 6, true),
            (std::vector<std::string>{"pipeline base, plan 2 table_wise, measured steps 20",
                                      "pipeline sparse_dist, plan 2 table_wise, measured steps 17",
                                      "pipeline base, plan 1 row_wise + 1 table_wise, measured steps 20"}));
  EXPECT_EQ(ss::differing_settings({&a, &d, &t}, 6, true),
            (std::vector<std::string>{"plan 2 table_wise, placement 1", "plan 2 table_wise, placement 2", ""}));
  EXPECT_EQ(ss::differing_settings({&a, &a}), (std::vector<std::string>{"", ""}));  // nothing differs
  EXPECT_EQ(ss::differing_settings({&a, &b, &c}, 1),
            (std::vector<std::string>{"pipeline base and 2 more settings", "pipeline sparse_dist and 2 more settings",
                                      "pipeline base and 2 more settings"}));
  for (const auto& p : {base, sparse, rw, moved, trace}) std::filesystem::remove(p);
}

// tester41 #20: compare had no loss row, so semi_sync's or a compressed table's accuracy cost was
// invisible; the held-out AUC (issue 16) comes from the session's held_out_json.
TEST(CompareLoss, LastLossAndHeldOutAucAreRowsWithDifferences) {
  const std::string path = ux41_scratch("auc");
  std::filesystem::remove(path);
  {
    ss::SessionWriter w(path);
    w.set_metadata(ss::meta::kHeldOutJson, R"({"batches":4,"samples":8192,"loss":0.41,"auc":0.7654})");
    w.close("complete");
  }
  ss::ComparedSession a, b;
  a.stats = ss::analyze(ss::SessionReader(path));
  ASSERT_TRUE(a.stats.held_out_auc.has_value());
  EXPECT_DOUBLE_EQ(*a.stats.held_out_auc, 0.7654);
  a.stats.steps = b.stats.steps = 2;
  a.stats.loss = {0.69, 0.45};
  b.stats.loss = {0.69, 0.44991};
  b.stats.held_out_auc = 0.7600;
  EXPECT_EQ(ss::compare_cell_text(a, CompareFigure::Loss), "0.45000");
  EXPECT_EQ(ss::compare_cell_text(a, CompareFigure::HeldOutAuc), "0.7654");
  EXPECT_EQ(ss::compare_delta(a, b, CompareFigure::Loss).text, "-0.00009 (-0.0 %)");
  EXPECT_EQ(ss::compare_delta(a, b, CompareFigure::HeldOutAuc).text, "-0.0054 (-0.7 %)");
  b.stats.loss.clear();  // a simulated run trains nothing
  b.stats.held_out_auc.reset();
  EXPECT_EQ(ss::compare_cell_text(b, CompareFigure::Loss), "-");
  EXPECT_EQ(ss::compare_cell_text(b, CompareFigure::HeldOutAuc), "-");
  EXPECT_STREQ(ss::compare_figure_key(CompareFigure::HeldOutAuc), "held_out_auc");
  std::filesystem::remove(path);
}

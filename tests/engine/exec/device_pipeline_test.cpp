// Pipelines (sparse_dist, semi_sync) on the cuda executor's device path without a GPU (issue 14;
// TrainerOptions::emulate_device, 4 ranks on one emulated device: every group on the
// intra-device communicator, as on the one-GPU desktop): the session's step attribution with
// two batches in flight. The cuda executor places each CUPTI record in the step whose host
// window holds its start (profiler::StepDrain), and an NCCL kernel or intra-device copy joined
// with its collective record in that record's step; both agree with the host's comm span only
// if every collective a step queued - the batch ahead's input dist included - ran inside that
// step's window and was recorded in that step.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <tuple>

#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/sessions/store/session.h"

using namespace embedscope::engine;
namespace sessions = embedscope::sessions;

namespace {

class DevicePipelineSession : public ::testing::TestWithParam<PipelineKind> {};

TEST_P(DevicePipelineSession, EveryCollectiveRanInsideTheStepThatQueuedIt) {
  const PipelineKind pipeline = GetParam();
  WorkloadSpec s = load_preset("tiny");
  s.devices.count = 4;
  s.sharding.default_type = ShardingType::row_wise;
  s.sharding.per_table.clear();
  s.pipeline = pipeline;
  s.warmup_steps = 0;
  s.steps = 5;
  TrainerOptions opt;
  opt.emulate_device = true;
  opt.emulated_devices = 1;
  opt.session_path = (std::filesystem::temp_directory_path() /
                      ("es_device_pipeline_" + std::string(to_string(pipeline)) + "_" + std::to_string(getpid()) + ".db"))
                         .string();
  const RunResult r = run_training(s, plan_sharding(s), opt);
  ASSERT_EQ(r.ended, RunEnd::complete) << r.error;
  sessions::SessionReader rd(opt.session_path);
  std::map<std::pair<int32_t, int64_t>, std::pair<int64_t, int64_t>> window;  // (rank, step) -> [start, end)
  for (const auto& m : rd.steps()) window[{m.rank, m.step}] = {m.start_ns, m.end_ns};
  ASSERT_EQ(window.size(), 20u);
  // the comm spans by (rank, correlation = the collective's sequence, name), and rank 0's
  // input_dist/ids spans per step: the batch ahead's input dist is queued in the step before
  // its own (sparse_dist: step 0 starts batches 0 and 1, steps 1-3 the next one, step 4 none;
  // semi_sync: step 0 starts batches 0, 1 and 2, steps 1-2 the one two ahead, steps 3-4 none).
  // Without warm-up, step 0's fill (sparse_dist's batch 0, semi_sync's batches 0 and 1) is
  // recorded at step -1, as a warm-up step holds it (trace50), inside step 0's window.
  std::map<std::tuple<int32_t, uint64_t, std::string>, int64_t> span_step;
  std::map<int64_t, int> ids_spans;
  for (const auto& o : rd.all_ops()) {
    if (o.lane != static_cast<int32_t>(sessions::Lane::comm)) continue;
    span_step[{o.rank, o.correlation, rd.name(o.name_id)}] = o.step;
    if (o.rank == 0 && rd.name(o.name_id) == "input_dist/ids") ++ids_spans[o.step];
  }
  const std::map<int64_t, int> want_ids = pipeline == PipelineKind::sparse_dist
                                              ? std::map<int64_t, int>{{-1, 1}, {0, 1}, {1, 1}, {2, 1}, {3, 1}}
                                              : std::map<int64_t, int>{{-1, 2}, {0, 1}, {1, 1}, {2, 1}};
  EXPECT_EQ(ids_spans, want_ids);
  int64_t checked = 0, input_dist = 0;
  for (const auto& c : rd.collectives()) {
    // the fill's dists at step -1 ran in step 0's window; setup's collectives have none
    const bool fill = c.step == -1 && (c.name.rfind("input_dist/", 0) == 0 || c.name.rfind("output_dist/", 0) == 0);
    const auto w = window.find({c.rank, fill ? 0 : c.step});
    if (w == window.end()) continue;  // setup's (no window)
    ++checked;
    input_dist += c.name.rfind("input_dist/", 0) == 0;
    EXPECT_GE(c.start_ns, w->second.first) << c.name << " rank " << c.rank << " step " << c.step;
    EXPECT_LE(c.end_ns, w->second.second) << c.name << " rank " << c.rank << " step " << c.step;
    const auto sp = span_step.find({c.rank, c.sequence, c.name});
    if (sp != span_step.end()) { EXPECT_EQ(sp->second, c.step) << c.name << " rank " << c.rank << " seq " << c.sequence; }
  }
  EXPECT_GT(checked, 100);
  // 4 ranks x 5 batches x 3 all-to-alls (splits, lengths, ids), each with its split check
  EXPECT_EQ(input_dist, 4 * 5 * 3 * 2);
  std::filesystem::remove(opt.session_path);
}

INSTANTIATE_TEST_SUITE_P(SparseDistAndSemiSync, DevicePipelineSession,
                         ::testing::Values(PipelineKind::sparse_dist, PipelineKind::semi_sync),
                         [](const auto& p) { return std::string(to_string(p.param)); });

}  // namespace

// Cross-thread hand-offs (cost/handoff.h, CpuContention::handoff_ns) and collectives fitted to the
// call's time (calibration.h): the gaps of a hand-built step, the simulator's hand-off on a
// balanced run, and calibrate recovering both from sessions timed by a known profile.
#include <gtest/gtest.h>

#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/engine/cost/calibration.h"
#include "embedscope/engine/cost/cost_model.h"
#include "embedscope/engine/cost/handoff.h"
#include "embedscope/engine/exec/backend.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/program/step_program.h"
#include "embedscope/engine/workload/presets.h"
#include "engine/cost/cost_sessions.h"

namespace es = embedscope::engine;
namespace fs = std::filesystem;
using embedscope::sessions::Lane;

namespace {

fs::path handoff_dir() { return embedscope::test_support::cost_scratch_dir("handoff"); }

// A base step by hand: input, bucketize (compute) -> input_dist (comm) -> lookup, dense (compute)
// -> grad_dist (comm) -> optimizer (compute); dense also waits for input_dist (an earlier-ending
// dependency on the other lane, not binding).
es::StepProgram handoff_program() {
  es::StepProgram p;
  auto add = [&](const char* name, Lane lane, std::vector<int> waits) {
    es::ProgramOp op;
    op.id = static_cast<int>(p.ops.size());
    op.name = name;
    op.lane = lane;
    op.waits_for = std::move(waits);
    p.ops.push_back(op);
  };
  add("input", Lane::compute, {});
  add("bucketize", Lane::compute, {0});
  add("input_dist", Lane::comm, {1});
  add("lookup", Lane::compute, {1, 2});
  add("dense", Lane::compute, {3, 2});
  add("grad_dist", Lane::comm, {2, 4});
  add("optimizer", Lane::compute, {4, 5});
  return p;
}

// criteo_kaggle on `ranks` simulated on round_numbers with 2 cores, 0.5 other groups and the
// hand-off `handoff_ns`, relabelled measured (load recorded: self 1, other 0.5); `sql` then run on it.
std::string handoff_session(const std::string& name, int ranks, es::ShardingType type, int64_t handoff_ns,
                            const std::string& sql = "") {
  std::ifstream f(std::string(EMBEDSCOPE_TEST_DATA) + "/hardware/round_numbers.json");
  nlohmann::json j = nlohmann::json::parse(f);
  j["name"] = "handoff_round_numbers";
  j["cluster"] = {{"gpus_per_node", 8}, {"max_nodes", 1}};
  j["cpu"] = {{"cores", 2}, {"threads_per_rank", 1.0}, {"background_threads", 0.0}, {"other_groups", 0.5},
              {"handoff_ns", handoff_ns}};
  const std::string profile = (handoff_dir() / (name + ".json")).string();
  std::ofstream(profile) << j.dump();
  return embedscope::test_support::criteo_as_measured(
      profile, (handoff_dir() / (name + ".db")).string(), ranks, type, 3,
      "INSERT OR REPLACE INTO metadata (key, value) VALUES ('cpu_cores', '2'), ('cpu_self_cores', '1.000'), "
      "('cpu_other_cores', '0.500');" + sql);
}

}  // namespace

TEST(Handoff, GapsAreTheWaitsForTheOtherThreadOnly) {
  const es::StepProgram p = handoff_program();
  // times in ns from the step's start at 100
  const std::vector<es::MeasuredSpan> compute = {{"input", 100, 200},      {"bucketize", 210, 250},
                                                 {"lookup", 420, 500},     {"dense", 530, 900},
                                                 {"optimizer", 1110, 1200}};
  const std::vector<es::MeasuredSpan> comm = {{"input_dist", 290, 400}, {"grad_dist", 960, 1100}};
  const auto gaps = es::handoff_gaps(p, compute, comm, 100);
  ASSERT_TRUE(gaps.has_value());
  std::map<int, int64_t> by_op;
  for (const auto& g : *gaps) by_op[g.op] = g.gap_ns;
  // input_dist: 290 - bucketize's 250; lookup: 420 - input_dist's 400; grad_dist: 960 - dense's
  // 900 (its own lane's input_dist ended at 400); optimizer: 1110 - grad_dist's 1100. input and
  // bucketize have no dependency on comm; dense's on input_dist (400) ended before lookup (500).
  EXPECT_EQ(by_op, (std::map<int, int64_t>{{2, 40}, {3, 20}, {5, 60}, {6, 10}}));
  // an op that started before its dependency's recorded end (clock skew): 0, not negative
  std::vector<es::MeasuredSpan> early = compute;
  early[2] = {"lookup", 395, 500};
  by_op.clear();
  const auto early_gaps = es::handoff_gaps(p, early, comm, 100);
  ASSERT_TRUE(early_gaps.has_value());
  for (const auto& g : *early_gaps) by_op[g.op] = g.gap_ns;
  EXPECT_EQ(by_op.at(3), 0);
  // spans that do not pair with the program: none
  std::vector<es::MeasuredSpan> renamed = compute;
  renamed[3].name = "dense_forward_backward";
  EXPECT_FALSE(es::handoff_gaps(p, renamed, comm, 100).has_value());
  EXPECT_FALSE(es::handoff_gaps(p, compute, {comm[0]}, 100).has_value());
}

TEST(Handoff, ProfileKeyParsesAndIsRefusedNegative) {
  std::ifstream f(std::string(EMBEDSCOPE_TEST_DATA) + "/hardware/round_numbers.json");
  nlohmann::json j = nlohmann::json::parse(f);
  j["cpu"] = {{"cores", 2}, {"threads_per_rank", 1.0}, {"background_threads", 0.0}};
  EXPECT_EQ(es::parse_hardware_profile(j.dump(), "p").cpu.handoff_ns, 0);  // optional
  j["cpu"]["handoff_ns"] = 250000;
  const es::HardwareProfile hw = es::parse_hardware_profile(j.dump(), "p");
  EXPECT_EQ(hw.cpu.handoff_ns, 250000);
  EXPECT_EQ(es::parse_hardware_profile(es::to_json(hw).dump(), "q").cpu.handoff_ns, 250000);  // round trip
  j["cpu"]["handoff_ns"] = -1;
  try {
    es::parse_hardware_profile(j.dump(), "p");
    FAIL() << "a negative handoff_ns was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("/cpu/handoff_ns"), std::string::npos) << e.what();
  }
}

TEST(Handoff, SimulatedStepAddsOneContendedHandoffPerWakeUp) {
  // row_wise on 2 ranks: both ranks run the same ops for the same time, so the wake-ups are on
  // the path. A base step's program (criteo_kaggle) has 9 ops that wait for the other lane; 6
  // of them wait for it last: input_dist/splits <- bucketize, kjt_permute <- input_dist/ids,
  // output_dist <- lookup, dense <- output_dist, grad_dist <- dense, backward_fused_optimizer
  // <- grad_dist (lengths and ids follow splits on their own lane, dense_optimizer's all-reduce
  // ended before grad_dist). grad_dist also waits for the dense all-reduce, issued during dense
  // and ending after it (checked below: by more than the hand-off), so its wake-up is hidden:
  // 5 x 20 us x contention 2 x 1.5 / 2 = 1.5 -> 150 us more a step.
  const std::string a = handoff_session("sim0", 2, es::ShardingType::row_wise, 0);
  const std::string b = handoff_session("sim1", 2, es::ShardingType::row_wise, 20000);
  auto query = [](const std::string& path, const char* sql) {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, sql, -1, &st, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    std::vector<int64_t> v;
    while (sqlite3_step(st) == SQLITE_ROW) v.push_back(sqlite3_column_int64(st, 0));
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
  };
  const char* steps = "SELECT end_ns - start_ns FROM steps WHERE rank = 0 AND step >= 0 ORDER BY step";
  const auto overhang = query(a, "SELECT r.end_ns - d.end_ns FROM ops r, ops d, strings sr, strings sd "
                                 "WHERE r.lane_key = 1 AND d.lane_key = 0 AND r.step = 1 AND d.step = 1 AND "
                                 "r.name_id = sr.id AND sr.value = 'dense_all_reduce' AND d.name_id = sd.id AND "
                                 "sd.value = 'dense_forward_backward'");
  ASSERT_EQ(overhang.size(), 1u);
  ASSERT_GT(overhang[0], 30000);  // the all-reduce outlasts dense by more than the hand-off
  const auto t0 = query(a, steps), t1 = query(b, steps);
  ASSERT_EQ(t0.size(), 3u);
  ASSERT_EQ(t1.size(), 3u);
  for (size_t i = 0; i < t0.size(); ++i) EXPECT_NEAR(t1[i] - t0[i], 5 * 30000, 6) << "step " << i;
}

TEST(Handoff, CalibrateRecoversTheHandoffAndTheCallsTime) {
  // truth: round_numbers at 2 cores, 0.5 other groups, hand-off 100 us. Every collective member
  // but the last to leave is then made to leave 400 ns early (rank 1's ends moved, a real run's
  // members leave at different times): the call's time is still the truth's, as the simulator
  // gives every member (each member's own end, the code before 2026-12-04, fitted 928 ns)
  const std::string early = "UPDATE collectives SET end_ns = end_ns - 400 WHERE rank = 1;";
  const std::vector<std::string> sessions = {
      handoff_session("c_tw2", 2, es::ShardingType::table_wise, 100000, early),
      handoff_session("c_rw2", 2, es::ShardingType::row_wise, 100000, early),
      handoff_session("c_tw4", 4, es::ShardingType::table_wise, 100000, early),
      handoff_session("c_rw4", 4, es::ShardingType::row_wise, 100000, early)};
  const es::Calibration cal = es::calibrate(sessions);
  EXPECT_NEAR(cal.step_scale, 1.0, 0.01);
  EXPECT_NEAR(static_cast<double>(cal.handoff_ns), 100000.0, 1000.0);  // per-op gaps / contention
  EXPECT_GT(cal.handoff_samples, 0);
  EXPECT_NEAR(static_cast<double>(cal.profile.intra_node.latency_ns), 1000.0, 20.0);  // round_numbers' link
  EXPECT_NEAR(cal.profile.intra_node.bus_bandwidth_bytes_per_s / 1e11, 1.0, 0.02);
}

TEST(Handoff, CalibrateTakesTheCollectivesMeanOverTheSteps) {
  // the truth's sessions (hand-off 0), with every collective of measured step 1 (of 0..2, one
  // place in a base run) 3 us x the session's contention factor longer (1.5 at 2 ranks, 3 at 4):
  // each (rank, collective) mean grows by 1 us once divided by it, so the fitted latency is
  // round_numbers' 1 us + 1 us (the median of the three steps would stay at 1 us)
  auto slow = [](double contention) {
    return "UPDATE collectives SET end_ns = end_ns + " + std::to_string(static_cast<int64_t>(3000 * contention)) +
           " WHERE step = 1;";
  };
  const std::vector<std::string> sessions = {handoff_session("m_tw2", 2, es::ShardingType::table_wise, 0, slow(1.5)),
                                             handoff_session("m_rw2", 2, es::ShardingType::row_wise, 0, slow(1.5)),
                                             handoff_session("m_tw4", 4, es::ShardingType::table_wise, 0, slow(3.0)),
                                             handoff_session("m_rw4", 4, es::ShardingType::row_wise, 0, slow(3.0))};
  const es::Calibration cal = es::calibrate(sessions);
  EXPECT_NEAR(static_cast<double>(cal.profile.intra_node.latency_ns) / cal.step_scale, 2000.0, 20.0);
  EXPECT_NEAR(cal.profile.intra_node.bus_bandwidth_bytes_per_s * cal.step_scale / 1e11, 1.0, 0.02);
  EXPECT_EQ(cal.handoff_ns, 0);  // no gap in the truth's steps
}

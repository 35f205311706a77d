// One rule of a collective call's time (cost/shared_cores.h collective_call_ns, calib40, issue 15):
// the planner's statistics (planner/stats.h), the simulated executor (exec/simulated/) and the LM
// simulation (program/lm_program.h simulate_lm_step) time a call alike - processor sharing of a
// cpu node's cores, the largest member's time for GPUs - checked against numbers by hand.
#include <gtest/gtest.h>

#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/engine/cost/cost_model.h"
#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/cost/shared_cores.h"
#include "embedscope/engine/exec/backend.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/planner/stats.h"
#include "embedscope/engine/program/lm_program.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/presets.h"
#include "engine/cost/cost_sessions.h"

namespace es = embedscope::engine;
namespace fs = std::filesystem;

namespace {

// The profile of these tests: round_numbers' GPU, a link of 1 us latency and 10 MB/s (100 ns a
// byte, so that the members' bytes, not the latency, decide), and with `cpu` a node of 2 cores,
// 1 thread per rank, no other load: contention f(m) = max(1, m / 2), f(4) = 2, f(3) = 1.5.
std::string call_rule_profile(bool cpu) {
  std::ifstream f(std::string(EMBEDSCOPE_TEST_DATA) + "/hardware/round_numbers.json");
  nlohmann::json j = nlohmann::json::parse(f);
  j["name"] = cpu ? "call_rule_cpu" : "call_rule_gpu";
  j["cluster"] = {{"gpus_per_node", 8}, {"max_nodes", 4}};
  j["intra_node"] = {{"name", "slow link"}, {"bus_bandwidth_bytes_per_s", 1e7}, {"latency_ns", 1000}};
  j["inter_node"] = j["intra_node"];
  if (cpu) j["cpu"] = {{"cores", 2}, {"threads_per_rank", 1.0}, {"background_threads", 0.0}, {"other_groups", 0.0}};
  const fs::path path = embedscope::test_support::cost_scratch_dir("call_rule") / (j["name"].get<std::string>() + ".json");
  std::ofstream(path) << j.dump();
  return path.string();
}

// The tiny preset (tables of dims 4, 8, 6 (two features) and 12) on `ranks` simulated ranks.
es::WorkloadSpec call_rule_spec(const std::string& profile, int ranks, es::ShardingType type) {
  es::WorkloadSpec s = es::load_preset("tiny");
  s.devices.backend = es::Backend::simulated;
  s.devices.hardware = profile;
  s.devices.count = ranks;
  s.sharding.default_type = type;
  s.steps = 3;
  s.warmup_steps = 1;
  return es::with_resolved_backend(s, "test");
}

// Per rank, ns of one step of the simulated session at `path`: its input and output dists'
// collectives (fwd) and its gradient dists' (bwd), each call counted as the simulator timed it
// (the last member's end after the last arrival: the same on every member, no waiting).
struct CallRuleComm {
  std::vector<int64_t> fwd, bwd;
};
CallRuleComm simulated_comm(const std::string& path, int ranks, int step) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db,
                               ("SELECT rank, name, group_name, sequence, start_ns, end_ns FROM collectives WHERE step = " +
                                std::to_string(step))
                                   .c_str(),
                               -1, &st, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(db);
  struct Rec {
    int rank;
    std::string name;
    std::pair<std::string, int64_t> call;
  };
  std::vector<Rec> recs;
  std::map<std::pair<std::string, int64_t>, std::pair<int64_t, int64_t>> calls;  // last arrival, end
  while (sqlite3_step(st) == SQLITE_ROW) {
    Rec r{sqlite3_column_int(st, 0), reinterpret_cast<const char*>(sqlite3_column_text(st, 1)),
          {reinterpret_cast<const char*>(sqlite3_column_text(st, 2)), sqlite3_column_int64(st, 3)}};
    auto& c = calls[r.call];
    c.first = std::max<int64_t>(c.first, sqlite3_column_int64(st, 4));
    c.second = std::max<int64_t>(c.second, sqlite3_column_int64(st, 5));
    recs.push_back(std::move(r));
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  CallRuleComm out{std::vector<int64_t>(static_cast<size_t>(ranks)), std::vector<int64_t>(static_cast<size_t>(ranks))};
  for (const Rec& r : recs) {
    const int64_t d = calls[r.call].second - calls[r.call].first;
    if (r.name.rfind("input_dist", 0) == 0 || r.name.rfind("output_dist", 0) == 0) out.fwd[static_cast<size_t>(r.rank)] += d;
    if (r.name.rfind("grad_dist", 0) == 0) out.bwd[static_cast<size_t>(r.rank)] += d;
  }
  return out;
}

// The planner's statistics and the simulator's step 1 of `spec` with plan_sharding's plan.
struct CallRuleBoth {
  es::PlanStats stats;
  CallRuleComm sim;
  es::ShardingPlan plan;
};
CallRuleBoth planner_and_simulator(const es::WorkloadSpec& spec, const std::string& name) {
  CallRuleBoth b;
  b.plan = es::plan_sharding(spec);
  b.stats = es::plan_stats(spec, b.plan, es::load_hardware_profile(spec.devices.hardware));
  const std::string db = (embedscope::test_support::cost_scratch_dir("call_rule") / (name + ".db")).string();
  es::TrainerOptions o;
  o.session_path = db;
  o.session_overwrite = true;
  EXPECT_EQ(es::run_training(spec, b.plan, o).ended, es::RunEnd::complete);
  b.sim = simulated_comm(db, spec.devices.count, 1);
  return b;
}

// The output dist all-to-all of a table_wise plan (member i: its pooled floats to each other
// rank, the others' to it; bytes max(sent, received)) with 8 samples a rank and 4 B a float.
std::vector<int64_t> output_dist_bytes(const std::vector<int64_t>& floats_per_sample_of_rank) {
  int64_t all = 0;
  for (int64_t d : floats_per_sample_of_rank) all += d;
  const int64_t n = static_cast<int64_t>(floats_per_sample_of_rank.size());
  std::vector<int64_t> out;
  for (int64_t d : floats_per_sample_of_rank) out.push_back(std::max((n - 1) * 8 * d * 4, 8 * (all - d) * 4));
  return out;
}

}  // namespace

TEST(CollectiveCall, OneRuleForACallByHand) {
  es::HardwareProfile hw;  // 2 cores, 1 thread per rank: f(m) = max(1, m / 2)
  hw.cpu.cores = 2;
  // one node of 4: 1000 x f(4) + 4000 x f(1) = 6,000 (the largest member x f(4): 10,000)
  EXPECT_EQ(es::collective_call_ns({{1000, 0, 4}, {5000, 0, 4}, {1000, 0, 4}, {1000, 0, 4}}, hw), 6000);
  // the same members on two nodes of 2 ranks: the largest member x f(2) = 5000 x 1
  EXPECT_EQ(es::collective_call_ns({{1000, 0, 2}, {5000, 0, 2}, {1000, 1, 2}, {1000, 1, 2}}, hw), 5000);
  // two nodes of 8 ranks (f(8) = 4): 5000 x 4
  EXPECT_EQ(es::collective_call_ns({{1000, 0, 8}, {5000, 1, 8}}, hw), 20000);
  EXPECT_EQ(es::collective_call_ns({}, hw), 0);
  // GPUs: the largest member's own time, on one node or not
  EXPECT_EQ(es::collective_call_ns({{1000, 0, 4}, {5000, 0, 4}, {1000, 0, 4}, {1000, 0, 4}}, es::HardwareProfile{}), 5000);
  EXPECT_EQ(es::contended_ns(1001, hw, 3), 1502);  // 1001 x 1.5 = 1501.5, rounded half away from 0
  EXPECT_EQ(es::contended_ns(1001, es::HardwareProfile{}, 8), 1001);
}

TEST(CollectiveCall, PlannerTimesAnImbalancedTableWiseCallAsTheSimulatorDoes) {
  // tiny on 4 cpu ranks, table_wise: one table a rank; output dist floats per sample by rank
  const es::WorkloadSpec spec = call_rule_spec(call_rule_profile(true), 4, es::ShardingType::table_wise);
  const CallRuleBoth b = planner_and_simulator(spec, "tw4_cpu");
  std::vector<int64_t> floats(4, 0);
  for (const es::TablePlan& tp : b.plan.tables) {
    ASSERT_EQ(tp.shards.size(), 1u);
    const es::TableSpec& t = spec.tables[static_cast<size_t>(tp.table)];
    floats[static_cast<size_t>(tp.shards[0].rank)] += t.embedding_dim * static_cast<int64_t>(t.feature_names.size());
  }
  std::vector<int64_t> sorted = floats;
  std::sort(sorted.begin(), sorted.end());
  ASSERT_EQ(sorted, (std::vector<int64_t>{4, 8, 12, 12}));  // t_small, t_a, t_b (two features), t_c
  // output dist bytes {1024, 896, 1152, 1152} (dims 4, 8, 12, 12): own times 1 us + 100 ns a byte
  // = {103400, 90600, 116200, 116200}; sorted phases: 90600 x f(4) + 12800 x f(3) + 12800 x f(2)
  // + 0 x f(1) = 181200 + 19200 + 12800 = 213,200 ns (the largest member x f(4): 232,400)
  std::vector<int64_t> bytes = output_dist_bytes(floats);
  std::sort(bytes.begin(), bytes.end());
  ASSERT_EQ(bytes, (std::vector<int64_t>{896, 1024, 1152, 1152}));
  constexpr int64_t kOutputDistByHand = 213200;
  // the gradient dist is the same exchange reversed (the same members' bytes), after Gloo's
  // split check (an all-gather of 8 int64 a member: 3 x 64 B from the others, balanced:
  // (1000 + 19200) x f(4) = 40,400 ns): every rank's bwd comms is 40,400 + 213,200 = 253,600 ns
  // (the largest member x f(4) would give 40,400 + 232,400)
  constexpr int64_t kGradDistByHand = 40400 + kOutputDistByHand;
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(b.stats.ranks[static_cast<size_t>(r)].bwd_comms_ns, kGradDistByHand) << "planner, rank " << r;
    EXPECT_EQ(b.sim.bwd[static_cast<size_t>(r)], kGradDistByHand) << "simulator, rank " << r;
    // every call: the planner's fwd comms (input dists + output dist) is the simulator's
    EXPECT_EQ(b.stats.ranks[static_cast<size_t>(r)].fwd_comms_ns, b.sim.fwd[static_cast<size_t>(r)]) << "rank " << r;
    EXPECT_GT(b.stats.ranks[static_cast<size_t>(r)].fwd_comms_ns, kOutputDistByHand);
  }
}

TEST(CollectiveCall, BalancedRowWiseKeepsItsFigures) {
  // row_wise on 4 ranks: members of equal bytes; the call is f(4) = 2 x a member's time on the
  // cpu profile (the contention model before processor sharing, calib38) and the member's time
  // on the GPU one; the planner and the simulator agree on both
  const CallRuleBoth cpu = planner_and_simulator(call_rule_spec(call_rule_profile(true), 4, es::ShardingType::row_wise), "rw4_cpu");
  const CallRuleBoth gpu = planner_and_simulator(call_rule_spec(call_rule_profile(false), 4, es::ShardingType::row_wise), "rw4_gpu");
  for (int r = 0; r < 4; ++r) {
    const auto R = static_cast<size_t>(r);
    EXPECT_EQ(cpu.stats.ranks[R].fwd_comms_ns, cpu.sim.fwd[R]);
    EXPECT_EQ(cpu.stats.ranks[R].bwd_comms_ns, cpu.sim.bwd[R]);
    EXPECT_EQ(gpu.stats.ranks[R].fwd_comms_ns, gpu.sim.fwd[R]);
    EXPECT_EQ(gpu.stats.ranks[R].bwd_comms_ns, gpu.sim.bwd[R]);
    EXPECT_EQ(cpu.stats.ranks[R].bwd_comms_ns, 2 * gpu.stats.ranks[R].bwd_comms_ns);
  }
  // today's figures (before calib40): the gradient dist's all-gather of 8 samples x 36 floats
  // from each of 3 peers, 3,456 B -> 1 us + 345.6 us = 346,600 ns a member on the GPU profile
  // (planner and simulator), x f(4) = 693,200 ns on the cpu one (the simulator; the planner gave
  // 346,600 there before calib40: it left contention out)
  EXPECT_EQ(gpu.stats.ranks[0].bwd_comms_ns, 346600);
  EXPECT_EQ(gpu.sim.bwd[0], 346600);
  EXPECT_EQ(cpu.sim.bwd[0], 693200);
  EXPECT_EQ(cpu.stats.ranks[0].bwd_comms_ns, 693200);
}

TEST(CollectiveCall, LmSimulationTimesItsCallsByTheSameRule) {
  // the LM's row_wise embedding on 4 cpu ranks: the input dist of ids is imbalanced (rank 0's
  // rows hold the Zipf head); each call lasts the processor-sharing phases of its members'
  // collective_ns, computed here by hand with f(4) = 2, f(3) = 1.5, f(2) = f(1) = 1
  const es::HardwareProfile hw = es::load_hardware_profile(call_rule_profile(true));
  es::LmWorkloadSpec s;
  s.vocab_size = 48;
  s.hidden_size = 8;
  s.sequence_length = 8;
  s.micro_batch_size = 2;
  s.body_layers = 1;
  s.world_size = 4;
  s.sharding = es::LmSharding::row_wise;
  s.steps = 1;
  const es::LmSimulatedStep sim = es::simulate_lm_step(s, hw, 4);
  const double f[5] = {0, 1, 1, 1.5, 2};
  size_t k = 0;
  int imbalanced = 0;
  // by hand (w = 1 us + 100 ns a byte of the member's max(sent, received)): the input dist of ids,
  // members {104, 112, 112, 264} B -> w {11400, 12200, 12200, 27400}: 11400 x 2 + 800 x 1.5 + 0 x 1
  // + 15200 x 1 = 39,200 ns (the largest member's, before calib40: 27,400); the output dist of
  // rows {42600, 45800, 45800, 106600}: 85200 + 4800 + 60800 = 150,800; the output projection's
  // all-gather, balanced (1,536 B each): 154600 x f(4) = 309,200
  const std::map<std::string, int64_t> by_hand = {
      {"input_dist/ids", 39200}, {"output_dist/rows", 150800}, {"grad_dist/rows", 150800},
      {"output_projection/all_gather", 309200}};
  int checked = 0;
  for (size_t op = 0; op < sim.program.ops.size(); ++op)
    for (size_t c = 0; c < sim.program.ops[op].collectives.size(); ++c, ++k) {
      std::vector<int64_t> w;
      for (int r = 0; r < 4; ++r)
        w.push_back(es::collective_ns(sim.programs[static_cast<size_t>(r)].ops[op].collectives[c], r, 4, hw));
      std::sort(w.begin(), w.end());
      double expected = 0;
      for (size_t i = 0; i < 4; ++i) expected += static_cast<double>(w[i] - (i ? w[i - 1] : 0)) * f[4 - i];
      int64_t ready = 0;
      for (int r = 0; r < 4; ++r) ready = std::max(ready, sim.collective_ns[static_cast<size_t>(r)][k].first);
      for (int r = 0; r < 4; ++r)
        EXPECT_EQ(sim.collective_ns[static_cast<size_t>(r)][k].second - ready, std::llround(expected))
            << sim.program.ops[op].collectives[c].name << " rank " << r;
      if (w.front() != w.back()) ++imbalanced;
      if (auto it = by_hand.find(sim.program.ops[op].collectives[c].name); it != by_hand.end()) {
        ++checked;
        for (int r = 0; r < 4; ++r)
          EXPECT_EQ(sim.collective_ns[static_cast<size_t>(r)][k].second - ready, it->second) << it->first << " rank " << r;
      }
    }
  EXPECT_GT(imbalanced, 0);
  EXPECT_EQ(checked, 4);
  // compute on the cpu node: compute_ns x f(4) = 2, as the simulated executor scales it
  for (size_t op = 0; op < sim.program.ops.size(); ++op)
    if (sim.program.ops[op].lane == embedscope::sessions::Lane::compute) {
      for (size_t r = 0; r < 4; ++r)
        EXPECT_EQ(sim.rank_end_ns[r][op] - sim.rank_start_ns[r][op], 2 * es::compute_ns(sim.programs[r].ops[op], hw))
            << sim.program.ops[op].name << " rank " << r;
    }
}

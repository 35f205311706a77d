// tester51 F6 + F1: a simulated session's comm ops carried correlation 0, so the session's
// collective instances (sessions/analysis/critical_path.h collective_instances) never formed:
// "waiting for peers" was 0 though the ranks waited, the critical path had no cross-rank links,
// and `stats`' per-collective bytes split each op by the wrong record (sent != received). The
// simulated executor now numbers each group's collectives 1, 2, ... and gives a comm op the
// sequence of its first collective, as the cpu executor does (threaded/rank.h on_comm_lane).
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/engine/cost/cost_model.h"
#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/exec/backend.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/program/step_program.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/engine/workload/spec.h"
#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/store/session.h"

namespace {
namespace fs = std::filesystem;
namespace b51 = embedscope::engine;
namespace s51 = embedscope::sessions;

const std::string kSimb51Profile = std::string(EMBEDSCOPE_TEST_DATA) + "/hardware/round_numbers.json";

fs::path simb51_scratch(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("embedscope_simb51_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Two table_wise tables on 2 simulated GPUs of round_numbers (base pipeline, no dense part):
// "wide" (dim 256, 1 id a bag) and "deep" (dim 16, 24 ids a bag), Adam. The wide table's rank
// looks up longer (its bags' 256 floats), the deep table's rank updates longer (24 ids a bag, each
// with its Adam state): each rank waits for the other once a step.
b51::WorkloadSpec simb51_two_tables() {
  const nlohmann::json j = {
      {"name", "simb51_two_tables"},
      {"tables",
       {{{"name", "wide"}, {"num_embeddings", 1000}, {"embedding_dim", 256}, {"pooling", "sum"}, {"feature_names", {"fw"}}},
        {{"name", "deep"}, {"num_embeddings", 1000}, {"embedding_dim", 16}, {"pooling", "sum"}, {"feature_names", {"fd"}}}}},
      {"features",
       {{{"name", "fw"}, {"pooling_factor", 1}, {"ids", "uniform"}}, {{"name", "fd"}, {"pooling_factor", 24}, {"ids", "uniform"}}}},
      {"batch_size", 64},
      {"steps", 3},
      {"warmup_steps", 1},
      {"seed", 1},
      {"devices", {{"count", 2}, {"backend", "simulated"}, {"hardware", kSimb51Profile}, {"memory_bytes", 1 << 30}}},
      {"optimizer", {{"type", "adam"}, {"learning_rate", 0.1}}},
      {"dense", nullptr},
      {"sharding", {{"default", "table_wise"}}}};
  return b51::with_resolved_backend(b51::parse_workload(j, "simb51"), "simb51");
}

b51::RunResult simb51_run(const b51::WorkloadSpec& s, const b51::ShardingPlan& plan, const fs::path& db) {
  b51::TrainerOptions o;
  o.session_path = db.string();
  return b51::run_training(s, plan, o);
}

// The cost model's time of rank r's op named `name` (its step program's compute op).
int64_t simb51_op_ns(const b51::StepProgram& p, const std::string& name, const b51::HardwareProfile& hw) {
  for (const auto& op : p.ops)
    if (op.name == name) return b51::compute_ns(op, hw);
  ADD_FAILURE() << "no op " << name;
  return 0;
}

// Per collective name (the op's: a record's name without "/split_check"), the measured steps'
// bytes sent of its records and its members' waits (for each call of a group: the last arrival
// minus each member's arrival; the split checks, which a GPU profile does not time, wait for nobody).
struct Simb51FromRecords {
  int64_t bytes_sent = 0, bytes_received = 0, wait_ns = 0;
};
std::map<std::string, Simb51FromRecords> simb51_from_records(const std::vector<s51::CollectiveRecord>& records) {
  std::map<std::string, Simb51FromRecords> out;
  std::map<std::pair<std::string, uint64_t>, std::vector<const s51::CollectiveRecord*>> calls;
  const std::string check = "/split_check";
  for (const auto& c : records) {
    if (c.step < 0) continue;
    const bool is_check = c.name.ends_with(check);
    const std::string name = is_check ? c.name.substr(0, c.name.size() - check.size()) : c.name;
    out[name].bytes_sent += c.bytes_sent;
    out[name].bytes_received += c.bytes_received;
    if (!is_check) calls[{c.group, c.sequence}].push_back(&c);
  }
  for (const auto& [key, members] : calls) {
    int64_t last = members.front()->start_ns;
    for (const auto* m : members) last = std::max(last, m->start_ns);
    for (const auto* m : members) out[members.front()->name].wait_ns += last - m->start_ns;
  }
  return out;
}

}  // namespace

// The waits by hand from the cost model (round_numbers: memory kernels at 1e12 B/s x efficiency,
// 1,000 ns a launch). Every collective's members end it together; the ranks then run the same ops
// except their shard's: after the input dist, kjt_permute + lookup before the output dist; after
// the grad dist, backward_fused_optimizer + dense_optimizer, which end the step. So each measured
// step (the warm-up step before the first) the output dist waits |(kjt_permute + lookup) of rank 0
// - the same of rank 1| and the next input dist (input_dist/splits, the step's first collective)
// |(backward_fused_optimizer + dense_optimizer) of rank 0 - the same of rank 1|; nothing else waits.
TEST(Simb51SimCollectives, WaitingForPeersIsTheRanksDifferenceOfTheCostModelsTimes) {
  const fs::path dir = simb51_scratch("waits");
  const b51::WorkloadSpec s = simb51_two_tables();
  const b51::ShardingPlan plan = b51::plan_sharding(s);
  const b51::RunResult r = simb51_run(s, plan, dir / "s.db");
  ASSERT_EQ(r.ended, b51::RunEnd::complete);
  const b51::HardwareProfile hw = b51::load_hardware_profile(kSimb51Profile);
  const b51::StepProgram p0 = b51::build_step_program(s, plan, 0, 1), p1 = b51::build_step_program(s, plan, 1, 1);
  const int64_t arrive0 = simb51_op_ns(p0, "kjt_permute", hw) + simb51_op_ns(p0, "lookup", hw);
  const int64_t arrive1 = simb51_op_ns(p1, "kjt_permute", hw) + simb51_op_ns(p1, "lookup", hw);
  const int64_t end0 = simb51_op_ns(p0, "backward_fused_optimizer", hw) + simb51_op_ns(p0, "dense_optimizer", hw);
  const int64_t end1 = simb51_op_ns(p1, "backward_fused_optimizer", hw) + simb51_op_ns(p1, "dense_optimizer", hw);
  // the workload does what it is built for: the rank that arrives last at the output dist is not
  // the one that ends the step last (so the critical path crosses ranks, below)
  ASSERT_NE(arrive0, arrive1);
  ASSERT_NE(end0, end1);
  ASSERT_NE(arrive0 > arrive1, end0 > end1);

  s51::SessionReader reader((dir / "s.db").string());
  const s51::RunStats st = s51::analyze(reader);
  std::map<std::string, s51::CollectiveTimes> by_name;
  for (const auto& c : st.collectives) by_name[reader.name(c.name_id)] = c;
  ASSERT_EQ(by_name.size(), 6u);
  EXPECT_EQ(by_name.at("output_dist/all_to_all").wait_ns, 3 * std::abs(arrive0 - arrive1));
  EXPECT_EQ(by_name.at("input_dist/splits").wait_ns, 3 * std::abs(end0 - end1));
  for (const char* none : {"input_dist/lengths", "input_dist/ids", "dense_all_reduce", "grad_dist/all_to_all"})
    EXPECT_EQ(by_name.at(none).wait_ns, 0) << none;

  // the per-collective bytes: what the records say (sent == received over a closed group), by hand:
  // output dist: the wide rank sends its 64 pooled rows of 256 floats (65,536 B), the deep rank 64
  // of 16 (4,096 B), and each checks the splits with 2 x 2 int64 to the other (64 B): 69,696 B a
  // step. input dist ids: 64 x 1 and 64 x 24 int64 ids (512 + 12,288 B) + the check: 12,864 B.
  // lengths: 64 int64 lengths each way (1,024 B) + 64; splits: 1 int64 each way (16 B) + 64.
  // dense_all_reduce: a buffer of 2 floats, which a ring of 2 ranks sends whole from each rank
  // (8 B) = 16 B; grad dist as output dist.
  const std::map<std::string, int64_t> hand = {{"output_dist/all_to_all", 69696}, {"input_dist/ids", 12864},
                                               {"input_dist/lengths", 1088},      {"input_dist/splits", 80},
                                               {"dense_all_reduce", 16},           {"grad_dist/all_to_all", 69696}};
  // stats moves each split check out of its collective's bytes into the check's own figures
  // (split_checks.h): the collective's own bytes are the hand figure less 64 B a step, the check's
  // 64 B a step, 2 checks a step (one a rank); the dense all-reduce has none.
  const auto records = simb51_from_records(reader.collectives());
  for (const auto& [name, c] : by_name) {
    const int64_t check = name == "dense_all_reduce" ? 0 : 64;
    EXPECT_EQ(c.bytes_sent, c.bytes_received) << name;
    EXPECT_EQ(c.bytes_sent + c.check_bytes_sent, records.at(name).bytes_sent) << name;
    EXPECT_EQ(c.bytes_sent, 3 * (hand.at(name) - check)) << name;
    EXPECT_EQ(c.check_bytes_sent, 3 * check) << name;
    EXPECT_EQ(c.check_count, check == 0 ? 0 : 3 * 2) << name;
    EXPECT_EQ(c.wait_ns, records.at(name).wait_ns) << name;
  }

  // the critical path of every measured step crosses ranks at the output dist: from the rank
  // that ends the step last back to the one that arrived last at the output dist
  ASSERT_EQ(st.critical_paths.size(), 3u);
  for (const auto& path : st.critical_paths) {
    std::set<int32_t> ranks;
    for (const auto& seg : path.segments) ranks.insert(seg.rank);
    EXPECT_EQ(ranks, (std::set<int32_t>{0, 1})) << "step " << path.step;
    EXPECT_EQ(path.segments.back().rank, end0 > end1 ? 0 : 1) << "step " << path.step;
    bool lookup_of_late_rank = false;
    for (const auto& seg : path.segments)
      lookup_of_late_rank |= reader.name(seg.name_id) == "lookup" && seg.rank == (arrive0 > arrive1 ? 0 : 1);
    EXPECT_TRUE(lookup_of_late_rank) << "step " << path.step;
  }
}

// The op's correlation is its first collective's sequence, numbered from 1 in each group as the
// Gloo groups number them; every member of a call has the same sequence (criteo_kaggle on 4 H100s,
// the tester's run: ranks 0, 1 and 3 wait about 11 us a step for rank 2 at the output dist).
TEST(Simb51SimCollectives, CriteoCommOpsCarryTheirFirstCollectivesSequence) {
  const fs::path dir = simb51_scratch("criteo");
  b51::WorkloadSpec s = b51::load_preset("criteo_kaggle");
  s.devices.backend = b51::Backend::simulated;
  s.devices.hardware = "h100_sxm";
  s.steps = 2;
  s.warmup_steps = 1;
  s = b51::with_resolved_backend(s, "simb51");
  const b51::RunResult r = simb51_run(s, b51::plan_sharding(s), dir / "c.db");
  ASSERT_EQ(r.ended, b51::RunEnd::complete);
  s51::SessionReader reader((dir / "c.db").string());
  const auto records = reader.collectives();
  std::map<std::pair<int32_t, uint64_t>, const s51::CollectiveRecord*> by_rank_seq;  // world group only
  uint64_t lowest = UINT64_MAX;
  for (const auto& c : records) {
    ASSERT_EQ(c.group, "world");
    lowest = std::min(lowest, c.sequence);
    by_rank_seq[{c.rank, c.sequence}] = &c;
  }
  EXPECT_EQ(lowest, 1u);
  int comm_ops = 0;
  for (const auto& o : reader.all_ops()) {
    if (o.category != s51::OpCategory::comm) continue;
    ++comm_ops;
    ASSERT_NE(o.correlation, 0u) << reader.name(o.name_id);
    const auto it = by_rank_seq.find({o.rank, o.correlation});
    ASSERT_NE(it, by_rank_seq.end());
    // the op's first collective: its split check where it has one, else the call itself
    EXPECT_TRUE(it->second->name == reader.name(o.name_id) || it->second->name == reader.name(o.name_id) + "/split_check")
        << reader.name(o.name_id) << " vs " << it->second->name;
    EXPECT_GE(it->second->start_ns, o.start_ns);
    EXPECT_LE(it->second->end_ns, o.end_ns);
  }
  EXPECT_EQ(comm_ops, 4 * 3 * 6);  // 4 ranks x 3 steps x 6 comm ops
  const s51::RunStats st = s51::analyze(reader);
  const auto from_records = simb51_from_records(records);
  int64_t waited = 0;
  for (const auto& c : st.collectives) {
    const std::string name = reader.name(c.name_id);
    EXPECT_EQ(c.wait_ns, from_records.at(name).wait_ns) << name;
    EXPECT_EQ(c.bytes_sent, c.bytes_received) << name;
    EXPECT_EQ(c.bytes_sent + c.check_bytes_sent, from_records.at(name).bytes_sent) << name;
    waited += c.wait_ns;
  }
  // rank 2 holds 22 tables (a longer lookup): the others wait for it at the output dist every step
  EXPECT_GT(from_records.at("output_dist/all_to_all").wait_ns, 2 * 5000);
  EXPECT_GT(waited, 0);
}

// run_lm's collectives (names and hand-computed bytes) and the CLI's run / plan / stats of an
// lm_embedding workload end to end.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "embedscope/engine/exec/lm_run.h"
#include "embedscope/engine/program/lm_program.h"
#include "embedscope/engine/workload/lm_spec.h"
#include "embedscope/sessions/analysis/load_imbalance.h"
#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"

using namespace embedscope::engine;
using nlohmann::json;

namespace {

LmWorkloadSpec spec2(bool sp) {
  LmWorkloadSpec s;
  s.vocab_size = 40;
  s.hidden_size = 8;
  s.sequence_length = 12;
  s.micro_batch_size = 2;  // T = 24 tokens
  s.world_size = 2;
  s.steps = 1;
  s.sequence_parallel = sp;
  return s;
}

/// Rank 0's bytes_sent per collective name (first step).
std::map<std::string, int64_t> rank0_bytes(const LmRunResult& r) {
  std::map<std::string, int64_t> out;
  for (const auto& c : r.collectives)
    if (c.rank == 0 && c.name.find("split_check") == std::string::npos) out[c.name] += c.bytes_sent;
  return out;
}

TEST(LmRun, VocabParallelAllReducesTokensTimesHidden) {
  const auto b = rank0_bytes(run_lm(spec2(false)));
  // ring all-reduce of T H floats: 2 (p - 1) / p x 24 x 8 x 4 = 768 bytes
  EXPECT_EQ(b.at("embedding/all_reduce"), 768);
  EXPECT_EQ(b.at("output_projection/grad_all_reduce"), 768);
  // the cross-entropy's three all-reduces of T floats: 96 bytes each; the full logits never move
  EXPECT_EQ(b.at("cross_entropy/max"), 96);
  EXPECT_EQ(b.at("cross_entropy/predicted_logit"), 96);
  EXPECT_EQ(b.at("cross_entropy/sum_exp"), 96);
  EXPECT_EQ(b.count("sequence_parallel/all_gather"), 0u);
  EXPECT_EQ(b.count("body/grad_all_reduce"), 0u);  // every rank ran the same tokens
}

TEST(LmRun, SequenceParallelReduceScattersAndGathers) {
  const auto b = rank0_bytes(run_lm(spec2(true)));
  // reduce-scatter of T H floats into T / p token slices: the other rank's slice, 12 x 8 x 4 = 384
  EXPECT_EQ(b.at("embedding/reduce_scatter"), 384);
  EXPECT_EQ(b.at("sequence_parallel/all_gather"), 384);
  EXPECT_EQ(b.at("output_projection/grad_reduce_scatter"), 384);
  EXPECT_EQ(b.at("embedding/grad_all_gather"), 384);
  EXPECT_EQ(b.count("embedding/all_reduce"), 0u);
  // the body's 2 layers of (8 x 8 + 8) floats: 2 (p - 1) / p x 144 x 4 = 576
  EXPECT_EQ(b.at("body/grad_all_reduce"), 576);
}

std::filesystem::path scratch() {
  static const auto dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("es_lm_cli_" + std::to_string(getpid()));
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}
embedscope::test_support::CliResult cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, scratch());
}

TEST(LmRun, SessionHoldsThePlanLoadAndTokenHistogram) {
  LmWorkloadSpec s = spec2(false);
  s.world_size = 3;
  s.make_vocab_size_divisible_by = 4;  // V' = ceil(40 / 12) * 12 = 48
  s.steps = 2;
  LmRunOptions opt;
  opt.session_path = (scratch() / "plan.db").string();
  opt.overwrite = true;
  run_lm(s, opt);
  embedscope::sessions::SessionReader session(opt.session_path);
  const auto tables = embedscope::sessions::workload_tables(session);
  ASSERT_EQ(tables.size(), 1u);
  EXPECT_EQ(tables[0].name, "token_embedding");
  EXPECT_EQ(tables[0].num_embeddings, 48);
  const auto shards = session.shards();
  ASSERT_EQ(shards.size(), 3u);
  EXPECT_EQ(shards[1].row_offset, 16);
  EXPECT_EQ(shards[1].num_rows, 16);
  EXPECT_EQ(shards[1].sharding_type, "vocab_parallel");
  // the group's 24 input tokens in each of the 2 steps, bucketed over 48 rows, once: every rank saw
  // the same tokens, so rank 0 writes them (tester43 F5: 3 x 2 x 24 counted each token per rank)
  int64_t ids = 0;
  for (const auto& b : session.id_histogram()) {
    ids += b.ids;
    EXPECT_EQ(b.row_end - b.row_begin, 1);  // 48 rows: 48 buckets of one row
  }
  EXPECT_EQ(ids, 2 * 24);
}

TEST(LmCli, RunPlanAndStatsOfAnLmWorkload) {
  const auto file = scratch() / "lm.json";
  std::ofstream(file) << to_json(spec2(false)).dump();
  const std::string db = (scratch() / "lm.db").string();
  auto r = cli("run " + file.string() + " --sequence-parallel --steps 2 --json -o " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j.at("ended"), "complete");
  EXPECT_EQ(j.at("sharding"), "vocab_parallel");
  EXPECT_TRUE(j.at("sequence_parallel").get<bool>());
  EXPECT_EQ(j.at("loss").size(), 2u);
  EXPECT_EQ(j.at("tokens_per_step"), 24);
  r = cli("stats " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("model        lm_embedding 40 x 8 (not padded), fp32, tied, sequence 12; vocab_parallel + "
                       "sequence_parallel"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("embedding/reduce_scatter"), std::string::npos) << r.out;
  // a step of an LM run is its tokens, not "1 samples" (tester33 D15)
  EXPECT_NE(r.out.find("2 measured steps of 24 tokens"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" tokens/s\n"), std::string::npos) << r.out;
  r = cli("plan --preset llama3_8b_embedding --json");
  // its 19.3 GiB fit or not in 90% of the memory available now (tester45 F10: not the total): the
  // plan is printed either way, exit 0 (the verdict is said, run refuses it: "refusal")
  ASSERT_EQ(r.code, 0) << r.err;
  const json p = json::parse(r.out);
  EXPECT_EQ(p.at("fits").get<bool>(), !p.contains("refusal")) << r.out;
  ASSERT_EQ(p.at("ranks").size(), 8u);
  EXPECT_EQ(p.at("ranks")[0].at("table_bytes"), 16032 * 4096 * 4);  // 128256 / 8 rows of fp32 master
  EXPECT_EQ(p.at("ranks")[0].at("logits_bytes"), int64_t{8192} * 16032 * 4);
  // bad input: exit 2, the field named, the flag that set it too
  r = cli("run --preset llama3_8b_embedding_scaled --devices 3 --sequence-parallel -o " + (scratch() / "x.db").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("/sequence_length: sequence_parallel splits each sequence over the 3 ranks: must be a multiple of 3 "
                       "(e.g. 255 or 258), got 256"),
            std::string::npos)
      << r.err;
  r = cli("run --preset llama3_8b_embedding_scaled --sharding table_wise -o " + (scratch() / "x.db").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--sharding: \"table_wise\" is not a sharding type of an lm_embedding workload"), std::string::npos)
      << r.err;
}

// A simulated LM cluster is asked for as a DLRM one (tester33 D14): --nodes x the profile's GPUs
// per node, past the 64 CPU threads of a measured run (which refuses them, naming --simulate).
TEST(LmCli, SimulatedClusterOfNodesBeyondTheCpuRanks) {
  const auto file = scratch() / "lm_nodes.json";
  auto spec = spec2(false);
  spec.vocab_size = 256;  // rows for 80 vocabulary shards
  std::ofstream(file) << to_json(spec).dump();
  const std::string db = (scratch() / "lm_nodes.db").string();
  std::filesystem::remove(db);
  auto r = cli("run " + file.string() + " --simulate h100_sxm --nodes 10 --steps 1 --json -o " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out).at("world_size"), 80);
  EXPECT_NE(r.err.find("SIMULATED: 10 nodes x 8 GPUs of hardware profile h100_sxm"), std::string::npos) << r.err;
  r = cli("run " + file.string() + " --simulate h100_sxm --devices 12 --gpus-per-node 4 --steps 1 --json --force-overwrite -o " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out).at("world_size"), 12);
  EXPECT_NE(r.err.find("SIMULATED: 3 nodes x 4 GPUs"), std::string::npos) << r.err;
  r = cli("run " + file.string() + " --simulate h100_sxm --devices 8 --nodes 2 -o " + db + "2");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--devices 8 disagrees with --nodes 2 x 8 GPUs per node (16 ranks)"), std::string::npos) << r.err;
  r = cli("run " + file.string() + " --devices 80 -o " + db + "3");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("/devices/count: a measured lm_embedding run has at most 64 ranks (CPU threads of one process), "
                       "got 80; --simulate PROFILE models up to 1024"),
            std::string::npos)
      << r.err;
  r = cli("run " + file.string() + " --nodes 2 -o " + db + "4");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--nodes: only with --simulate PROFILE"), std::string::npos) << r.err;
}

TEST(LmCli, PlanSimulatesTheStepProgram) {
  const auto file = scratch() / "lm_sim.json";
  std::ofstream(file) << to_json(spec2(false)).dump();
  auto r = cli("plan " + file.string() + " --simulate h100_sxm --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json sim = json::parse(r.out).at("simulated_step");
  EXPECT_EQ(sim.at("hardware"), "h100_sxm");
  // rank 0 sends 768 (embedding/all_reduce) + 768 (output_projection/grad_all_reduce) + 3 x 96
  // (cross-entropy) = 1824 B (as VocabParallelAllReducesTokensTimesHidden measures); 2 ranks, 24 tokens
  EXPECT_EQ(sim.at("bytes_sent_rank0"), 1824);
  EXPECT_DOUBLE_EQ(sim.at("bytes_on_the_wire_per_token").get<double>(), 2 * 1824 / 24.0);
  EXPECT_GT(sim.at("step_ns").get<int64_t>(), sim.at("comm_ns").get<int64_t>());
  r = cli("plan " + file.string() + " --simulate no_such_gpu");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("unknown hardware profile \"no_such_gpu\""), std::string::npos) << r.err;
  // run --simulate: the same program as a simulated session, the same bytes; nothing trained
  const std::string db = (scratch() / "lm_sim.db").string();
  std::filesystem::remove(db);
  r = cli("run " + file.string() + " --simulate h100_sxm --steps 2 --json -o " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  const json run = json::parse(r.out);
  EXPECT_TRUE(run.at("simulated").get<bool>());
  EXPECT_TRUE(run.at("loss").empty());
  EXPECT_DOUBLE_EQ(run.at("bytes_on_wire_per_token").get<double>(), 2 * 1824 / 24.0);
  EXPECT_EQ(run.at("step_time_ns").at("mean").get<double>(), sim.at("step_ns").get<double>());
  // the session's comm spans are the collectives under their own names, as a measured run's: the
  // token embedding's share is the plan's (tester33 D4: 0.0% from the ops' fused names)
  EXPECT_GT(sim.at("embedding_comm_share").get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(run.at("embedding_comm_share_rank0").get<double>(), sim.at("embedding_comm_share").get<double>());
  {
    embedscope::sessions::SessionReader session(db);
    EXPECT_EQ(session.meta("simulated"), "1");
    EXPECT_EQ(session.steps().size(), 4u);  // 2 steps x 2 ranks
    int64_t sent = 0;
    for (const auto& c : session.collectives())
      if (c.rank == 0 && c.step == 0 && c.name.find("split_check") == std::string::npos) sent += c.bytes_sent;
    EXPECT_EQ(sent, 1824);
  }
  r = cli("stats " + db);
  EXPECT_EQ(r.code, 0) << r.err;
  // row_wise's program names its comm ops "input_dist", "output_dist", "grad_dist" (the
  // collectives inside are "input_dist/ids", ...): the same share in plan and run
  r = cli("plan " + file.string() + " --sharding row_wise --simulate h100_sxm --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const double plan_rw = json::parse(r.out).at("simulated_step").at("embedding_comm_share").get<double>();
  r = cli("run " + file.string() + " --sharding row_wise --simulate h100_sxm --steps 1 --json -o " + db + ".rw");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_GT(plan_rw, 0.0);
  EXPECT_DOUBLE_EQ(json::parse(r.out).at("embedding_comm_share_rank0").get<double>(), plan_rw);
  r = cli("run " + file.string() + " --pipeline sparse_dist -o " + (scratch() / "y.db").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--pipeline: not for an lm_embedding workload"), std::string::npos) << r.err;
}

}  // namespace

// `program` prints an lm_embedding workload's step program (the one the executors run), and the
// commands that read DLRM workloads only say so instead of misreading it (tester33 D7).
TEST(LmRun, ProgramPrintsTheLmStepAndDlrmOnlyCommandsSaySo) {
  auto r = cli("program --preset llama3_8b_embedding_scaled --devices 2 --rank 1 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  LmWorkloadSpec spec = load_lm_preset("llama3_8b_embedding_scaled");
  spec.world_size = 2;
  EXPECT_EQ(nlohmann::json::parse(r.out), to_json(build_lm_step_program(spec, 1, 0)));
  r = cli("program --preset llama3_8b_embedding_scaled --devices 2 --rank 2");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--rank 2: the workload has ranks 0 to 1"), std::string::npos) << r.err;
  // (`scaling` takes lm_embedding workloads: tests/engine/exec/lm59_scaling_test.cpp)
  for (const char* cmd : {"inspect-input"}) {
    r = cli(std::string(cmd) + " --preset llama3_8b_embedding_scaled");
    EXPECT_EQ(r.code, 2) << cmd;
    EXPECT_NE(r.err.find("preset llama3_8b_embedding_scaled: an lm_embedding workload"), std::string::npos)
        << cmd << ": " << r.err;
  }
}

// The run's step time is the slowest rank's, as `stats` computes it from the session's steps rows
// (tester33 D6: it was rank 0's).
TEST(LmRun, StepTimeIsTheSlowestRanksAsStatsHasIt) {
  LmWorkloadSpec s = spec2(false);
  s.world_size = 3;
  s.steps = 3;
  LmRunOptions opt;
  opt.session_path = (scratch() / "slowest.db").string();
  opt.overwrite = true;
  const LmRunResult r = run_lm(s, opt);
  embedscope::sessions::SessionReader session(opt.session_path);
  std::map<int64_t, int64_t> slowest;
  for (const auto& st : session.steps()) slowest[st.step] = std::max(slowest[st.step], st.end_ns - st.start_ns);
  ASSERT_EQ(r.step_ns.size(), 3u);
  ASSERT_EQ(slowest.size(), 3u);
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(r.step_ns[static_cast<size_t>(i)], slowest.at(i)) << "step " << i;
}

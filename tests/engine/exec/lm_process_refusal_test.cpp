// tester43's findings on lm_embedding workloads through the CLI: one-rank-per-process flags and
// `launch` refused (F18), a workload beyond this machine's memory refused before the run (F1),
// and the summary of a cancelled run (F7).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/engine/planner/host_memory.h"
#include "embedscope/engine/planner/lm_memory_estimate.h"
#include "embedscope/engine/workload/lm_spec.h"
#include "embedscope/sessions/model/units.h"
#include "support/cli_run.h"

namespace {

namespace fs = std::filesystem;

fs::path lm43_scratch() {
  static const auto dir = [] {
    auto d = fs::temp_directory_path() / ("es_lm43_cli_" + std::to_string(getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

embedscope::test_support::CliResult lm43_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, lm43_scratch());
}

/// lm_uneven.json of the finding: V 1001, H 32 on 3 ranks, a handful of steps.
std::string lm43_uneven_file() {
  embedscope::engine::LmWorkloadSpec s;
  s.name = "lm_uneven";
  s.vocab_size = 1001;
  s.hidden_size = 32;
  s.sequence_length = 8;
  s.micro_batch_size = 2;
  s.world_size = 3;
  s.steps = 2;
  const auto file = lm43_scratch() / "lm_uneven.json";
  std::ofstream(file) << embedscope::engine::to_json(s).dump();
  return file.string();
}

bool lm43_dir_has_db(const fs::path& dir) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".db") return true;
  return false;
}

constexpr const char* kThreadsNote =
    "an lm_embedding workload's ranks are threads of one process: --rank/--world-size/--rendezvous and launch are "
    "for DLRM workloads";

// F18: run --rank/--world-size/--rendezvous (each alone too) and launch of an lm_embedding
// workload are bad input (exit 2) naming the flag, and write no session at all.
TEST(LmProcessRefusal, RankFlagsAndLaunchAreRefusedWritingNothing) {
  const std::string file = lm43_uneven_file();
  const fs::path out = lm43_scratch() / "f18";
  fs::create_directories(out);
  const std::string o = " -o '" + (out / "x.rank{rank}.db").string() + "'";
  auto r = lm43_cli("run " + file + " --rank 0 --world-size 2 --rendezvous file://" + (out / "rdv").string() + o);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--rank: not for an lm_embedding workload (" + file + "): " + kThreadsNote), std::string::npos)
      << r.err;
  for (const std::string flag : {"--world-size 2", "--rendezvous file:///tmp/nowhere", "--run-id r1", "--host 127.0.0.1"}) {
    r = lm43_cli("run " + file + " " + flag + o);
    EXPECT_EQ(r.code, 2) << flag << ": " << r.err;
    EXPECT_NE(r.err.find(flag.substr(0, flag.find(' ')) + ": not for an lm_embedding workload"), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find(kThreadsNote), std::string::npos) << r.err;
  }
  // a launcher's environment of more than one rank is the same thing
  r = embedscope::test_support::run_cli("RANK=1 WORLD_SIZE=2 " + std::string(EMBEDSCOPE_CLI), "run " + file + o,
                                        lm43_scratch());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(file + ": rank 1 of 2 from torchrun's environment: " + kThreadsNote), std::string::npos)
      << r.err;
  // the other refused flags' list says so too
  r = lm43_cli("run --preset llama3_8b_embedding_scaled --pipeline semi_sync" + o);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--pipeline: not for an lm_embedding workload (preset llama3_8b_embedding_scaled runs on CPU "
                       "ranks; its flags: --devices, --sharding, --sequence-parallel, --steps, --batch-size, "
                       "--simulate, --nodes, --gpus-per-node; " +
                       std::string(kThreadsNote) + ")"),
            std::string::npos)
      << r.err;
  // launch: refused before any process starts
  const std::string launch_o = " -o " + (out / "lm_launch.db").string();
  r = lm43_cli("launch -n 2 run " + file + launch_o);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("launch: " + file + " is an lm_embedding workload: " + kThreadsNote), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("[rank"), std::string::npos) << r.err;  // no rank ran
  r = lm43_cli("launch -n 2 run --preset=gpt2_small_embedding" + launch_o);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("launch: preset gpt2_small_embedding is an lm_embedding workload"), std::string::npos) << r.err;
  EXPECT_FALSE(lm43_dir_has_db(out));
  EXPECT_FALSE(fs::exists(out / "rdv"));
  // the same workload as threads of one process runs (the uneven split of the finding)
  r = lm43_cli("run " + file + " --json -o " + (out / "ok.db").string());
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("ranks")[1].at("row_begin"), 333);
  EXPECT_EQ(j.at("ranks")[2].at("row_begin"), 667);
}

// F1, the rule: all ranks' estimates together against 90% of the machine (exec/host_memory_check.h's).
TEST(LmProcessRefusal, MemoryRefusalNamesEachRankAndTheMachine) {
  std::vector<embedscope::engine::LmMemoryEstimate> est(2);
  est[0].rank = 0;
  est[0].table_bytes = int64_t{3} << 30;  // 3.0 GiB
  est[1].rank = 1;
  est[1].table_bytes = int64_t{3} << 30;
  est[1].logits_bytes = int64_t{1} << 29;  // 3.5 GiB
  const int64_t gib = int64_t{1} << 30;
  EXPECT_EQ(embedscope::engine::lm_memory_refusal(est, {8 * gib, 8 * gib}),  // 6.5 GiB of 7.2 GiB (90% of 8)
            "");
  EXPECT_EQ(embedscope::engine::lm_memory_refusal(est, {0, 0}), "");  // unknown: never refused
  EXPECT_EQ(embedscope::engine::lm_memory_refusal(est, {8 * gib, 7 * gib}),  // 6.5 GiB > 6.3 GiB
            "/devices: the cpu backend runs all 2 ranks of this lm_embedding workload as threads of this process: "
            "rank 0 needs 3.0 GiB, rank 1 3.5 GiB (planner/lm_memory_estimate.h), 6.5 GiB in all, but this machine has "
            "7.0 GiB available now (of 8.0 GiB; a run is refused above 90% of what is available); use fewer ranks, a "
            "smaller vocab_size, hidden_size or micro batch, or --simulate PROFILE");
  // tester45 F10: the total fits (6.5 <= 0.9 x 24 GiB) but what other processes left does not: refused
  EXPECT_NE(embedscope::engine::lm_memory_refusal(est, {24 * gib, 7 * gib}), "");
  EXPECT_EQ(embedscope::engine::lm_memory_refusal(est, {24 * gib, 8 * gib}), "");
}

// F1 through the CLI: vocab 2^31 x 4096 with adam on 3 ranks, 43 TiB a rank: `plan` prints the
// estimate and the verdict, then exit 2; `run` is refused before it starts, nothing written.
TEST(LmProcessRefusal, WorkloadBeyondThisMachineIsRefusedBeforeTheRun) {
  embedscope::engine::LmWorkloadSpec s;
  s.name = "lm_huge";
  s.vocab_size = int64_t{1} << 31;
  s.hidden_size = 4096;
  s.sequence_length = 8;
  s.micro_batch_size = 2;
  s.world_size = 3;
  s.optimizer = embedscope::engine::LmOptimizer::adam;
  s.steps = 1;
  const auto file = (lm43_scratch() / "lm_huge.json").string();
  std::ofstream(file) << embedscope::engine::to_json(s).dump();
  const auto est = embedscope::engine::estimate_lm_memory(s);
  ASSERT_EQ(est.size(), 3u);
  // floor(2^31 / 3) = 715,827,882 rows on rank 0 (rows [floor(r V / p), floor((r + 1) V / p))), fp32 master of H = 4096
  EXPECT_EQ(est[0].table_bytes, int64_t{715827882} * 4096 * 4);
  const int64_t machine = embedscope::engine::this_host_memory().total_bytes;
  ASSERT_GT(machine, 0);
  ASSERT_GT(est[0].total(), machine);  // 10.7 TiB of table alone: beyond any machine this runs on
  using embedscope::sessions::format_bytes;
  const std::string each = "rank 0 needs " + format_bytes(est[0].total()) + ", rank 1 " + format_bytes(est[1].total()) +
                           ", rank 2 " + format_bytes(est[2].total());
  // plan gives the verdict without refusing the plan (exit 0), as a DLRM plan's on this machine;
  // run refuses it
  auto r = lm43_cli("plan " + file);
  EXPECT_EQ(r.code, 0) << r.err;
  // the available figure changes between processes: only its wording and the total are compared
  EXPECT_NE(r.out.find("memory       DOES NOT FIT: all 3 ranks need " +
                       format_bytes(est[0].total() + est[1].total() + est[2].total()) + " in all; this machine has "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(" available now (of " + format_bytes(machine) + "; a run is refused above 90% of what is available) "
                       "(cpu ranks are threads of one process); `run` refuses it (--simulate PROFILE plans a cluster)\n"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.err.find("error:"), std::string::npos) << r.err;
  r = lm43_cli("plan " + file + " --json");
  EXPECT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_FALSE(j.at("fits").get<bool>());
  EXPECT_FALSE(j.contains("ended")) << j.dump();
  // run's refusal, as the run gives it
  EXPECT_NE(j.at("refusal").get<std::string>().find("/devices: the cpu backend runs all 3 ranks of this lm_embedding "
                                                    "workload as threads of this process: " + each),
            std::string::npos)
      << j.dump();
  EXPECT_NE(j.at("refusal").get<std::string>().find(" available now (of " + format_bytes(machine) + "; "), std::string::npos);
  EXPECT_EQ(j.at("machine_memory_bytes"), machine);
  EXPECT_GT(j.at("available_memory_bytes").get<int64_t>(), 0);
  EXPECT_LE(j.at("available_memory_bytes").get<int64_t>(), machine);
  const fs::path out = lm43_scratch() / "f1";
  fs::create_directories(out);
  r = lm43_cli("run " + file + " -o " + (out / "lm_huge.db").string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("error: " + file + ": /devices: the cpu backend runs all 3 ranks of this lm_embedding workload "
                       "as threads of this process: " + each),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(" available now (of " + format_bytes(machine) + "; "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("embedscope run:"), std::string::npos) << r.err;  // refused before it is announced
  EXPECT_FALSE(lm43_dir_has_db(out));
  // the small one fits, and says so
  r = lm43_cli("plan " + lm43_uneven_file());
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("memory       fits: all 3 ranks need "), std::string::npos) << r.out;
}

// Runs the CLI with `args`, stdout to a file (`other`), stderr read through a pipe (`piped`); once
// stderr holds `wait_for` the child gets `sig`. No timing: the run is far too long to end by itself.
embedscope::test_support::SignalledRun lm43_signal_after(const std::vector<std::string>& args, const std::string& wait_for,
                                                         int sig) {
  return embedscope::test_support::run_signalled(EMBEDSCOPE_CLI, args, sig, {{wait_for}},
                                                 {2, (lm43_scratch() / "signal_out.txt").string()});
}

// F7: a cancelled run's summary counts the steps run, and bytes/token over them. V 40, H 8,
// T = 12 x 2 = 24 tokens, 2 ranks, vocab_parallel: per step each rank sends the ring all-reduce
// of T H floats twice (embedding, output projection's gradient), 2 (p - 1) / p x 24 x 8 x 4 =
// 768 bytes each, and the cross-entropy's three all-reduces of T floats, 96 bytes each: 1,824
// bytes a rank, 3,648 for both, / 24 tokens = 152 bytes on the wire per token.
TEST(LmProcessRefusal, CancelledRunCountsTheStepsItRan) {
  embedscope::engine::LmWorkloadSpec s;
  s.name = "lm_long";
  s.vocab_size = 40;
  s.hidden_size = 8;
  s.sequence_length = 12;
  s.micro_batch_size = 2;
  s.world_size = 2;
  s.steps = 100000;
  const auto file = (lm43_scratch() / "lm_long.json").string();
  std::ofstream(file) << embedscope::engine::to_json(s).dump();
  const std::string db = (lm43_scratch() / "lm_int.db").string();
  // signalled at its first progress line ("step N/100000  T tokens/s  ETA ..."), once steps have run: a
  // signal right after the header can come before the run starts, which ends it with no session
  // ("cancelled before the run started", fixc49), not what this test is about
  auto st = lm43_signal_after({"run", file, "--json", "--force-overwrite", "-o", db}, " tokens/s  ETA ", SIGTERM);
  ASSERT_TRUE(WIFEXITED(st.status)) << st.piped;
  EXPECT_EQ(WEXITSTATUS(st.status), 0) << st.piped;
  const auto j = nlohmann::json::parse(st.other);
  EXPECT_EQ(j.at("ended"), "cancelled");
  const int64_t n = j.at("steps").get<int64_t>();
  EXPECT_GE(n, 1);
  EXPECT_LT(n, 100000);
  EXPECT_EQ(j.at("steps_planned"), 100000);
  EXPECT_DOUBLE_EQ(j.at("bytes_on_wire_per_token").get<double>(), 152.0);
  for (const auto& c : j.at("collectives_rank0"))
    if (c.at("name") == "embedding/all_reduce") {
      EXPECT_EQ(c.at("count"), n);
      EXPECT_EQ(c.at("bytes_sent"), 768 * n);
    }
  // the text summary, cancelled by Ctrl-C
  st = lm43_signal_after({"run", file, "--force-overwrite", "-o", db}, " tokens/s  ETA ", SIGINT);
  ASSERT_TRUE(WIFEXITED(st.status)) << st.piped;
  EXPECT_EQ(WEXITSTATUS(st.status), 0) << st.piped;
  const auto at = st.other.find("cancelled after ");
  ASSERT_NE(at, std::string::npos) << st.other;
  const int64_t m = std::stoll(st.other.substr(at + 16));
  EXPECT_GE(m, 1);
  EXPECT_NE(st.other.find("cancelled after " + std::to_string(m) + (m == 1 ? " step" : " steps") + "; session: " + db +
                        "\n"),
            std::string::npos)
      << st.other;
  EXPECT_NE(st.other.find("steps        " + std::to_string(m) + " (cancelled; 100000 planned) of 24 tokens"),
            std::string::npos)
      << st.other;
  EXPECT_NE(st.other.find("; 152 bytes on the wire per token"), std::string::npos) << st.other;
}

// F16 (lm44): the cost model times a bf16 LM step's output projection at the profile's tensor-core
// rate (dense_bf16_flops_per_s x dense_bf16_efficiency), its body and fp32 GEMMs at the FP32 rate;
// every SIMULATED line says which, with the rates.
TEST(LmProcessRefusal, SimulatedLinesSayHowTheGemmsAreTimed) {
  auto r = lm43_cli("plan --preset llama3_8b_embedding_scaled");  // bf16
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("SIMULATED step on h100_sxm (4 GPUs per node; the step program timed by the cost model, not this "
                       "machine; the output projection's GEMMs timed as bf16 on tensor cores (989.4 TFLOP/s x 0.6), the "
                       "body's as fp32 on CUDA cores (67 TFLOP/s x 0.5)): "),
            std::string::npos)
      << r.out;
  r = lm43_cli("plan " + lm43_uneven_file());  // fp32
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("not this machine; GEMMs timed as fp32 on CUDA cores (67 TFLOP/s x 0.5; no tensor cores, no TF32)): "),
            std::string::npos)
      << r.out;
  const std::string db = (lm43_scratch() / "lm_sim.db").string();
  r = lm43_cli("run " + lm43_uneven_file() + " --simulate h100_sxm --force-overwrite -o " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("SIMULATED: 1 node x 3 GPUs of hardware profile h100_sxm; every time below is the cost model's, "
                       "nothing is trained; GEMMs timed as fp32 on CUDA cores (67 TFLOP/s x 0.5; no tensor cores, no TF32)\n"),
            std::string::npos)
      << r.err;
}

}  // namespace

// The threaded executor running the lm_embedding step program (exec/threaded/lm_executor.h):
// the spans it records against the program and the collectives, and the endings of a run that
// does not complete (out of memory, cancelled) as the session records them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "embedscope/engine/exec/lm_run.h"
#include "embedscope/engine/program/lm_program.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"

using namespace embedscope::engine;
namespace sessions = embedscope::sessions;

namespace {

/// V = 64, H = 8, S = 8, B = 2 (T = 16), 2 body layers, vocab_parallel untied on 2 ranks: rank 0
/// holds rows [0, 32); its parameters and gradients take 5248 B, its step's peak 10368 B
/// (lm_memory_test.cpp HandComputedPeakOfOneRank).
LmWorkloadSpec small_spec() {
  LmWorkloadSpec s;
  s.vocab_size = 64;
  s.hidden_size = 8;
  s.sequence_length = 8;
  s.micro_batch_size = 2;
  s.body_layers = 2;
  s.world_size = 2;
  s.tie_word_embeddings = false;
  s.steps = 3;
  return s;
}

std::string scratch(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (name + "_" + std::to_string(getpid()) + ".esdb")).string();
}

TEST(LmExecutor, SpansAreTheProgramsComputeOpsAndOneCommSpanPerCollective) {
  LmWorkloadSpec s = small_spec();
  s.sequence_parallel = true;
  s.steps = 2;
  const LmRunResult r = run_lm(s);
  EXPECT_EQ(r.ended, RunEnd::complete);
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE(rank);
    // the comm lane: exactly the rank's collectives, by name, each with its bytes
    std::map<std::string, int64_t> span_bytes, coll_bytes;
    int compute = 0;
    for (const auto& e : r.ops) {
      if (e.rank != rank) continue;
      if (e.lane == sessions::Lane::compute) ++compute;
      if (e.lane == sessions::Lane::comm) span_bytes[e.name] += e.bytes;
    }
    for (const auto& c : r.collectives)
      if (c.rank == rank) coll_bytes[c.name] += c.bytes_sent + c.bytes_received;
    EXPECT_EQ(span_bytes, coll_bytes);
    // sequence parallel, p = 2: embedding/reduce_scatter of 2 x 8 tokens x 8 floats: each rank
    // sends the other's 64-float half and receives its own (2 x 256 B), twice (2 steps)
    EXPECT_EQ(span_bytes.at("embedding/reduce_scatter"), 2 * 2 * 64 * 4);
    int program_compute = 0;
    for (const ProgramOp& op : build_lm_step_program(s, rank, 0).ops)
      program_compute += op.lane == sessions::Lane::compute ? 1 : 0;
    EXPECT_EQ(compute, 2 * program_compute);
  }
}

TEST(LmExecutor, OutOfMemoryEndsTheSessionOomWithWhatTheRankHeld) {
  // One rank (no peer to fail with it), V = 16400, H = 8, tied, T = 16, in 2 MiB of device
  // memory. The caching allocator serves requests up to 1 MiB from 2 MiB segments of its small
  // pool: E and its gradient (16400 x 8 x 4 = 524800 B each, 1025 x 512), the body's 8 blocks of
  // 512 B, the lookup's 512 B, the batch's token ids and targets (16 int64, a 512 B block each)
  // and the body's activations (5 x 16 x 8 x 4 = 2560 B) share the
  // one segment; the logits [16 x 16400] (1049600 B > 1 MiB) need a large-pool segment of their
  // own, which does not fit.
  LmWorkloadSpec s = small_spec();
  s.vocab_size = 16400;
  s.world_size = 1;
  s.tie_word_embeddings = true;
  const std::string path = scratch("lm_oom");
  LmRunOptions opt;
  opt.session_path = path;
  opt.overwrite = true;
  opt.device_memory_bytes = int64_t{2} << 20;
  try {
    run_lm(s, opt);
    FAIL() << "the run should have run out of memory";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("out of memory"), std::string::npos) << e.what();
  }
  {
    sessions::SessionReader session(path);
    EXPECT_EQ(session.status(), "oom");
    EXPECT_NE(session.meta(sessions::meta::kEndMessage).find("out of memory"), std::string::npos);
    EXPECT_TRUE(session.steps().empty());  // no step ended
    // the layout that could not hold the logits, and the counters of step 0 with what the rank
    // held: E, dE, the body, the token ids and targets and the activations (the lookup's buffer
    // was freed)
    const auto snaps = session.memory_snapshots();
    ASSERT_EQ(snaps.size(), 1u);
    EXPECT_EQ(snaps[0].reason, "oom");
    const auto counters = session.memory_counters();
    ASSERT_EQ(counters.size(), 1u);
    EXPECT_EQ(counters[0].step, 0);
    EXPECT_EQ(counters[0].allocated, 2 * 524800 + 8 * 512 + 2 * 512 + 2560);
    // the step's spans up to the failure: the ops before the logits (the lookup's all-reduce
    // included) and the logits op itself, ended where it failed
    std::vector<std::string> names;
    for (const auto& op : session.all_ops()) names.push_back(session.name(op.name_id));
    std::sort(names.begin(), names.end());
    EXPECT_EQ(names, (std::vector<std::string>{"body_forward", "embedding/all_reduce", "input", "lookup",
                                              "output_projection/logits"}));
    EXPECT_EQ(session.ranks().size(), 1u);
  }
  std::filesystem::remove(path);
}

TEST(LmExecutor, CancelStopsEveryRankAfterTheSameStep) {
  const std::string path = scratch("lm_cancel");
  std::atomic<bool> cancel{true};  // set before the run: it stops after step 0
  LmRunOptions opt;
  opt.session_path = path;
  opt.overwrite = true;
  opt.cancel = &cancel;
  const LmRunResult r = run_lm(small_spec(), opt);
  EXPECT_EQ(r.ended, RunEnd::cancelled);
  EXPECT_EQ(r.losses.size(), 1u);
  EXPECT_EQ(r.step_ns.size(), 1u);
  {
    sessions::SessionReader session(path);
    EXPECT_EQ(session.status(), "cancelled");
    EXPECT_EQ(session.steps().size(), 2u);  // step 0 of both ranks
  }
  std::filesystem::remove(path);
}

}  // namespace

// fixj50: an lm_embedding run writes its token histogram with each step's records (one call of
// SessionWriter::add_step_records: the step row, the rank's load counter and the buckets its
// batch changed, in one transaction), as the DLRM ranks do since fixe49. Before, the LM executor
// wrote it at the run's end only, so a run killed with SIGKILL kept no id_histogram at all.
//
// The reference is independent of the executor: the tokens are lm_sequence_tokens(spec, step,
// sequence) (the same pure function the run and the double-precision reference draw from), a
// rank's inputs are tokens [0, S) of its sequences (vocab_parallel: the group's sequences
// [0, B), counted once, by rank 0; data_parallel: rank r's [r B, (r + 1) B)), and a token's
// bucket is id_bucket_of_row(V', id).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/engine/model/lm_embedding.h"
#include "embedscope/engine/workload/lm_spec.h"
#include "embedscope/sessions/model/id_buckets.h"
#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;
using embedscope::engine::LmSharding;
using embedscope::engine::LmWorkloadSpec;

fs::path fixj50_scratch() {
  const fs::path d = fs::temp_directory_path() / ("es_fixj50_lmhist_" + std::to_string(getpid()));
  fs::create_directories(d);
  return d;
}

/// 1,000 x 8 tied fp32, sequences of 16 tokens, 2 a micro batch: 32 input tokens a rank a step
/// (vocab_parallel: the group's 32); Zipf(1) ids, so a few buckets are hot.
LmWorkloadSpec fixj50_spec(LmSharding sharding) {
  LmWorkloadSpec s;
  s.name = "fixj50_lm";
  s.vocab_size = 1000;
  s.hidden_size = 8;
  s.sequence_length = 16;
  s.micro_batch_size = 2;
  s.body_layers = 1;
  s.world_size = 2;
  s.sharding = sharding;
  s.steps = 4;
  return s;
}

/// `db` and its -wal / -shm gone (a test repeated in one process reuses its scratch folder).
void fixj50_remove_session(const std::string& db) {
  for (const char* tail : {"", "-wal", "-shm"}) fs::remove(db + tail);
}

std::string fixj50_write_spec(const LmWorkloadSpec& s, const fs::path& dir) {
  const fs::path f = dir / (std::string("lm_") + embedscope::engine::to_string(s.sharding) + ".json");
  std::ofstream(f) << embedscope::engine::to_json(s).dump();
  return f.string();
}

/// (rank, bucket) -> ids: the tokens rank `rank` counts over steps [0, steps).
std::map<std::pair<int32_t, int32_t>, int64_t> fixj50_reference(const LmWorkloadSpec& s, int rank, int64_t steps) {
  const int64_t vp = s.padded_vocab_size(), B = s.micro_batch_size, S = s.sequence_length;
  const int64_t seq0 = s.sharding == LmSharding::vocab_parallel ? 0 : rank * B;
  std::map<std::pair<int32_t, int32_t>, int64_t> out;
  for (int64_t st = 0; st < steps; ++st)
    for (int64_t g = seq0; g < seq0 + B; ++g) {
      const std::vector<int64_t> tok = embedscope::engine::lm_sequence_tokens(s, st, g);
      for (int64_t i = 0; i < S; ++i)
        ++out[{rank, static_cast<int32_t>(embedscope::sessions::id_bucket_of_row(vp, tok[static_cast<size_t>(i)]))}];
    }
  return out;
}

struct Fixj50Session {
  std::map<std::pair<int32_t, int32_t>, int64_t> histogram;  // (rank, bucket) -> ids, rows with ids only
  int64_t histogram_rows = 0, zero_rows = 0;
  std::map<int32_t, int64_t> hist_ids, load_ids, steps;  // by rank
  std::map<int64_t, int64_t> load_ids_of_step;           // summed over the ranks
  std::map<int64_t, int> ranks_of_step;                  // step rows by step
  bool bounds_ok = true;                                 // every bucket's rows as id_bucket_begin says
};

Fixj50Session fixj50_read(const std::string& db, int64_t vp) {
  const embedscope::sessions::SessionReader s(db);
  Fixj50Session out;
  for (const auto& b : s.id_histogram()) {
    ++out.histogram_rows;
    EXPECT_EQ(b.table, 0);
    if (b.row_begin != embedscope::sessions::id_bucket_begin(vp, b.bucket) ||
        b.row_end != embedscope::sessions::id_bucket_begin(vp, b.bucket + 1))
      out.bounds_ok = false;
    if (b.ids == 0) {
      ++out.zero_rows;
      continue;
    }
    out.histogram[{b.rank, b.bucket}] += b.ids;
    out.hist_ids[b.rank] += b.ids;
  }
  for (const auto& c : s.load()) {
    out.load_ids[c.rank] += c.ids;
    out.load_ids_of_step[c.step] += c.ids;
  }
  for (const auto& st : s.steps()) {
    ++out.steps[st.rank];
    ++out.ranks_of_step[st.step];
  }
  return out;
}

/// Runs `spec` with 1,000,000 steps and SIGKILLs it once every rank has committed at least 6.
Fixj50Session fixj50_killed_run(const LmWorkloadSpec& spec, const fs::path& dir, const std::string& db) {
  const std::string file = fixj50_write_spec(spec, dir);
  fixj50_remove_session(db);
  const int64_t vp = spec.padded_vocab_size();
  const auto k = embedscope::test_support::kill_when(
      EMBEDSCOPE_CLI, {"run", file, "--steps", "1000000", "-o", db}, [&] {
        if (!fs::exists(db)) return false;
        const Fixj50Session s = fixj50_read(db, vp);
        if (s.steps.size() < static_cast<size_t>(spec.world_size)) return false;
        for (const auto& [r, n] : s.steps)
          if (n < 6) return false;
        return true;
      });
  EXPECT_TRUE(k.ready) << "the run did not keep 6 steps on every rank within 60 s";
  EXPECT_TRUE(WIFSIGNALED(k.status) && WTERMSIG(k.status) == SIGKILL) << "status " << k.status;
  return fixj50_read(db, vp);
}
}  // namespace

// data_parallel: each rank counts its own batch and looks up its own batch's ids in its whole
// replica, so a rank's histogram and load counters are both exactly the 32 tokens of each of its
// kept steps, whatever point the kill came at.
TEST(Fixj50LmHistogram, SigkilledDataParallelRunKeepsEachRanksKeptSteps) {
  const fs::path dir = fixj50_scratch();
  const std::string db = (dir / "kdp.db").string();
  const LmWorkloadSpec spec = fixj50_spec(LmSharding::data_parallel);
  const Fixj50Session s = fixj50_killed_run(spec, dir, db);
  ASSERT_EQ(s.steps.size(), 2u);
  for (const auto& [r, steps] : s.steps) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_GE(steps, 6);
    EXPECT_LT(steps, 1000000);
    ASSERT_EQ(s.hist_ids.count(r), 1u) << "a killed LM run kept no token histogram";
    EXPECT_EQ(s.hist_ids.at(r), 32 * steps);
    EXPECT_EQ(s.load_ids.at(r), 32 * steps);
  }
  // bucket by bucket, the tokens of exactly the steps kept (rank r: steps 0 .. steps(r) - 1)
  auto expected = fixj50_reference(spec, 0, s.steps.at(0));
  const auto r1 = fixj50_reference(spec, 1, s.steps.at(1));
  expected.insert(r1.begin(), r1.end());
  EXPECT_EQ(s.histogram, expected);
  EXPECT_TRUE(s.bounds_ok);
  EXPECT_EQ(s.zero_rows, 0);  // only the buckets a step changed: none written empty
}

// vocab_parallel: the group's one batch is counted once, by rank 0, with rank 0's step rows; each
// rank's load counter holds the ids its vocabulary rows served, so for every step that both ranks
// kept the two counters add up to the step's 32 tokens (every token's row is in one shard). The
// ranks commit apart, so at the kill rank 1 may hold a step fewer or more than rank 0.
TEST(Fixj50LmHistogram, SigkilledVocabParallelRunKeepsRank0sKeptSteps) {
  const fs::path dir = fixj50_scratch();
  const std::string db = (dir / "kvp.db").string();
  const LmWorkloadSpec spec = fixj50_spec(LmSharding::vocab_parallel);
  const Fixj50Session s = fixj50_killed_run(spec, dir, db);
  ASSERT_EQ(s.steps.size(), 2u);
  const int64_t steps0 = s.steps.at(0);
  EXPECT_GE(steps0, 6);
  ASSERT_EQ(s.hist_ids.size(), 1u) << "rank 0 alone writes a vocab_parallel histogram";
  EXPECT_EQ(s.hist_ids.at(0), 32 * steps0);
  EXPECT_EQ(s.histogram, fixj50_reference(spec, 0, steps0));
  EXPECT_TRUE(s.bounds_ok);
  int64_t both = 0;
  for (const auto& [step, ranks] : s.ranks_of_step)
    if (ranks == 2) {
      ++both;
      EXPECT_EQ(s.load_ids_of_step.at(step), 32) << "step " << step;
    }
  EXPECT_GE(both, steps0 - 1);
  EXPECT_LE(std::abs(s.steps.at(1) - steps0), 1);

  // what the CLI says of such a session: stats counts the steps kept and their ids (the
  // histogram has no line of its own in stats); rebalance refuses every lm_embedding session,
  // whole or killed, with the reason (not "no id histogram"). stats checkpoints the -wal into
  // the file: the histogram read again after it is the same.
  const auto st = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "stats " + db, dir);
  ASSERT_EQ(st.code, 0) << st.err;
  const std::string steps_line = "crashed after " + std::to_string(s.ranks_of_step.size()) + " measured steps";
  EXPECT_NE(st.out.find(steps_line), std::string::npos) << st.out;
  EXPECT_NE(st.out.find(std::to_string(s.ranks_of_step.size()) + " measured steps of 32 tokens"), std::string::npos)
      << st.out;
  const auto rb = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "rebalance " + db, dir);
  EXPECT_EQ(rb.code, 2);
  EXPECT_NE(rb.err.find("an lm_embedding session: rebalance moves DLRM embedding tables between ranks"),
            std::string::npos)
      << rb.err;
  EXPECT_EQ(rb.err.find("no id histogram"), std::string::npos) << rb.err;
  EXPECT_EQ(fixj50_read(db, spec.padded_vocab_size()).histogram, s.histogram);
}

// A complete run's histogram is what LM sessions held before fixj50: every bucket of each
// counting rank once (the empty ones with 0, as the run's end writes them), each with the total
// of every step's tokens.
TEST(Fixj50LmHistogram, CompleteRunHoldsEveryBucketWithTheRunsTotals) {
  const fs::path dir = fixj50_scratch();
  for (LmSharding sh : {LmSharding::vocab_parallel, LmSharding::data_parallel, LmSharding::row_wise}) {
    SCOPED_TRACE(embedscope::engine::to_string(sh));
    const LmWorkloadSpec spec = fixj50_spec(sh);
    const std::string db = (dir / (std::string("c_") + embedscope::engine::to_string(sh) + ".db")).string();
    fixj50_remove_session(db);
    const auto r = embedscope::test_support::run_cli(
        EMBEDSCOPE_CLI, "run " + fixj50_write_spec(spec, dir) + " --steps 5 -o " + db, dir);
    ASSERT_EQ(r.code, 0) << r.err;
    const int64_t vp = spec.padded_vocab_size();
    ASSERT_EQ(vp, 1000);
    const Fixj50Session s = fixj50_read(db, vp);
    const int counting = sh == LmSharding::vocab_parallel ? 1 : 2;
    auto expected = fixj50_reference(spec, 0, 5);
    if (counting == 2) {
      const auto r1 = fixj50_reference(spec, 1, 5);
      expected.insert(r1.begin(), r1.end());
    }
    EXPECT_EQ(s.histogram, expected);
    EXPECT_EQ(s.histogram_rows, counting * embedscope::sessions::id_buckets_of(vp));  // 256 a rank
    EXPECT_EQ(s.zero_rows, s.histogram_rows - static_cast<int64_t>(expected.size()));
    EXPECT_TRUE(s.bounds_ok);
    int64_t hist = 0, load = 0;
    for (const auto& [rank, n] : s.hist_ids) hist += n;
    for (const auto& [rank, n] : s.load_ids) load += n;
    EXPECT_EQ(hist, 5 * 32 * counting);
    EXPECT_EQ(load, hist);  // each token looked up once, by its row's owner
  }
}

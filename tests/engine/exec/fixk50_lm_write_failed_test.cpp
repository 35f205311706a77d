// fixk50: an lm_embedding run whose session cannot be written (a file size limit standing in for
// a full disk, as Fixe49WriteFailed) stops at the end of the step in which it learns of it, says
// the steps the session keeps, exits 1 and ends the session write_failed, as a DLRM run does since
// fixe49 (tester49 F3): the session ends write_failed where the file still takes that end (see
// fixk50_expect_end). Before, the measured LM run went on to its last step and failed at close
// (exit 2, "error: PATH: disk I/O error"), and the simulated one the same.
//
// The simulated LM run writes each rank's step row and load counter in one add_step_records call
// (one transaction): whatever commit failed, every step row kept has its load counter and no load
// counter is kept without its step row. It writes no token histogram (nothing draws a token; the
// simulated DLRM run writes no id histogram either).
//
// Hand-checked totals: the workload is 8,000 x 64, sequences of 64 tokens, 2 a micro batch, 2
// ranks vocab_parallel: the group's batch is 2 x 64 = 128 tokens a step, every token looked up by
// the rank whose vocabulary half holds it, so the two ranks' load counters of a step add up to 128,
// and rank 0 alone counts the batch in the token histogram: 128 ids a step it kept.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"

namespace {
namespace fs = std::filesystem;

constexpr int64_t kFixk50TokensPerStep = 2 * 64;  // micro batch x sequence length (vocab_parallel: the group's batch)

fs::path fixk50_scratch(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("es_fixk50_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(d);  // a repeated test starts without the session of the round before
  fs::create_directories(d);
  return d;
}

std::string fixk50_read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The lm_embedding workload of the tests (see the header), 2 ranks vocab_parallel, written to
/// dir/lm.json.
std::string fixk50_workload(const fs::path& dir) {
  const fs::path f = dir / "lm.json";
  std::ofstream(f) << R"({"model": "lm_embedding", "name": "fixk50_lm", "vocab_size": 8000, "hidden_size": 64,
    "sequence_length": 64, "micro_batch_size": 2, "body_layers": 1, "devices": {"count": 2},
    "sharding": {"type": "vocab_parallel"}, "steps": 100000})";
  return f.string();
}

/// `embedscope run WORKLOAD EXTRA... -o db` with files limited to `limit` bytes (RLIMIT_FSIZE,
/// SIGXFSZ ignored: a write past it fails as on a full disk); returns the exit status (-1: a
/// signal) and leaves stderr in dir/err.txt.
int fixk50_run_limited(const fs::path& dir, const std::string& db, const std::vector<std::string>& extra, rlim_t limit) {
  const std::string workload = fixk50_workload(dir);
  std::vector<std::string> args{EMBEDSCOPE_CLI, "run", workload};
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back("-o");
  args.push_back(db);
  const pid_t child = fork();
  if (child == 0) {
    signal(SIGXFSZ, SIG_IGN);
    dup2(open((dir / "err.txt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), 2);
    dup2(open("/dev/null", O_WRONLY), 1);
    const rlimit r{limit, limit};
    setrlimit(RLIMIT_FSIZE, &r);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(EMBEDSCOPE_CLI, argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

struct Fixk50Session {
  std::map<int32_t, std::set<int64_t>> step_rows, load_steps;  // by rank: the steps of its rows
  std::map<int64_t, int64_t> load_ids_of_step;                 // summed over the ranks
  std::map<int64_t, int> load_rows_of_step;
  std::map<int32_t, int64_t> histogram_ids;                    // by rank
  int64_t histogram_rows = 0;
  std::string ended, end_message;
};

Fixk50Session fixk50_session(const std::string& db) {
  const embedscope::sessions::SessionReader s(db);
  Fixk50Session out;
  out.ended = s.status();
  out.end_message = s.meta(embedscope::sessions::meta::kEndMessage);
  for (const auto& st : s.steps()) EXPECT_TRUE(out.step_rows[st.rank].insert(st.step).second) << st.step;
  for (const auto& c : s.load()) {
    EXPECT_EQ(c.table, 0);
    EXPECT_EQ(c.shard, c.rank);
    EXPECT_TRUE(out.load_steps[c.rank].insert(c.step).second) << c.step;
    out.load_ids_of_step[c.step] += c.ids;
    ++out.load_rows_of_step[c.step];
  }
  for (const auto& b : s.id_histogram()) {
    ++out.histogram_rows;
    out.histogram_ids[b.rank] += b.ids;
  }
  return out;
}

/// Checks stderr's "error: run ended write_failed: ...; the session keeps N steps (through step
/// N - 1), ..." and "session: DB"; returns N (0 when the line is missing).
int64_t fixk50_kept_steps(const std::string& err, const std::string& db) {
  std::smatch m;
  const bool said = std::regex_search(
      err, m,
      std::regex(R"(error: run ended write_failed: .*w\.db: [^\n]*; the session keeps (\d+) steps? \(through step (\d+)\), every commit before the failure, whole, and ends write_failed\n)"));
  EXPECT_TRUE(said) << err;
  if (!said) return 0;
  const int64_t kept = std::stoll(m[1].str()), last = std::stoll(m[2].str());
  EXPECT_EQ(last, kept - 1);  // no warm-up: steps 0 .. kept - 1
  EXPECT_NE(err.find("\nsession: " + db + "\n"), std::string::npos) << err;
  return kept;
}

/// The session's end after a failed write: `ended` write_failed and a message naming the `kept`
/// steps and "the run stopped there", where the file still took that last small commit (the
/// rolled-back commit's space in the -wal usually holds it: docs/cli-run.md "When the session cannot be written"); else no end was
/// written, and the reader, the writer's process gone, says "crashed" with no end message (the
/// writer's limit, the same for a DLRM run: about 1 run in 5 of each test here).
void fixk50_expect_end(const Fixk50Session& s, int64_t kept) {
  if (s.ended != "write_failed") {
    EXPECT_EQ(s.ended, "crashed");
    EXPECT_EQ(s.end_message, "");
    return;
  }
  EXPECT_NE(s.end_message.find(fmt::format("the session keeps {} step{} (through step {})", kept, kept == 1 ? "" : "s",
                                           kept - 1)),
            std::string::npos)
      << s.end_message;
  EXPECT_NE(s.end_message.find("the run stopped there"), std::string::npos) << s.end_message;
}
}  // namespace

// The measured (threaded) LM run stops, says how many steps the session keeps, exits 1; the
// session reads write_failed with the same count; every rank holds those steps (at most one
// more: the ranks commit their steps apart), each step row with its load counter and, for rank
// 0, its 128 tokens in the histogram.
TEST(Fixk50LmWriteFailed, FullDiskStopsTheLmRunAndTheSessionSaysWhatItKept) {
  const fs::path dir = fixk50_scratch("lm");
  const std::string db = (dir / "w.db").string();
  ASSERT_EQ(fixk50_run_limited(dir, db, {}, 2 * 1024 * 1024), 1) << fixk50_read(dir / "err.txt");
  const std::string err = fixk50_read(dir / "err.txt");
  const int64_t kept = fixk50_kept_steps(err, db);
  ASSERT_GE(kept, 1);
  EXPECT_LT(kept, 100000);  // it stopped
  EXPECT_EQ(err.find("step 100000/100000"), std::string::npos) << err;
  const Fixk50Session s = fixk50_session(db);
  fixk50_expect_end(s, kept);
  ASSERT_EQ(s.step_rows.size(), 2u);
  for (const auto& [rank, steps] : s.step_rows) {
    EXPECT_GE(static_cast<int64_t>(steps.size()), kept) << "rank " << rank;
    EXPECT_LE(static_cast<int64_t>(steps.size()), kept + 1) << "rank " << rank;
    EXPECT_EQ(*steps.rbegin(), static_cast<int64_t>(steps.size()) - 1) << "rank " << rank;  // steps 0 .. n - 1
    EXPECT_EQ(s.load_steps.at(rank), steps) << "rank " << rank;  // each step row with its load counter
  }
  for (int64_t st = 0; st < kept; ++st) {  // the steps both ranks kept: the group's 128 tokens
    EXPECT_EQ(s.load_rows_of_step.at(st), 2) << "step " << st;
    EXPECT_EQ(s.load_ids_of_step.at(st), kFixk50TokensPerStep) << "step " << st;
  }
  // vocab_parallel: rank 0 alone counts the batch, 128 tokens a step it kept (the end-of-run
  // write of every bucket never came)
  ASSERT_EQ(s.histogram_ids.size(), 1u);
  EXPECT_EQ(s.histogram_ids.at(0), kFixk50TokensPerStep * static_cast<int64_t>(s.step_rows.at(0).size()));
}

// The simulated LM run: the same ending, exit and wording; each rank's step rows and load
// counters cover the same steps (one call a step), the ranks' load of a step adds up to 128, and
// there is no token histogram.
TEST(Fixk50LmWriteFailed, SimulatedFullDiskStopsTooWithEachStepsLoadBesideItsRow) {
  const fs::path dir = fixk50_scratch("sim");
  const std::string db = (dir / "w.db").string();
  // 64 MiB: above the writer's bound on a commit (about 32 MiB pending), so that a writer starved of
  // CPU still commits steps before the limit (ci53)
  ASSERT_EQ(fixk50_run_limited(dir, db, {"--simulate", "h100_sxm"}, 64 * 1024 * 1024), 1) << fixk50_read(dir / "err.txt");
  const std::string err = fixk50_read(dir / "err.txt");
  const int64_t kept = fixk50_kept_steps(err, db);
  ASSERT_GE(kept, 1);
  EXPECT_LT(kept, 100000);
  const Fixk50Session s = fixk50_session(db);
  fixk50_expect_end(s, kept);
  ASSERT_EQ(s.step_rows.size(), 2u);
  for (const auto& [rank, steps] : s.step_rows) {
    EXPECT_GE(static_cast<int64_t>(steps.size()), kept) << "rank " << rank;
    EXPECT_LE(static_cast<int64_t>(steps.size()), kept + 1) << "rank " << rank;
    EXPECT_EQ(s.load_steps.at(rank), steps) << "rank " << rank;
  }
  for (int64_t st = 0; st < kept; ++st) {
    EXPECT_EQ(s.load_rows_of_step.at(st), 2) << "step " << st;
    EXPECT_EQ(s.load_ids_of_step.at(st), kFixk50TokensPerStep) << "step " << st;
  }
  EXPECT_EQ(s.histogram_rows, 0);
}

// Nothing committed (the simulated run's first commit, about 2,000 steps, is past a 2 MiB limit):
// exit 1, "no session was written", no half-created file, as a DLRM run.
TEST(Fixk50LmWriteFailed, SimulatedNothingRecordedLeavesNoFile) {
  const fs::path dir = fixk50_scratch("sim0");
  const std::string db = (dir / "w.db").string();
  ASSERT_EQ(fixk50_run_limited(dir, db, {"--simulate", "h100_sxm"}, 2 * 1024 * 1024), 1) << fixk50_read(dir / "err.txt");
  const std::string err = fixk50_read(dir / "err.txt");
  EXPECT_NE(err.find("error: run ended write_failed: " + db + ": "), std::string::npos) << err;
  EXPECT_NE(err.find("; nothing was recorded, and the half-created file was removed\nno session was written\n"),
            std::string::npos)
      << err;
  EXPECT_FALSE(fs::exists(db)) << err;
  EXPECT_FALSE(fs::exists(db + "-wal")) << err;
}

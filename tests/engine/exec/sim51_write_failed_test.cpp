// sim51: a simulated DLRM run on a session it cannot write (a file size limit standing in for a
// full disk, as Fixe49WriteFailed and Fixk50LmWriteFailed) stops after the step in which the
// writer says so, ends write_failed and exits 1, as the measured DLRM run (fixe49) and both LM runs
// (fixk50) do. Before, it ran every remaining step into a writer that wrote nothing more (the last
// progress line on stderr), then failed at the close; and it wrote each rank's step row and its
// load counters in separate calls, so that a commit could hold the one without the other. It now
// hands them to SessionWriter::add_step_records together (one transaction).
//
// Hand-checked load: the workload (2 ranks, batch 8 a rank, table_wise: ta with 3 ids a bag, tb
// with 2, fixed bag sizes) looks up 2 x 8 x (3 + 2) = 80 ids a step over both ranks, so every step
// kept adds up to 80 in its load counters.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;

constexpr int64_t kSim51wIdsPerStep = 2 * 8 * (3 + 2);

// `embedscope run WORKLOAD --simulate h100_sxm -o db` (the workload above, written to dir/w.json)
// with files limited to `limit` bytes; its exit status (-1: a signal) and stderr. 1,000,000 steps:
// the writer commits behind the simulation (it wakes every 250 ms or 50,000 spans), so the run
// learns of the failure some steps after the last one kept (at 8 MiB: 10,000-30,000 here, of 1,924 kept),
// far from the last step on any machine.
embedscope::test_support::CliResult sim51w_run_limited(const fs::path& dir, const std::string& db, long long limit) {
  const nlohmann::json wl = {
      {"name", "sim51_write_failed"},
      {"batch_size", 8},
      {"steps", 1000000},
      {"warmup_steps", 0},
      {"seed", 5},
      {"devices", {{"count", 2}, {"memory_bytes", 64 << 20}}},
      {"optimizer", {{"type", "sgd"}}},
      {"dense", {{"num_dense_features", 4}, {"bottom_mlp", {8}}, {"interaction", "cat"}, {"top_mlp", {16, 1}}}},
      {"tables",
       {{{"name", "ta"}, {"num_embeddings", 40}, {"embedding_dim", 8}, {"feature_names", {"f_a"}}},
        {{"name", "tb"}, {"num_embeddings", 20}, {"embedding_dim", 8}, {"feature_names", {"f_b"}}}}},
      {"features", {{{"name", "f_a"}, {"pooling_factor", 3}}, {{"name", "f_b"}, {"pooling_factor", 2}}}},
      {"sharding", {{"default", "table_wise"}}}};
  std::ofstream(dir / "w.json") << wl.dump(2);
  embedscope::test_support::ChildIo io;  // stderr piped, stdout to /dev/null
  io.file_size_limit = limit;
  const auto r = embedscope::test_support::run_signalled(
      EMBEDSCOPE_CLI, {"run", (dir / "w.json").string(), "--simulate", "h100_sxm", "-o", db}, 0, {}, io);
  return {WIFEXITED(r.status) ? WEXITSTATUS(r.status) : -1, "", r.piped};
}
}  // namespace

// The run stops, says how many steps the session keeps and exits 1; every step row the session
// holds has its load counters (80 ids over the 2 ranks), and no counter is there without its
// row; the session ends write_failed saying the run stopped there (where the file took that end:
// else the reader says crashed, the writer's limit, as in Fixk50LmWriteFailed).
TEST(Sim51WriteFailed, SimulatedDlrmRunStopsAtTheFailedWriteWithEachStepsLoadBesideItsRow) {
  const fs::path dir = embedscope::test_support::fresh_scratch("es_sim51_wf_" + std::to_string(getpid()));
  const std::string db = (dir / "w.db").string();
  // 64 MiB: above the writer's bound on a commit (SessionWriter holds its producers at about 32
  // MiB pending), so that a writer starved of CPU still commits steps before the limit (ci53)
  const auto run = sim51w_run_limited(dir, db, 64LL * 1024 * 1024);
  const std::string& err = run.err;
  ASSERT_EQ(run.code, 1) << err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      err, m,
      std::regex(R"(error: run ended write_failed: .*w\.db: [^\n]*; the session keeps (\d+) steps? \(through step (\d+)\), every commit before the failure, whole, and ends write_failed\n)")))
      << err;
  const int64_t kept = std::stoll(m[1].str()), last = std::stoll(m[2].str());
  ASSERT_GE(kept, 1) << err;
  EXPECT_EQ(last, kept - 1);  // tiny: no warm-up, steps 0 .. kept - 1
  EXPECT_LT(kept, 1000000);
  // it stopped: the last progress line (every 100,000 steps and the last) never came
  EXPECT_EQ(err.find("step 1000000/1000000"), std::string::npos) << err;
  EXPECT_NE(err.find("\nsession: " + db + "\n"), std::string::npos) << err;

  const embedscope::sessions::SessionReader s(db);
  if (s.status() == "write_failed") {
    const std::string end = s.meta(embedscope::sessions::meta::kEndMessage);
    EXPECT_NE(end.find(fmt::format("the session keeps {} step{} (through step {})", kept, kept == 1 ? "" : "s", kept - 1)),
              std::string::npos)
        << end;
    EXPECT_NE(end.find("the run stopped there"), std::string::npos) << end;  // was "the run ended complete"
  } else {
    EXPECT_EQ(s.status(), "crashed");
  }
  std::map<int32_t, std::set<int64_t>> rows, counted;  // by rank: steps of its rows, of its counters
  std::map<int64_t, int64_t> ids;                      // by step, both ranks
  for (const auto& st : s.steps()) EXPECT_TRUE(rows[st.rank].insert(st.step).second) << st.step;
  for (const auto& c : s.load()) {
    counted[c.rank].insert(c.step);
    ids[c.step] += c.ids;
  }
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& [rank, steps] : rows) {
    EXPECT_GE(static_cast<int64_t>(steps.size()), kept) << "rank " << rank;
    EXPECT_LE(static_cast<int64_t>(steps.size()), kept + 1) << "rank " << rank;  // the ranks' rows of the last step apart
    EXPECT_EQ(*steps.rbegin(), static_cast<int64_t>(steps.size()) - 1) << "rank " << rank;
    EXPECT_EQ(counted[rank], steps) << "rank " << rank;  // each row with its counters, no counter without its row
  }
  for (int64_t st = 0; st < kept; ++st) EXPECT_EQ(ids[st], kSim51wIdsPerStep) << "step " << st;
}

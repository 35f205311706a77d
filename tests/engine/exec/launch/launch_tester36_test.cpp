// Defects of the one-rank-per-process path found by a black-box tester (tester 36): launch's
// -o rank pattern, a cancellable rendezvous, a dead or refusing rank before the rendezvous,
// peer-failure wording, launch_node under --hosts-file, the digest order of a workload
// mismatch, rendezvous URLs (file:// host part, bracketed IPv6 redis) and
// EMBEDSCOPE_FR_BUFFER_SIZE validation. Each test failed before its fix.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {
fs::path t36_scratch() {
  static const auto dir = [] {
    auto d = fs::temp_directory_path() / ("es_t36_" + std::to_string(getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}
embedscope::test_support::CliResult t36_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "" + args, t36_scratch());
}
std::string t36_meta(const fs::path& db, const std::string& key) {
  const embedscope::sessions::SessionReader r(db.string());
  const auto m = r.metadata();
  const auto it = m.find(key);
  return it == m.end() ? std::string("(missing)") : it->second;
}
}  // namespace

// D2: launch's -o with {rank} is a rank pattern, as under mpirun: rank files x.rank0.db,
// x.rank1.db and the merged x.db.
TEST(Tester36, LaunchTakesARankPatternAsMpirunDoes) {
  const auto dir = t36_scratch() / "d2";
  fs::create_directories(dir);
  const auto r = t36_cli("launch -n 2 run --preset tiny --steps 2 --warmup-steps 0 -o " + (dir / "x.rank{rank}.db").string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir / "x.rank0.db"));
  EXPECT_TRUE(fs::exists(dir / "x.rank1.db"));
  EXPECT_TRUE(fs::exists(dir / "x.db")) << r.out;
  EXPECT_FALSE(fs::exists(dir / "x.rank0.rank0.db"));
  EXPECT_NE(r.out.find("session: " + (dir / "x.db").string() + " (2 of 2 rank sessions)"), std::string::npos) << r.out;
}

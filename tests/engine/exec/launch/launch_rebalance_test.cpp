// Live rebalancing with one rank per process (issue 17 under issue 18's launch): the hot-table
// straggler run by `embedscope launch -n 4` rebalances as the same run on 4 threads does - the
// same rebalance (step, moves, bytes, imbalance before / predicted / after), the same plan
// changes, the same losses and per-collective bytes - and the merged session holds them once.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/store/session.h"
#include "engine/rebalance/straggler_workload.h"
#include "support/cli_run.h"

namespace fs = std::filesystem;
using embedscope::sessions::SessionReader;

TEST(LaunchRebalance, FourProcessesRebalanceAsFourThreadsDo) {
  const fs::path dir = fs::temp_directory_path() / ("es_launch_rb_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  nlohmann::json j = embedscope::test_support::straggler_workload("launch_live");
  j["steps"] = 4;
  j["rebalance"] = {{"every", 2}};
  std::ofstream(dir / "live.json") << j.dump(2);
  auto cli = [&](const std::string& a) { return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, a, dir); };
  const std::string threads = (dir / "threads.db").string(), launched = (dir / "launched.db").string();
  auto t = cli("run " + (dir / "live.json").string() + " -o " + threads);
  ASSERT_EQ(t.code, 0) << t.err;
  auto l = cli("launch -n 4 run " + (dir / "live.json").string() + " -o " + launched);
  ASSERT_EQ(l.code, 0) << l.err;
  // launch prints the rebalances as run does (output/rebalance_text.h rebalances_block, from the
  // merged session): the same lines but for the time each took
  auto block = [](const std::string& out) {
    const size_t at = out.find("rebalances   ");
    if (at == std::string::npos) return std::string("(none)");
    std::string b;
    std::istringstream in(out.substr(at));
    for (std::string line; std::getline(in, line);) {
      if (!b.empty() && line.rfind("  ", 0) != 0) break;  // the block: its header and indented lines
      b += std::regex_replace(line, std::regex("; [0-9.]+ ms;"), "; T ms;") + "\n";
    }
    return b;
  };
  EXPECT_NE(block(t.out), "(none)") << t.out;
  EXPECT_EQ(block(l.out), block(t.out)) << l.out;
  EXPECT_NE(block(l.out).find("  rebalance after step 1: "), std::string::npos) << l.out;
  auto lj = cli("launch -n 4 run " + (dir / "live.json").string() + " -o " + (dir / "launched_json.db").string() + " --json");
  ASSERT_EQ(lj.code, 0) << lj.err;
  const nlohmann::json lr = nlohmann::json::parse(lj.out);
  ASSERT_EQ(lr["rebalances"].size(), 1u) << lj.out;
  EXPECT_EQ(lr["rebalances"][0]["step"], 1);
  EXPECT_GE(lr["rebalances"][0]["moves"].get<int>(), 1);
  const SessionReader a(threads), b(launched);
  const auto ra = a.rebalances(), rb = b.rebalances();
  ASSERT_EQ(ra.size(), 1u);  // every 2 steps: after step 1 (none after the last, step 3)
  ASSERT_EQ(rb.size(), ra.size());
  for (size_t i = 0; i < ra.size(); ++i) {
    EXPECT_EQ(rb[i].step, ra[i].step);
    EXPECT_EQ(rb[i].reason, ra[i].reason);
    EXPECT_EQ(rb[i].moves, ra[i].moves);
    EXPECT_EQ(rb[i].bytes_moved, ra[i].bytes_moved);
    EXPECT_EQ(rb[i].imbalance_before, ra[i].imbalance_before);
    EXPECT_EQ(rb[i].imbalance_predicted, ra[i].imbalance_predicted);
    EXPECT_EQ(rb[i].imbalance_after, ra[i].imbalance_after) << "the world's load after it, not one rank's";
    EXPECT_EQ(rb[i].after_steps, ra[i].after_steps);
    EXPECT_GT(rb[i].duration_ns, 0);
  }
  EXPECT_GE(ra[0].moves, 1);
  auto changes = [](const SessionReader& x) {
    std::vector<std::tuple<int64_t, int32_t, int32_t, int32_t, int32_t, int64_t>> v;
    for (const auto& c : x.plan_changes()) v.emplace_back(c.step, c.table, c.shard_index, c.from_rank, c.to_rank, c.bytes);
    return v;
  };
  EXPECT_EQ(changes(a), changes(b));
  EXPECT_FALSE(changes(b).empty());
  auto losses = [](const SessionReader& x) {
    std::map<std::pair<int64_t, int32_t>, double> m;
    for (const auto& s : x.steps()) m[{s.step, s.rank}] = s.loss;
    return m;
  };
  EXPECT_EQ(losses(a), losses(b));
  // the same collectives, but for the processes' one all-gather of every rank's load at the end
  auto collectives = [](const SessionReader& x) {
    std::map<std::tuple<int32_t, std::string, uint64_t>, std::pair<int64_t, int64_t>> m;
    for (const auto& c : x.collectives()) m[{c.rank, c.group, c.sequence}] = {c.bytes_sent, c.bytes_received};
    return m;
  };
  auto ca = collectives(a), cb = collectives(b);
  for (int r = 0; r < 4; ++r) {
    auto last = std::prev(cb.end());
    for (auto it = cb.begin(); it != cb.end(); ++it)
      if (std::get<0>(it->first) == r) last = it;
    EXPECT_EQ(ca.count(last->first), 0u) << "rank " << r << ": the end's all-gather is the processes' own";
    cb.erase(last);
  }
  EXPECT_EQ(ca, cb);
  fs::remove_all(dir);
}

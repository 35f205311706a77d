// cli43 (tester42 F14 and the calibrate half of F20): launch's table gives a crashed rank's steps,
// step mean and loss from its own session (they were "-" though the session knew "crashed in step
// 18, after 18 measured steps"), and calibrate refuses one process's session of a multi-process
// run as rebalance does, naming the merged session. Each failed before its fix.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;
using nlohmann::json;

fs::path cli43_launch_scratch() {
  static const auto dir = [] {
    auto d = fs::temp_directory_path() / ("es_cli43_launch_" + std::to_string(getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}
embedscope::test_support::CliResult cli43_launch_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, cli43_launch_scratch());
}
// The line of `text` that starts with `head` ("" when none).
std::string cli43_line(const std::string& text, const std::string& head) {
  for (size_t at = 0; at < text.size();) {
    const size_t end = text.find('\n', at);
    const std::string line = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
    if (line.rfind(head, 0) == 0) return line;
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return "";
}
}  // namespace

// compaction_rescues_semi_sync's first run (criteo_kaggle, semi_sync, caching allocator, 645 MiB
// devices) on 4 processes: rank 0 runs out of memory by fragmentation inside a measured step, the
// other three crash on its broken collective. None prints figures (run --json has no
// step_time_ns then); each one's row takes them from its session, the same as `stats --json`.
TEST(Cli43Launch, ACrashedRanksFiguresComeFromItsSession) {
  const fs::path dir = cli43_launch_scratch() / "f14";
  fs::create_directories(dir);
  std::ifstream in(std::string(EMBEDSCOPE_TEST_DATA) + "/../../resources/workloads/criteo_kaggle.json");
  json wl = json::parse(in);
  wl["steps"] = 3;
  wl["warmup_steps"] = 1;
  wl["pipeline"] = "semi_sync";
  wl["devices"]["memory_bytes"] = 676331520;
  wl["memory"]["allocator"] = "caching";
  std::ofstream(dir / "frag.json") << wl.dump();
  const std::string base = "launch -n 4 run " + (dir / "frag.json").string();
  const auto text = cli43_launch_cli(base + " -o " + (dir / "t.db").string());
  ASSERT_EQ(text.code, 1) << text.err;
  const auto js = cli43_launch_cli(base + " --json -o " + (dir / "j.db").string());
  ASSERT_EQ(js.code, 1) << js.err;
  const json j = json::parse(js.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << js.out;
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE(fmt::format("rank {}", r));
    // what stats reads from the rank's session
    const std::string rank_db = (dir / fmt::format("t.rank{}.db", r)).string();
    const auto st = cli43_launch_cli("stats --json " + rank_db);
    ASSERT_EQ(st.code, 0) << st.err;
    const json s = json::parse(st.out);
    const int64_t steps = s.at("steps").get<int64_t>();
    ASSERT_GE(steps, 1) << st.out;  // it crashed after measured steps: there are figures to give
    const std::string ended = r == 0 ? "oom" : "crashed";
    const auto stats_text = cli43_launch_cli("stats " + rank_db);
    const std::string head = cli43_line(stats_text.out, "session      ");
    const std::string in_step = head.substr(head.find('(') + 1, head.find(", measured") - head.find('(') - 1);
    EXPECT_EQ(in_step.rfind(ended + " ", 0), 0u) << head;  // "oom in step 1, after 1 measured step"
    // the text table: the row's steps and step mean, and the session's own words under it
    const std::string row = cli43_line(text.out, fmt::format("{:<5} ", r));
    ASSERT_FALSE(row.empty()) << text.out;
    EXPECT_NE(row.find(fmt::format("exit 1 ({}) ", ended)), std::string::npos) << row;
    EXPECT_NE(row.find(fmt::format(" {:>10} ", steps)), std::string::npos) << row << "\n" << st.out;
    EXPECT_EQ(row.find(" - "), std::string::npos) << row;
    EXPECT_NE(row.find(rank_db), std::string::npos) << row;
    EXPECT_NE(text.out.find("      from its session: " + in_step + "\n"), std::string::npos) << text.out;
    // --json: from_session beside the rank's result, as stats has them for the same run's files
    const json& rk = j.at("ranks").at(static_cast<size_t>(r));
    ASSERT_TRUE(rk.contains("from_session")) << rk.dump();
    const auto js_stats = json::parse(cli43_launch_cli(fmt::format("stats --json {}/j.rank{}.db", dir.string(), r)).out);
    EXPECT_EQ(rk["from_session"].at("steps"), js_stats.at("steps")) << rk.dump();
    EXPECT_EQ(rk["from_session"].at("step_time_ns").at("mean"), js_stats.at("step_time_ns").at("mean")) << rk.dump();
    EXPECT_EQ(rk["from_session"].at("loss_last"), js_stats.at("loss").back()) << rk.dump();
    EXPECT_EQ(rk["result"].contains("step_time_ns"), false) << rk.dump();
  }
}

// calibrate X.rank1.db of `launch -n 2`: refused (exit 2) naming the merged X.db, as rebalance
// refuses it; with X.db gone, the merge that makes it. A --check session is refused the same way.
TEST(Cli43Launch, CalibrateRefusesOneRanksSessionNamingTheMergedOne) {
  const fs::path dir = cli43_launch_scratch() / "calib";
  fs::create_directories(dir);
  const std::string x = (dir / "x").string();
  const auto l = cli43_launch_cli("launch -n 2 run --preset tiny --steps 2 -o " + x + ".db");
  ASSERT_EQ(l.code, 0) << l.err;
  auto r = cli43_launch_cli("calibrate " + x + ".rank1.db");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("error: " + x + ".rank1.db: the session of rank 1 alone of a 2-rank run (each process wrote its "
                       "own): the ops and collectives of the other 1 rank are not in it, so the fit and the check would "
                       "take one rank's times for the whole run's; calibrate from the merged session " + x +
                       ".db (launch wrote it beside the ranks' sessions)\n"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out, "");
  // as a held-out check: the merged session passes the refusal (whatever its fit says), the
  // rank's is refused; here the fit itself fails first on tiny's all-latency collectives, so the
  // refusal is checked by giving the rank session first
  r = cli43_launch_cli("calibrate " + x + ".rank0.db --check " + x + ".db");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(x + ".rank0.db: the session of rank 0 alone of a 2-rank run"), std::string::npos) << r.err;
  r = cli43_launch_cli("calibrate " + x + ".db");
  EXPECT_EQ(r.err.find("alone of a"), std::string::npos) << r.err;  // the merged session is no rank session
  fs::remove(x + ".db");
  r = cli43_launch_cli("calibrate " + x + ".rank0.db");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("; merge the ranks' sessions (embedscope merge " + x + ".rank*.db -o " + x +
                       ".db) and calibrate from that\n"),
            std::string::npos)
      << r.err;
}

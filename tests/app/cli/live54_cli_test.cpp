// tester54, end to end through the CLI:
// F1: every output that --force-overwrite may replace (export's chrome file, rebalance's
//     --plan-out, tokenize's -o and --model-out, calibrate's -o) refuses the session file of a
//     run still writing it, in the words and with the exit code (2) of run / import / merge; the
//     run ends complete with its session whole.
// F3: a session whose metadata world_size is not a number in [0, 2^20] is refused by name
//     (exit 2), not read into unbounded allocations; a world_size above the ranks a run's session
//     holds lists the missing rank as untraced, not as a rank of zeros.
// F6: a session file cut short inside its last pages is refused by name (exit 2); a live session
//     in WAL mode and a killed run's session (a -wal beside it) still read.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;
namespace ts = embedscope::test_support;

fs::path live54_scratch() {
  static const fs::path dir = ts::fresh_scratch("es_live54_" + std::to_string(getpid()));
  return dir;
}

std::string live54_slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// A POSIX shell script run in the scratch folder with $E set to the CLI; its exit status.
int live54_sh(const std::string& script) {
  const fs::path file = live54_scratch() / "script.sh";
  std::ofstream(file) << "cd '" << live54_scratch().string() << "' || exit 99\nE='" << EMBEDSCOPE_CLI << "'\n" << script;
  const int status = std::system(("sh '" + file.string() + "'").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

ts::CliResult live54_cli(const std::string& args) { return ts::run_cli(EMBEDSCOPE_CLI, args, live54_scratch()); }

// A finished 2-rank tiny session at scratch/NAME (made once per name).
std::string live54_tiny(const std::string& name) {
  const fs::path p = live54_scratch() / name;
  if (!fs::exists(p)) {
    const auto r = live54_cli("run --preset tiny --steps 3 --warmup-steps 1 -o " + p.string());
    if (r.code != 0) ADD_FAILURE() << r.err;
  }
  return p.string();
}

void live54_sql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  const std::string why = err ? err : "";
  sqlite3_free(err);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK) << why;
}

// F1: `command` (shell text, writing live.db with --force-overwrite) while a run writes live.db:
// refused with run's words and exit 2, and the run goes on to a complete session of its 60 steps.
void expect_live_session_kept(const std::string& command) {
  live54_tiny("tiny.db");
  // 2 ms per collective: 60 steps take a second or more (2.4 s of wall at load 25), and the
  // command is refused before any work, in milliseconds; a run that ended first fails (exit 96).
  // 200 steps, as before, took 3 s at load 4 and 5.0 s of CPU a run (60 steps: 1.6 s)
  const int rc = live54_sh("rm -f live.db live.db-wal live.db-shm\n"
                           "$E run --preset tiny --steps 60 --network-latency 2000000 --json -o live.db >run.json "
                           "2>run.err &\n"
                           "P=$!\necho $P >run.pid\n"
                           "while [ ! -s live.db ]; do kill -0 $P 2>/dev/null || exit 97; sleep 0.01; done\n" +
                           command + " >cmd.out 2>cmd.err\necho $? >cmd.rc\n"
                           "kill -0 $P 2>/dev/null || exit 96\n"  // the run was live all along
                           "wait $P\n");
  ASSERT_EQ(rc, 0) << "rc " << rc << ": " << live54_slurp(live54_scratch() / "run.err");
  long pid = 0;
  std::ifstream(live54_scratch() / "run.pid") >> pid;
  EXPECT_EQ(live54_slurp(live54_scratch() / "cmd.rc"), "2\n") << command;
  const std::string err = live54_slurp(live54_scratch() / "cmd.err");
  EXPECT_NE(err.find("error: live.db: not overwritten: a run (pid " + std::to_string(pid) +
                     ") is still writing it"),
            std::string::npos)
      << command << "\n" << err;
  EXPECT_NE(err.find("; wait for it to end, stop it, or choose another name"), std::string::npos) << err;
  const auto j = nlohmann::json::parse(live54_slurp(live54_scratch() / "run.json"));
  EXPECT_EQ(j["ended"], "complete");
  const embedscope::sessions::SessionReader r((live54_scratch() / "live.db").string());
  EXPECT_EQ(r.status(), "complete");
  EXPECT_EQ(r.meta("writer_pid"), std::to_string(pid));
  EXPECT_EQ(r.steps().size(), 120u);  // 60 steps x 2 ranks
}
}  // namespace

// ... and once the run has ended, --force-overwrite replaces its session (the refusal is for live ones).
TEST(Live54ForceOverwrite, ExportChromeRefusesALiveSession) {
  expect_live_session_kept("$E export tiny.db --format chrome -o live.db --force-overwrite");
  const auto r = live54_cli("export " + (live54_scratch() / "tiny.db").string() + " --format chrome -o " +
                            (live54_scratch() / "live.db").string() + " --force-overwrite");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(live54_slurp(live54_scratch() / "live.db").substr(0, 1), "{");  // Chrome trace JSON now
}

// retest54 R1: launch refuses before any rank starts (it ran every rank to the end, then its
// merge refused with exit 1); no rank session is written.
TEST(Live54ForceOverwrite, LaunchRefusesALiveSessionBeforeAnyRankRuns) {
  fs::remove(live54_scratch() / "live.rank0.db");
  fs::remove(live54_scratch() / "live.rank1.db");
  expect_live_session_kept("$E launch -n 2 run --preset tiny --steps 2 -o live.db --force-overwrite");
  EXPECT_FALSE(fs::exists(live54_scratch() / "live.rank0.db"));
  EXPECT_FALSE(fs::exists(live54_scratch() / "live.rank1.db"));
}

// retest54 R2: scaling refuses a live session among its -o directory's before any point runs,
// exit 2 (it ran the point, then called the refusal a write failure with disk advice, exit 1).
TEST(Live54ForceOverwrite, ScalingRefusesALiveSessionInItsDirectory) {
  const int rc = live54_sh("rm -rf scal; mkdir scal\n"
                           "$E run --preset tiny --steps 200 --network-latency 2000000 -o scal/row_wise_8.db >srun.out "
                           "2>&1 &\n"
                           "P=$!\necho $P >srun.pid\n"
                           "while [ ! -s scal/row_wise_8.db ]; do kill -0 $P 2>/dev/null || exit 97; sleep 0.01; done\n"
                           "$E scaling --preset tiny --steps 2 --simulate h100_sxm --gpus 8 --shardings row_wise -o scal "
                           "--force-overwrite >scal.out 2>scal.err\necho $? >scal.rc\n"
                           "kill -0 $P 2>/dev/null || exit 96\n"
                           "wait $P\n");
  ASSERT_EQ(rc, 0) << "rc " << rc << ": " << live54_slurp(live54_scratch() / "srun.out");
  long pid = 0;
  std::ifstream(live54_scratch() / "srun.pid") >> pid;
  EXPECT_EQ(live54_slurp(live54_scratch() / "scal.rc"), "2\n");
  const std::string err = live54_slurp(live54_scratch() / "scal.err");
  EXPECT_NE(err.find("scal/row_wise_8.db: not overwritten: a run (pid " + std::to_string(pid) + ") is still writing it"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("write_failed"), std::string::npos) << err;
  const embedscope::sessions::SessionReader r((live54_scratch() / "scal" / "row_wise_8.db").string());
  EXPECT_EQ(r.status(), "complete");
  EXPECT_EQ(r.steps().size(), 400u);  // 200 steps x 2 ranks: the run's own, whole
}

TEST(Live54ForceOverwrite, RebalancePlanOutRefusesALiveSession) {
  expect_live_session_kept("$E rebalance tiny.db --plan-out live.db --force-overwrite");
}

TEST(Live54ForceOverwrite, TokenizeOutputsRefuseALiveSession) {
  {
    std::ofstream text(live54_scratch() / "text.txt");
    for (int i = 0; i < 200; ++i) text << "the quick brown fox jumps over the lazy dog and some more words here\n";
  }
  // the same text where no run writes: tokenized (the refusal below is the live session's)
  const auto ok = live54_cli("tokenize --input " + (live54_scratch() / "text.txt").string() + " --vocab-size 40 -o " +
                             (live54_scratch() / "ids0.bin").string());
  ASSERT_EQ(ok.code, 0) << ok.err;
  expect_live_session_kept("$E tokenize --input text.txt --vocab-size 40 -o live.db --force-overwrite");
  expect_live_session_kept("$E tokenize --input text.txt --vocab-size 40 -o ids.bin --model-out live.db --force-overwrite");
}

TEST(Live54ForceOverwrite, CalibrateOutputRefusesALiveSession) {
  expect_live_session_kept("$E calibrate tiny.db -o live.db --force-overwrite --no-dense-bench");
}

// F3: world_size edited to values a per-rank list cannot be sized by. Under a 3 GB address
// space: before the fix the readers allocated without bound (std::bad_alloc, exit 1; 23.5 GB
// unlimited).
TEST(Live54WorldSize, OutOfRangeOrNotANumberIsRefusedByName) {
  const std::string tiny = live54_tiny("tiny.db");
  for (const std::string value : {"99999999999", "10000000", "1048577", "-1", "abc", "2x", ""}) {
    const fs::path bad = live54_scratch() / "ws_bad.db";
    fs::copy_file(tiny, bad, fs::copy_options::overwrite_existing);
    live54_sql(bad.string(), "UPDATE metadata SET value = '" + value + "' WHERE key = 'world_size'");
    const std::string want = bad.string() + ": metadata world_size '" + value +
                             "' is not a whole number in [0, 1048576]: the session file is damaged or was edited";
    for (const std::string& cmd : {"stats " + bad.string(), "stats --json " + bad.string(),
                                  "compare " + tiny + " " + bad.string(),
                                  "export " + bad.string() + " --format csv -o ws_csv --force-overwrite"}) {
      const auto r = ts::run_merged("cd '" + live54_scratch().string() + "' && ulimit -v 3000000 && '" +
                                    EMBEDSCOPE_CLI + "' " + cmd + " 2>&1");
      EXPECT_EQ(r.code, 2) << value << ": " << cmd << "\n" << r.out;
      EXPECT_NE(r.out.find(want), std::string::npos) << value << ": " << cmd << "\n" << r.out;
    }
  }
  // the largest allowed world reads (a session of 2 ranks that says 1048576: untraced ranks)
  const fs::path big = live54_scratch() / "ws_max.db";
  fs::copy_file(tiny, big, fs::copy_options::overwrite_existing);
  live54_sql(big.string(), "UPDATE metadata SET value = '1048576' WHERE key = 'world_size'");
  EXPECT_NO_THROW(embedscope::sessions::SessionReader{big.string()});
}

// F3: world_size 3 on a 2-rank run's session: rank 2 is listed as not in the session (stats says
// why), the figures are the 2 ranks' own (before: "tiny on 3 cpu ranks", a rank 2 of zeros).
TEST(Live54WorldSize, AboveTheRanksHeldListsTheMissingRankAsUntraced) {
  const std::string tiny = live54_tiny("tiny.db");
  const fs::path three = live54_scratch() / "ws3.db";
  fs::copy_file(tiny, three, fs::copy_options::overwrite_existing);
  live54_sql(three.string(), "UPDATE metadata SET value = '3' WHERE key = 'world_size'");
  const auto a = nlohmann::json::parse(live54_cli("stats --json " + tiny).out);
  const auto r = live54_cli("stats --json " + three.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const auto b = nlohmann::json::parse(r.out);
  ASSERT_EQ(a.at("ranks").size(), 2u);
  EXPECT_EQ(b.at("ranks").size(), 2u);
  EXPECT_EQ(b.at("untraced_ranks"), nlohmann::json::array({2}));
  EXPECT_EQ(b.at("world_size"), 3);
  // the 2 ranks' own figures (before: a rank 2 of zeros, 3 ranks, lookups max/mean x 3/2 and
  // exposed communication x 2/3)
  EXPECT_EQ(b.at("imbalance"), a.at("imbalance"));
  EXPECT_GT(a.at("imbalance").at("lookups_max_over_mean").get<double>(), 1.0);
  EXPECT_EQ(b.at("exposed_comm_ns"), a.at("exposed_comm_ns"));
  EXPECT_GT(a.at("exposed_comm_ns").get<int64_t>(), 0);
  const auto t = live54_cli("stats " + three.string());
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("on 2 cpu ranks"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("; rank 2 of the world of 3 not in this session (the metadata world_size counts it, but the "
                       "session holds no record of it; left out of the figures below)"),
            std::string::npos)
      << t.out;
}

// F6: a copy cut inside its last page(s): refused by name with its sizes, exit 2 (before: rows of
// NULLs, the same figures, exit 0).
TEST(Live54CutShort, ASessionShorterThanItsHeaderSaysIsRefused) {
  const std::string tiny = live54_tiny("tiny.db");
  const auto size = static_cast<int64_t>(fs::file_size(tiny));
  unsigned char h[100] = {};
  std::ifstream(tiny, std::ios::binary).read(reinterpret_cast<char*>(h), sizeof(h));
  int64_t page = (h[16] << 8) | h[17];
  if (page == 1) page = 65536;
  const int64_t pages = (int64_t{h[28]} << 24) | (h[29] << 16) | (h[30] << 8) | h[31];
  ASSERT_EQ(size, pages * page);  // a closed session: exactly its pages
  for (const int64_t cut : {int64_t{1}, int64_t{100}, int64_t{4096}}) {
    const fs::path bad = live54_scratch() / ("cut_" + std::to_string(cut) + ".db");
    {
      std::ifstream in(tiny, std::ios::binary);
      std::string bytes(static_cast<size_t>(size - cut), '\0');
      in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      std::ofstream(bad, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    const std::string want = bad.string() + ": the session file is truncated or corrupt (" + std::to_string(size - cut) +
                             " bytes, where its SQLite header says " + std::to_string(pages) + " pages of " +
                             std::to_string(page) + " bytes: " + std::to_string(pages * page) + " bytes;";
    for (const std::string& cmd :
         {std::string("stats "), "export --format chrome -o " + (live54_scratch() / "cut.json").string() + " --force-overwrite "}) {
      const auto r = live54_cli(cmd + bad.string());
      EXPECT_EQ(r.code, 2) << cut << ": " << cmd << "\n" << r.err;
      EXPECT_NE(r.err.find(want), std::string::npos) << cut << ": " << cmd << "\n" << r.err;
    }
  }
}

// F6: what must still open. A live run's session in WAL mode (read while the run writes and
// checkpoints), and a killed run's session with its -wal beside it (the reader checkpoints it);
// once checkpointed, the killed run's session is whole, and a copy of it cut short is refused.
TEST(Live54CutShort, LiveAndKilledSessionsWithTheirWalStillRead) {
  const int rc = live54_sh("rm -f w.db w.db-wal w.db-shm k.db k.db-wal k.db-shm\n"
                           "$E run --preset tiny --steps 100 --network-latency 2000000 -o w.db >w.out 2>w.err &\n"
                           "P=$!\n"
                           "n=0\n"
                           "while kill -0 $P 2>/dev/null; do\n"
                           "  if [ -s w.db ]; then $E stats w.db >ws.out 2>ws.err; R=$?\n"
                           "    if [ $R -ne 0 ] && ! grep -q 'nothing committed yet' ws.err; then cat ws.err; exit 90; fi\n"
                           "    [ $R -eq 0 ] && n=$((n+1)); fi\n"
                           "done\n"
                           "wait $P || exit 91\n"
                           "[ $n -ge 1 ] || exit 92\n"  // at least one read of the live session
                           "$E run --preset tiny --steps 100000 --network-latency 2000000 -o k.db >k.out 2>k.err &\n"
                           "K=$!\n"
                           "steps() { sqlite3 -readonly k.db 'SELECT count(*) FROM steps' 2>/dev/null || echo 0; }\n"
                           "until [ \"$(steps)\" -ge 6 ]; do kill -0 $K || exit 93; sleep 0.05; done\n"
                           "{ kill -KILL $K; wait $K; } 2>/dev/null\n"
                           "[ -s k.db-wal ] || exit 94\n"
                           "$E stats k.db >ks.out 2>ks.err || { cat ks.err; exit 95; }\n");
  ASSERT_EQ(rc, 0) << live54_slurp(live54_scratch() / "ws.err") << live54_slurp(live54_scratch() / "ks.err");
  EXPECT_EQ(embedscope::sessions::SessionReader((live54_scratch() / "w.db").string()).status(), "complete");
  const embedscope::sessions::SessionReader k((live54_scratch() / "k.db").string());
  EXPECT_EQ(k.status(), "crashed");
  EXPECT_GE(k.steps().size(), 6u);
  ASSERT_FALSE(fs::exists(live54_scratch() / "k.db-wal"));  // checkpointed by the first stats
  const auto size = static_cast<int64_t>(fs::file_size(live54_scratch() / "k.db"));
  ASSERT_EQ(live54_sh("head -c " + std::to_string(size - 512) + " k.db >k_cut.db\n"), 0);
  const auto r = live54_cli("stats " + (live54_scratch() / "k_cut.db").string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find((live54_scratch() / "k_cut.db").string() + ": the session file is truncated or corrupt (" +
                       std::to_string(size - 512) + " bytes, where its SQLite header says "),
            std::string::npos)
      << r.err;
}

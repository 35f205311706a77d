// A SIGKILLed run's session (FILE.db + FILE.db-wal) is folded back into FILE.db by the first
// `stats` that can: readers started together take turns on a lock of the -wal from before they
// open anything of the session, so the first folds it and the others read the result. Before,
// every one of them looked at the session with connections of its own while another tried to
// fold it, every checkpoint failed, and the -wal stayed until a later lone `stats`. Where
// another program has the session open (the workbench, export), nothing is changed and stats
// says why.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;

std::string rob62_slurp(const fs::path& p) {
  std::ifstream in(p);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// SQLite's header byte 18 (file format write version): 2 in WAL mode, 1 in rollback (DELETE) mode
int rob62_write_version(const fs::path& db) {
  std::ifstream in(db, std::ios::binary);
  char h[20] = {};
  in.read(h, sizeof h);
  return h[18];
}

// A tiny run (2 ranks) SIGKILLed once it has kept 20 step rows (10 steps): its session in
// `dir`/k.db + k.db-wal.
fs::path rob62_killed_session(const fs::path& dir) {
  const fs::path db = dir / "k.db";
  const auto k = embedscope::test_support::kill_when(
      EMBEDSCOPE_CLI, {"run", "--preset", "tiny", "--steps", "100000", "-o", db.string()}, [&] {
        if (!fs::exists(db)) return false;
        const embedscope::sessions::SessionReader s(db.string());
        return s.steps().size() >= 20;
      });
  EXPECT_TRUE(k.ready) << "the run did not keep 10 steps within 60 s";
  EXPECT_TRUE(fs::exists(db.string() + "-wal"));
  return db;
}

// A copy of the killed session (its .db and -wal, as a user copies them) in `dir`/`name`.
fs::path rob62_copy(const fs::path& killed, const fs::path& dir, const std::string& name) {
  fs::create_directories(dir / name);
  const fs::path db = dir / name / "k.db";
  fs::copy_file(killed, db);
  fs::copy_file(killed.string() + "-wal", db.string() + "-wal");
  return db;
}

}  // namespace

// 6 stats processes started at once by one shell, 3 rounds: in each, exactly one says it folded
// the -wal back, the -wal is gone and FILE.db is out of WAL mode, and every one reads the same
// `crashed` session with the same steps (nothing recorded is lost). On the old code the -wal
// stayed after most rounds (and no reader said it folded it).
TEST(Rob62WalFold, ReadersStartedTogetherFoldTheWalOnce) {
  const fs::path dir = embedscope::test_support::fresh_scratch("es_rob62_fold_" + std::to_string(getpid()));
  const fs::path killed = rob62_killed_session(dir);
  ASSERT_FALSE(::testing::Test::HasFailure());
  // the steps a lone reader of an untouched copy reads
  const fs::path ref = rob62_copy(killed, dir, "ref");
  const auto lone = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "stats --json " + ref.string(), dir / "ref");
  ASSERT_EQ(lone.code, 0) << lone.err;
  const int64_t steps = nlohmann::json::parse(lone.out).at("steps").get<int64_t>();
  ASSERT_GE(steps, 10);
  constexpr int kRounds = 3, kReaders = 6;
  for (int round = 0; round < kRounds; ++round) {
    const fs::path db = rob62_copy(killed, dir, "r" + std::to_string(round));
    const fs::path rd = db.parent_path();
    std::string cmd;
    for (int i = 0; i < kReaders; ++i)
      cmd += fmt::format("'{}' stats '{}' --json > '{}' 2> '{}' & ", EMBEDSCOPE_CLI, db.string(),
                         (rd / fmt::format("o{}.json", i)).string(), (rd / fmt::format("e{}.txt", i)).string());
    cmd += "wait";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    int folded_by = 0;
    for (int i = 0; i < kReaders; ++i) {
      const std::string err = rob62_slurp(rd / fmt::format("e{}.txt", i));
      folded_by += err.find("its -wal file was checkpointed into " + db.string()) != std::string::npos;
      EXPECT_EQ(err.find("could not be checkpointed"), std::string::npos) << err;
      const auto j = nlohmann::json::parse(rob62_slurp(rd / fmt::format("o{}.json", i)), nullptr, false);
      ASSERT_TRUE(j.is_object()) << "round " << round << " reader " << i << ": " << err;
      EXPECT_EQ(j.value("ended", ""), "crashed") << "round " << round << " reader " << i;
      EXPECT_EQ(j.value("steps", int64_t{-1}), steps) << "round " << round << " reader " << i;
    }
    EXPECT_EQ(folded_by, 1) << "round " << round;
    EXPECT_FALSE(fs::exists(db.string() + "-wal")) << "round " << round;
    EXPECT_EQ(rob62_write_version(db), 1) << "round " << round;  // journal mode DELETE: FILE.db alone is the session
  }
}

// Another program holding the session open (here a SessionReader of this process, as the workbench
// holds it) makes the fold impossible: stats says why, reads the session with its -wal, and
// changes nothing (the -wal keeps every byte); once it is closed, the next stats folds it. On the
// old code stats said nothing, and its checkpoint emptied the -wal but left FILE.db in WAL mode,
// which no later stats changed.
TEST(Rob62WalFold, AReaderHoldingItOpenIsNamedAndNothingChanges) {
  const fs::path dir = embedscope::test_support::fresh_scratch("es_rob62_held_" + std::to_string(getpid()));
  const fs::path killed = rob62_killed_session(dir);
  ASSERT_FALSE(::testing::Test::HasFailure());
  const fs::path db = rob62_copy(killed, dir, "held");
  const auto wal_bytes = fs::file_size(db.string() + "-wal");
  {
    const embedscope::sessions::SessionReader held(db.string());
    ASSERT_EQ(held.status(), "crashed");
    const auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "stats " + db.string(), db.parent_path());
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.err.find("the run that wrote " + db.string() + " was killed; its -wal file could not be checkpointed into " +
                         db.string() + " now: another program has the session open"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.out.find("crashed"), std::string::npos) << r.out;
    EXPECT_EQ(fs::file_size(db.string() + "-wal"), wal_bytes);
    EXPECT_EQ(rob62_write_version(db), 2);
  }
  const auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "stats " + db.string(), db.parent_path());
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("its -wal file was checkpointed into " + db.string()), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(db.string() + "-wal"));
  EXPECT_EQ(rob62_write_version(db), 1);
}

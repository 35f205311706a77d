// launch51 (a tester's leftover): the workbench's run panel (RunJob::finished, shown by the
// designer and the scenario view) read an lm_embedding run's ending as "crashed" when nothing was
// saved, and as "error" (a refused workload) when its session could not be made: it caught the
// run's failure as any exception and asked a session that did not exist. It now takes the ending
// from the run, as for a DLRM run (LmRunError: how it ended and the session kept, "" for none;
// a session that cannot be made on a full disk: write_failed), and a run that left no session
// says "no session was written" (the CLI's words), DLRM and lm_embedding alike.
//
// The full disk is a file size limit on this process (RLIMIT_FSIZE, SIGXFSZ ignored: a write past
// it fails with EFBIG, as on a full disk), set around each run and lifted after it.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <QSignalSpy>
#include <QString>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>

#include "embedscope/engine/workload/lm_spec.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "jobs/run_job.h"
#include "ui/support/ui_fixtures.h"

namespace {
namespace fs = std::filesystem;
using embedscope::ui::RunJob;

// The LM workload of LmRunReportsProgressAfterEveryStep: 2 ranks vocab_parallel, small.
embedscope::engine::LmWorkloadSpec launch51j_lm(int64_t steps) {
  embedscope::engine::LmWorkloadSpec spec = embedscope::engine::load_lm_preset("llama3_8b_embedding_scaled");
  spec.vocab_size = 64;
  spec.hidden_size = 8;
  spec.sequence_length = 8;
  spec.micro_batch_size = 2;
  spec.world_size = 2;
  spec.steps = steps;
  return spec;
}

struct Launch51JobEnd {
  QString path, ended, message;
};

// Runs `job` to its end with files limited to `limit` bytes (0: no limit); its finished().
Launch51JobEnd launch51j_run(RunJob& job, rlim_t limit) {
  QSignalSpy finished(&job, &RunJob::finished);
  rlimit before{};
  getrlimit(RLIMIT_FSIZE, &before);
  const auto old_xfsz = signal(SIGXFSZ, SIG_IGN);
  if (limit > 0) {
    const rlimit r{limit, before.rlim_max};
    setrlimit(RLIMIT_FSIZE, &r);
  }
  job.start();
  const bool ended = finished.wait(120'000);
  setrlimit(RLIMIT_FSIZE, &before);
  signal(SIGXFSZ, old_xfsz);
  if (!ended || finished.size() != 1) return {"", "(no finished signal)", ""};
  return {finished[0][0].toString(), finished[0][1].toString(), finished[0][2].toString()};
}
}  // namespace

// No room for the session at all (a limit of 64 KiB: the writer's 256 KiB end reserve cannot be
// held): both kinds of run end write_failed, keep no session and say so (before: the LM run
// ended "error", the refusal of a workload, and neither said that no session was written).
TEST(Launch51RunJobEnd, NoRoomForTheSessionIsWriteFailedWithNoSessionForLmAndDlrmRuns) {
  const fs::path dir = embedscope::ui::fixtures::scratch("launch51_job_noroom");
  fs::remove_all(dir);
  fs::create_directories(dir);
  {
    RunJob job(launch51j_lm(4), QString::fromStdString((dir / "lm.db").string()));
    const Launch51JobEnd e = launch51j_run(job, 64 * 1024);
    EXPECT_EQ(e.ended, "write_failed") << e.message.toStdString();
    EXPECT_EQ(e.path, "");
    EXPECT_TRUE(e.message.endsWith("\nno session was written")) << e.message.toStdString();
    EXPECT_TRUE(e.message.contains("cannot be written")) << e.message.toStdString();  // the writer's reason
    EXPECT_FALSE(fs::exists(dir / "lm.db"));
  }
  {
    embedscope::engine::WorkloadSpec spec = embedscope::engine::load_preset("tiny");
    spec.steps = 3;
    RunJob job(spec, QString::fromStdString((dir / "dlrm.db").string()));
    const Launch51JobEnd e = launch51j_run(job, 64 * 1024);
    EXPECT_EQ(e.ended, "write_failed") << e.message.toStdString();
    EXPECT_EQ(e.path, "");
    EXPECT_TRUE(e.message.endsWith("\nno session was written")) << e.message.toStdString();
    EXPECT_FALSE(fs::exists(dir / "dlrm.db"));
  }
}

// The session made, then no commit fits (a limit just over the schema's commit: what a fresh
// session's files take, measured here, plus 48 KiB, less than the run's first commit of its
// plan, metadata and steps): the LM run fails with nothing recorded, and the half-made file is
// removed (LmRunError, session ""). Before: the job asked that missing session how the run
// ended and said "crashed", with the session's path.
TEST(Launch51RunJobEnd, AnLmRunThatCommittedNothingEndsWriteFailedWithNoSession) {
  namespace ss = embedscope::sessions;
  const fs::path dir = embedscope::ui::fixtures::scratch("launch51_job_nothing");
  fs::remove_all(dir);
  fs::create_directories(dir);
  uintmax_t schema = 0;  // the bytes a fresh session's files take (its schema's commit, in the -wal)
  {
    const std::string probe = (dir / "probe.db").string();
    ss::SessionWriter w(probe);
    std::error_code ec;
    for (const std::string& f : {probe, probe + "-wal"}) schema = std::max(schema, fs::file_size(f, ec) + 0);
    w.close("complete");
  }
  ASSERT_GT(schema, 0u);
  RunJob job(launch51j_lm(4), QString::fromStdString((dir / "lm.db").string()));
  const rlim_t limit = std::max<rlim_t>(static_cast<rlim_t>(schema) + 48 * 1024, 300 * 1024);
  const Launch51JobEnd e = launch51j_run(job, limit);
  EXPECT_EQ(e.ended, "write_failed") << "limit " << limit << ": " << e.message.toStdString();
  EXPECT_EQ(e.path, "");
  EXPECT_TRUE(e.message.contains("nothing was recorded, and the half-created file was removed")) << e.message.toStdString();
  EXPECT_TRUE(e.message.endsWith("\nno session was written")) << e.message.toStdString();
  EXPECT_FALSE(fs::exists(dir / "lm.db"));
}

// A run's id histogram counts the batches its counted steps looked up: with a pipeline, the
// batches looked up in the warm-up (semi_sync's fill) and in the drain steps are left out, as
// `stats` leaves those lookups out, so the histogram's ids per table are the load counters' of
// the counted steps (before: every measured step's input batch, 6 batches where stats counted 4).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;

fs::path ui57h_scratch() {
  const fs::path d = fs::temp_directory_path() / ("es_ui57_hist_" + std::to_string(getpid()));
  fs::create_directories(d);
  return d;
}

struct Ui57Ids {
  std::map<int32_t, int64_t> histogram, counted;  // per table
  int64_t all = 0;                                // every measured step's counters' ids
};

// the histogram's ids per table, and the load counters' of steps 0 .. steps - drain - 1
Ui57Ids ui57h_ids(const std::string& db, int64_t steps, int64_t drain) {
  const embedscope::sessions::SessionReader s(db);
  Ui57Ids out;
  for (const auto& b : s.id_histogram()) out.histogram[b.table] += b.ids;
  for (const auto& c : s.load()) {
    if (c.step < 0) continue;
    out.all += c.ids;
    if (c.step < steps - drain) out.counted[c.table] += c.ids;
  }
  return out;
}
}  // namespace

TEST(Ui57Histogram, APipelinedRunsHistogramHoldsItsCountedSteps) {
  const fs::path dir = ui57h_scratch();
  for (const auto& [pipeline, drain] : std::map<std::string, int64_t>{{"base", 0}, {"sparse_dist", 1}, {"semi_sync", 2}})
    for (int warmup : {0, 2}) {
      SCOPED_TRACE(pipeline + ", warm-up " + std::to_string(warmup));
      const std::string db = (dir / (pipeline + std::to_string(warmup) + ".db")).string();
      for (const char* tail : {"", "-wal", "-shm"}) fs::remove(db + tail);
      const auto r = embedscope::test_support::run_cli(
          EMBEDSCOPE_CLI,
          "run --preset tiny --steps 6 --warmup-steps " + std::to_string(warmup) + " --pipeline " + pipeline + " -o " + db, dir);
      ASSERT_EQ(r.code, 0) << r.err;
      const embedscope::sessions::SessionReader s(db);
      EXPECT_EQ(s.meta(embedscope::sessions::meta::kIdHistogramCounts, ""), "counted_lookups");
      ASSERT_EQ(embedscope::sessions::analyze_step_times(s).drain_steps, drain);  // stats' rule
      const Ui57Ids ids = ui57h_ids(db, 6, drain);
      ASSERT_EQ(ids.counted.size(), 4u);  // tiny's four tables
      EXPECT_EQ(ids.histogram, ids.counted);
      // stats' ids looked up: the same total
      int64_t stats_ids = 0, hist = 0;
      for (const auto& rs : embedscope::sessions::analyze(s).ranks) stats_ids += rs.ids_looked_up;
      for (const auto& [t, n] : ids.histogram) hist += n;
      EXPECT_EQ(hist, stats_ids);
      if (drain > 0) EXPECT_LT(hist, ids.all);  // the drain steps' lookups are not in it
    }
}

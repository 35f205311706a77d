// tester48 F4: a pipeline moves the next batches' lookups and dists into the warm-up and leaves
// them out of the drain steps, so the ranks' counts (ids looked up, lookup time, bytes sent and
// received) leave the drain steps out, as the time figures do - the same steps everywhere.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"

namespace {
namespace fix48ss = embedscope::sessions;

// One rank, 6 measured steps like a semi_sync run of tester48 F4: warm-up step -1 holds two
// batches' lookups (4096 ids) and extra dists (3000 B); steps 0-3 one batch each (2048 ids,
// 1000 B sent, 800 B received, 10 ns lookup); step 4 (drain) 2048 ids and 900 B; step 5 (drain)
// no lookup and 700 B.
std::string fix48_pipeline_session(const std::string& pipeline) {
  const auto p = std::filesystem::temp_directory_path() / ("es_fix48_counts_" + pipeline + "_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(p);
  fix48ss::SessionWriter w(p.string());
  w.set_metadata(fix48ss::meta::kPipeline, pipeline);
  w.set_metadata(fix48ss::meta::kWorldSize, "1");
  w.set_metadata(fix48ss::meta::kSamplesPerStep, "2048");
  for (int64_t s = -1; s < 6; ++s) {
    const int64_t t = 1000 + 100 * s;
    w.add_ops({{0, fix48ss::Lane::compute, fix48ss::OpCategory::dense, "dense", s, t, t + 100}});
    if (s >= 0) w.add_step({s, 0, t, t + 100, 0.5, 0, 0});
    fix48ss::LoadCounter c;
    c.step = s;
    c.ids = s == -1 ? 4096 : s == 5 ? 0 : 2048;
    c.lookup_ns = s == 5 ? 0 : 10;
    w.add_load(c);
    fix48ss::CollectiveRecord r;
    r.op = "all_to_all";
    r.name = "input_dist/all_to_all";
    r.group = "world";
    r.sequence = static_cast<uint64_t>(s + 2);
    r.dtype = "int64";
    r.step = s;
    r.start_ns = t;
    r.end_ns = t + 10;
    r.bytes_sent = s == -1 ? 3000 : s == 4 ? 900 : s == 5 ? 700 : 1000;
    r.bytes_received = s < 4 ? 800 : 0;
    r.peers = {0};
    w.add_collective(r);
  }
  w.close("complete");
  return p.string();
}
}  // namespace

TEST(Fix48DrainCounts, TheRanksCountsLeaveTheDrainStepsOut) {
  const std::string path = fix48_pipeline_session("semi_sync");
  const fix48ss::RunStats st = fix48ss::analyze(fix48ss::SessionReader(path));
  EXPECT_EQ(st.drain_steps, 2);
  EXPECT_EQ(st.counted_steps(), 4);
  ASSERT_EQ(st.ranks.size(), 1u);
  EXPECT_EQ(st.ranks[0].ids_looked_up, 4 * 2048);  // with the drain steps 10240 (5 lookups in 6 steps)
  EXPECT_EQ(st.ranks[0].lookup_ns, 40);
  EXPECT_EQ(st.ranks[0].bytes_sent, 4000);         // with the drain steps 5600
  EXPECT_EQ(st.ranks[0].bytes_received, 3200);
  std::filesystem::remove(path);
}

TEST(Fix48DrainCounts, ABaseSessionCountsEveryMeasuredStep) {
  const std::string path = fix48_pipeline_session("base");
  const fix48ss::RunStats st = fix48ss::analyze(fix48ss::SessionReader(path));
  EXPECT_EQ(st.drain_steps, 0);
  ASSERT_EQ(st.ranks.size(), 1u);
  EXPECT_EQ(st.ranks[0].ids_looked_up, 5 * 2048);
  EXPECT_EQ(st.ranks[0].bytes_sent, 5600);  // the warm-up's 3000 B are not measured
  std::filesystem::remove(path);
}

// lm44 (tester43 F2, F5, F23): an lm_embedding session in the Summary's plan table (planned memory
// = the LM estimate, bytes in / out of each rank's lookups) and in the load view's row histogram
// (each token counted once under vocab_parallel); the workload designer and LM workloads (a clear
// refusal, the Preset box showing where the workload came from).
#include <gtest/gtest.h>
#include <unistd.h>

#include <QApplication>
#include <QComboBox>
#include <qcustomplot.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "core/input_figures.h"
#include "jobs/analysis_job.h"
#include "embedscope/engine/exec/lm_run.h"
#include "embedscope/engine/planner/lm_memory_estimate.h"
#include "embedscope/engine/workload/lm_spec.h"
#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/store/session.h"
#include "models/sharding_plan_model.h"
#include "models/workload_model.h"
#include "views/load_view.h"
#include "views/workload_designer.h"

namespace {

using namespace embedscope;
using namespace embedscope::ui;

std::filesystem::path lm44_path(const std::string& name) {
  return std::filesystem::temp_directory_path() / (std::to_string(getpid()) + "_lm44_" + name);
}

// V 1,000 rows of H 16 on 4 ranks (250 rows each), vocab_parallel, 32 tokens a step, 2 steps, fp32.
nlohmann::json lm44_workload() {
  return nlohmann::json::parse(R"({"model": "lm_embedding", "name": "lm44", "vocab_size": 1000, "hidden_size": 16,
    "sequence_length": 32, "micro_batch_size": 1, "devices": {"count": 4}, "steps": 2,
    "sharding": {"type": "vocab_parallel"}, "token_ids": {"distribution": "zipf", "alpha": 1.0}})");
}

// One measured run of lm44_workload(), its session (written once per test process).
const std::string& lm44_session() {
  static const std::string path = [] {
    const std::string p = lm44_path("vp4.db").string();
    engine::LmRunOptions opt;
    opt.session_path = p;
    opt.overwrite = true;
    engine::run_lm(engine::parse_lm_workload(lm44_workload(), "lm44"), opt);
    return p;
  }();
  return path;
}

TEST(Lm44Summary, PlannedMemoryOfAnLmSessionIsTheLmEstimate) {
  const sessions::SessionReader r(lm44_session());
  const sessions::RunStats st = sessions::analyze(r);
  ShardingPlanModel m(r, st);
  ASSERT_EQ(m.ranks().size(), 4u);
  const auto est = engine::estimate_lm_memory(engine::parse_lm_workload(lm44_workload(), "lm44"));
  for (int k = 0; k < 4; ++k) {
    const auto& row = m.ranks()[static_cast<size_t>(k)];
    // table 250 x 16 x 4 = 16,000 B, its gradient as much, logits 32 x 250 x 4 = 32,000 B: the
    // estimate is far more than the table's weights (tester43 F2: "planned memory 15.7 MiB")
    EXPECT_EQ(est[static_cast<size_t>(k)].table_bytes, 16'000);
    EXPECT_EQ(est[static_cast<size_t>(k)].logits_bytes, 32'000);
    // lm45: the replay of the rank's buffers through its caching allocator, the run's peak
    EXPECT_EQ(row.planned_bytes, est[static_cast<size_t>(k)].peak_allocated_bytes) << "rank " << k;
    EXPECT_EQ(row.planned_bytes, row.peak_bytes) << "rank " << k;
    EXPECT_GT(row.planned_bytes, 64'000);
    EXPECT_EQ(row.peak_planned_bytes, row.planned_bytes);
    EXPECT_EQ(m.data(m.index(k, ShardingPlanModel::PlannedMemory), Qt::UserRole).toLongLong(), row.planned_bytes);
  }
}

TEST(Lm44Summary, BytesInAndOutOfAnLmRankAreItsIdsTimesEightAndTimesARow) {
  const sessions::SessionReader r(lm44_session());
  ShardingPlanModel m(r, sessions::analyze(r));
  int64_t ids = 0;
  for (const auto& row : m.ranks()) {
    ids += row.ids;
    EXPECT_EQ(row.bytes_in, row.ids * 8) << "rank " << row.rank;       // int64 ids
    EXPECT_EQ(row.bytes_out, row.ids * 16 * 4) << "rank " << row.rank; // fp32 rows of H 16
  }
  EXPECT_EQ(ids, 2 * 32);  // vocab_parallel: each token looked up by the one rank holding its row
  EXPECT_GT(m.ranks()[0].bytes_out, 0);  // rank 0 holds the Zipf-hot rows
}

// (Lm44Summary.AnLmPeakAboveItsEstimateSaysTheAllocatorRoundsLargeBlocks, the red line of an LM
// session whose large buffers get unsplit blocks, is gone since lm45: the estimate replays the
// allocator; tests/ui/views/lm45_ui_test.cpp checks that session has no red line.)

TEST(Lm44LoadRows, VocabParallelHistogramCountsEachTokenOnce) {
  const sessions::SessionReader r(lm44_session());
  ASSERT_TRUE(r.has_id_histogram());
  int64_t total = 0;
  for (const auto& b : r.id_histogram()) total += b.ids;
  EXPECT_EQ(total, 2 * 32);  // 2 steps x 32 tokens, not 4 ranks x that (tester43 F5: 5,120 for 1,280)
}

// The shard heatmap of one table's 4 shards: "#0".."#3" upright under the columns, the table once on
// the axis, and at least 150 + 4 x 18 = 222 px tall (tester43 F5: rotated "token_embedding #k"
// names left the 4 rank rows ~25 px).
TEST(Lm44LoadRows, OneTablesShardHeatmapHasShortUprightLabelsAndRoomForTheRanks) {
  EXPECT_EQ(LoadView::heatmap_min_height(4), 222);
  EXPECT_EQ(LoadView::heatmap_min_height(8), 294);
  EXPECT_EQ(LoadView::heatmap_min_height(1), 200);
  LoadView view(std::make_shared<const sessions::SessionReader>(lm44_session()));
  view.resize(1600, 600);  // a short window: the heatmaps get their minimum
  view.show();
  ASSERT_TRUE(wait_for_analyses(&view));
  QApplication::processEvents();
  EXPECT_GE(view.shard_map()->height(), 222);
  QCPAxis* x = view.shard_map()->axisRect()->axis(QCPAxis::atBottom);
  EXPECT_EQ(x->label().toStdString(), "token_embedding: shard");
  EXPECT_EQ(x->tickLabelRotation(), 0.0);
  auto ticker = x->ticker().dynamicCast<QCPAxisTickerText>();
  ASSERT_TRUE(ticker);
  ASSERT_EQ(ticker->ticks().size(), 4);
  EXPECT_EQ(ticker->ticks().value(0).toStdString(), "#0");
  EXPECT_EQ(ticker->ticks().value(3).toStdString(), "#3");
}

TEST(Lm44LoadRows, InputNoteNamesTheLmEmbeddingRun) {
  const sessions::SessionReader r(lm44_session());
  const auto fig = input_figures(r);
  EXPECT_NE(fig.unavailable.find("(DLRM), not for this lm_embedding run"), std::string::npos) << fig.unavailable;
}

TEST(Lm44Designer, LmPresetIsRefusedWithTheReason) {
  WorkloadModel m;
  try {
    m.load_preset("llama3_8b_embedding_scaled");
    ADD_FAILURE() << "no error";
  } catch (const std::exception& e) {
    EXPECT_EQ(std::string(e.what()),
              "preset \"llama3_8b_embedding_scaled\" is an lm_embedding workload: the designer edits DLRM (embedding-bag) "
              "workloads only; run it with `embedscope run --preset llama3_8b_embedding_scaled` (or --simulate h100_sxm), "
              "or compare its modes in a teaching scenario");
  }
}

TEST(Lm44Designer, LmFileIsRefusedWithTheReasonNotAnUnknownKey) {
  const std::string path = lm44_path("lm.json").string();
  std::ofstream(path) << lm44_workload().dump();
  WorkloadDesigner d;
  const QString err = d.load_file(QString::fromStdString(path), true);
  EXPECT_EQ(err.toStdString(), path + ": an lm_embedding workload (\"model\": \"lm_embedding\"): the designer edits DLRM "
                                      "(embedding-bag) workloads only; run it with `embedscope run " + path +
                                      "` (or --simulate h100_sxm), or compare its modes in a teaching scenario");
  EXPECT_EQ(d.preset_box()->currentText().toStdString(), "tiny");  // still the workload shown
  EXPECT_EQ(d.model()->value("/name").get<std::string>(), "tiny");
  std::filesystem::remove(path);
}

TEST(Lm44Designer, PresetBoxShowsWhereTheWorkloadCameFrom) {
  WorkloadDesigner d;
  EXPECT_EQ(d.preset_box()->currentText().toStdString(), "tiny");
  ASSERT_TRUE(d.load_preset("criteo_kaggle", true).isEmpty());
  EXPECT_EQ(d.preset_box()->currentText().toStdString(), "criteo_kaggle");
  const std::string path = lm44_path("my_criteo.json").string();
  std::ofstream(path) << d.model()->workload().dump();
  ASSERT_TRUE(d.load_file(QString::fromStdString(path), true).isEmpty());
  EXPECT_EQ(d.preset_box()->currentIndex(), -1);  // no preset selected ...
  EXPECT_EQ(d.preset_box()->placeholderText().toStdString(),
            "(file " + std::to_string(getpid()) + "_lm44_my_criteo.json)");  // ... the file shown instead
  EXPECT_FALSE(d.load_preset("no_such_preset", true).isEmpty());
  EXPECT_EQ(d.preset_box()->currentIndex(), -1);  // a failed load leaves the file's name
  ASSERT_TRUE(d.load_preset("tiny", true).isEmpty());
  EXPECT_EQ(d.preset_box()->currentText().toStdString(), "tiny");
  std::filesystem::remove(path);
}

}  // namespace

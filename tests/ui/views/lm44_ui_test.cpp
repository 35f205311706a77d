// lm44 (tester43 F2, F5, F23): an lm_embedding session in the Summary's plan table (planned memory
// = the LM estimate, each rank's bytes sent and received by its collectives) and in the load view's row histogram
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

// tester62a F9: an lm_embedding rank's bytes columns are its collectives' bytes sent and received
// (every rank all-reduces the whole [T x H] partial sum under vocab_parallel), not its lookups'
// ids x 8 and rows x H x 4, which gave the Zipf-hot rank 0 a spread the wire does not have.
// Hand: per step the embedding's all-reduce and the projection input gradient's, each of
// T x H x 4 = 32 x 16 x 4 = 2,048 B, a ring sending 2 (p - 1) / p of it = 3,072 B, and the
// cross-entropy's 3 all-reduces of T x 4 = 128 B, 2 x 3/4 x 128 = 192 B each: 6,720 B a step,
// 13,440 B over the 2 steps, received as much (a ring all-reduce), the same on every rank.
TEST(Lm44Summary, BytesOfAnLmRankAreItsCollectivesSentAndReceived) {
  const sessions::SessionReader r(lm44_session());
  const sessions::RunStats st = sessions::analyze(r);
  ShardingPlanModel m(r, st);
  ASSERT_EQ(m.ranks().size(), 4u);
  int64_t ids = 0;
  for (const auto& row : m.ranks()) {
    ids += row.ids;
    EXPECT_EQ(row.bytes_out, 13'440) << "rank " << row.rank;
    EXPECT_EQ(row.bytes_in, 13'440) << "rank " << row.rank;
    const auto& rs = st.ranks[static_cast<size_t>(row.rank)];  // stats' figures (`stats --json` ranks[])
    EXPECT_EQ(row.bytes_out, rs.bytes_sent);
    EXPECT_EQ(row.bytes_in, rs.bytes_received);
    EXPECT_EQ(m.data(m.index(row.rank, ShardingPlanModel::BytesOut), Qt::UserRole).toLongLong(), 13'440);
    EXPECT_EQ(m.data(m.index(row.rank, ShardingPlanModel::BytesOut)).toString().toStdString(), "13.1 KiB (6.6 KiB a step)");
    // the rank's one shard row: no bytes of its own (the rank's are its collectives')
    const QModelIndex rank_index = m.index(row.rank, 0);
    ASSERT_EQ(m.rowCount(rank_index), 1);
    EXPECT_EQ(m.data(m.index(0, ShardingPlanModel::BytesIn, rank_index)).toString(), "");
  }
  EXPECT_EQ(ids, 2 * 32);  // vocab_parallel: each token looked up by the one rank holding its row
  EXPECT_EQ(m.headerData(ShardingPlanModel::BytesIn, Qt::Horizontal).toString(), "bytes received");
  EXPECT_EQ(m.headerData(ShardingPlanModel::BytesOut, Qt::Horizontal).toString(), "bytes sent");
  EXPECT_TRUE(m.headerData(ShardingPlanModel::BytesOut, Qt::Horizontal, Qt::ToolTipRole)
                  .toString()
                  .contains("whole [tokens x hidden] partial sum"));
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

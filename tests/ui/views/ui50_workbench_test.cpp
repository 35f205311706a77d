// tester50's workbench findings: F8 the Summary says how the run was set up (network, simulated
// hardware, dense precision) as `stats` does; F10 a folded timeline run takes the colour of the
// category with the most time in it; F3 the Summary's Collectives pane shows every column;
// F11 the Load page's row histogram plots ids per row.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QApplication>
#include <QHeaderView>
#include <QLabel>
#include <QTableView>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/load_data.h"
#include "core/timeline_math.h"
#include "embedscope/engine/cost/run_setup_text.h"
#include "embedscope/engine/workload/spec.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "jobs/analysis_job.h"
#include "ui/support/ui_fixtures.h"
#include "views/summary_view.h"

namespace {

namespace fs = std::filesystem;
using embedscope::sessions::OpCategory;

// tester50's net4.json: 4 cpu ranks on 2 nodes, the cross-node link held to 10 MB/s
const char* kUi50Net4 =
    R"({"name": "net", "tables": [{"name": "ta", "num_embeddings": 1000, "embedding_dim": 64, "pooling": "sum", )"
    R"("feature_names": ["fa"]}, {"name": "tb", "num_embeddings": 1000, "embedding_dim": 64, "pooling": "sum", )"
    R"("feature_names": ["fb"]}], "features": [{"name": "fa", "pooling_factor": 1, "ids": "uniform"}, )"
    R"({"name": "fb", "pooling_factor": 1, "ids": "uniform"}], "batch_size": 256, "steps": 5, "warmup_steps": 1, )"
    R"("seed": 1, "devices": {"count": 4, "backend": "cpu", "memory_bytes": 67108864}, "optimizer": {"type": "sgd", )"
    R"("learning_rate": 0.1}, "dense": {"num_dense_features": 4, "bottom_mlp": [64], "interaction": "cat", )"
    R"("top_mlp": [16, 1]}, "sharding": {"default": "table_wise", "local_world_size": 2}, )"
    R"("network": {"inter_node": {"bandwidth_bytes_per_s": 10000000.0, "latency_ns": 0}}})";

// One rank, two measured steps of 100 ns with a dense op each, the workload `workload_json`.
std::string ui50_setup_session(const std::string& name, const std::string& workload_json) {
  const fs::path p = fs::temp_directory_path() / ("es_ui50_" + name + "_" + std::to_string(getpid()) + ".db");
  fs::remove(p);
  embedscope::sessions::SessionWriter w(p.string());
  w.set_metadata(embedscope::sessions::meta::kWorkloadName, "net");
  w.set_metadata(embedscope::sessions::meta::kWorldSize, "1");
  w.set_metadata(embedscope::sessions::meta::kSamplesPerStep, "256");
  w.set_metadata(embedscope::sessions::meta::kWorkloadJson, workload_json);
  for (int64_t s = 0; s < 2; ++s) {
    w.add_ops({{0, embedscope::sessions::Lane::compute, OpCategory::dense, "dense", s, 100 * s, 100 * s + 100}});
    w.add_step({s, 0, 100 * s, 100 * s + 100, 0.5, 0, 0});
  }
  w.close("complete");
  return p.string();
}

QString ui50_summary_text(const std::string& path) {
  embedscope::ui::SummaryView view(std::make_shared<embedscope::sessions::SessionReader>(path));
  if (!embedscope::ui::wait_for_analyses(&view)) return "analysis did not end";
  auto* label = view.findChild<QLabel*>("summary_text");
  return label ? label->text() : QString("no summary_text label");
}

embedscope::sessions::OpRecord ui50_op(int64_t start, int64_t end, OpCategory c) {
  embedscope::sessions::OpRecord o;
  o.start_ns = start;
  o.end_ns = end;
  o.category = c;
  return o;
}

}  // namespace

// F8: the emulated cross-node link, and the dense precision, in the words `stats` prints
TEST(Ui50RunSetup, TheSummarySaysTheEmulatedNetworkAndTheDensePrecision) {
  const std::string path = ui50_setup_session("net4", kUi50Net4);
  const QString t = ui50_summary_text(path);
  // `embedscope plan net4.json` prints "network      intra_node unlimited; inter_node 10 MB/s, 0 ns latency"
  // and "dense        fp32 (fp32 GEMMs)"
  EXPECT_TRUE(t.contains("network: intra_node unlimited; inter_node 10 MB/s, 0 ns latency &nbsp; dense: fp32 (fp32 GEMMs)<br>"))
      << t.toStdString();
  fs::remove(path);
}

TEST(Ui50RunSetup, TheSummaryOfASimulatedRunNamesItsHardwareProfile) {
  auto w = nlohmann::json::parse(kUi50Net4);
  w["devices"] = {{"count", 2}, {"backend", "simulated"}, {"hardware", "h100_sxm"}};
  w.erase("network");
  w["sharding"] = {{"default", "table_wise"}};
  const std::string path = ui50_setup_session("sim", w.dump());
  const QString t = ui50_summary_text(path);
  // as `embedscope plan sim.json` prints them (the same function: engine::run_setup_text)
  EXPECT_TRUE(t.contains("network: simulated: NVLink 4 (NVSwitch), 900 GB/s bidirectional per GPU within a node, "
                         "InfiniBand NDR 400 Gb/s, one NIC per GPU across nodes (hardware profile h100_sxm)"))
      << t.toStdString();
  EXPECT_TRUE(t.contains("dense: fp32 (GEMMs timed at 67 TFLOP/s x 0.5, fp32)")) << t.toStdString();
  const auto setup = embedscope::engine::run_setup_text(embedscope::engine::parse_workload(w, "test"));
  EXPECT_EQ(setup.pipeline, "base; qcomms forward fp32 backward fp32");
  fs::remove(path);
}

TEST(Ui50RunSetup, ASessionWithoutAStoredWorkloadHasNoSetupLine) {
  const std::string path = ui50_setup_session("none", "");
  const QString t = ui50_summary_text(path);
  EXPECT_FALSE(t.contains("network:")) << t.toStdString();
  EXPECT_TRUE(t.contains("2 measured steps")) << t.toStdString();
  fs::remove(path);
}

TEST(Ui50RunSetup, NetworkTextUnits) {
  embedscope::engine::NetworkSpec n;
  n.intra_node.bandwidth_bytes_per_s = 1'000'000;  // 1e6 B/s: "1 MB/s" (not "0.001 GB/s")
  n.intra_node.latency_ns = 5000;
  n.inter_node.latency_ns = 2000;  // latency only
  EXPECT_EQ(embedscope::engine::emulated_network_text(n),
            "intra_node 1 MB/s, 5.00 us latency; inter_node unlimited bandwidth, 2.00 us latency");
}

// F10: a folded run takes the category with the most time in it, whatever its first op is
TEST(Ui50FoldLane, AFoldedRunTakesTheCategoryWithTheMostTime) {
  embedscope::ui::TimeScale s(0, 1'000'000, 1000);  // 1 us per px: every op below is sub-pixel
  // input 10 ns, dense 80 ns, input 10 ns, optimizer 30 ns, gaps of 10 ns: input first, dense 80 of 130 ns
  std::vector<embedscope::sessions::OpRecord> ops{ui50_op(0, 10, OpCategory::input), ui50_op(20, 100, OpCategory::dense),
                                                  ui50_op(110, 120, OpCategory::input),
                                                  ui50_op(130, 160, OpCategory::optimizer)};
  auto boxes = embedscope::ui::fold_lane(ops, s);
  ASSERT_EQ(boxes.size(), 1u);
  EXPECT_EQ(boxes[0].count, 4);
  EXPECT_EQ(boxes[0].category, OpCategory::dense);  // before: input, the first op's
  // a tie goes to the first op's category when it is among the tied, else to the lowest category
  std::vector<embedscope::sessions::OpRecord> tie{ui50_op(0, 6, OpCategory::input), ui50_op(10, 16, OpCategory::optimizer)};
  EXPECT_EQ(embedscope::ui::fold_lane(tie, s).at(0).category, OpCategory::input);
  tie = {ui50_op(0, 5, OpCategory::lookup), ui50_op(10, 16, OpCategory::optimizer), ui50_op(20, 26, OpCategory::input)};
  EXPECT_EQ(embedscope::ui::fold_lane(tie, s).at(0).category, OpCategory::input);
  // many ops (whole blocks of 64 from the index's prefix sums, with partial blocks at both ends):
  // after a dense op, 1000 ops alternating input 4 ns / optimizer 6 ns, every 10th a lookup of
  // 9 ns: input 500 x 4 = 2000, optimizer 400 x 6 = 2400, lookup 100 x 9 = 900 -> optimizer
  std::vector<embedscope::sessions::OpRecord> many{ui50_op(0, 1, OpCategory::dense)};
  int64_t t = 10;
  for (int i = 0; i < 1000; ++i) {
    const OpCategory c = i % 10 == 9 ? OpCategory::lookup : i % 2 == 0 ? OpCategory::input : OpCategory::optimizer;
    const int64_t d = c == OpCategory::lookup ? 9 : c == OpCategory::input ? 4 : 6;
    many.push_back(ui50_op(t, t + d, c));
    t += d + 1;
  }
  const embedscope::ui::LaneIndex index(many);
  EXPECT_EQ(index.dominant_category(many, 1, 1001), OpCategory::optimizer);
  EXPECT_EQ(index.dominant_category(many, 0, 1), OpCategory::dense);
  // ops 1..3 (i = 0..2): input 2 x 4 = 8, optimizer 6 -> input
  EXPECT_EQ(index.dominant_category(many, 1, 4), OpCategory::input);
  // ops 0..1001 with the dense op: still optimizer (dense 1 ns)
  EXPECT_EQ(embedscope::ui::fold_lane(many, s).at(0).category, OpCategory::optimizer);
  // the same answer by a plain sum over [i, k) for runs across block edges
  for (const auto& [a, b] : std::vector<std::pair<size_t, size_t>>{{63, 130}, {64, 128}, {100, 901}, {1, 65}, {700, 1001}}) {
    std::vector<int64_t> ns(embedscope::sessions::kNumCategories, 0);
    for (size_t i = a; i < b; ++i) ns[static_cast<size_t>(many[i].category)] += many[i].end_ns - many[i].start_ns;
    size_t best = static_cast<size_t>(many[a].category);
    for (size_t c = 0; c < ns.size(); ++c)
      if (ns[c] > ns[best]) best = c;
    EXPECT_EQ(index.dominant_category(many, a, b), static_cast<OpCategory>(best)) << a << ".." << b;
  }
}

// F11: ids per row, so that a uniform table is flat over its 3- and 4-row buckets
TEST(Ui50RowHistogram, IdsPerRowAreFlatForUniformIds) {
  embedscope::ui::RowHistogram h;
  h.num_rows = 11;
  h.row_begin = {0, 4, 7};
  h.row_end = {4, 7, 11};
  h.ids = {12, 9, 12};  // 3 ids on every row: per bucket 12, 9, 12 (the false dip), per row 3, 3, 3
  EXPECT_DOUBLE_EQ(h.ids_per_row(0), 3.0);
  EXPECT_DOUBLE_EQ(h.ids_per_row(1), 3.0);
  EXPECT_DOUBLE_EQ(h.ids_per_row(2), 3.0);
  EXPECT_EQ(h.hottest_bucket(), 0u);  // a tie: the first
  h.ids = {12, 10, 12};  // the 3-row bucket is the hottest per row (3.33) though it has fewer ids
  EXPECT_EQ(h.hottest_bucket(), 1u);
}

// F3: the Collectives pane gets the width its columns need, beside the Critical path
TEST(Ui50SummaryPanes, TheCollectivesPaneShowsEveryColumn) {
  const std::string path = embedscope::ui::fixtures::busy_session();
  embedscope::ui::SummaryView view(std::make_shared<embedscope::sessions::SessionReader>(path));
  ASSERT_TRUE(embedscope::ui::wait_for_analyses(&view));
  auto* paths = view.findChild<QTableView*>("critical_path");
  auto* collectives = view.findChild<QTableView*>("collectives");
  ASSERT_TRUE(paths && collectives);
  ASSERT_GT(collectives->model()->rowCount(), 0);
  view.resize(400, 800);
  view.show();
  QApplication::processEvents();
  const int need_paths = paths->horizontalHeader()->length(), need_coll = collectives->horizontalHeader()->length();
  // wider than the two tables' columns with 200 px to spare, narrower than twice the Collectives':
  // half each would cut the Collectives' last column
  ASSERT_GT(need_coll, need_paths + 250) << need_coll << " vs " << need_paths;
  view.resize(need_paths + need_coll + 200, 800);
  QApplication::processEvents();
  EXPECT_LE(collectives->horizontalHeader()->length(), collectives->viewport()->width())
      << "collectives need " << need_coll << " px, shown " << collectives->viewport()->width();
  EXPECT_LE(paths->horizontalHeader()->length(), paths->viewport()->width());
  EXPECT_TRUE(collectives->property("report_every_column").toBool());
  fs::remove(path);
}

// The Summary's "Waiting for peers, per rank" and "GPU kernel breakdown" tables: the figures
// `embedscope stats` prints for traces and runs (stats_tables.cpp), from the same analyses, so a
// cell reads as the CLI's --json says (its raw ns divided per counted step, as stats divides them).
//   - tests/data/traces/straggler (2 ranks, 2 profiler steps, one all-reduce: rank 0's starts at
//     1250 us, rank 1's at 1400 us): rank 0 waited 150 us, 75.0 us per step; rank 1 arrived last;
//   - nccl_data.json.gz (../shared/data/traces: DDP rank 0, NCCL): the breakdown's types, its
//     computation kernels 75,169 us in all (the data README's HTA compute time: one stream, no
//     overlap, so the sum is the union), the top 10 kernels and "... and 62 more";
//   - fuser_h200.sqlite (../shared/data/nsys, one H200): its longest kernel
//     nvfuser_none_f0_c0_r0_g0 135,137 ns (the data README, counted with sqlite3), one rank: no
//     peer table.
#include <gtest/gtest.h>

#include <QLabel>
#include <QTableView>

#include <filesystem>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/model/units.h"
#include "embedscope/sessions/store/session.h"
#include "jobs/analysis_job.h"
#include "models/kernel_breakdown_model.h"
#include "models/peer_waits_model.h"
#include "support/cli_run.h"
#include "views/summary_view.h"

namespace {
namespace fs = std::filesystem;
using nlohmann::json;

struct Ui61Imported {
  fs::path dir, db;
  json stats;
};

// `embedscope import SOURCE -o DIR/s.db` and its `stats --json`; nullopt-like empty dir when the
// shared data is absent.
Ui61Imported ui61_import(const fs::path& source, const std::string& name) {
  Ui61Imported out;
  out.dir = embedscope::test_support::fresh_scratch("ui61_" + name);
  out.db = out.dir / "s.db";
  const auto cli = std::string("'") + EMBEDSCOPE_CLI + "' ";
  auto r = embedscope::test_support::run_merged(cli + "import '" + source.string() + "' -o '" + out.db.string() + "'");
  EXPECT_EQ(r.code, 0) << r.out;
  r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "stats --json '" + out.db.string() + "'", out.dir);
  EXPECT_EQ(r.code, 0) << r.err;
  out.stats = json::parse(r.out, nullptr, false);
  return out;
}

QString ui61_cell(QTableView* v, int row, int col, int role = Qt::DisplayRole) {
  return v->model()->index(row, col).data(role).toString();
}

std::string dur(int64_t ns) { return embedscope::sessions::format_duration(ns); }

}  // namespace

TEST(Ui61SummaryPeerTables, StragglerTraceCellsEqualStatsJsonAndTheHandFigures) {
  const auto imp = ui61_import(fs::path(EMBEDSCOPE_TEST_DATA) / "traces" / "straggler", "straggler");
  ASSERT_TRUE(imp.stats.is_object());
  embedscope::ui::SummaryView view(std::make_shared<const embedscope::sessions::SessionReader>(imp.db.string()));
  view.resize(1600, 1200);
  ASSERT_TRUE(embedscope::ui::wait_for_analyses(&view));
  const json& pw = imp.stats["peer_waits"];
  ASSERT_TRUE(pw["text"].is_string()) << pw.dump();  // two ranks shared a collective
  const int64_t steps = imp.stats["steps"].get<int64_t>();
  ASSERT_EQ(steps, 2);
  const int64_t per = steps - imp.stats["drain_steps"].get<int64_t>();
  auto* peers = view.findChild<QTableView*>("peer_waits");
  ASSERT_NE(peers, nullptr);
  ASSERT_EQ(peers->model()->rowCount(), static_cast<int>(pw["ranks"].size()));
  ASSERT_EQ(peers->model()->rowCount(), 2);
  using M = embedscope::ui::PeerWaitsModel;
  for (int i = 0; i < 2; ++i) {
    const json& r = pw["ranks"][static_cast<size_t>(i)];
    EXPECT_EQ(ui61_cell(peers, i, M::Rank).toInt(), r["rank"].get<int>());
    EXPECT_EQ(ui61_cell(peers, i, M::Collectives).toLongLong(), r["collectives"].get<int64_t>());
    EXPECT_EQ(ui61_cell(peers, i, M::LastArrivals).toLongLong(), r["last_arrivals"].get<int64_t>());
    EXPECT_EQ(ui61_cell(peers, i, M::Waited).toStdString(), dur(r["waited_ns"].get<int64_t>() / per));
    EXPECT_EQ(ui61_cell(peers, i, M::CausedWait).toStdString(), dur(r["caused_wait_ns"].get<int64_t>() / per));
    EXPECT_EQ(ui61_cell(peers, i, M::Waited, Qt::UserRole).toLongLong(), r["waited_ns"].get<int64_t>());
  }
  // by hand: rank 0 waited 1400 - 1250 = 150 us for rank 1, 75 us per step; rank 1 kept it waiting
  EXPECT_EQ(ui61_cell(peers, 0, M::Waited).toStdString(), "75.0 us");
  EXPECT_EQ(ui61_cell(peers, 0, M::Waited, Qt::UserRole).toLongLong(), 150'000);
  EXPECT_EQ(ui61_cell(peers, 1, M::Waited).toStdString(), "0 ns");
  EXPECT_EQ(ui61_cell(peers, 1, M::LastArrivals).toLongLong(), 1);
  EXPECT_EQ(ui61_cell(peers, 1, M::CausedWait).toStdString(), "75.0 us");
  EXPECT_EQ(ui61_cell(peers, 0, M::Collectives).toLongLong(), 1);
}

TEST(Ui61SummaryPeerTables, NcclTraceBreakdownCellsEqualStatsJson) {
  const fs::path trace = fs::path(EMBEDSCOPE_SHARED_DATA) / "traces" / "nccl_data.json.gz";
  if (!fs::exists(trace)) GTEST_SKIP() << trace << " is absent (../shared/data/README.md)";
  const auto imp = ui61_import(trace, "nccl");
  ASSERT_TRUE(imp.stats.is_object());
  embedscope::ui::SummaryView view(std::make_shared<const embedscope::sessions::SessionReader>(imp.db.string()));
  view.resize(1600, 1200);
  ASSERT_TRUE(embedscope::ui::wait_for_analyses(&view));
  EXPECT_EQ(view.findChild<QTableView*>("peer_waits"), nullptr);  // rank 0's trace alone: nobody to wait for
  const json& kb = imp.stats["gpu_kernel_breakdown"];
  ASSERT_TRUE(kb.is_object());
  auto* types = view.findChild<QTableView*>("kernel_types");
  auto* kernels = view.findChild<QTableView*>("kernel_breakdown");
  ASSERT_NE(types, nullptr);
  ASSERT_NE(kernels, nullptr);
  ASSERT_EQ(types->model()->rowCount(), static_cast<int>(kb["types"].size()));
  for (int i = 0; i < types->model()->rowCount(); ++i) {
    const json& t = kb["types"][static_cast<size_t>(i)];
    EXPECT_EQ(ui61_cell(types, i, 0).toStdString(), t["type"].get<std::string>());
    EXPECT_EQ(ui61_cell(types, i, 1).toLongLong(), t["count"].get<int64_t>());
    EXPECT_EQ(ui61_cell(types, i, 2).toStdString(), dur(t["total_ns"].get<int64_t>()));
  }
  // the data README: HTA's compute time of rank 0, 75169 us (computation kernels on one stream)
  ASSERT_EQ(ui61_cell(types, 0, 0).toStdString(), "computation");
  EXPECT_EQ(ui61_cell(types, 0, 2, Qt::UserRole).toLongLong(), 75'169'000);
  EXPECT_EQ(ui61_cell(types, 0, 2).toStdString(), "75.17 ms");
  const size_t all = kb["kernels"].size();
  ASSERT_GT(all, 10u);  // the top 10 and the rest in one line
  ASSERT_EQ(kernels->model()->rowCount(), 10);
  using K = embedscope::ui::KernelBreakdownModel;
  for (int i = 0; i < 10; ++i) {
    const json& k = kb["kernels"][static_cast<size_t>(i)];
    EXPECT_EQ(ui61_cell(kernels, i, K::Kernel, Qt::UserRole).toStdString(), k["name"].get<std::string>());
    EXPECT_EQ(ui61_cell(kernels, i, K::Count).toLongLong(), k["count"].get<int64_t>());
    EXPECT_EQ(ui61_cell(kernels, i, K::Total).toStdString(), dur(k["total_ns"].get<int64_t>()));
    EXPECT_EQ(ui61_cell(kernels, i, K::Max).toStdString(), dur(k["max_ns"].get<int64_t>()));
    EXPECT_EQ(ui61_cell(kernels, i, K::Mean).toStdString(), dur(static_cast<int64_t>(k["mean_ns"].get<double>())));
  }
  auto* more = view.findChild<QLabel*>("kernel_breakdown_more");
  ASSERT_NE(more, nullptr);
  EXPECT_TRUE(more->text().startsWith(QString("... and %1 more (share ").arg(all - 10))) << more->text().toStdString();
  EXPECT_EQ(all, 72u);  // 62 more
}

TEST(Ui61SummaryPeerTables, NsysExportShowsItsKernelsAndNoPeerTable) {
  const fs::path nsys = fs::path(EMBEDSCOPE_SHARED_DATA) / "nsys" / "fuser_h200.sqlite";
  if (!fs::exists(nsys)) GTEST_SKIP() << nsys << " is absent (../shared/data/README.md)";
  const auto imp = ui61_import(nsys, "nsys");
  ASSERT_TRUE(imp.stats.is_object());
  embedscope::ui::SummaryView view(std::make_shared<const embedscope::sessions::SessionReader>(imp.db.string()));
  view.resize(1600, 1200);
  ASSERT_TRUE(embedscope::ui::wait_for_analyses(&view));
  EXPECT_EQ(view.findChild<QTableView*>("peer_waits"), nullptr);  // one rank: nobody to wait for
  auto* kernels = view.findChild<QTableView*>("kernel_breakdown");
  ASSERT_NE(kernels, nullptr);
  using K = embedscope::ui::KernelBreakdownModel;
  // the data README: 19 kernels of 393,539 ns in all (all computation), the longest
  // nvfuser_none_f0_c0_r0_g0 of 135,137 ns (its whole name the demangled signature)
  auto* types = view.findChild<QTableView*>("kernel_types");
  ASSERT_NE(types, nullptr);
  ASSERT_EQ(ui61_cell(types, 0, 0).toStdString(), "computation");
  EXPECT_EQ(ui61_cell(types, 0, 1).toLongLong(), 19);
  EXPECT_EQ(ui61_cell(types, 0, 2, Qt::UserRole).toLongLong(), 393'539);
  EXPECT_EQ(ui61_cell(types, 0, 2).toStdString(), dur(393'539));
  EXPECT_NE(ui61_cell(kernels, 0, K::Kernel, Qt::UserRole).toStdString().find("nvfuser_none_f0_c0_r0_g0("), std::string::npos)
      << ui61_cell(kernels, 0, K::Kernel, Qt::UserRole).toStdString();
  EXPECT_EQ(ui61_cell(kernels, 0, K::Max, Qt::UserRole).toLongLong(), 135'137);
  EXPECT_EQ(ui61_cell(kernels, 0, K::Max).toStdString(), dur(135'137));
  const json& kb = imp.stats["gpu_kernel_breakdown"];
  ASSERT_TRUE(kb.is_object());
  EXPECT_EQ(kernels->model()->rowCount(), static_cast<int>(std::min<size_t>(10, kb["kernels"].size())));
  EXPECT_EQ(view.findChild<QLabel*>("kernel_breakdown_more") != nullptr, kb["kernels"].size() > 10);
}

// Compare's throughput row in each session's own unit (tester35 D7): samples/s for a DLRM run,
// tokens/s for an lm_embedding run, none for an imported trace, and no difference or ratio
// between two sessions whose units differ.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QAbstractItemModelTester>
#include <QLabel>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

#include "core/throughput.h"
#include "embedscope/engine/workload/lm_spec.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "jobs/analysis_job.h"
#include "models/compare_model.h"
#include "views/compare_view.h"
#include "ui/support/ui_fixtures.h"

using namespace embedscope;
using namespace embedscope::ui;
using namespace embedscope::ui::fixtures;

namespace {
// 2 ranks of an lm_embedding run (vocab_parallel, micro batch 2 x 8 tokens: 16 tokens a step),
// one step of `step_ns` each; or, with `imported`, the same rows marked as an imported trace.
std::string cmp_units_session(const std::string& name, int64_t step_ns, bool lm, bool imported = false,
                              const std::string& import_format = "") {
  const auto path = std::filesystem::temp_directory_path() / (name + "_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  engine::LmWorkloadSpec spec;
  spec.name = name;
  spec.vocab_size = 48;
  spec.hidden_size = 8;
  spec.sequence_length = 8;
  spec.micro_batch_size = 2;
  spec.world_size = 2;
  sessions::SessionWriter w(path.string());
  if (import_format.empty()) w.set_metadata(sessions::meta::kWorkloadName, name);  // a trace has no workload
  else w.set_metadata(sessions::meta::kImportFormat, import_format);
  w.set_metadata(sessions::meta::kBackend, "cpu");
  w.set_metadata("samples_per_step", "2");  // what the run wrote: sequences, not tokens
  if (lm) w.set_metadata(sessions::meta::kWorkloadJson, engine::to_json(spec).dump());
  if (imported) w.set_metadata(sessions::meta::kImported, "1");
  for (int r = 0; r < 2; ++r) {
    w.add_lane({r, 0, "compute", "thread"});
    w.add_step({0, r, 0, step_ns, 0.0, 0, 0});
  }
  w.close("complete");
  return path.string();
}
}  // namespace

TEST(CompareUnits, ThroughputOfEachSessionInItsOwnUnit) {
  auto dlrm = open_reader(step_session("es_cmpu_dlrm", 0, {1'000'000, 1'000'000}));  // 8 samples / 1 ms
  auto lm = open_reader(cmp_units_session("es_cmpu_lm", 4'000'000, true));          // 16 tokens / 4 ms
  auto trace = open_reader(cmp_units_session("es_cmpu_trace", 4'000'000, false, true));
  const sessions::RunStats a = sessions::analyze(*dlrm), b = sessions::analyze(*lm), c = sessions::analyze(*trace);
  EXPECT_EQ(throughput_of(*dlrm, a).unit, "samples");
  EXPECT_DOUBLE_EQ(throughput_of(*dlrm, a).per_s, 8000);
  EXPECT_EQ(throughput_of(*lm, b).unit, "tokens");
  EXPECT_DOUBLE_EQ(throughput_of(*lm, b).per_s, 4000);  // not samples_per_s (2 / 4 ms = 500)
  EXPECT_EQ(throughput_of(*trace, c).unit, "");

  CompareModel m({"A", "B", "C"}, {a, b, c}, {throughput_of(*dlrm, a), throughput_of(*lm, b), throughput_of(*trace, c)});
  QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::Fatal);
  auto text = [&](int col) { return m.data(m.index(CompareModel::Throughput, col)).toString(); };
  EXPECT_EQ(m.data(m.index(CompareModel::Throughput, 0)).toString(), "throughput");
  EXPECT_EQ(text(1), "8000 samples/s");
  EXPECT_EQ(text(2), "4000 tokens/s");
  EXPECT_EQ(text(3), "-");  // a trace has no samples
  EXPECT_FALSE(m.data(m.index(CompareModel::Throughput, 3), Qt::UserRole).isValid());
  EXPECT_EQ(text(4), "units differ (tokens/s vs samples/s)");  // B - A: no ratio of tokens to samples
  EXPECT_FALSE(m.data(m.index(CompareModel::Throughput, 4), Qt::UserRole).isValid());
  EXPECT_EQ(text(5), "-");
  EXPECT_DOUBLE_EQ(m.data(m.index(CompareModel::Throughput, 2), Qt::UserRole).toDouble(), 4000);
  EXPECT_THROW(CompareModel({"A"}, {a}, {throughput_of(*dlrm, a), throughput_of(*lm, b)}), std::invalid_argument);
}

TEST(CompareUnits, TwoLmSessionsCompareInTokensThroughTheView) {
  auto fast = open_reader(cmp_units_session("es_cmpu_lm4", 4'000'000, true));  // 4,000 tokens/s
  auto slow = open_reader(cmp_units_session("es_cmpu_lm8", 8'000'000, true));  // 2,000 tokens/s
  CompareView view({{"A", fast}, {"B", slow}});
  ASSERT_TRUE(wait_for_analyses(&view));
  ASSERT_NE(view.model(), nullptr);
  const auto* m = view.model();
  EXPECT_EQ(m->data(m->index(CompareModel::Throughput, 1)).toString(), "4000 tokens/s");
  EXPECT_EQ(m->data(m->index(CompareModel::Throughput, 2)).toString(), "2000 tokens/s");
  EXPECT_EQ(m->data(m->index(CompareModel::Throughput, 3)).toString(), "-2000 tokens/s (-50.0 %)");
  EXPECT_DOUBLE_EQ(m->data(m->index(CompareModel::Throughput, 3), Qt::UserRole).toDouble(), -2000);
}

// tester34 D19: an imported session has no workload name; the header says what it is instead of
// "trace.db: , complete on 2 ranks".
TEST(CompareUnits, TheHeaderNamesAnImportedTraceAndSnapshotForWhatTheyAre) {
  auto run = open_reader(cmp_units_session("es_cmpu_run", 4'000'000, false));
  auto kineto = open_reader(cmp_units_session("es_cmpu_kin", 4'000'000, false, true, "kineto_json"));
  auto snap = open_reader(cmp_units_session("es_cmpu_snap", 4'000'000, false, true, "torch_memory_snapshot"));
  CompareView view({{"A", run}, {"B", kineto}, {"C", snap}});
  ASSERT_TRUE(wait_for_analyses(&view));
  QString head;
  for (const auto* l : view.findChildren<QLabel*>())
    if (l->text().contains("&#9632;")) head = l->text();
  ASSERT_FALSE(head.isEmpty());
  EXPECT_TRUE(head.contains("es_cmpu_run_" + QString::number(getpid()) + ".db: es_cmpu_run, complete on 2 ranks")) << head.toStdString();
  EXPECT_TRUE(head.contains(".db: imported PyTorch profiler (Kineto) trace, complete on 2 ranks")) << head.toStdString();
  EXPECT_TRUE(head.contains(".db: imported memory snapshot, complete on 2 ranks")) << head.toStdString();
  EXPECT_FALSE(head.contains(": , ")) << head.toStdString();
}

namespace {
// 1 rank, `steps` steps of 1 ms with 0.25 ms of exposed all-to-all each; a run (memory and load
// counters) or an imported trace (neither).
std::string cmp_memory_session(const std::string& name, int steps, bool imported) {
  const auto path = std::filesystem::temp_directory_path() / (name + "_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  sessions::SessionWriter w(path.string());
  if (imported) {
    w.set_metadata(sessions::meta::kImported, "1");
    w.set_metadata(sessions::meta::kImportFormat, "kineto_json");
  } else {
    w.set_metadata(sessions::meta::kWorkloadName, name);
  }
  w.add_lane({0, 0, "compute", "thread"});
  w.add_lane({0, 1, "comm", "thread"});
  for (int st = 0; st < steps; ++st) {
    const int64_t t0 = st * 1'000'000;
    w.add_step({st, 0, t0, t0 + 1'000'000, 0.0, 0, 0});
    const sessions::OpEvent op{.rank = 0, .lane = sessions::Lane::comm, .category = sessions::OpCategory::comm,
                               .name = "all_to_all", .step = st, .start_ns = t0, .end_ns = t0 + 250'000};
    w.add_ops(&op, 1);
    if (!imported) {
      w.add_load({.step = st, .rank = 0, .table = 0, .shard = 0, .ids = 10});
      w.add_memory({.step = st, .rank = 0, .allocated = 1 << 20, .reserved = 2 << 20, .peak_allocated = 3 << 20,
                    .peak_reserved = 4 << 20});
    }
  }
  w.close("complete");
  return path.string();
}
}  // namespace

// tester37 D2 / D4: a trace has no memory or load counters: Compare shows "-" (not "0 B" and a
// -100 % difference, not "1.00"); exposed communication is per step (3 steps against 5 were
// compared as totals: +588 %).
TEST(CompareUnits, ATraceHasNoMemoryOrImbalanceAndExposedCommIsPerStep) {
  auto run = open_reader(cmp_memory_session("es_cmpm_run", 2, false));
  auto trace = open_reader(cmp_memory_session("es_cmpm_trace", 5, true));
  const sessions::RunStats a = sessions::analyze(*run), b = sessions::analyze(*trace);
  EXPECT_TRUE(a.has_memory);
  EXPECT_TRUE(a.has_load);
  EXPECT_FALSE(b.has_memory);
  EXPECT_FALSE(b.has_load);
  CompareModel m({"run", "trace"}, {a, b}, {throughput_of(*run, a), throughput_of(*trace, b)});
  auto text = [&](CompareModel::Figure f, int col) { return m.data(m.index(f, col)).toString(); };
  EXPECT_EQ(text(CompareModel::PeakAllocated, 1), "3.0 MiB");
  EXPECT_EQ(text(CompareModel::PeakAllocated, 2), "-");
  EXPECT_EQ(text(CompareModel::PeakAllocated, 3), "-");  // no difference from a figure not recorded
  EXPECT_EQ(text(CompareModel::PeakReserved, 2), "-");
  EXPECT_EQ(text(CompareModel::LookupImbalance, 1), "1.00");
  EXPECT_EQ(text(CompareModel::LookupImbalance, 2), "-");
  EXPECT_EQ(text(CompareModel::LookupTimeImbalance, 3), "-");
  // exposed: 0.25 ms in every step of both: per step, no difference (totals were 0.5 vs 1.25 ms)
  EXPECT_EQ(m.data(m.index(CompareModel::ExposedComm, 0)).toString(), "exposed communication (per rank and step)");
  EXPECT_DOUBLE_EQ(m.data(m.index(CompareModel::ExposedComm, 1), Qt::UserRole).toDouble(), 250'000);
  EXPECT_DOUBLE_EQ(m.data(m.index(CompareModel::ExposedComm, 2), Qt::UserRole).toDouble(), 250'000);
  EXPECT_DOUBLE_EQ(m.data(m.index(CompareModel::ExposedComm, 3), Qt::UserRole).toDouble(), 0);
}

// tester38 #1: a session whose figures are its GPU streams' beside one whose figures are its host
// threads': the header says they are not the same measure, naming which is which.
TEST(CompareUnits, StreamAndThreadLevelFiguresAreSaidNotToBeTheSameMeasure) {
  auto cpu = open_reader(cmp_memory_session("es_cmpu_cpu", 2, false));
  const auto gpu_path = std::filesystem::temp_directory_path() / ("es_cmpu_gpu_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(gpu_path);
  {
    sessions::SessionWriter w(gpu_path.string());
    w.set_metadata(sessions::meta::kWorkloadName, "es_cmpu_gpu");
    w.add_lane({0, 0, "compute", "thread"});
    w.add_lane({0, 2, "gpu_compute", "stream"});
    for (int st = 0; st < 2; ++st) {
      const int64_t t0 = st * 1'000'000;
      w.add_step({st, 0, t0, t0 + 1'000'000, 0.0, 0, 0});
      const sessions::OpEvent op{.rank = 0, .lane = sessions::Lane::gpu_compute, .category = sessions::OpCategory::lookup,
                                 .name = "tbe_forward_kernel", .step = st, .start_ns = t0, .end_ns = t0 + 100'000};
      w.add_ops(&op, 1);
    }
    w.close("complete");
  }
  auto gpu = open_reader(gpu_path.string());
  const auto header_of = [](CompareView& view) {
    QString head;
    for (const auto* l : view.findChildren<QLabel*>())
      if (l->text().contains("&#9632;")) head = l->text();
    return head;
  };
  {
    CompareView view({{"A", gpu}, {"B", cpu}});
    ASSERT_TRUE(wait_for_analyses(&view));
    const QString head = header_of(view);
    EXPECT_TRUE(head.contains("<b>not the same measure</b>: the communication, overlap and idle figures of A are its "
                              "GPU streams' (kernels and copies), those of B its host threads' spans"))
        << head.toStdString();
  }
  CompareView same({{"A", cpu}, {"B", cpu}});
  ASSERT_TRUE(wait_for_analyses(&same));
  EXPECT_FALSE(header_of(same).contains("not the same measure")) << header_of(same).toStdString();
  // a simulated session's figures are the cost model's ops, not host threads (tester45 F12.2)
  const auto sim_path = std::filesystem::temp_directory_path() / ("es_cmpu_sim_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(sim_path);
  {
    sessions::SessionWriter w(sim_path.string());
    w.set_metadata(sessions::meta::kWorkloadName, "es_cmpu_sim");
    w.set_metadata(sessions::meta::kSimulated, "1");
    w.add_lane({0, 0, "compute", "thread"});
    w.add_step({0, 0, 0, 1'000'000, 0.0, 0, 0});
    w.close("complete");
  }
  auto sim = open_reader(sim_path.string());
  {
    CompareView view({{"A", gpu}, {"B", cpu}, {"C", sim}});
    ASSERT_TRUE(wait_for_analyses(&view));
    const QString head = header_of(view);
    EXPECT_TRUE(head.contains("figures of A are its GPU streams' (kernels and copies), those of B its host threads' "
                              "spans, those of C the cost model's compute and comm ops per simulated rank;"))
        << head.toStdString();
  }
  std::filesystem::remove(sim_path);
  std::filesystem::remove(gpu_path);
}

namespace {
// A one-rank session of the recorded workload `workload_json` whose steps take `mean_us` -+ 10 us
// alternately (16 steps), for the run-to-run noise of repeated configurations.
std::string cmp_repeat_session(const std::string& name, const std::string& workload_json, int64_t mean_us) {
  const auto path = std::filesystem::temp_directory_path() / (name + "_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  sessions::SessionWriter w(path.string());
  w.set_metadata(sessions::meta::kWorldSize, "1");
  w.set_metadata(sessions::meta::kBackend, "cpu");
  w.set_metadata(sessions::meta::kWorkloadName, "hand");
  w.set_metadata(sessions::meta::kWorkloadJson, workload_json);
  w.set_metadata(sessions::meta::kShardingPlanJson, R"({"tables": [{"name": "t0", "sharding_type": "table_wise", "ranks": [0]}]})");
  w.set_metadata("samples_per_step", "8");
  w.add_lane({0, 0, "compute", "thread"});
  int64_t t = 0;
  for (int s = 0; s < 16; ++s) {
    const int64_t ns = (mean_us + (s % 2 ? 10 : -10)) * 1000;
    w.add_step({s, 0, t, t + ns, 0.5, 0, 0});
    t += ns;
  }
  w.close("complete");
  return path.string();
}
}  // namespace

// The workbench's Compare holds step-time differences against the run-to-run noise of repeated
// configurations as `embedscope compare` does: A and B ran one configuration (steady steps of 20
// and 26 ms: 6 ms, 30 %, is this machine's run-to-run noise); C (another optimizer) at 24 ms is
// +20 % of the faster mean, within it, although its steps alone differ from A's (batch-means test).
TEST(CompareUnits, StepTimesOfRepeatedConfigurationsAreHeldAgainstTheirRunToRunNoise) {
  const std::string adam = R"({"name": "hand", "batch_size": 8, "steps": 16, "optimizer": {"type": "adam"}})";
  const std::string sgd = R"({"name": "hand", "batch_size": 8, "steps": 16, "optimizer": {"type": "sgd"}})";
  auto a = open_reader(cmp_repeat_session("es_cmpu_rep_a", adam, 20000));
  auto b = open_reader(cmp_repeat_session("es_cmpu_rep_b", adam, 26000));
  auto c = open_reader(cmp_repeat_session("es_cmpu_rep_c", sgd, 24000));
  const sessions::RunStats sa = sessions::analyze(*a), sb = sessions::analyze(*b), sc = sessions::analyze(*c);
  CompareModel m({"A", "B", "C"}, {sa, sb, sc}, {throughput_of(*a, sa), throughput_of(*b, sb), throughput_of(*c, sc)});
  auto delta = [&](int col) { return m.data(m.index(CompareModel::StepMean, col)).toString(); };
  // before: C's +4 ms is beyond its steps' noise (the within-run verdict alone)
  EXPECT_FALSE(delta(5).contains("within noise")) << delta(5).toStdString();
  const sessions::RunToRunNoise noise = m.apply_run_to_run_noise({a.get(), b.get(), c.get()});
  ASSERT_TRUE(noise.measured());
  EXPECT_EQ(sessions::run_to_run_text(noise, {"A", "B", "C"}),
            "run-to-run noise: two runs of the same configuration (A, B) differ by 6.00 ms (30.0 %): differences "
            "below that are noise on this machine");
  EXPECT_TRUE(delta(4).contains("within noise")) << delta(4).toStdString();  // B - A: a repeat
  EXPECT_TRUE(delta(5).contains("within noise")) << delta(5).toStdString();  // C - A: +20 % < 30 %
  EXPECT_THROW(m.apply_run_to_run_noise({a.get()}), std::invalid_argument);
}

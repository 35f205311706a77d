// The scaling page of an lm_embedding study: `embedscope scaling vp4.json --json` (the LM tests'
// vp4 workload: V 1000, H 16, S 32, B 2, fp32) opened as a user opens it (File > Open's path),
// every cell the CLI's --json (and its text table's) for the same point, a refused point shown
// refused with its reason, the device memory line of a study that comes near it, and the
// screenshot `embedscope-ui study.json --screenshot` writes.
#include <gtest/gtest.h>

#include <QImage>
#include <QLabel>
#include <QTableWidget>
#include <qcustomplot.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/cost/hardware_profile.h"
#include "shell/main_window.h"
#include "support/cli_run.h"
#include "views/scaling_view.h"

using namespace embedscope;
using namespace embedscope::ui;
using nlohmann::json;

namespace {
json vp4(const std::string& name = "vp4", int64_t vocab = 1000, int64_t hidden = 16, int64_t seq = 32, int64_t batch = 2) {
  json j = json::parse(R"({"model": "lm_embedding", "vocab_size": 1000, "hidden_size": 16,
    "sequence_length": 32, "micro_batch_size": 2, "data_type": "fp32", "tie_word_embeddings": true,
    "body_layers": 1, "token_ids": {"distribution": "zipf", "alpha": 1.0},
    "sharding": {"type": "vocab_parallel"}, "devices": {"count": 4},
    "optimizer": {"type": "sgd", "learning_rate": 2.0}, "steps": 3, "seed": 0})");
  j.update({{"name", name}, {"vocab_size", vocab}, {"hidden_size", hidden}, {"sequence_length", seq},
            {"micro_batch_size", batch}});
  return j;
}

// `embedscope scaling W --simulate h100_sxm ARGS --json` into dir/study.json; its JSON
json study(const std::filesystem::path& dir, const json& workload, const std::string& args) {
  std::ofstream(dir / "w.json") << workload.dump();
  const auto r = test_support::run_cli(EMBEDSCOPE_CLI, "scaling " + (dir / "w.json").string() + " --simulate h100_sxm " + args + " --json", dir);
  EXPECT_EQ(r.code, 0) << r.err;
  std::ofstream(dir / "study.json") << r.out;
  return json::parse(r.out);
}

QString text(QTableWidget* t, int r, int c) { return t->item(r, c) ? t->item(r, c)->text() : QString("(none)"); }

// the memory plot's line of text under its title (device memory, refusals); "" when none
QString memory_note(QCustomPlot* plot) {
  for (int i = 0; i < plot->plotLayout()->elementCount(); ++i)
    if (auto* t = qobject_cast<QCPTextElement*>(plot->plotLayout()->elementAt(i)); t && t->font().pointSize() == 8)
      return t->text();
  return "";
}
}  // namespace

TEST(ScalingLmView, EveryCellIsTheCliJsonAndTheRefusedPointSaysWhy) {
  const auto dir = test_support::fresh_scratch("es_scaling_lm_view");
  // sequence parallel splits each sequence of 32 over the GPUs: 3 does not divide it
  const json j = study(dir, vp4(), "--gpus 1,2,3 --sequence-parallel");
  ASSERT_EQ(j["points"].size(), 9u);  // vocab_parallel+sp, data_parallel, row_wise x 1, 2, 3
  const auto text_table = test_support::run_cli(
      EMBEDSCOPE_CLI, "scaling " + (dir / "w.json").string() + " --simulate h100_sxm --gpus 1,2,3 --sequence-parallel", dir);
  ASSERT_EQ(text_table.code, 0) << text_table.err;

  MainWindow w;
  ASSERT_EQ(w.open_path(QString::fromStdString((dir / "study.json").string()), true), QString());
  auto* view = qobject_cast<ScalingView*>(w.tabs()->currentWidget());
  ASSERT_NE(view, nullptr);
  EXPECT_EQ(w.tabs()->tabText(w.tabs()->currentIndex()), "scaling: vp4 on h100_sxm (simulated)");
  ASSERT_TRUE(view->lm_study().has_value());
  EXPECT_EQ(view->note_column(), ScalingView::kLmNoteColumn);
  const QString caption = view->caption()->text();
  EXPECT_TRUE(caption.contains("SIMULATED")) << caption.toStdString();
  EXPECT_TRUE(caption.contains("sequence 32 x micro batch 2")) << caption.toStdString();
  EXPECT_TRUE(caption.contains(QString("the best at the smallest size any type ran: %1 at 1 GPU, %2 tokens/s per GPU")
                                   .arg(QString::fromStdString(j["efficiency_baseline"]["sharding"]))
                                   .arg(j["efficiency_baseline"]["tokens_per_s_per_gpu"].get<double>(), 0, 'f', 0)))
      << caption.toStdString();

  QTableWidget* t = view->table();
  ASSERT_EQ(t->columnCount(), 13);
  const QStringList headers = {"sharding", "GPUs",      "nodes",   "step",       "tokens/s", "per GPU", "efficiency",
                               "emb comm", "comm",      "wire/step", "B/token", "memory/GPU", "note"};
  for (int c = 0; c < 13; ++c) EXPECT_EQ(t->horizontalHeaderItem(c)->text(), headers[c]) << c;
  ASSERT_EQ(t->rowCount(), 9);
  for (int r = 0; r < 9; ++r) {
    const json& p = j["points"][static_cast<size_t>(r)];
    const QString type = QString::fromStdString(p["sharding"]) + (p["sequence_parallel"].get<bool>() ? "+sp" : "");
    EXPECT_EQ(text(t, r, 0), type) << r;
    EXPECT_EQ(text(t, r, 1), QString::number(p["gpus"].get<int>())) << r;
    EXPECT_EQ(text(t, r, 2), "1") << r;
    if (p.contains("error")) continue;
    EXPECT_EQ(text(t, r, 3), QString::number(p["step_time_ns"].get<double>() / 1e6, 'f', 2) + " ms") << r;
    EXPECT_EQ(text(t, r, 4), QString::number(p["tokens_per_s"].get<double>(), 'f', 0)) << r;
    EXPECT_EQ(text(t, r, 5), QString::number(p["tokens_per_s_per_gpu"].get<double>(), 'f', 0)) << r;
    EXPECT_EQ(text(t, r, 6), QString::number(100 * p["scaling_efficiency"].get<double>(), 'f', 1) + " %") << r;
    EXPECT_EQ(text(t, r, 7), QString::number(100 * p["embedding_comm_share"].get<double>(), 'f', 1) + " %") << r;
    EXPECT_EQ(text(t, r, 8), QString::number(100 * p["comm_share"].get<double>(), 'f', 1) + " %") << r;
    EXPECT_EQ(text(t, r, ScalingView::kLmTokenBytesColumn), QString::number(p["wire_bytes_per_token"].get<double>(), 'f', 1)) << r;
    EXPECT_TRUE(t->item(r, ScalingView::kWireColumn)->toolTip().startsWith(
        QLocale::c().toString(p["wire_bytes_per_step"].get<qlonglong>()) + " B on the wire per step"))
        << r << " " << t->item(r, ScalingView::kWireColumn)->toolTip().toStdString();
    // the CLI's text row of this point holds the same step, wire/step, B/token and memory/GPU
    const std::string head = type.leftJustified(17).toStdString() + " " + QString::number(p["gpus"].get<int>()).rightJustified(5).toStdString();
    const size_t at = text_table.out.find(head);
    ASSERT_NE(at, std::string::npos) << head << "\n" << text_table.out;
    const std::string row = text_table.out.substr(at, text_table.out.find('\n', at) - at);
    for (int c : {3, ScalingView::kWireColumn, ScalingView::kLmTokenBytesColumn, 11})
      EXPECT_NE(row.find(" " + text(t, r, c).toStdString()), std::string::npos) << c << ": " << text(t, r, c).toStdString() << " in " << row;
  }
  // hand-computed: data_parallel on 2 GPUs all-reduces the table's gradient 64,000 B, the body's
  // 1,088 B and the loss's 4 B, 2 x (p - 1) / p x 65,092 = 65,092 B a rank: 130,184 B a step over
  // 2 x 64 tokens = 1,017.06 B/token; every data_parallel GPU holds the whole 396.5 KiB (394.0
  // before the cross-entropy's three vectors of 64 floats were blocks of the arena, 512 B each;
  // 395.5 before the step's 64 input and 64 target token ids were, int32, a 512 B block each)
  EXPECT_EQ(text(t, 4, 0), "data_parallel");
  EXPECT_EQ(text(t, 4, 1), "2");
  EXPECT_EQ(text(t, 4, ScalingView::kWireColumn), "127.1 KiB");
  EXPECT_TRUE(t->item(4, ScalingView::kWireColumn)->toolTip().startsWith("130184 B on the wire per step"));
  EXPECT_EQ(text(t, 4, ScalingView::kLmTokenBytesColumn), "1017.1");
  for (int r : {3, 4, 5}) EXPECT_EQ(text(t, r, 11), "396.5 KiB") << r;
  // the refused point: vocab_parallel+sp at 3 GPUs, no figures, its whole reason in red
  EXPECT_EQ(text(t, 2, 0), "vocab_parallel+sp");
  EXPECT_EQ(t->item(2, 3), nullptr);
  EXPECT_EQ(t->item(2, 4), nullptr);
  const QString why = QString::fromStdString(j["points"][2]["error"]);
  EXPECT_TRUE(why.contains("/sequence_length: sequence_parallel splits each sequence over the 3 ranks: must be a multiple of 3"))
      << why.toStdString();
  EXPECT_EQ(text(t, 2, ScalingView::kLmNoteColumn), why.simplified());
  EXPECT_EQ(t->item(2, ScalingView::kLmNoteColumn)->toolTip(), why);
  EXPECT_EQ(t->item(2, ScalingView::kLmNoteColumn)->foreground().color(), QColor(0xd6, 0x27, 0x28));

  // the plots: one line per type, the points that ran, every axis with its unit
  const char* units[] = {"tokens/s", "%", "%", "KiB"};
  for (int m = 0; m < 4; ++m) {
    QCustomPlot* plot = view->plot(m);
    EXPECT_EQ(plot->xAxis->label(), "GPUs (simulated)") << m;
    EXPECT_EQ(plot->yAxis->label(), units[m]) << m;
    ASSERT_EQ(plot->graphCount(), 3) << m;
    EXPECT_EQ(plot->graph(0)->name(), "vocab_parallel+sp");
    EXPECT_EQ(plot->graph(0)->data()->size(), 2) << m;  // 3 GPUs refused
    EXPECT_EQ(plot->graph(1)->data()->size(), 3) << m;
    for (int k = 0; k < 3; ++k) {
      const json& p = j["points"][static_cast<size_t>(3 + k)];  // data_parallel
      const double want = m == 0   ? p["tokens_per_s"].get<double>()
                          : m == 1 ? 100 * p["scaling_efficiency"].get<double>()
                          : m == 2 ? 100 * p["embedding_comm_share"].get<double>()
                                   : p["memory_bytes_per_gpu"].get<double>() / 1024;
      EXPECT_EQ(plot->graph(1)->data()->at(k)->key, k + 1);
      EXPECT_DOUBLE_EQ(plot->graph(1)->data()->at(k)->value, want) << m << " " << k;
    }
  }
  // the memory plot: one cross for the refused point at 3 GPUs, and under its title the device
  // memory (80 GB, far above 398 KiB: no line) and the refusal's reason
  QCustomPlot* mem = view->plot(3);
  ASSERT_EQ(mem->itemCount(), 1);
  auto* cross = qobject_cast<QCPItemText*>(mem->item(0));
  ASSERT_NE(cross, nullptr);
  EXPECT_EQ(cross->text(), QString::fromUtf8("\u2715"));
  EXPECT_EQ(cross->position->key(), 3);
  EXPECT_EQ(memory_note(mem).toStdString(), std::string("device memory NVIDIA H100 80GB HBM3: 79.6 GiB, far above the points\n"
                                                "\u2715 refused (/sequence_length: sequence_parallel splits each sequence "
                                                "over the 3 ranks):\n  vocab_parallel+sp at 3 GPUs"));
}

// A study that comes near the device: V 1,500,000 x H 8,192 fp32 holds a 45.8 GiB table and as
// much gradient, 92.1 GiB allocated (92.2 GiB reserved, what the check compares) on one GPU, more
// than an H100's 79.6 GiB; vocab_parallel on 2 GPUs
// holds half. The memory plot draws the device's memory as a line and its axis reaches it.
TEST(ScalingLmView, TheMemoryPlotDrawsTheDeviceAndTheTypesThatDoNotFit) {
  const auto dir = test_support::fresh_scratch("es_scaling_lm_view_big");
  const json j = study(dir, vp4("big", 1500000, 8192, 16, 1), "--gpus 1,2 --shardings vocab_parallel,data_parallel");
  ASSERT_EQ(j["points"].size(), 4u);
  MainWindow w;
  ASSERT_EQ(w.open_path(QString::fromStdString((dir / "study.json").string()), true), QString());
  auto* view = qobject_cast<ScalingView*>(w.tabs()->currentWidget());
  ASSERT_NE(view, nullptr);
  QCustomPlot* mem = view->plot(3);
  EXPECT_EQ(mem->yAxis->label(), "GiB");
  ASSERT_EQ(mem->graph(0)->data()->size(), 1);  // vocab_parallel at 2 GPUs
  EXPECT_DOUBLE_EQ(mem->graph(0)->data()->at(0)->value, j["points"][1]["memory_bytes_per_gpu"].get<double>() / (1 << 30));
  EXPECT_EQ(mem->graph(1)->data()->size(), 0);  // data_parallel fits nowhere
  const double capacity = static_cast<double>(engine::load_hardware_profile("h100_sxm").gpu.memory_bytes) / (1 << 30);
  int lines = 0, crosses = 0;
  for (int i = 0; i < mem->itemCount(); ++i) {
    if (auto* l = qobject_cast<QCPItemStraightLine*>(mem->item(i))) {
      ++lines;
      EXPECT_DOUBLE_EQ(l->point1->value(), capacity);
      EXPECT_DOUBLE_EQ(l->point2->value(), capacity);
    }
    if (auto* c = qobject_cast<QCPItemText*>(mem->item(i)); c && c->text() == QString::fromUtf8("\u2715")) ++crosses;
  }
  EXPECT_EQ(lines, 1);
  EXPECT_EQ(crosses, 3);  // vocab_parallel at 1, data_parallel at 1 and 2
  EXPECT_GT(mem->yAxis->range().upper, capacity);
  EXPECT_EQ(memory_note(mem).toStdString(),
            "\u2715 refused (does not fit): vocab_parallel at 1 GPU; data_parallel at 1, 2 GPUs");
  EXPECT_TRUE(text(view->table(), 0, ScalingView::kLmNoteColumn).startsWith("does not fit: rank 0 needs 92.2 GiB"));
}

TEST(ScalingLmView, ABadLmStudyFileNamesTheKey) {
  const auto dir = test_support::fresh_scratch("es_scaling_lm_view_bad");
  json j = study(dir, vp4(), "--gpus 2 --shardings data_parallel");
  const auto path = dir / "study.json";
  MainWindow w;
  auto error_of = [&](const json& bad) {
    std::ofstream(path) << bad.dump();
    return w.open_path(QString::fromStdString(path.string()), true).toStdString();
  };
  json bad = j;
  bad["points"][0]["tokens_per_s"] = "fast";
  EXPECT_EQ(error_of(bad), path.string() + ": /points/0/tokens_per_s: must be a number");
  bad = j;
  bad["points"][0]["sharding"] = "table_wise";
  EXPECT_EQ(error_of(bad), path.string() + ": /points/0/sharding: \"table_wise\" is not a sharding type of an "
                                           "lm_embedding study (vocab_parallel, data_parallel, row_wise)");
  bad = j;
  bad.erase("sequence_length");
  EXPECT_EQ(error_of(bad), path.string() + ": /sequence_length: is missing");
  bad = j;
  bad["points"][0]["gpus"] = 0;
  EXPECT_EQ(error_of(bad), path.string() + ": /points/0/gpus: must be in [1, 1024], got 0");
  EXPECT_EQ(error_of(j), "");
}

// `embedscope-ui study.json --screenshot s.png`: the LM page at the window's 1280 x 800
TEST(ScalingLmView, TheScreenshotIsTheLmPage) {
  const auto dir = test_support::fresh_scratch("es_scaling_lm_view_shot");
  study(dir, vp4(), "--gpus 1,2,3,4 --sequence-parallel");
  const auto png = dir / "lm_scaling.png";
  const auto r = test_support::run_cli("QT_QPA_PLATFORM=offscreen " + std::string(EMBEDSCOPE_UI),
                                       (dir / "study.json").string() + " --screenshot " + png.string(), dir);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const QImage image(QString::fromStdString(png.string()));
  ASSERT_FALSE(image.isNull());
  EXPECT_EQ(image.size(), QSize(1280, 800));
}

// A study run against a profile file ("lab_gpus.json", not a built-in profile's name): the page
// takes the device from the study's JSON (device_name, device_memory_bytes), draws its line at
// 1,048,576 B = 1,024 KiB over a point of 700,000 B = 683.6 KiB, and shows the 2,000,000 B a point
// refused for memory would need. Without the device keys (a file written before them) there is
// no line: the profile's name does not say.
TEST(ScalingLmView, TheDeviceLineIsTheStudysRecordedDeviceWhateverTheProfileIsCalled) {
  const auto dir = test_support::fresh_scratch("es_scaling_lm_view_device");
  json j = json::parse(R"({"batch_size_per_gpu": 2, "model": "lm_embedding", "workload": "lab", "hardware": "lab_gpus.json",
    "simulated": true, "gpus_per_node": 8, "sequence_length": 32, "steps": 3, "vocab_size": 1000, "hidden_size": 16,
    "device_name": "Lab GPU", "device_memory_bytes": 1048576, "efficiency_baseline": null,
    "points": [
      {"sharding": "vocab_parallel", "gpus": 1, "nodes": 1, "sequence_parallel": false, "device_memory_bytes": 1048576,
       "step_time_ns": 1000000, "tokens_per_step": 64, "tokens_per_s": 64000, "tokens_per_s_per_gpu": 64000,
       "scaling_efficiency": 1, "embedding_comm_share": 0, "comm_share": 0, "wire_bytes_per_step": 0,
       "split_check_bytes_per_step": 0, "wire_bytes_per_token": 0, "memory_bytes_per_gpu": 700000},
      {"sharding": "data_parallel", "gpus": 1, "nodes": 1, "sequence_parallel": false, "device_memory_bytes": 1048576,
       "error": "does not fit: rank 0 needs 1.9 MiB at its peak but Lab GPU has 1.0 MiB", "memory_bytes_per_gpu": 2000000}]})");
  const auto path = dir / "study.json";
  auto open = [&](const json& study) {
    std::ofstream(path) << study.dump();
    auto w = std::make_unique<MainWindow>();
    EXPECT_EQ(w->open_path(QString::fromStdString(path.string()), true), QString());
    return w;
  };
  auto lines_at = [](QCustomPlot* mem) {
    std::vector<double> at;
    for (int i = 0; i < mem->itemCount(); ++i)
      if (auto* l = qobject_cast<QCPItemStraightLine*>(mem->item(i))) at.push_back(l->point1->value());
    return at;
  };
  auto labels = [](QCustomPlot* mem) {
    QStringList texts;
    for (int i = 0; i < mem->itemCount(); ++i)
      if (auto* t = qobject_cast<QCPItemText*>(mem->item(i)); t && t->text() != QString::fromUtf8("\u2715")) texts << t->text();
    return texts;
  };
  {
    const auto w = open(j);
    auto* view = qobject_cast<ScalingView*>(w->tabs()->currentWidget());
    ASSERT_NE(view, nullptr);
    QCustomPlot* mem = view->plot(3);
    EXPECT_EQ(mem->yAxis->label(), "KiB");
    ASSERT_EQ(mem->graph(0)->data()->size(), 1);
    EXPECT_DOUBLE_EQ(mem->graph(0)->data()->at(0)->value, 700000.0 / 1024);
    EXPECT_EQ(lines_at(mem), std::vector<double>{1024.0});
    EXPECT_EQ(labels(mem), QStringList{"device memory, Lab GPU: 1.0 MiB"});
    EXPECT_GT(mem->yAxis->range().upper, 1024.0);
    QTableWidget* t = view->table();
    EXPECT_EQ(text(t, 0, 11), "683.6 KiB");
    EXPECT_EQ(text(t, 1, 11), "1.9 MiB");  // 2,000,000 B
    EXPECT_EQ(t->item(1, 11)->toolTip(),
              "2000000 B: the largest rank's peak of the LM memory estimate, more than the device's 1048576 B");
    EXPECT_TRUE(text(t, 1, ScalingView::kLmNoteColumn).startsWith("does not fit: rank 0 needs 1.9 MiB"));
  }
  {  // only the points record the device: the line is theirs, named by the study's hardware
    json points_only = j;
    points_only.erase("device_name");
    points_only.erase("device_memory_bytes");
    const auto w = open(points_only);
    QCustomPlot* mem = qobject_cast<ScalingView*>(w->tabs()->currentWidget())->plot(3);
    EXPECT_EQ(lines_at(mem), std::vector<double>{1024.0});
    EXPECT_EQ(labels(mem), QStringList{"device memory, lab_gpus.json: 1.0 MiB"});
  }
  {  // a file written before the device was recorded: no line, the profile file is not located
    json old = j;
    old.erase("device_name");
    old.erase("device_memory_bytes");
    for (auto& p : old["points"]) p.erase("device_memory_bytes");
    const auto w = open(old);
    QCustomPlot* mem = qobject_cast<ScalingView*>(w->tabs()->currentWidget())->plot(3);
    EXPECT_TRUE(lines_at(mem).empty());
    EXPECT_EQ(text(qobject_cast<ScalingView*>(w->tabs()->currentWidget())->table(), 1, 11), "1.9 MiB");
  }
}

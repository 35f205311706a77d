// The scaling page's refused row (tester62a F5): its note held the whole reason in its text but
// the table drew it on one line, cut with "..." mid-number before the advice ("read copy 2....";
// "but NVIDIA H100 80GB HBM3 has 79.6 GiB; fewer GPUs ..." never visible, in the window or in the
// report). The note column wraps now and the row is as tall as its note.
#include <gtest/gtest.h>

#include <QApplication>
#include <QFontMetrics>
#include <QHeaderView>
#include <QImage>
#include <QTableWidget>

#include <climits>
#include <fstream>

#include <nlohmann/json.hpp>

#include "shell/main_window.h"
#include "support/cli_run.h"
#include "views/scaling_view.h"

using namespace embedscope;
using namespace embedscope::ui;

namespace {
// A refusal as `scaling` writes one for row_wise at 1,024 H100s (tester62a's l70 study): long,
// with its advice at the end.
const char* kRefusal =
    "does not fit: rank 3 needs 259.4 GiB at its peak (reserved; allocated 259.4 GiB; "
    "planner/lm_memory_estimate.h: activations 256.6 GiB, logits 2.0 GiB, optimizer state 2.5 GiB, table 3.9 MiB, "
    "output projection 3.9 MiB, read copy 2.0 MiB, gradients 7.8 MiB, body 1.0 GiB) but NVIDIA H100 80GB HBM3 has "
    "79.6 GiB; row_wise gathers every GPU's hidden states [p T x H] and its logits (p T) x V'/p do not shrink: fewer "
    "GPUs, vocab_parallel, or a smaller micro batch";

nlohmann::json study_with_a_refusal() {
  auto j = nlohmann::json::parse(R"({"batch_size_per_gpu": 1, "model": "lm_embedding", "workload": "l70",
    "hardware": "h100_sxm", "simulated": true, "gpus_per_node": 8, "sequence_length": 4096, "steps": 2,
    "vocab_size": 128256, "hidden_size": 8192, "efficiency_baseline": null,
    "points": [
      {"sharding": "vocab_parallel", "gpus": 8, "nodes": 1, "sequence_parallel": false,
       "step_time_ns": 17829000, "tokens_per_step": 4096, "tokens_per_s": 229744, "tokens_per_s_per_gpu": 28718,
       "scaling_efficiency": 1, "embedding_comm_share": 0.01, "comm_share": 0.01, "wire_bytes_per_step": 1879736320,
       "split_check_bytes_per_step": 0, "wire_bytes_per_token": 458920, "memory_bytes_per_gpu": 6254000000},
      {"sharding": "row_wise", "gpus": 1024, "nodes": 128, "sequence_parallel": false,
       "memory_bytes_per_gpu": 278507913216}]})");
  j["points"][1]["error"] = kRefusal;
  return j;
}
}  // namespace

// The row of the refused point is as tall as its note wrapped in the note column's width (several
// lines), and the note item's text is the whole refusal: nothing of it is elided.
TEST(Lm63ScalingNote, TheRefusedRowsNoteWrapsWhole) {
  const auto dir = test_support::fresh_scratch("es_lm63_scaling_note");
  const auto path = dir / "study.json";
  std::ofstream(path) << study_with_a_refusal().dump();
  MainWindow w;
  ASSERT_EQ(w.open_path(QString::fromStdString(path.string()), true), QString());
  auto* view = qobject_cast<ScalingView*>(w.tabs()->currentWidget());
  ASSERT_NE(view, nullptr);
  w.resize(1280, 800);
  w.show();
  QApplication::processEvents();
  QTableWidget* t = view->table();
  ASSERT_EQ(t->rowCount(), 2);
  const int c = ScalingView::kLmNoteColumn;
  ASSERT_NE(t->item(1, c), nullptr);
  EXPECT_EQ(t->item(1, c)->text().toStdString(), kRefusal);
  EXPECT_TRUE(t->wordWrap());
  EXPECT_EQ(t->textElideMode(), Qt::ElideNone);
  const int width = t->columnWidth(c);
  ASSERT_GT(width, 100);
  const QFontMetrics fm(t->font());
  // the wrapped note's height in the column (less the cell's margins) fits its row: at this width
  // the refusal takes several lines, which a one-line row (~30 px) cut to "... read copy 2...."
  const QRect need = fm.boundingRect(QRect(0, 0, width - 12, INT_MAX), Qt::TextWordWrap, t->item(1, c)->text());
  EXPECT_GT(need.height(), 3 * fm.lineSpacing());
  EXPECT_GE(t->rowHeight(1), need.height());
  // the row of a point that ran stays one line
  EXPECT_LT(t->rowHeight(0), 2 * fm.lineSpacing() + 12);
}

// `embedscope-ui --report study.json -o DIR`: the page with the table's every row, the refused
// row at its wrapped height, so the report PNG is taller than the window's 900 px by at least
// the two rows and the wrapped note.
TEST(Lm63ScalingNote, TheReportHoldsTheWrappedNote) {
  const auto dir = test_support::fresh_scratch("es_lm63_scaling_report");
  std::ofstream(dir / "study.json") << study_with_a_refusal().dump();
  const auto r = test_support::run_cli("QT_QPA_PLATFORM=offscreen " + std::string(EMBEDSCOPE_UI),
                                       "--report " + (dir / "study.json").string() + " -o " + (dir / "rep").string(), dir);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const QImage png(QString::fromStdString((dir / "rep" / "scaling.png").string()));
  ASSERT_FALSE(png.isNull());
  const QFontMetrics fm(QApplication::font());
  EXPECT_GT(png.height(), 900 + 4 * fm.lineSpacing());
}

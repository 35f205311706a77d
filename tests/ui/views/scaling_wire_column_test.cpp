// The scaling page's wire/step column: every point's bytes on the wire per step
// (ScalingPoint::wire_bytes_per_step), as `embedscope scaling` prints it for the same study. The
// CLI runs the study twice (text, then --json: the simulation is deterministic); the page opens
// the JSON and each row's wire/step cell reads as the CLI's wire/step column of that row.
#include <gtest/gtest.h>

#include <QLabel>
#include <QTableWidget>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shell/main_window.h"
#include "support/cli_run.h"
#include "views/scaling_view.h"

using namespace embedscope;
using namespace embedscope::ui;

namespace {
// The CLI row's wire/step field: point_row's columns are fixed-width (sharding 17, GPUs 5, nodes
// 5, step p50 11, samples/s 12, per GPU 9, scaling 8, emb comm 9, comm 7, one space between),
// so it is the 11 characters from offset 93, trimmed.
std::string cli_wire_field(const std::string& row) {
  constexpr size_t kAt = 17 + 1 + 5 + 1 + 5 + 1 + 11 + 1 + 12 + 1 + 9 + 1 + 8 + 1 + 9 + 1 + 7 + 1;
  std::string f = row.size() >= kAt + 11 ? row.substr(kAt, 11) : "";
  f.erase(0, f.find_first_not_of(' '));
  return f;
}
}  // namespace

TEST(ScalingWireColumn, EachRowReadsTheCliWirePerStep) {
  const auto dir = test_support::fresh_scratch("es_scaling_wire_column");
  const std::string args = "scaling --preset tiny --simulate h100_sxm --gpus 1,8,16 --shardings table_wise,row_wise "
                           "--steps 2 --warmup-steps 1";
  const auto text = test_support::run_cli(EMBEDSCOPE_CLI, args, dir);
  ASSERT_EQ(text.code, 0) << text.err;
  const auto js = test_support::run_cli(EMBEDSCOPE_CLI, args + " --json", dir);
  ASSERT_EQ(js.code, 0) << js.err;
  const nlohmann::json j = nlohmann::json::parse(js.out);
  const auto path = dir / "study.json";
  std::ofstream(path) << js.out;

  // the CLI's rows (a line that starts with a sharding type), in the study's order
  std::vector<std::string> rows;
  std::istringstream in(text.out);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("table_wise ", 0) == 0 || line.rfind("row_wise ", 0) == 0) rows.push_back(line);
  ASSERT_EQ(rows.size(), 6u) << text.out;
  ASSERT_EQ(j["points"].size(), 6u);
  // the header names the column where the rows have it
  const size_t header = text.out.find("wire/step");
  ASSERT_NE(header, std::string::npos) << text.out;

  MainWindow w;
  ASSERT_EQ(w.open_path(QString::fromStdString(path.string()), true), QString());
  auto* view = qobject_cast<ScalingView*>(w.tabs()->currentWidget());
  ASSERT_NE(view, nullptr);
  QTableWidget* table = view->table();
  ASSERT_EQ(table->rowCount(), 6);
  EXPECT_EQ(table->horizontalHeaderItem(ScalingView::kWireColumn)->text(), "wire/step");
  int sends = 0;
  for (int r = 0; r < 6; ++r) {
    const int64_t bytes = j["points"][static_cast<size_t>(r)]["wire_bytes_per_step"].get<int64_t>();
    ASSERT_NE(table->item(r, ScalingView::kWireColumn), nullptr) << r;
    const std::string cell = table->item(r, ScalingView::kWireColumn)->text().toStdString();
    EXPECT_EQ(cell, cli_wire_field(rows[static_cast<size_t>(r)])) << rows[static_cast<size_t>(r)];
    EXPECT_TRUE(table->item(r, ScalingView::kWireColumn)->toolTip().startsWith(
        QLocale::c().toString(static_cast<qlonglong>(bytes)) + " B on the wire per step"))
        << table->item(r, ScalingView::kWireColumn)->toolTip().toStdString();
    if (j["points"][static_cast<size_t>(r)]["gpus"].get<int>() == 1) EXPECT_EQ(bytes, 0) << r;  // nothing to send
    else sends += bytes > 0;
  }
  EXPECT_EQ(sends, 4);  // 8 and 16 GPUs of both types send something
  // the columns around it keep their figures: memory/GPU after it, the note last
  EXPECT_EQ(table->horizontalHeaderItem(ScalingView::kWireColumn + 1)->text(), "memory/GPU");
  EXPECT_EQ(table->horizontalHeaderItem(ScalingView::kNoteColumn)->text(), "note");
  if (const char* shot = std::getenv("SCALING_WIRE_SHOT")) {  // to look at it
    view->resize(1400, 900);
    view->grab().save(shot);
  }
}

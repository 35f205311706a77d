// tester49 F10: the Designer showed a workload with forward bf16 / backward fp16 as "bf16", and
// one whose network limits only the links in a node as "the" network; an edit of either box
// rewrote both precisions, both link classes and the latency in whole microseconds. Each
// precision and each link class now has its own boxes, and an edit writes only its own field.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QComboBox>
#include <QDoubleSpinBox>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/workload/presets.h"
#include "embedscope/engine/workload/spec.h"
#include "models/workload_model.h"
#include "views/workload_designer.h"

using embedscope::ui::WorkloadDesigner;

namespace {
namespace fs = std::filesystem;

template <class W>
W* fixf49_box(WorkloadDesigner& d, const char* field) {
  W* w = d.findChild<W*>(field);
  EXPECT_NE(w, nullptr) << field;
  return w;
}
}  // namespace

TEST(Fixf49DesignerLinks, ShowsBothPrecisionsAndBothLinkClassesAndEditsOnlyOne) {
  nlohmann::json wl = embedscope::engine::to_json(embedscope::engine::load_preset("tiny"));
  wl["qcomms"] = {{"forward_precision", "bf16"}, {"backward_precision", "fp16"}};
  wl["network"] = {{"intra_node", {{"bandwidth_bytes_per_s", 100'000'000}, {"latency_ns", 1'500}}}};
  const fs::path path = fs::temp_directory_path() / ("es_fixf49_combo_" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << wl.dump(2);
  WorkloadDesigner d("tiny");
  ASSERT_EQ(d.load_file(QString::fromStdString(path.string()), true), QString());
  fs::remove(path);
  ASSERT_EQ(d.model()->error(), QString()) << d.model()->error().toStdString();

  auto* fwd = fixf49_box<QComboBox>(d, "/qcomms/forward_precision");
  auto* bwd = fixf49_box<QComboBox>(d, "/qcomms/backward_precision");
  auto* intra_bw = fixf49_box<QDoubleSpinBox>(d, "/network/intra_node/bandwidth_bytes_per_s");
  auto* intra_lat = fixf49_box<QDoubleSpinBox>(d, "/network/intra_node/latency_ns");
  auto* inter_bw = fixf49_box<QDoubleSpinBox>(d, "/network/inter_node/bandwidth_bytes_per_s");
  auto* inter_lat = fixf49_box<QDoubleSpinBox>(d, "/network/inter_node/latency_ns");
  ASSERT_TRUE(fwd && bwd && intra_bw && intra_lat && inter_bw && inter_lat);
  // shown as the file has them
  EXPECT_EQ(fwd->currentText(), "bf16");
  EXPECT_EQ(bwd->currentText(), "fp16");
  EXPECT_DOUBLE_EQ(intra_bw->value(), 100.0);
  EXPECT_DOUBLE_EQ(intra_lat->value(), 1.5);  // 1,500 ns, not a whole 1 us
  EXPECT_EQ(intra_lat->text(), "1.500 us");
  EXPECT_DOUBLE_EQ(inter_bw->value(), 0.0);
  EXPECT_EQ(inter_bw->text(), "unlimited");
  EXPECT_DOUBLE_EQ(inter_lat->value(), 0.0);

  // the bandwidth in a node: nothing else changes (latency 1,500 ns, no inter_node, fp16 backward)
  intra_bw->setValue(200.0);
  EXPECT_EQ(d.model()->value("/network/intra_node"),
            (nlohmann::json{{"bandwidth_bytes_per_s", 200'000'000}, {"latency_ns", 1'500}}));
  EXPECT_TRUE(d.model()->value("/network/inter_node").is_null()) << d.model()->workload()["network"].dump();
  EXPECT_EQ(d.model()->value("/qcomms/backward_precision"), "fp16");
  EXPECT_EQ(d.model()->value("/qcomms/forward_precision"), "bf16");
  // the backward precision: the forward one stays
  bwd->setCurrentText("fp32");
  EXPECT_EQ(d.model()->value("/qcomms/backward_precision"), "fp32");
  EXPECT_EQ(d.model()->value("/qcomms/forward_precision"), "bf16");
  // the latency across nodes: an inter_node link of latency only; the link in a node stays
  inter_lat->setValue(50.25);
  EXPECT_EQ(d.model()->value("/network/inter_node"), (nlohmann::json{{"latency_ns", 50'250}}));
  EXPECT_EQ(d.model()->value("/network/intra_node/latency_ns"), 1'500);
  EXPECT_EQ(d.model()->error(), QString()) << d.model()->error().toStdString();
  // back to no limit: the link's object goes (unlimited = absent, as the normalized workload has it)
  inter_lat->setValue(0.0);
  EXPECT_TRUE(d.model()->value("/network/inter_node").is_null()) << d.model()->workload()["network"].dump();
  EXPECT_EQ(d.model()->value("/network/intra_node/bandwidth_bytes_per_s"), 200'000'000);
  EXPECT_EQ(d.model()->error(), QString()) << d.model()->error().toStdString();
}

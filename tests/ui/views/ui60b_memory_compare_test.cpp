// Compare > Memory of a shorter, smaller session beside a longer one (tester60a F1): B (2 ranks,
// steps 0-9) compared with A (4 ranks, steps 0-19) at A's last step 19 said "the layout of step 0,
// unchanged up to step 19: 1 segments" (B has no step 19) and "no snapshot" for ranks 2-3 (B has
// no rank 2 or 3). It names B's own last step and says it has no such rank now.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QLabel>
#include <QTableWidget>

#include <filesystem>
#include <memory>
#include <string>

#include "embedscope/sessions/store/session.h"
#include "views/memory_compare.h"

using namespace embedscope;
using namespace embedscope::ui;

namespace {

// A session of `ranks` ranks and measured steps 0..last: each rank's counters every step (4 MiB
// allocated of an 8 MiB segment) and one snapshot of its layout at step 0 (one 8 MiB segment,
// a 4 MiB block allocated, the other 4 MiB one free block: fragmentation 1 - 4/4 = 0).
std::string ui60b_memory_session(const std::string& name, int ranks, int64_t last) {
  const auto path = std::filesystem::temp_directory_path() / ("es_ui60b_" + name + "_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  sessions::SessionWriter w(path.string());
  for (int r = 0; r < ranks; ++r) {
    for (int64_t step = 0; step <= last; ++step)
      w.add_memory({step, r, 4 << 20, 8 << 20, 4 << 20, 8 << 20, 4 << 20, 0, 1, 0.0, 0.0});
    const sessions::MemoryBlockRecord used{0, 8 << 20, 0, 4 << 20, 4 << 20, true, "weights"};
    const sessions::MemoryBlockRecord free{0, 8 << 20, 4 << 20, 4 << 20, 4 << 20, false, ""};
    w.add_snapshot({r + 1, r, 0, 10, "step", {used, free}});
  }
  w.close("complete");
  return path.string();
}

QString ui60b_caption(MemoryCompare& mc, const QString& label) {
  for (auto* l : mc.findChildren<QLabel*>())
    if (l->text().contains("<b>" + label + "</b>")) return l->text();
  return {};
}

}  // namespace

TEST(Ui60bMemoryCompare, AShorterSessionsCaptionNamesItsOwnLastStep) {
  const std::string a = ui60b_memory_session("long", 4, 19), b = ui60b_memory_session("short", 2, 9);
  MemoryCompare mc({{"A", std::make_shared<const sessions::SessionReader>(a)},
                    {"B", std::make_shared<const sessions::SessionReader>(b)}});
  mc.show(0, 19);  // A's last step, as the page opens
  const QString ca = ui60b_caption(mc, "A"), cb = ui60b_caption(mc, "B");
  EXPECT_TRUE(ca.contains("rank 0, the layout of step 0, unchanged up to step 19: 1 segment, 8.0 MiB reserved"))
      << ca.toStdString();
  EXPECT_TRUE(cb.contains("rank 0, the layout of step 0, unchanged up to its last step 9 (it has no step 19): 1 segment,"))
      << cb.toStdString();
  EXPECT_FALSE(cb.contains("up to step 19")) << cb.toStdString();
  // at B's own last step it reads as before
  mc.show(0, 9);
  EXPECT_TRUE(ui60b_caption(mc, "B").contains("rank 0, the layout of step 0, unchanged up to step 9: 1 segment,"))
      << ui60b_caption(mc, "B").toStdString();
  // rank 2: A's map; B has no rank 2, in the caption and the devices table
  mc.show(2, 19);
  EXPECT_TRUE(ui60b_caption(mc, "B").contains("no rank 2 (B has ranks 0-1)")) << ui60b_caption(mc, "B").toStdString();
  QTableWidget* devices = mc.devices();
  ASSERT_EQ(devices->rowCount(), 4);
  ASSERT_EQ(devices->columnCount(), 2);
  EXPECT_EQ(devices->item(2, 1)->text().toStdString(), "no rank 2");
  EXPECT_EQ(devices->item(3, 1)->text().toStdString(), "no rank 3");
  EXPECT_EQ(devices->item(2, 0)->text().toStdString(), "0.0% (4.0 MiB of 4.0 MiB free)");
  std::filesystem::remove(a);
  std::filesystem::remove(b);
}

TEST(Ui60bMemoryCompare, SnapshotWhenPastTheSessionsLastStep) {
  const sessions::MemorySnapshot at3{2, 0, 3, 0, "step", {}}, at9{3, 0, 9, 0, "step", {}};
  EXPECT_EQ(snapshot_when(at3, 19, 9).toStdString(), "the layout of step 3, unchanged up to its last step 9 (it has no step 19)");
  EXPECT_EQ(snapshot_when(at9, 19, 9).toStdString(), "snapshot of its last step 9 (it has no step 19)");
  EXPECT_EQ(snapshot_when(at3, 9, 9).toStdString(), "the layout of step 3, unchanged up to step 9");
  EXPECT_EQ(snapshot_when(at3, 19).toStdString(), "the layout of step 3, unchanged up to step 19");  // last step unknown
}

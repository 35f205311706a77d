// fixc49: the designer's red message beside a field wraps and shows in full after an edit, from
// the first pass of the event loop (before, the label kept its one-line height there - 23 of the
// 56 px its 3 lines need - and its group clipped it: what a --screenshot grabbed). Checked by
// the label's height against its heightForWidth and by how much of it its parents leave visible.
// FIXC49_SHOTS=DIR saves the designer's image there (looked at by hand: the message in full).
#include <gtest/gtest.h>

#include <QApplication>
#include <QImage>
#include <QLabel>
#include <QPixmap>
#include <QString>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "models/workload_model.h"
#include "views/workload_designer.h"

namespace {

// The label that shows `text` in `root` (nullptr if none).
QLabel* fixc49_label_showing(QWidget& root, const QString& text) {
  for (QLabel* l : root.findChildren<QLabel*>())
    if (!text.isEmpty() && l->text() == text) return l;
  return nullptr;
}

// Whether the label is tall enough for its text wrapped at its width, and visible in full inside
// the designer (its bottom inside the window).
std::string fixc49_fits(QWidget& root, QLabel* l) {
  const int need = l->heightForWidth(l->width());
  const QPoint bottom = l->mapTo(&root, QPoint(0, l->height()));
  std::string why;
  if (l->height() < need)
    why += "label " + std::to_string(l->width()) + " x " + std::to_string(l->height()) + " px, its text needs " +
           std::to_string(need) + " px; ";
  if (bottom.y() > root.height()) why += "below the window's bottom; ";
  const int shown = l->visibleRegion().boundingRect().height();  // what its parents do not clip
  if (shown < need) why += "only " + std::to_string(shown) + " px of it visible; ";
  return why;
}

}  // namespace

TEST(Fixc49DesignerMessage, ALongMessageWrapsAndShowsInFullAfterAnEdit) {
  embedscope::ui::WorkloadDesigner d("tiny");
  d.resize(1280, 760);
  d.show();
  QApplication::processEvents();
  // an edit after the window is laid out: the latency far above the timeout, a message of several lines
  d.model()->set_value("/network", nlohmann::json{{"intra_node", {{"bandwidth_bytes_per_s", 1e6}, {"latency_ns", 1e12}}},
                                                  {"inter_node", {{"bandwidth_bytes_per_s", 1e6}, {"latency_ns", 1e12}}}});
  QApplication::processEvents();
  {
    QLabel* first = fixc49_label_showing(d, d.message_at("/network"));
    ASSERT_NE(first, nullptr);
    EXPECT_EQ(fixc49_fits(d, first), "") << "after one pass of the event loop";
  }
  QApplication::processEvents();
  QApplication::processEvents();
  const QString msg = d.message_at("/network");
  ASSERT_FALSE(msg.isEmpty());
  QLabel* l = fixc49_label_showing(d, msg);
  ASSERT_NE(l, nullptr);
  std::printf("network message: %d x %d px, hfw %d\n", l->width(), l->height(), l->heightForWidth(l->width()));
  if (const char* shot = std::getenv("FIXC49_SHOTS")) d.grab().save(QString(shot) + "/designer_network.png");
  EXPECT_EQ(fixc49_fits(d, l), "");
  d.model()->set_value("/network", nullptr);
  d.model()->set_value("/devices/memory_bytes", 1 << 20);
  QApplication::processEvents();  // one pass, as the --screenshot path gives it
  const QString mem = d.message_at("/devices/memory_bytes");
  l = fixc49_label_showing(d, mem);
  ASSERT_NE(l, nullptr);
  std::printf("memory message: %d x %d px, hfw %d\n", l->width(), l->height(), l->heightForWidth(l->width()));
  if (const char* shot = std::getenv("FIXC49_SHOTS")) d.grab().save(QString(shot) + "/designer_memory.png");
  EXPECT_EQ(fixc49_fits(d, l), "");
}

#include "charts/legend.h"

#include <QHelpEvent>
#include <QPainter>
#include <QToolTip>

#include <algorithm>

#include "charts/colors.h"

namespace embedscope::ui {

namespace {
constexpr int kSwatch = 12, kGap = 4, kSpacing = 14;
}

std::vector<LegendEntry> timeline_legend(bool gpu_sync, bool annotations) {
  using sessions::OpCategory;
  std::vector<LegendEntry> out = {
      {"input", category_color(OpCategory::input), "input batches: reading, bucketizing, permuting ids"},
      {"lookup", category_color(OpCategory::lookup), "embedding lookups (forward)"},
      {"dense", category_color(OpCategory::dense), "dense layers, interaction, loss"},
      {"optimizer", category_color(OpCategory::optimizer), "backward and optimizer updates of the tables"},
      {"exposed comm", category_color(OpCategory::comm), "communication with no compute of its rank under it"},
      {"hidden comm", hidden_comm_color(), "communication while the same rank computed (HTA's overlap)"},
      {"set-up wait", setup_wait_color(),
       "communication before every rank had started: the first collective waiting for a slower rank's set-up"},
      {"memcpy", category_color(OpCategory::memcpy), "copies and memsets"},
      {"other", category_color(OpCategory::other), "everything else"},
      // a folded run takes the colour of the category with the most time in it, lightened: the
      // swatch is one example (tester45 F12.9; the most time, not the first op's, tester50 F10)
      {"lighter shade: folded", category_color(OpCategory::lookup).lighter(130),
       "a run of ops narrower than a pixel, drawn as one box in the colour of the category with the most time in "
       "the run, made lighter (this swatch: a run mostly of lookups; a light purple box is mostly copies); zoom in "
       "to see the ops"},
      {"critical path", critical_path_color(), "the ops that bounded each step (P)", true},
  };
  if (gpu_sync)  // after memcpy
    out.insert(out.begin() + 8, {"GPU sync wait", gpu_sync_color(),
                                 "the host thread waits for the GPU (cudaStreamSynchronize, cudaDeviceSynchronize)"});
  if (annotations)  // before "folded"
    out.insert(out.end() - 2, {"NVTX range", annotation_color(),
                               "an NVTX range of the thread above (its own row, as in Nsight Systems): it encloses work"});
  return out;
}

ColourLegend::ColourLegend(std::vector<LegendEntry> entries, QWidget* parent) : QWidget(parent), entries_(std::move(entries)) {
  setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Preferred);
  QSizePolicy p = sizePolicy();
  p.setHeightForWidth(true);
  setSizePolicy(p);
}

int ColourLegend::row_height() const { return std::max(kSwatch, fontMetrics().height()) + 4; }

std::vector<QRect> ColourLegend::layout_for(int width) const {
  std::vector<QRect> out;
  int x = 0, y = 0;
  const int h = row_height();
  for (const auto& e : entries_) {
    const int w = kSwatch + kGap + fontMetrics().horizontalAdvance(e.label);
    if (x > 0 && x + w > width) {
      x = 0;
      y += h;
    }
    out.emplace_back(x, y, w, h);
    x += w + kSpacing;
  }
  return out;
}

QRect ColourLegend::swatch_rect(size_t i) const {
  const QRect box = layout_for(width()).at(i);
  return {box.x(), box.y() + (box.height() - kSwatch) / 2, kSwatch, kSwatch};
}

QSize ColourLegend::sizeHint() const {
  const auto boxes = layout_for(1 << 20);
  return {boxes.empty() ? 0 : boxes.back().right() + 1, row_height()};
}

int ColourLegend::heightForWidth(int width) const {
  const auto boxes = layout_for(width);
  return boxes.empty() ? row_height() : boxes.back().bottom() + 1;
}

void ColourLegend::paintEvent(QPaintEvent*) {
  QPainter p(this);
  const auto boxes = layout_for(width());
  for (size_t i = 0; i < entries_.size(); ++i) {
    const auto& e = entries_[i];
    const QRect sw = swatch_rect(i);
    if (e.line) {
      p.setPen(QPen(e.color, 3, Qt::SolidLine, Qt::FlatCap));
      p.drawLine(sw.left(), sw.center().y(), sw.right(), sw.center().y());
    } else {
      p.fillRect(sw, e.color);
    }
    p.setPen(palette().text().color());
    p.drawText(QRect(sw.right() + 1 + kGap, boxes[i].y(), boxes[i].width() - kSwatch - kGap, boxes[i].height()),
               Qt::AlignVCenter | Qt::AlignLeft, e.label);
  }
}

bool ColourLegend::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip) {
    const auto* help = static_cast<QHelpEvent*>(e);
    const auto boxes = layout_for(width());
    for (size_t i = 0; i < boxes.size(); ++i)
      if (boxes[i].contains(help->pos())) {
        QToolTip::showText(help->globalPos(), entries_[i].tip, this);
        return true;
      }
    QToolTip::hideText();
    e->ignore();
    return true;
  }
  return QWidget::event(e);
}

}  // namespace embedscope::ui

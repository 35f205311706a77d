#include "views/memory_replay.h"

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>
#include <QCheckBox>
#include <QDoubleSpinBox>
#include <QGridLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QResizeEvent>
#include <QScrollBar>
#include <QTableWidget>

#include <algorithm>
#include <cmath>

#include "embedscope/engine/memory/snapshot_replay.h"
#include "embedscope/sessions/model/units.h"
#include "jobs/analysis_job.h"

namespace embedscope::ui {

namespace {
constexpr double kMiB = 1024.0 * 1024.0;
}

MemoryReplayPanel::MemoryReplayPanel(QWidget* parent)
    : QWidget(parent), caching_(new QCheckBox("caching", this)), expandable_(new QCheckBox("expandable", this)),
      max_split_mib_(new QDoubleSpinBox(this)), gc_threshold_(new QDoubleSpinBox(this)), capacity_mib_(new QDoubleSpinBox(this)),
      button_(new QPushButton("Replay", this)), note_(new QLabel(this)), table_(new QTableWidget(0, 4, this)),
      verdicts_(new QLabel(this)), job_(new AnalysisJob(this)) {
  auto* g = new QGridLayout(this);
  g->setContentsMargins(0, 0, 0, 0);
  caching_->setChecked(true);
  expandable_->setChecked(true);
  max_split_mib_->setRange(0, 1 << 20);
  max_split_mib_->setDecimals(0);
  max_split_mib_->setSuffix(" MiB");
  max_split_mib_->setSpecialValueText("off");
  max_split_mib_->setToolTip("max_split_size: blocks of this size or more are never split (0: off)");
  gc_threshold_->setRange(0, 0.99);
  gc_threshold_->setDecimals(2);
  gc_threshold_->setSingleStep(0.05);
  gc_threshold_->setSpecialValueText("off");
  gc_threshold_->setToolTip("garbage_collection_threshold: above this fraction of the capacity reserved, whole free "
                            "segments unused longest are released before new memory is reserved (0: off)");
  capacity_mib_->setRange(1, 1 << 24);
  capacity_mib_->setDecimals(0);
  capacity_mib_->setSuffix(" MiB");
  g->addWidget(new QLabel("replay under", this), 0, 0);
  g->addWidget(caching_, 0, 1);
  g->addWidget(expandable_, 0, 2);
  g->addWidget(new QLabel("caching with max_split_size", this), 1, 0);
  g->addWidget(max_split_mib_, 1, 1);
  g->addWidget(new QLabel("caching with garbage_collection_threshold", this), 2, 0);
  g->addWidget(gc_threshold_, 2, 1);
  g->addWidget(new QLabel("device capacity", this), 3, 0);
  g->addWidget(capacity_mib_, 3, 1);
  g->addWidget(button_, 3, 2);
  note_->setWordWrap(true);
  g->addWidget(note_, 4, 0, 1, 3);
  // taken when reserved bytes first reach their peak (engine ReplayResult::fragmentation_at_peak)
  table_->setHorizontalHeaderLabels({"setting", "peak reserved", "frag. at peak reserved", "result"});
  table_->horizontalHeaderItem(2)->setToolTip(
      "1 - largest free block / free bytes in the reserved segments, after the first entry at which reserved bytes "
      "reach their peak");
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->resizeColumnsToContents();  // the headers whole before any row (tester59 F8: "g. at peak reserv")
  table_->verticalHeader()->hide();
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Fixed);  // fit_table_height: its rows' height
  fit_table_height();
  g->addWidget(table_, 5, 0, 1, 3);
  verdicts_->setWordWrap(true);
  verdicts_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  verdicts_->setStyleSheet("color: #b00000");
  verdicts_->hide();
  g->addWidget(verdicts_, 6, 0, 1, 3);
  button_->setEnabled(false);
  connect(button_, &QPushButton::clicked, this, &MemoryReplayPanel::replay);
}

int MemoryReplayPanel::table_height_for(int rows) const {
  int h = 2 * table_->frameWidth() + table_->horizontalHeader()->sizeHint().height();
  for (int r = 0; r < table_->rowCount(); ++r) h += table_->rowHeight(r);
  h += std::max(0, rows - table_->rowCount()) * table_->verticalHeader()->defaultSectionSize();
  // the columns wider than the viewport: the horizontal scroll bar under the rows
  if (table_->horizontalHeader()->length() > table_->width() - 2 * table_->frameWidth())
    h += table_->horizontalScrollBar()->sizeHint().height();
  return h;
}

void MemoryReplayPanel::fit_table_height() {
  const int h = table_height_for(std::max(2, table_->rowCount()));  // two rows before a replay: the default settings'
  if (table_->height() != h || table_->minimumHeight() != h) table_->setFixedHeight(h);
}

void MemoryReplayPanel::resizeEvent(QResizeEvent* e) {
  QWidget::resizeEvent(e);
  fit_table_height();  // its scroll bar comes and goes with the width
}

void MemoryReplayPanel::set_history(std::shared_ptr<const sessions::MemoryHistory> history, int64_t capacity,
                                    int64_t peak_reserved, const std::string& recorded) {
  history_ = std::move(history);
  capacity_unknown_ = capacity <= 0;
  // below what the recorded run held at once (replay-memory does the same, tester34 D21)
  const bool below_peak = capacity > 0 && capacity < peak_reserved;
  const int64_t cap = capacity > 0 && !below_peak ? capacity : std::max<int64_t>(peak_reserved, 1 << 20);
  capacity_mib_->setValue(std::ceil(static_cast<double>(cap) / kMiB));
  auto bytes = [](int64_t b) { return QString::fromStdString(sessions::format_bytes(b)); };
  recorded_ = recorded;
  // a recorded threshold (sessions::allocator_settings: "caching, garbage_collection_threshold
  // 0.5") is offered, so the replay of the recorded settings collects as the run did
  constexpr std::string_view kGc = "garbage_collection_threshold ";
  const size_t at = recorded.find(kGc);
  recorded_gc_threshold_ = at == std::string::npos ? 0.0 : std::strtod(recorded.c_str() + at + kGc.size(), nullptr);
  gc_threshold_->setValue(recorded_gc_threshold_);
  recorded_entry_ = -1;
  recorded_oom_ = dump_segments_ = dump_reserved_ = -1;
  base_note_ = QString("Recorded settings: %1. Capacity: %2.")
                     .arg(QString::fromStdString(recorded))
                     .arg(below_peak ? QString("the recorded peak reserved bytes, %1 (free + reserved at the recorded "
                                               "OOM is only %2: memory another process held then)")
                                           .arg(bytes(peak_reserved), bytes(capacity))
                          : capacity > 0 ? QString("the device's, %1").arg(bytes(capacity))
                                         : QString("unknown (no OOM records the device's free bytes): the recorded peak "
                                                   "reserved bytes are offered"));
  note_->setText(base_note_);
  button_->setEnabled(history_ && history_->size() > 0);
  table_->setRowCount(0);
  fit_table_height();
  verdicts_->clear();
  verdicts_->hide();
  results_.clear();
}

void MemoryReplayPanel::set_recorded_at_peak_reserved(int64_t entry, double fragmentation, int64_t reserved) {
  recorded_entry_ = entry;
  recorded_fragmentation_ = fragmentation;
  recorded_reserved_ = reserved;
  if (entry >= 0)
    note_->setText(base_note_ + QString(" Recorded at peak reserved (%1 after entry %2): fragmentation %3%.")
                                    .arg(QString::fromStdString(sessions::format_bytes(reserved)))
                                    .arg(entry)
                                    .arg(100 * fragmentation, 0, 'f', 1));
}

void MemoryReplayPanel::set_recorded_outcome(int64_t first_oom_entry, int64_t dump_segments, int64_t dump_reserved) {
  recorded_oom_ = first_oom_entry;
  dump_segments_ = dump_segments;
  dump_reserved_ = dump_reserved;
}

QString MemoryReplayPanel::recorded_comparison(const std::vector<engine::ReplayResult>& results, const std::string& recorded,
                                               int64_t recorded_entry, double recorded_fragmentation,
                                               int64_t recorded_reserved, int64_t recorded_oom, int64_t dump_segments,
                                               int64_t dump_reserved, bool capacity_assumed) {
  if (recorded_entry < 0) return {};
  // the recorded settings' name as the replay labels them ("expandable_segments" is PyTorch's)
  const std::string label = recorded == "expandable_segments" ? "expandable" : recorded;
  const auto it = std::find_if(results.begin(), results.end(), [&](const engine::ReplayResult& r) { return r.label == label; });
  if (it == results.end()) return {};
  engine::RecordedMemory rec;
  rec.peak_reserved = recorded_reserved;
  rec.fragmentation_at_peak_reserved = recorded_fragmentation;
  rec.first_oom_entry = recorded_oom;
  rec.dump_segments = dump_segments;
  rec.dump_reserved = dump_reserved;
  rec.capacity_assumed = capacity_assumed;
  return QString::fromStdString(engine::recorded_replay_verdict(*it, label, rec).text);
}

std::optional<engine::AllocatorConfig> MemoryReplayPanel::recorded_config(const std::string& recorded, int64_t capacity) {
  engine::AllocatorConfig c{engine::AllocatorKind::caching, capacity, 0, false};
  if (recorded.rfind("expandable", 0) == 0) c.kind = engine::AllocatorKind::expandable;
  else if (recorded.rfind("caching", 0) != 0) return std::nullopt;  // "unknown", or another allocator
  constexpr std::string_view kSplit = "max_split_size ";
  if (const size_t at = recorded.find(kSplit); at != std::string::npos) {
    char* end = nullptr;
    const double v = std::strtod(recorded.c_str() + at + kSplit.size(), &end);
    const std::string_view unit(end, std::min<size_t>(4, std::strlen(end)));
    const double scale = unit.rfind(" GiB", 0) == 0 ? kMiB * 1024 : unit.rfind(" KiB", 0) == 0 ? 1024.0 : kMiB;
    c.max_split_size = static_cast<int64_t>(std::llround(v * scale));
  }
  constexpr std::string_view kGc = "garbage_collection_threshold ";
  if (const size_t at = recorded.find(kGc); at != std::string::npos && c.kind == engine::AllocatorKind::caching)
    c.garbage_collection_threshold = std::strtod(recorded.c_str() + at + kGc.size(), nullptr);
  return c;
}

std::vector<engine::AllocatorConfig> MemoryReplayPanel::settings() const {
  std::vector<engine::AllocatorConfig> out;
  const auto cap = static_cast<int64_t>(capacity_mib_->value() * kMiB);
  const auto split = static_cast<int64_t>(max_split_mib_->value() * kMiB);
  if (caching_->isChecked()) out.push_back({engine::AllocatorKind::caching, cap, 0, false});
  if (expandable_->isChecked()) out.push_back({engine::AllocatorKind::expandable, cap, 0, false});
  if (split > 0) out.push_back({engine::AllocatorKind::caching, cap, split, false});
  if (const double gc = gc_threshold_->value(); gc > 0) out.push_back({engine::AllocatorKind::caching, cap, 0, false, gc});
  return out;
}

void MemoryReplayPanel::replay() {
  if (!history_) return;
  const auto wanted = settings();
  if (wanted.empty()) {
    note_->setText("choose at least one setting");
    return;
  }
  button_->setEnabled(false);
  table_->setRowCount(0);
  verdicts_->clear();
  verdicts_->hide();
  auto h = history_;
  const double recorded_gc = recorded_gc_threshold_;  // the recording's collections are not empty_cache calls
  const std::optional<engine::AllocatorConfig> recorded = recorded_config(recorded_, wanted.front().capacity_bytes);
  job_->start<std::vector<engine::ReplayResult>>(
      [h, wanted, recorded_gc, recorded, pytorch = pytorch_program_] {
        auto rows = engine::replay_history(*h, wanted, "memory history", recorded_gc);
        // each OOM's advice as replay-memory gives it for the same snapshot (one function for both)
        engine::advise_snapshot_rows(rows, recorded ? &*recorded : nullptr, [&](const engine::AllocatorConfig& c) {
          return engine::replay_history(*h, {c}, "memory history", recorded_gc).front();
        }, pytorch);
        return rows;
      },
      [this](std::vector<engine::ReplayResult>& r) {
        results_ = std::move(r);
        table_->setRowCount(static_cast<int>(results_.size()));
        for (size_t i = 0; i < results_.size(); ++i) {
          const auto& x = results_[i];
          const QString verdict = x.oom ? QString("OOM at entry %1%2").arg(x.oom_action).arg(x.oom_pending ? " (pending frees)" : "")
                                        : QString::fromStdString(x.verdict());
          const QStringList cells{QString::fromStdString(x.label), QString::fromStdString(sessions::format_bytes(x.peak_reserved)),
                                  QString("%1%").arg(100 * x.fragmentation_at_peak, 0, 'f', 1), verdict};
          for (int c = 0; c < cells.size(); ++c) {
            auto* item = new QTableWidgetItem(cells[c]);
            if (c == 3 && x.oom) item->setToolTip(QString::fromStdString(x.oom_message));
            if (c == 3) item->setForeground(x.oom ? QColor(0xb0, 0, 0) : QColor(0x1a, 0x7f, 0x1a));
            table_->setItem(static_cast<int>(i), c, item);
          }
        }
        table_->resizeColumnsToContents();
        fit_table_height();
        QStringList oom_lines;  // replay-memory's "<setting>: <message>" of each that ran out
        for (const auto& x : results_)
          if (x.oom) oom_lines << QString::fromStdString(x.label + ": " + x.oom_message);
        verdicts_->setText(oom_lines.join("\n"));
        verdicts_->setVisible(!oom_lines.isEmpty());
        // the capacity assumed: none was known and the spin box still offers the recorded peak
        const bool assumed = capacity_unknown_ && !results_.empty() &&
                             results_.front().config.capacity_bytes ==
                                 static_cast<int64_t>(std::ceil(static_cast<double>(recorded_reserved_) / kMiB) * kMiB);
        if (const QString c = recorded_comparison(results_, recorded_, recorded_entry_, recorded_fragmentation_,
                                                  recorded_reserved_, recorded_oom_, dump_segments_, dump_reserved_,
                                                  assumed);
            !c.isEmpty())
          note_->setText(note_->text() + " " + c);
        button_->setEnabled(true);
        emit replayed();
      },
      [this](const QString& e) {
        note_->setText("the replay failed: " + e);
        button_->setEnabled(true);
      });
}

}  // namespace embedscope::ui

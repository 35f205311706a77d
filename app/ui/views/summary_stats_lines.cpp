// The Summary's `stats` figures (summary_stats_lines.h).
#include "views/summary_stats_lines.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QScrollBar>
#include <QStandardItemModel>
#include <QTableView>
#include <QVBoxLayout>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/model/held_out_key.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/model/units.h"
#include "embedscope/sessions/model/unit_ladder.h"  // format_ms

namespace embedscope::ui {

namespace {
// the steps stats divides by: a whole trace is one "step"
int64_t counted_of(const sessions::RunStats& st) { return st.whole_trace ? 1 : st.counted_steps(); }
}  // namespace

QString lookup_time_imbalance_text(const sessions::RunStats& st) {
  if (!st.lookup_time_max_over_mean) return "lookup time not recorded (no rank's load counters hold a lookup time)";
  return QString("lookup time max/mean %1").arg(*st.lookup_time_max_over_mean, 0, 'f', 2);
}

QString held_out_line(const sessions::SessionReader& s) {
  const auto h = nlohmann::json::parse(s.meta(sessions::meta::kHeldOutJson, "null"), nullptr, false);
  if (!h.is_object()) return {};
  if (h.contains("skipped"))
    return "held-out not evaluated: " + QString::fromStdString(h.value("skipped", std::string()));
  const auto auc = h.value("auc", nlohmann::json());
  const int64_t batches = h.value("batches", int64_t{0});
  return QString("held-out AUC %1, loss %2 on %3 samples (%4 positive) of %5 generated batch%6 training never saw")
      .arg(auc.is_number() ? QString::number(auc.get<double>(), 'f', 4) : QString("undefined (one class only)"))
      .arg(h.value("loss", 0.0), 0, 'f', 4)
      .arg(h.value("samples", int64_t{0}))
      .arg(h.value("positives", int64_t{0}))
      .arg(batches)
      .arg(batches == 1 ? "" : "es");
}

QString critical_path_total_text(const sessions::RunStats& st) {
  if (st.critical_path_ns <= 0) return {};
  const QString total = QString::fromStdString(sessions::format_ms(static_cast<double>(st.critical_path_ns)));
  if (st.whole_trace) return total;
  const int64_t n = counted_of(st);
  return QString("%1 over %2 step%3").arg(total).arg(n).arg(n == 1 ? "" : "s");
}

QString category_times_caption(const sessions::RunStats& st, bool imported) {
  const int64_t n = counted_of(st);
  const size_t r = st.ranks.size();
  if (st.whole_trace)
    return QString("<b>Time by op category</b> (union per category on each rank): summed over %1 rank%2 over the whole "
                   "trace, and per rank")
        .arg(r)
        .arg(r == 1 ? "" : "s");
  return QString("<b>Time by op category</b> (union per category on each rank%1): summed over %2 rank%3 x %4 %5step%6, "
                 "and per rank and step")
      .arg(st.stream_ranks && !imported ? ", GPU streams" : "")
      .arg(r)
      .arg(r == 1 ? "" : "s")
      .arg(n)
      .arg(st.drain_steps > 0 ? "counted " : "measured ")
      .arg(n == 1 ? "" : "s");
}

QAbstractItemModel* category_times_model(const sessions::RunStats& st, QObject* parent) {
  auto* m = new QStandardItemModel(parent);
  const int64_t rank_steps = std::max<int64_t>(1, counted_of(st) * static_cast<int64_t>(st.ranks.size()));
  m->setHorizontalHeaderLabels({"category", st.whole_trace ? "summed over ranks" : "summed over ranks and steps",
                                st.whole_trace ? "per rank" : "per rank and step"});
  for (int c = 0; c < sessions::kNumCategories; ++c) {
    int64_t total = 0;
    for (const auto& r : st.ranks) total += r.by_category_ns[static_cast<size_t>(c)];
    if (total <= 0) continue;
    auto* name = new QStandardItem(QString::fromStdString(sessions::to_string(static_cast<sessions::OpCategory>(c))));
    auto* sum = new QStandardItem(QString::fromStdString(sessions::format_ms(static_cast<double>(total))));
    auto* per = new QStandardItem(QString::fromStdString(sessions::format_duration(total / rank_steps)));
    sum->setData(QVariant::fromValue<qlonglong>(total), Qt::UserRole);
    per->setData(QVariant::fromValue<qlonglong>(total / rank_steps), Qt::UserRole);
    for (auto* i : {sum, per}) i->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    for (auto* i : {name, sum, per}) i->setEditable(false);
    m->appendRow({name, sum, per});
  }
  return m;
}

void add_category_table(QVBoxLayout* layout, QWidget* page, const sessions::RunStats& st, bool imported) {
  QAbstractItemModel* m = category_times_model(st, page);
  if (m->rowCount() == 0) {
    delete m;
    return;
  }
  auto* caption = new QLabel(category_times_caption(st, imported), page);
  caption->setObjectName("category_times_caption");
  caption->setWordWrap(true);
  caption->setToolTip("Per rank, the time its ops of each category covered (overlapping ops of one category counted "
                      "once), as embedscope stats prints it: where a step's time goes (dense GEMMs, lookups, "
                      "communication, input, optimizer)");
  auto* view = new QTableView(page);
  view->setObjectName("category_times");
  view->setModel(m);
  m->setParent(view);
  view->verticalHeader()->hide();
  view->verticalHeader()->setDefaultSectionSize(view->fontMetrics().height() + 6);
  view->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  view->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  view->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  view->setSizeAdjustPolicy(QAbstractScrollArea::AdjustToContents);  // every row and column, no scrolling
  view->setSizePolicy(QSizePolicy::Fixed, QSizePolicy::Fixed);  // its size hint: every row and column
  layout->addWidget(caption);
  auto* row = new QHBoxLayout;
  row->addWidget(view);
  row->addStretch(1);
  layout->addLayout(row);
}

}  // namespace embedscope::ui

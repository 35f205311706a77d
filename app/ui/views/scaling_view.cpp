#include "views/scaling_view.h"

#include <QFile>
#include <QGridLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLocale>
#include <QTableWidget>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>
#include <qcustomplot.h>

#include "charts/colors.h"
#include "embedscope/engine/workload/spec.h"
#include "embedscope/sessions/importers/importer.h"
#include "embedscope/sessions/model/units.h"

namespace embedscope::ui {

namespace {
// The unit the memory plot reads in: the largest of KiB, MiB and GiB that the largest point's
// memory fills once (B below 1 KiB), so that a small workload's 76 KiB does not read 7e-5 GiB.
struct MemoryUnit {
  const char* name;
  double bytes;
};
MemoryUnit memory_unit(const std::vector<engine::ScalingPoint>& points) {
  int64_t top = 0;
  for (const auto& p : points)
    if (p.error.empty()) top = std::max(top, p.memory_bytes_per_gpu);
  const MemoryUnit units[] = {{"GiB", 1024.0 * 1024.0 * 1024.0}, {"MiB", 1024.0 * 1024.0}, {"KiB", 1024.0}};
  for (const MemoryUnit& u : units)
    if (static_cast<double>(top) >= u.bytes) return u;
  return {"B", 1.0};
}

// x: GPUs on a log 2 axis, a tick at every size of the study
void gpu_axis(QCPAxis* x, const std::set<int>& sizes) {
  x->setScaleType(QCPAxis::stLogarithmic);
  auto ticker = QSharedPointer<QCPAxisTickerText>::create();
  for (int g : sizes) ticker->addTick(g, QString::number(g));
  x->setTicker(ticker);
  x->setLabel("GPUs (simulated)");
  if (!sizes.empty()) x->setRange(*sizes.begin() / 1.3, *sizes.rbegin() * 1.3);
}
}  // namespace

ScalingView::ScalingView(engine::ScalingStudy study, QWidget* parent)
    : QWidget(parent), study_(std::move(study)), table_(new QTableWidget(this)), caption_(new QLabel(this)),
      kept_(new QLabel(this)) {
  auto* grid = new QGridLayout(this);
  caption_->setWordWrap(true);
  // the baseline named as `embedscope scaling` names it (one for every type: engine::scaling_baseline)
  const auto baseline = engine::scaling_baseline(study_.points);
  const QString efficiency =
      baseline ? QString("Efficiency: samples/s per GPU over the baseline, the best at the smallest size any type ran: "
                         "%1 at %2 GPU%3, %4 samples/s per GPU (one baseline for every type; 100 % = its rate)")
                     .arg(engine::to_string(baseline->sharding))
                     .arg(baseline->gpus)
                     .arg(baseline->gpus == 1 ? "" : "s")
                     .arg(baseline->samples_per_s_per_gpu, 0, 'f', 0)
               : QString("Efficiency: no point ran, so no baseline");
  caption_->setText(QString("<b>SIMULATED</b> scaling study: %1 on %2 (%3 GPUs per node), %4 samples per GPU per step "
                            "(weak scaling), %5 measured steps per point. %6; embedding comm: the input, output and "
                            "gradient dists' share of the step.")
                        .arg(QString::fromStdString(study_.workload).toHtmlEscaped(),
                             QString::fromStdString(study_.hardware).toHtmlEscaped())
                        .arg(study_.gpus_per_node)
                        .arg(study_.batch_size_per_gpu)
                        .arg(study_.steps)
                        .arg(efficiency));
  grid->addWidget(caption_, 0, 0, 1, 2);
  // the tables kept in another type than the point's (tester44 F4; plan45: the CLI said so, the page did not)
  kept_->setWordWrap(true);
  kept_->setTextFormat(Qt::PlainText);
  QString notes = QString::fromStdString(kept_tables_text(study_));
  const auto coinciding = coinciding_types(study_);
  for (const auto& [later, earlier] : coinciding)  // tester45 F3: one line hidden under the other
    notes += QString("%1%2's figures are within 0.5 % of %3's at every size (on one node the same plan): its line is "
                     "drawn dashed over %3's.")
                .arg(notes.isEmpty() ? "" : " ", engine::to_string(later), engine::to_string(earlier));
  kept_->setText(notes);
  kept_->setVisible(!kept_->text().isEmpty());
  grid->addWidget(kept_, 1, 0, 1, 2);
  std::vector<engine::ShardingType> types;
  std::set<int> sizes;
  for (const auto& p : study_.points) {
    if (std::find(types.begin(), types.end(), p.sharding) == types.end()) types.push_back(p.sharding);
    sizes.insert(p.gpus);
  }
  struct Metric {
    const char* title;
    const char* unit;
    std::function<double(const engine::ScalingPoint&)> value;
  };
  const MemoryUnit mem = memory_unit(study_.points);
  const Metric metrics[] = {
      {"throughput", "samples/s", [](const engine::ScalingPoint& p) { return p.samples_per_s; }},
      {"weak-scaling efficiency", "%", [](const engine::ScalingPoint& p) { return 100 * p.scaling_efficiency; }},
      {"embedding communication share of the step", "%",
       [](const engine::ScalingPoint& p) { return 100 * p.embedding_comm_share; }},
      {"memory per GPU (largest rank)", mem.name,
       [mem](const engine::ScalingPoint& p) { return static_cast<double>(p.memory_bytes_per_gpu) / mem.bytes; }}};
  for (int m = 0; m < 4; ++m) {
    auto* plot = new QCustomPlot(this);
    plot->setMinimumSize(360, 220);
    plot->plotLayout()->insertRow(0);
    plot->plotLayout()->addElement(0, 0, new QCPTextElement(plot, metrics[m].title, QFont("sans", 10, QFont::Bold)));
    double top = 0;
    for (size_t t = 0; t < types.size(); ++t) {
      auto* g = plot->addGraph();
      g->setName(engine::to_string(types[t]));
      const bool over = std::any_of(coinciding.begin(), coinciding.end(), [&](const auto& c) { return c.first == types[t]; });
      g->setPen(QPen(session_color(t), 2, over ? Qt::DashLine : Qt::SolidLine));
      g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 6));
      for (const auto& p : study_.points)
        if (p.sharding == types[t] && p.error.empty()) {
          g->addData(p.gpus, metrics[m].value(p));
          top = std::max(top, metrics[m].value(p));
        }
    }
    gpu_axis(plot->xAxis, sizes);
    plot->yAxis->setLabel(metrics[m].unit);
    plot->yAxis->setRange(0, m == 1 || m == 2 ? std::max(100.0, top * 1.05) : std::max(1e-9, top * 1.1));
    // the legend in a row of its own under the axes, one entry beside the other: inside the
    // axes it covered points whichever corner it took (tester33 D13)
    plot->legend->setVisible(true);
    plot->axisRect()->insetLayout()->take(plot->legend);
    plot->plotLayout()->addElement(2, 0, plot->legend);
    plot->plotLayout()->setRowStretchFactor(2, 0.001);
    plot->legend->setFillOrder(QCPLayoutGrid::foColumnsFirst);
    follow_palette(plot);
    plots_.push_back(plot);
    grid->addWidget(plot, 2 + m / 2, m % 2);
  }
  const QStringList headers = {"sharding", "GPUs", "nodes", "step p50", "samples/s", "per GPU", "efficiency",
                               "emb comm", "comm", "wire/step", "memory/GPU", "note"};
  static_assert(kWireColumn == 9 && kNoteColumn == 11);
  table_->setColumnCount(static_cast<int>(headers.size()));
  table_->setHorizontalHeaderLabels(headers);
  table_->setRowCount(static_cast<int>(study_.points.size()));
  table_->verticalHeader()->hide();
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  for (int r = 0; r < table_->rowCount(); ++r) {
    const auto& p = study_.points[static_cast<size_t>(r)];
    auto set = [&](int c, const QString& text) {
      auto* item = new QTableWidgetItem(text);
      item->setTextAlignment(c == 0 || c == kNoteColumn ? Qt::Alignment(Qt::AlignLeft | Qt::AlignVCenter)
                                               : Qt::Alignment(Qt::AlignRight | Qt::AlignVCenter));
      table_->setItem(r, c, item);
    };
    set(0, engine::to_string(p.sharding));
    set(1, QString::number(p.gpus));
    set(2, QString::number(p.nodes));
    if (!p.error.empty()) {
      // the whole refusal on one line: its first line ends before the ranks and what they need
      set(kNoteColumn, QString::fromStdString(p.error).replace('\n', ' ').simplified());
      table_->item(r, kNoteColumn)->setToolTip(QString::fromStdString(p.error));
      table_->item(r, kNoteColumn)->setForeground(QColor(0xd6, 0x27, 0x28));
      continue;
    }
    set(3, QString::number(static_cast<double>(p.step_time_ns) / 1e6, 'f', 2) + " ms");
    set(4, QString::number(p.samples_per_s, 'f', 0));
    set(5, QString::number(p.samples_per_s / p.gpus, 'f', 0));
    set(6, QString::number(100 * p.scaling_efficiency, 'f', 1) + " %");
    set(7, QString::number(100 * p.embedding_comm_share, 'f', 1) + " %");
    set(8, QString::number(100 * p.comm_share, 'f', 1) + " %");
    // every rank's bytes sent per step, as `embedscope scaling` prints it (0 B in studies written
    // before it was recorded, and for one GPU)
    set(kWireColumn, QString::fromStdString(sessions::format_bytes(p.wire_bytes_per_step)));
    table_->item(r, kWireColumn)->setToolTip(QString("%1 B on the wire per step (every rank's bytes sent)")
                                                 .arg(QLocale::c().toString(static_cast<qlonglong>(p.wire_bytes_per_step))));
    set(10, QString::fromStdString(sessions::format_bytes(p.memory_bytes_per_gpu)));
    // how the planner placed the tables (ScalingPoint::placement), and the point's session
    QStringList note;
    if (!p.placement.empty()) note << (p.placement == "greedy" ? "placed by bytes" : "placed by time");
    if (!p.other_types.empty()) {
      QStringList names;
      for (const auto& [name, t] : p.other_types)
        names << QString::fromStdString(name) + " " + engine::to_string(t);
      note << QString("not %1: %2").arg(engine::to_string(p.sharding), names.join(", "));
    }
    if (!p.empty_shard_tables.empty()) {
      QStringList names;
      for (const auto& name : p.empty_shard_tables) names << QString::fromStdString(name);
      note << QString("empty shards: %1").arg(names.join(", "));
    }
    if (!p.session_path.empty()) note << QString::fromStdString(p.session_path);
    if (!note.isEmpty()) set(kNoteColumn, note.join("; "));
  }
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setStretchLastSection(true);
  grid->addWidget(table_, 4, 0, 1, 2);
  grid->setRowStretch(2, 2);
  grid->setRowStretch(3, 2);
  grid->setRowStretch(4, 1);
}

std::vector<std::pair<engine::ShardingType, engine::ShardingType>> coinciding_types(const engine::ScalingStudy& study) {
  std::vector<engine::ShardingType> types;
  for (const auto& p : study.points)
    if (std::find(types.begin(), types.end(), p.sharding) == types.end()) types.push_back(p.sharding);
  // within 0.5 % of each other: closer than a line's width on the plots
  const auto near = [](double a, double b) { return std::abs(a - b) <= 0.005 * std::max(std::abs(a), std::abs(b)); };
  const auto same = [&](const engine::ScalingPoint& a, const engine::ScalingPoint& b) {
    return near(static_cast<double>(a.step_time_ns), static_cast<double>(b.step_time_ns)) &&
           near(a.samples_per_s, b.samples_per_s) && near(a.scaling_efficiency, b.scaling_efficiency) &&
           near(a.embedding_comm_share, b.embedding_comm_share) && near(a.comm_share, b.comm_share) &&
           near(static_cast<double>(a.memory_bytes_per_gpu), static_cast<double>(b.memory_bytes_per_gpu));
  };
  std::vector<std::pair<engine::ShardingType, engine::ShardingType>> out;
  for (size_t later = 1; later < types.size(); ++later)
    for (size_t earlier = 0; earlier < later; ++earlier) {
      int shared = 0;
      bool all_same = true;
      for (const auto& a : study.points) {
        if (a.sharding != types[later] || !a.error.empty()) continue;
        for (const auto& b : study.points)
          if (b.sharding == types[earlier] && b.gpus == a.gpus && b.error.empty()) {
            ++shared;
            all_same = all_same && same(a, b);
          }
      }
      if (shared > 0 && all_same) {
        out.emplace_back(types[later], types[earlier]);
        break;
      }
    }
  return out;
}

std::string kept_tables_text(const engine::ScalingStudy& study) {
  // groups of points of one type with the same kept tables, in the study's order
  struct Group {
    engine::ShardingType type;
    std::vector<std::pair<std::string, engine::ShardingType>> tables;
    std::vector<int> gpus;
  };
  std::vector<Group> groups;
  for (const auto& p : study.points) {
    if (p.other_types.empty()) continue;
    auto g = std::find_if(groups.begin(), groups.end(),
                          [&](const Group& x) { return x.type == p.sharding && x.tables == p.other_types; });
    if (g == groups.end()) groups.push_back({p.sharding, p.other_types, {}}), g = groups.end() - 1;
    g->gpus.push_back(p.gpus);
  }
  // fixf49 (tester49 F6): tables whose row split leaves ranks without rows (ScalingPoint::empty_shard_tables)
  struct Split {
    engine::ShardingType type;
    std::vector<std::string> tables;
    std::vector<int> gpus;
  };
  std::vector<Split> splits;
  for (const auto& p : study.points) {
    if (p.empty_shard_tables.empty()) continue;
    auto g = std::find_if(splits.begin(), splits.end(),
                          [&](const Split& x) { return x.type == p.sharding && x.tables == p.empty_shard_tables; });
    if (g == splits.end()) splits.push_back({p.sharding, p.empty_shard_tables, {}}), g = splits.end() - 1;
    g->gpus.push_back(p.gpus);
  }
  std::string split_text;
  if (!splits.empty()) {
    split_text = "Tables split into empty shards (too few rows for a block of ceil(rows / ranks) on every rank: the "
                 "last ranks hold none), as `run --sharding TYPE` splits them: ";
    for (size_t k = 0; k < splits.size(); ++k) {
      const Split& g = splits[k];
      std::string sizes, names;
      for (int n : g.gpus) sizes += (sizes.empty() ? "" : ", ") + std::to_string(n);
      for (size_t i = 0; i < g.tables.size() && i < 8; ++i) names += (i == 0 ? "" : ", ") + g.tables[i];
      if (g.tables.size() > 8) names += " and " + std::to_string(g.tables.size() - 8) + " more";
      split_text += (k == 0 ? "" : "; ") + std::string(engine::to_string(g.type)) + " at " + sizes + " GPUs: " + names;
    }
    split_text += " (the planner would keep a table with fewer rows than ranks table_wise, which adds a pooled "
                  "all-to-all to the step).";
  }
  if (groups.empty()) return split_text;
  std::string text = "Tables not in the point's sharding type: ";
  bool one_type = true;
  for (size_t k = 0; k < groups.size(); ++k) {
    const Group& g = groups[k];
    one_type = one_type && g.type == groups[0].type;
    std::string sizes, names;
    for (int n : g.gpus) sizes += (sizes.empty() ? "" : ", ") + std::to_string(n);
    for (size_t i = 0; i < g.tables.size() && i < 8; ++i)
      names += (i == 0 ? "" : ", ") + g.tables[i].first + " " + engine::to_string(g.tables[i].second);
    if (g.tables.size() > 8) names += " and " + std::to_string(g.tables.size() - 8) + " more";
    text += (k == 0 ? "" : "; ") + std::string(engine::to_string(g.type)) + " at " + sizes + " GPUs: " + names;
  }
  return text + " (fewer rows than the ranks a row split needs; `run --sharding " +
         (one_type ? std::string(engine::to_string(groups[0].type)) : std::string("TYPE")) +
         "` splits them into empty shards instead)." + (split_text.empty() ? "" : " " + split_text);
}

bool is_scaling_study_file(const QString& path) {
  // read_head: a live session of this process's run keeps its SQLite locks (QFile's close dropped them)
  const std::string raw = sessions::importers::read_head(path.toStdString(), 256);
  const QByteArray head = QByteArray(raw.data(), static_cast<qsizetype>(raw.size())).simplified().replace(" ", "");
  return head.startsWith("{\"batch_size_per_gpu\"");
}

engine::ScalingStudy load_scaling_study_file(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly))
    throw engine::SpecError(path.toStdString() + ": cannot read: " + f.errorString().toStdString());
  const QByteArray text = f.readAll();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    throw engine::SpecError(path.toStdString() + ": not JSON: " + e.what());
  }
  return engine::scaling_study_from_json(j, path.toStdString());
}

}  // namespace embedscope::ui

#include "views/scaling_view.h"

#include <QFile>
#include <QGridLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLocale>
#include <QRegularExpression>
#include <QTableWidget>

#include <algorithm>
#include <optional>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>
#include <qcustomplot.h>

#include "charts/colors.h"
#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/workload/spec.h"
#include "embedscope/sessions/importers/importer.h"
#include "embedscope/sessions/model/units.h"
#include "views/scaling_page.h"

namespace embedscope::ui {

namespace {
// The unit the memory plot reads in: the largest of KiB, MiB and GiB that the largest point's
// memory fills once (B below 1 KiB), so that a small workload's 76 KiB does not read 7e-5 GiB.
struct MemoryUnit {
  const char* name;
  double bytes;
};
MemoryUnit memory_unit(const std::vector<ScalingPage::Point>& points) {
  int64_t top = 0;
  for (const auto& p : points)
    if (p.refusal.empty()) top = std::max(top, p.memory_bytes);
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

// The device's memory as a dashed line across the memory plot, labelled; the axis reaches it when
// the largest point holds a tenth of it or more, else the line under the plot's title gives it
// (returned; a line there would flatten every point onto the axis).
QString capacity_line(QCustomPlot* plot, const ScalingPage& page, const MemoryUnit& mem, double top) {
  if (page.device_memory_bytes <= 0) return "";
  const double capacity = static_cast<double>(page.device_memory_bytes) / mem.bytes;
  const QString text = QString("%1: %2").arg(page.device_name, QString::fromStdString(sessions::format_bytes(page.device_memory_bytes)));
  if (top < capacity / 10) return QString("device memory %1, far above the points").arg(text);
  plot->yAxis->setRange(0, std::max(top, capacity) * 1.12);
  auto* line = new QCPItemStraightLine(plot);
  line->point1->setCoords(0, capacity);
  line->point2->setCoords(1, capacity);
  line->setPen(QPen(QColor(0xd6, 0x27, 0x28), 1.5, Qt::DashLine));
  auto* label = new QCPItemText(plot);
  label->position->setTypeX(QCPItemPosition::ptAxisRectRatio);
  label->position->setTypeY(QCPItemPosition::ptPlotCoords);
  label->position->setCoords(0.02, capacity);
  label->setPositionAlignment(Qt::AlignLeft | Qt::AlignBottom);
  label->setColor(QColor(0xd6, 0x27, 0x28));
  label->setText("device memory, " + text);
  return "";
}

// The refused points on the memory plot: a cross in the line's colour at each one's GPU count on
// the x axis, and returned, a line per reason naming the types and sizes, e.g. "refused (does not
// fit): data_parallel at 1, 2, 4 GPUs; row_wise at 1 GPU" (the reason up to its first ':' or '('
// after the "TYPE at N GPUs: " a workload refusal starts with, and past the JSON pointer it may
// name; the whole one is in the table).
QStringList refused_marks(QCustomPlot* plot, const ScalingPage& page) {
  std::map<int, int> stacked;  // per GPU count, the crosses already there
  std::vector<std::pair<QString, std::vector<std::pair<size_t, std::vector<int>>>>> reasons;  // reason: (line, sizes)
  for (const auto& p : page.points) {
    if (p.refusal.empty()) continue;
    auto* mark = new QCPItemText(plot);
    mark->position->setTypeX(QCPItemPosition::ptPlotCoords);
    mark->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
    mark->position->setCoords(p.gpus, 1.0 - 0.08 * stacked[p.gpus]++);
    mark->setPositionAlignment(Qt::AlignHCenter | Qt::AlignBottom);
    mark->setColor(session_color(p.line));
    mark->setFont(QFont("sans", 10, QFont::Bold));
    mark->setText("\u2715");
    QString why = QString::fromStdString(p.refusal).simplified();
    if (const QString prefix = QString("%1 at %2 GPU").arg(page.lines[p.line].name).arg(p.gpus); why.startsWith(prefix))
      why = why.mid(why.indexOf(": ") + 2);
    // "/sequence_length: sequence_parallel splits ...: must be ..." reads up to its second ':'
    const qsizetype from = why.startsWith('/') && why.contains(": ") ? why.indexOf(": ") + 2 : 0;
    why = why.left(why.indexOf(QRegularExpression("[:(]"), from)).trimmed();
    auto r = std::find_if(reasons.begin(), reasons.end(), [&](const auto& x) { return x.first == why; });
    if (r == reasons.end()) r = reasons.insert(r, {why, {}});
    auto l = std::find_if(r->second.begin(), r->second.end(), [&](const auto& x) { return x.first == p.line; });
    if (l == r->second.end()) l = r->second.insert(l, {p.line, {}});
    l->second.push_back(p.gpus);
  }
  QStringList text;
  for (const auto& [why, lines] : reasons) {
    QString row = QString("\u2715 refused (%1):").arg(why);
    for (size_t k = 0; k < lines.size(); ++k) {
      QStringList sizes;
      for (int g : lines[k].second) sizes << QString::number(g);
      const QString part = QString("%1 at %2 GPU%3").arg(page.lines[lines[k].first].name, sizes.join(", "),
                                                         sizes.size() == 1 && sizes[0] == "1" ? "" : "s");
      // lines of 80 characters at most, broken between types (the plot is half the window wide)
      const bool wraps = row.size() - row.lastIndexOf('\n') - 1 + part.size() > 80;
      row += QString(k > 0 ? ";" : "") + (wraps ? "\n  " : " ");
      row += part;
    }
    text << row;
  }
  return text;
}
}  // namespace

std::pair<int64_t, QString> study_device_memory(const std::string& hardware) {
  const auto names = engine::hardware_profile_names();
  if (std::find(names.begin(), names.end(), hardware) == names.end()) return {0, ""};
  const engine::HardwareProfile hw = engine::load_hardware_profile(hardware);
  return {hw.gpu.memory_bytes, QString::fromStdString(hw.gpu.name)};
}

size_t ScalingPage::line_of(const QString& name, bool dashed) {
  const auto line = std::find_if(lines.begin(), lines.end(), [&](const Line& l) { return l.name == name; });
  if (line != lines.end()) return static_cast<size_t>(line - lines.begin());
  lines.push_back({name, dashed});
  return lines.size() - 1;
}

QString efficiency_caption(const QString& unit, const QString& type, int gpus, double per_gpu) {
  if (gpus == 0) return "Efficiency: no point ran, so no baseline";
  return QString("Efficiency: %1 per GPU over the baseline, the best at the smallest size any type ran: %2 at %3 GPU%4, "
                 "%5 %1 per GPU (one baseline for every type; 100 % = its rate)")
      .arg(unit, type)
      .arg(gpus)
      .arg(gpus == 1 ? "" : "s")
      .arg(per_gpu, 0, 'f', 0);
}

void fill_rate_cells(std::vector<ScalingPage::Cell>& row, double per_s, int gpus, double efficiency,
                     double embedding_comm_share, double comm_share) {
  row[4].text = QString::number(per_s, 'f', 0);
  row[5].text = QString::number(per_s / gpus, 'f', 0);
  row[6].text = QString::number(100 * efficiency, 'f', 1) + " %";
  row[7].text = QString::number(100 * embedding_comm_share, 'f', 1) + " %";
  row[8].text = QString::number(100 * comm_share, 'f', 1) + " %";
}

ScalingPage::Cell refusal_cell(const std::string& error) {
  // the whole refusal on one line: its first line ends before the ranks and what they need
  return {QString::fromStdString(error).replace('\n', ' ').simplified(), QString::fromStdString(error)};
}

std::vector<ScalingPage::Cell>& ScalingPage::add_point(const QString& line, bool dashed, Point point, int nodes) {
  point.line = line_of(line, dashed);
  std::vector<Cell> row(static_cast<size_t>(headers.size()));
  row[0].text = line;
  row[1].text = QString::number(point.gpus);
  row[2].text = QString::number(nodes);
  if (!point.refusal.empty()) row[static_cast<size_t>(note_column)] = refusal_cell(point.refusal);
  points.push_back(std::move(point));
  rows.push_back(std::move(row));
  return rows.back();
}

ScalingPage dlrm_scaling_page(const engine::ScalingStudy& study) {
  ScalingPage page;
  page.throughput_unit = "samples/s";
  page.efficiency_title = "weak-scaling efficiency";
  std::tie(page.device_memory_bytes, page.device_name) = study_device_memory(study.hardware);
  // the baseline named as `embedscope scaling` names it (one for every type: engine::scaling_baseline)
  const auto baseline = engine::scaling_baseline(study.points);
  const QString efficiency = baseline ? efficiency_caption("samples/s", engine::to_string(baseline->sharding), baseline->gpus,
                                                          baseline->samples_per_s_per_gpu)
                                      : efficiency_caption("samples/s", "", 0, 0);
  page.caption = QString("<b>SIMULATED</b> scaling study: %1 on %2 (%3 GPUs per node), %4 samples per GPU per step "
                         "(weak scaling), %5 measured steps per point. %6; embedding comm: the input, output and "
                         "gradient dists' share of the step.")
                     .arg(QString::fromStdString(study.workload).toHtmlEscaped(),
                          QString::fromStdString(study.hardware).toHtmlEscaped())
                     .arg(study.gpus_per_node)
                     .arg(study.batch_size_per_gpu)
                     .arg(study.steps)
                     .arg(efficiency);
  // how far to trust the times (tester63d F3, F6): the profile's assumed figures or its
  // calibration's error band, and the range of the step with the assumed figures moved
  if (!study.profile_note.empty()) {
    page.caption += QString(" <b>Trust:</b> %1.").arg(QString::fromStdString(study.profile_note).toHtmlEscaped());
    QStringList ranges;
    for (const auto& p : study.points)
      if (p.step_time_high_ns > 0)
        ranges << QString("%1 %2: %3 .. %4 ms")
                      .arg(engine::to_string(p.sharding))
                      .arg(p.gpus)
                      .arg(static_cast<double>(p.step_time_low_ns) / 1e6, 0, 'g', 3)
                      .arg(static_cast<double>(p.step_time_high_ns) / 1e6, 0, 'g', 3);
    if (!ranges.isEmpty())
      page.caption += QString(" Step p50 with each assumed figure x0.5 .. x2 (efficiencies at most 1): %1.").arg(ranges.join("; "));
  }
  // the tables kept in another type than the point's (tester44 F4; plan45: the CLI said so, the page did not)
  page.notes = QString::fromStdString(kept_tables_text(study));
  const auto coinciding = coinciding_types(study);
  for (const auto& c : coinciding) {  // tester45 F3, tester63a F8: one line hidden under the other
    const QString type = QString::fromStdString(engine::to_string(c.type));
    const QString earlier = QString::fromStdString(engine::to_string(c.earlier));
    const bool one_node = std::all_of(c.gpus.begin(), c.gpus.end(), [&](int g) { return g <= study.gpus_per_node; });
    QStringList sizes;
    for (const int g : c.gpus) sizes << QString::number(g);
    const QString where = c.every_size ? QString("at every size")
                                       : QString("at %1 GPUs").arg(sizes.size() > 1 ? sizes.mid(0, sizes.size() - 1).join(", ") +
                                                                                          " and " + sizes.back()
                                                                                    : sizes.front());
    page.notes += QString("%1%2's figures are within 0.5 % of %3's %4%5: its line is drawn dashed over %3's.")
                      .arg(page.notes.isEmpty() ? "" : " ", type, earlier, where,
                           one_node ? " (on one node the same plan)" : "");
  }
  page.headers = {"sharding", "GPUs", "nodes", "step p50", "samples/s", "per GPU", "efficiency",
                  "emb comm", "comm", "wire/step", "memory/GPU", "note"};
  static_assert(ScalingView::kWireColumn == 9 && ScalingView::kNoteColumn == 11);
  page.note_column = ScalingView::kNoteColumn;
  for (const auto& p : study.points) {
    const QString name = engine::to_string(p.sharding);
    const bool over = std::any_of(coinciding.begin(), coinciding.end(), [&](const auto& c) { return c.type == p.sharding; });
    auto& row = page.add_point(name, over,
                               {0, p.gpus, p.error, p.samples_per_s, p.scaling_efficiency, p.embedding_comm_share,
                                p.memory_bytes_per_gpu},
                               p.nodes);
    if (!p.error.empty()) continue;
    row[3].text = QString::number(static_cast<double>(p.step_time_ns) / 1e6, 'f', 2) + " ms";
    fill_rate_cells(row, p.samples_per_s, p.gpus, p.scaling_efficiency, p.embedding_comm_share, p.comm_share);
    // every rank's bytes sent per step, as `embedscope scaling` prints it (0 B in studies written
    // before it was recorded, and for one GPU)
    row[ScalingView::kWireColumn] = {QString::fromStdString(sessions::format_bytes(p.wire_bytes_per_step)),
                                     QString("%1 B on the wire per step (every rank's bytes sent)")
                                         .arg(QLocale::c().toString(static_cast<qlonglong>(p.wire_bytes_per_step)))};
    row[10].text = QString::fromStdString(sessions::format_bytes(p.memory_bytes_per_gpu));
    // how the planner placed the tables (ScalingPoint::placement), and the point's session
    QStringList note;
    if (!p.placement.empty()) note << (p.placement == "greedy" ? "placed by bytes" : "placed by time");
    if (!p.other_types.empty()) {
      QStringList names;
      for (const auto& [table, t] : p.other_types) names << QString::fromStdString(table) + " " + engine::to_string(t);
      note << QString("not %1: %2").arg(engine::to_string(p.sharding), names.join(", "));
    }
    if (!p.empty_shard_tables.empty()) {
      QStringList names;
      for (const auto& table : p.empty_shard_tables) names << QString::fromStdString(table);
      note << QString("empty shards: %1").arg(names.join(", "));
    }
    if (!p.session_path.empty()) note << QString::fromStdString(p.session_path);
    row[ScalingView::kNoteColumn].text = note.join("; ");
  }
  return page;
}

ScalingView::ScalingView(ScalingStudyFile study, QWidget* parent) : QWidget(parent) {
  if (auto* lm = std::get_if<engine::LmScalingStudy>(&study)) {
    lm_study_ = std::move(*lm);
    build(lm_scaling_page(*lm_study_));
  } else {
    study_ = std::get<engine::ScalingStudy>(std::move(study));
    build(dlrm_scaling_page(study_));
  }
}

QString ScalingView::workload() const {
  return QString::fromStdString(lm_study_ ? lm_study_->workload : study_.workload);
}
QString ScalingView::hardware() const {
  return QString::fromStdString(lm_study_ ? lm_study_->hardware : study_.hardware);
}

void ScalingView::build(const ScalingPage& page) {
  table_ = new QTableWidget(this);
  caption_ = new QLabel(this);
  kept_ = new QLabel(this);
  note_column_ = page.note_column;
  auto* grid = new QGridLayout(this);
  caption_->setWordWrap(true);
  caption_->setText(page.caption);
  grid->addWidget(caption_, 0, 0, 1, 2);
  kept_->setWordWrap(true);
  kept_->setTextFormat(Qt::PlainText);
  kept_->setText(page.notes);
  kept_->setVisible(!page.notes.isEmpty());
  grid->addWidget(kept_, 1, 0, 1, 2);
  std::set<int> sizes;
  for (const auto& p : page.points) sizes.insert(p.gpus);
  struct Metric {
    QString title;
    QString unit;
    std::function<double(const ScalingPage::Point&)> value;
  };
  const MemoryUnit mem = memory_unit(page.points);
  const Metric metrics[] = {
      {"throughput", page.throughput_unit, [](const ScalingPage::Point& p) { return p.throughput; }},
      {page.efficiency_title, "%", [](const ScalingPage::Point& p) { return 100 * p.efficiency; }},
      {"embedding communication share of the step", "%",
       [](const ScalingPage::Point& p) { return 100 * p.embedding_comm_share; }},
      {"memory per GPU (largest rank)", mem.name,
       [mem](const ScalingPage::Point& p) { return static_cast<double>(p.memory_bytes) / mem.bytes; }}};
  for (int m = 0; m < 4; ++m) {
    auto* plot = new QCustomPlot(this);
    plot->setMinimumSize(360, 220);
    plot->plotLayout()->insertRow(0);
    plot->plotLayout()->addElement(0, 0, new QCPTextElement(plot, metrics[m].title, QFont("sans", 10, QFont::Bold)));
    double top = 0;
    for (size_t t = 0; t < page.lines.size(); ++t) {
      auto* g = plot->addGraph();
      g->setName(page.lines[t].name);
      g->setPen(QPen(session_color(t), 2, page.lines[t].dashed ? Qt::DashLine : Qt::SolidLine));
      g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 6));
      for (const auto& p : page.points)
        if (p.line == t && p.refusal.empty()) {
          g->addData(p.gpus, metrics[m].value(p));
          top = std::max(top, metrics[m].value(p));
        }
    }
    gpu_axis(plot->xAxis, sizes);
    plot->yAxis->setLabel(metrics[m].unit);
    plot->yAxis->setRange(0, m == 1 || m == 2 ? std::max(100.0, top * 1.05) : std::max(1e-9, top * 1.1));
    if (m == 3) {  // the device's memory and the refused points, said under the title
      QStringList note = refused_marks(plot, page);
      if (const QString off = capacity_line(plot, page, mem, top); !off.isEmpty()) note.prepend(off);
      if (!note.isEmpty()) {
        plot->plotLayout()->insertRow(1);
        plot->plotLayout()->addElement(1, 0, new QCPTextElement(plot, note.join("\n"), QFont("sans", 8)));
        plot->plotLayout()->setRowStretchFactor(1, 0.001);
      }
    }
    // the legend in a row of its own under the axes, one entry beside the other: inside the
    // axes it covered points whichever corner it took (tester33 D13)
    plot->legend->setVisible(true);
    plot->axisRect()->insetLayout()->take(plot->legend);
    const int legend_row = plot->plotLayout()->rowCount();
    plot->plotLayout()->addElement(legend_row, 0, plot->legend);
    plot->plotLayout()->setRowStretchFactor(legend_row, 0.001);
    plot->legend->setFillOrder(QCPLayoutGrid::foColumnsFirst);
    follow_palette(plot);
    plots_.push_back(plot);
    grid->addWidget(plot, 2 + m / 2, m % 2);
  }
  table_->setColumnCount(static_cast<int>(page.headers.size()));
  table_->setHorizontalHeaderLabels(page.headers);
  table_->setRowCount(static_cast<int>(page.rows.size()));
  table_->verticalHeader()->hide();
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  for (int r = 0; r < table_->rowCount(); ++r) {
    const auto& row = page.rows[static_cast<size_t>(r)];
    const bool refused = !page.points[static_cast<size_t>(r)].refusal.empty();
    for (int c = 0; c < static_cast<int>(row.size()); ++c) {
      const ScalingPage::Cell& cell = row[static_cast<size_t>(c)];
      if (cell.text.isEmpty()) continue;
      auto* item = new QTableWidgetItem(cell.text);
      item->setTextAlignment(c == 0 || c == page.note_column ? Qt::Alignment(Qt::AlignLeft | Qt::AlignVCenter)
                                                             : Qt::Alignment(Qt::AlignRight | Qt::AlignVCenter));
      if (!cell.tooltip.isEmpty()) item->setToolTip(cell.tooltip);
      if (refused && c == page.note_column) item->setForeground(QColor(0xd6, 0x27, 0x28));
      table_->setItem(r, c, item);
    }
  }
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setStretchLastSection(true);
  // the note (the last column, stretched to the table's width) wraps, and each row is as tall as
  // its note needs: a refused point's whole reason and its advice readable on the page and in the
  // report, not cut with "..." mid-number (tester62a F5; the tooltip holds it too)
  table_->setWordWrap(true);
  table_->setTextElideMode(Qt::ElideNone);
  table_->verticalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  grid->addWidget(table_, 4, 0, 1, 2);
  grid->setRowStretch(2, 2);
  grid->setRowStretch(3, 2);
  grid->setRowStretch(4, 1);
}

std::vector<CoincidingType> coinciding_types(const engine::ScalingStudy& study) {
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
  std::vector<CoincidingType> out;
  for (size_t later = 1; later < types.size(); ++later) {
    std::optional<CoincidingType> best;
    for (size_t earlier = 0; earlier < later; ++earlier) {
      CoincidingType c{types[later], types[earlier], {}, false};
      int shared = 0;
      for (const auto& a : study.points) {
        if (a.sharding != types[later] || !a.error.empty()) continue;
        for (const auto& b : study.points)
          if (b.sharding == types[earlier] && b.gpus == a.gpus && b.error.empty()) {
            ++shared;
            if (same(a, b)) c.gpus.push_back(a.gpus);
          }
      }
      c.every_size = shared > 0 && static_cast<int>(c.gpus.size()) == shared;
      // a stretch of line hidden: every size, or two sizes or more (at one size alone the lines only
      // cross: at 1 GPU every type is the same plan)
      const bool hides = c.every_size || c.gpus.size() >= 2;
      if (hides && (!best || c.gpus.size() > best->gpus.size())) best = std::move(c);
    }
    if (best) {
      std::sort(best->gpus.begin(), best->gpus.end());
      out.push_back(std::move(*best));
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

ScalingStudyFile load_scaling_study_file(const QString& path) {
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
  if (engine::is_lm_scaling_study(j)) return engine::lm_scaling_study_from_json(j, path.toStdString());
  return engine::scaling_study_from_json(j, path.toStdString());
}

}  // namespace embedscope::ui

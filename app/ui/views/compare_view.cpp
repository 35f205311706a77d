#include "views/compare_view.h"

#include <QCheckBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QScrollArea>
#include <QSpinBox>
#include <QSplitter>
#include <QTabWidget>
#include <QTableView>
#include <QVBoxLayout>

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include <qcustomplot.h>

#include "charts/colors.h"  // session_color
#include "charts/plot_axes.h"
#include "core/rebalance_marks.h"
#include "jobs/analysis_job.h"
#include "timeline/step_box.h"
#include "views/memory_compare.h"
#include "embedscope/sessions/analysis/compare.h"  // what_it_ran
#include "embedscope/sessions/analysis/gpu_run.h"  // gpu_run_text: the GPU busy / host / GPU trace lines
#include "embedscope/sessions/analysis/gpu_sharing.h"
#include "embedscope/sessions/analysis/memory_analysis.h"  // recorded_oom_text
#include "embedscope/sessions/analysis/stats.h"  // drain_steps_text
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/model/unit_ladder.h"  // duration_unit

namespace embedscope::ui {

// ---- CompareView -----------------------------------------------------------------------------

namespace {
// The legend in a row of its own above the axis rect, its entries side by side (the sessions'
// letters, so one row), without a frame: inside
// the axis rect it covered the tops of the bars and points of a 3-session compare (tester37).
void style_plot(QCustomPlot* plot) {
  plot->legend->setVisible(true);
  plot->legend->setFont(QFont(plot->font().family(), 8));
  plot->plotLayout()->insertRow(0);
  auto* above = new QCPLayoutGrid;
  plot->plotLayout()->addElement(0, 0, above);
  above->addElement(0, 0, plot->legend);  // taken out of the axis rect's inset layout
  plot->legend->setFillOrder(QCPLegend::foColumnsFirst);
  plot->legend->setWrap(0);  // no wrapping
  plot->legend->setBorderPen(Qt::NoPen);
  plot->plotLayout()->setRowStretchFactor(0, 0.001);  // as tall as the legend needs
  plot->setMinimumSize(300, 200);
}

}  // namespace

CompareView::CompareView(const std::vector<LabelledSession>& sessions, int64_t align_step, QWidget* parent)
    : QWidget(parent), pages_(new QTabWidget(this)), sessions_(sessions), job_(new AnalysisJob(this)) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(pages_);

  // Figures: analysed off the GUI thread (each session through a reader of its own), then the
  // table and the two charts side by side
  // the page scrolls inside its tab rather than raise the window's minimum height (its table, notes
  // and two charts held a scenario's window at 1379x1042, past a 1280x800 laptop's screen)
  auto* figures_scroll = new QScrollArea(pages_);
  figures_scroll->setObjectName("compare_figures_scroll");
  figures_scroll->setFrameShape(QFrame::NoFrame);
  figures_scroll->setWidgetResizable(true);
  figures_ = new QWidget(figures_scroll);
  figures_scroll->setWidget(figures_);
  auto* fl = new QVBoxLayout(figures_);
  status_ = new QLabel(QString("Analysing %1 sessions (step times, overlap, memory)...").arg(sessions.size()), figures_);
  status_->setAlignment(Qt::AlignCenter);
  status_->setWordWrap(true);
  fl->addWidget(status_);
  pages_->addTab(figures_scroll, "Figures");
  std::vector<std::string> paths;
  for (const auto& s : sessions) paths.push_back(s.session->path());
  struct Figures {  // each session's figures, its throughput in its own unit (samples, tokens), its GPU lines
    std::vector<sessions::RunStats> stats;
    std::vector<SessionThroughput> rates;
    std::vector<std::string> gpu_lines;
    std::vector<std::optional<double>> hta;  // HTA's comm/comp overlap of an imported trace (tester48 F13)
    std::vector<sessions::WireFacts> wire;   // the bytes-on-the-wire rows' facts (collective bytes unknown, split checks)
    std::vector<std::string> recorded_oom;   // a snapshot's recorded OOM, as stats heads it (tester52 F9)
  };
  job_->start<Figures>(
      [paths] {
        Figures f;
        for (const auto& p : paths) {
          const sessions::SessionReader reader(p);
          f.stats.push_back(sessions::analyze(reader));
          f.rates.push_back(throughput_of(reader, f.stats.back()));
          f.gpu_lines.push_back(sessions::gpu_run_text(reader, f.stats.back()));
          f.hta.push_back(sessions::hta_overlap_pct(reader));
          f.wire.push_back(sessions::wire_facts(reader, f.stats.back()));
          f.recorded_oom.push_back(sessions::recorded_oom_text(reader));
        }
        return f;
      },
      [this](Figures& f) {
        delete status_;
        status_ = nullptr;
        gpu_lines_ = std::move(f.gpu_lines);
        hta_ = std::move(f.hta);
        wire_ = std::move(f.wire);
        recorded_oom_ = std::move(f.recorded_oom);
        show_figures(std::move(f.stats), std::move(f.rates));
      },
      [this](const QString& error) { status_->setText(error); });

  // Timelines, aligned on a step
  auto* tl = new QWidget(pages_);
  auto* tll = new QVBoxLayout(tl);
  auto* bar = new QHBoxLayout;
  int64_t first = std::numeric_limits<int64_t>::max(), last = std::numeric_limits<int64_t>::min();
  for (const auto& s : sessions)
    for (const auto& st : s.session->steps()) {
      first = std::min(first, st.step);
      last = std::max(last, st.step);
    }
  if (first > last) first = last = 0;
  auto* step_box = new StepBox(first, last, tl);  // warm-up steps read "warm-up 1 of 2"
  step_box->setValue(static_cast<int>(std::clamp(align_step, first, last)));
  bar->addWidget(new QLabel("align on step", tl));
  bar->addWidget(step_box);
  auto* how = new QLabel("(it starts at 0 in every timeline; zoom or pan one and all follow; "
                         "red: exposed communication, light red: hidden under compute)", tl);
  how->setWordWrap(true);  // in one line it held the page 1027 px wide
  bar->addWidget(how, 1);
  tll->addLayout(bar);
  auto* scroll = new QScrollArea(tl);
  stack_ = new TimelineStack(sessions, step_box->value(), scroll);
  scroll->setWidget(stack_);
  scroll->setWidgetResizable(true);
  tll->addWidget(scroll, 1);
  connect(step_box, &QSpinBox::valueChanged, stack_, [this](int v) { stack_->align_to_step(v); });
  pages_->addTab(tl, "Timelines");

  memory_ = new MemoryCompare(sessions, pages_);
  pages_->addTab(memory_, "Memory");
}

void CompareView::show_figures(std::vector<sessions::RunStats> stats, std::vector<SessionThroughput> rates) {
  std::vector<QString> labels;
  for (const auto& s : sessions_) labels.push_back(s.label);
  auto* figures = figures_;
  auto* fl = static_cast<QVBoxLayout*>(figures->layout());
  const auto& sessions = sessions_;
  QStringList paths;
  for (const auto& s : sessions) paths << QString::fromStdString(s.session->path());
  const QStringList names = distinct_file_names(paths);  // run1/criteo.db beside run3/criteo.db
  std::vector<const sessions::SessionReader*> readers;
  for (const auto& s : sessions) readers.push_back(s.session.get());
  // tester41 #2; per table what moved between the plans (tester42 F13), the raw list behind a toggle
  const std::vector<std::string> settings = sessions::differing_settings(readers);
  const std::vector<std::string> raw_settings = sessions::differing_settings(readers, 6, true);
  QString head;
  for (size_t i = 0; i < sessions.size(); ++i) {
    // an imported snapshot's recorded OOM, as `compare` and stats say it (tester52 F9)
    const bool oom = i < recorded_oom_.size() && !recorded_oom_[i].empty();
    head += QString(oom ? "<span style=\"color:%1\">&#9632;</span> <b>%2</b> &nbsp; %3: %4, %5; %6, %7%8%9<br>"
                        : "<span style=\"color:%1\">&#9632;</span> <b>%2</b> &nbsp; %3: %4, %5 on %6, %7%8%9<br>")
                .arg(session_color(i).name(), labels[i].toHtmlEscaped(),
                     names[static_cast<qsizetype>(i)].toHtmlEscaped(),
                     QString::fromStdString(sessions::what_it_ran(*sessions[i].session)).toHtmlEscaped(),
                     QString::fromStdString(oom                                   ? recorded_oom_[i]
                                            : stats[i].exported_run_ended.empty() ? stats[i].ended
                                            // an import of an Embedscope export, as `compare` says it
                                                                                  : stats[i].ended + " (an export of a run that ended " +
                                                                                        stats[i].exported_run_ended + ")")
                         .toHtmlEscaped())
                // which ranks shared which GPU, as `stats` says it (tester38 #11: "4 cuda ranks" read as 4 GPUs)
                .arg((stats[i].ranks.size() == 1 ? QString("1 rank") : QString("%1 ranks").arg(stats[i].ranks.size())) +
                     QString::fromStdString(sessions::gpus_text(sessions[i].session->ranks())).toHtmlEscaped())
                .arg(QString::fromStdString(sessions[i].session->meta(sessions::meta::kBackend)))
                // the backend "simulated" says it already ("simulated (SIMULATED)" read twice: tester39)
                .arg(stats[i].simulated && sessions[i].session->meta(sessions::meta::kBackend) != "simulated"
                         ? " (SIMULATED)"
                         : "")
                .arg(settings[i].empty() ? QString()
                                         : " &nbsp; <i>" + QString::fromStdString(settings[i]).toHtmlEscaped() + "</i>");
  }
  // a run that changed its plan mid-run: its figures below mix both plans; say what each move did
  for (size_t i = 0; i < sessions.size(); ++i)
    if (const std::string brief = rebalances_brief(*sessions[i].session); !brief.empty())
      head += QString("<b>%1</b>: %2 (the figures below span the whole run, before and after)<br>")
                  .arg(labels[i].toHtmlEscaped(), QString::fromStdString(brief).toHtmlEscaped());
  // communication figures of GPU streams beside a host's threads' (tester38 #1: a cuda run's
  // 0.41 ms of exposed comm against a cpu run's 20 ms read as the GPU hiding 98% of it)
  // (a simulated session's are the cost model's ops per rank, neither: tester45 F12.2), and which
  // row, if any, compares them like for like (tester54 F5): the CLI's line
  {
    std::vector<sessions::ComparedSession> compared;
    std::vector<std::string> label_text;
    for (size_t i = 0; i < sessions.size(); ++i) {
      sessions::ComparedSession c;
      c.stats = stats[i];
      c.imported = sessions[i].session->meta(sessions::meta::kImported) == "1";
      compared.push_back(std::move(c));
      label_text.push_back(labels[i].toStdString());
    }
    if (const std::string note = sessions::measure_note(compared, label_text); !note.empty()) {
      const QString text = QString::fromStdString(note).toHtmlEscaped();
      const QString lead = "not the same measure";
      head += QString("<span style=\"color:#b00000\"><b>%1</b>%2</span><br>").arg(lead, text.mid(lead.size()));
    }
  }
  // a GPU run's GPU busy, its host threads' exposed communication and what its GPU trace lost, as
  // `embedscope stats` says them (ux41 #6: only the streams' exposed communication was shown)
  for (size_t i = 0; i < sessions.size() && i < gpu_lines_.size(); ++i) {
    const QString lines = QString::fromStdString(gpu_lines_[i]);
    for (const QString& line : lines.split('\n', Qt::SkipEmptyParts))
      head += QString("<b>%1</b>: %2<br>").arg(labels[i].toHtmlEscaped(), line.simplified().toHtmlEscaped());
    // a pipeline's drain steps, left out of the figures, as `embedscope compare` says (tester48 F14.6)
    const auto& st = stats[i];
    const QString drain = QString::fromStdString(sessions::drain_steps_text(st.pipeline, st.steps, st.drain_steps, st.all_drain))
                              .simplified();
    if (!drain.isEmpty()) head += QString("<b>%1</b>: %2<br>").arg(labels[i].toHtmlEscaped(), drain.toHtmlEscaped());
  }
  {  // the same file twice, another workload or world size (tester41 #5)
    std::vector<std::string> label_text;
    for (const auto& l : labels) label_text.push_back(l.toStdString());
    for (const auto& w : sessions::comparison_warnings(readers, label_text))
      head += QString("<span style=\"color:#b00000\"><b>warning</b>: %1</span><br>")
                  .arg(QString::fromStdString(w).toHtmlEscaped());
  }
  for (size_t i = 0; i < sessions.size(); ++i)  // how a run that failed ended, in its own words
    if (const std::string msg = sessions[i].session->meta(sessions::meta::kEndMessage); !msg.empty() && stats[i].ended != "complete")
      head += QString("<span style=\"color:#b00000\"><b>%1</b>: %2</span><br>")
                  .arg(labels[i].toHtmlEscaped(), QString::fromStdString(msg).toHtmlEscaped());
  auto* head_label = new QLabel(head, figures);
  head_label->setObjectName("compare_head");
  head_label->setWordWrap(true);
  head_label->setTextInteractionFlags(Qt::TextSelectableByMouse);
  fl->addWidget(head_label);
  if (raw_settings != settings) {  // every differing workload leaf by its JSON pointer, on demand
    QString raw;
    for (size_t i = 0; i < sessions.size(); ++i)
      if (!raw_settings[i].empty())
        raw += QString("<b>%1</b>: %2<br>").arg(labels[i].toHtmlEscaped(), QString::fromStdString(raw_settings[i]).toHtmlEscaped());
    auto* toggle = new QCheckBox("Every differing setting, by its JSON pointer", figures);
    toggle->setObjectName("compare_settings_details_toggle");
    auto* details = new QLabel(raw, figures);
    details->setObjectName("compare_settings_details");
    details->setWordWrap(true);
    details->setTextInteractionFlags(Qt::TextSelectableByMouse);
    details->setVisible(false);
    connect(toggle, &QCheckBox::toggled, details, &QLabel::setVisible);
    fl->addWidget(toggle);
    fl->addWidget(details);
  }
  model_ = new CompareModel(labels, stats, std::move(rates), this);
  if (hta_.size() == sessions.size()) model_->set_hta_overlaps(hta_);
  if (wire_.size() == sessions.size()) model_->set_wire_facts(wire_);
  {  // the run-to-run noise the step-time verdicts are held against, as `embedscope compare` prints it
    std::vector<std::string> label_text;
    for (const auto& l : labels) label_text.push_back(l.toStdString());
    // then, per session after the baseline, the step-time verdict and a machine that differed,
    // as `embedscope compare` prints them (one function each: sessions/analysis/compare.h)
    QString text = QString::fromStdString(sessions::run_to_run_text(model_->apply_run_to_run_noise(readers), label_text))
                       .toHtmlEscaped();
    const auto& cs = model_->sessions();
    for (size_t i = 1; i < cs.size() && i < readers.size(); ++i) {
      text += "<br>" + QString::fromStdString(sessions::step_time_test_text(cs[0], cs[i], label_text[0], label_text[i]))
                           .toHtmlEscaped();
      if (const auto m = sessions::machine_difference(*readers[0], cs[0], *readers[i], cs[i]))
        text += QString("<br><span style=\"color:#b00000\"><b>warning</b>: %1</span>")
                    .arg(QString::fromStdString(
                             sessions::machine_difference_text(*m, *readers[0], *readers[i], label_text[0], label_text[i]))
                             .toHtmlEscaped());
    }
    auto* noise = new QLabel(text, figures);
    noise->setObjectName("compare_run_to_run_noise");
    noise->setWordWrap(true);
    noise->setTextInteractionFlags(Qt::TextSelectableByMouse);
    fl->addWidget(noise);
  }
  auto* table = new QTableView(figures);
  table->setModel(model_);
  table->setRowHidden(CompareModel::HtaOverlap, !model_->has_hta_overlap());  // a row for imported traces only
  table->setRowHidden(CompareModel::WireBytesPerToken, !model_->has_tokens());  // a row for lm_embedding runs only
  table->verticalHeader()->hide();
  table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  table->setSizeAdjustPolicy(QAbstractScrollArea::AdjustToContents);  // every figure visible, no scrolling
  table->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
  fl->addWidget(table);
  auto* charts = new QHBoxLayout;
  step_plot_ = new QCustomPlot(figures);
  exposed_plot_ = new QCustomPlot(figures);
  style_plot(step_plot_);
  style_plot(exposed_plot_);
  auto* group = new QCPBarsGroup(exposed_plot_);
  int max_ranks = 0;
  // each chart's unit from its largest value, on format_duration's ladder: 13-hour steps read
  // "(h)" with ticks 0..14, not "(ms)" with ticks 1e7..5e7 (tester39 F9)
  double max_window = 0, max_exposed = 0;
  for (const auto& st : stats) {
    for (const auto& t : st.per_step) max_window = std::max(max_window, static_cast<double>(t.window_ns));
    for (const auto& r : st.ranks)
      max_exposed = std::max(max_exposed, static_cast<double>(r.exposed_comm_ns) / static_cast<double>(std::max<int64_t>(1, st.counted_steps())));
  }
  const sessions::DurationUnit step_unit = sessions::duration_unit(max_window);
  const sessions::DurationUnit exposed_unit = sessions::duration_unit(max_exposed);
  for (size_t i = 0; i < stats.size(); ++i) {
    // step time per measured step: the slowest rank's window, as analyze() defines step time
    std::map<int64_t, int64_t> per_step;
    for (const auto& t : stats[i].per_step) per_step[t.step] = std::max(per_step[t.step], t.window_ns);
    // x: the measured step's ordinal (0 = the session's first), as the Timelines tab aligns by
    // step: two imports' profiler steps (#4..6 and #1009..1014) shared no axis (tester37 #9); a
    // run's measured steps are 0..n-1 already
    std::set<int64_t> drain;  // a pipeline's drain steps: drawn apart, hollow and grey (tester48 F14.6)
    for (const auto& t : stats[i].per_step)
      if (t.drain) drain.insert(t.step);
    QVector<double> xs, ys, drain_xs, drain_ys;
    for (const auto& [step, ns] : per_step) {
      const double x = static_cast<double>(xs.size() + drain_xs.size());
      const double y = static_cast<double>(ns) / step_unit.ns;
      if (drain.count(step)) {
        drain_xs << x;
        drain_ys << y;
      } else {
        xs << x;
        ys << y;
      }
    }
    auto* g = step_plot_->addGraph();
    g->setName(labels[i]);
    g->setData(xs, ys);
    g->setPen(QPen(session_color(i), 1.5, session_dash(i)));  // one width for all (tester42 F26)
    g->setScatterStyle(QCPScatterStyle(static_cast<QCPScatterStyle::ScatterShape>(session_marker(i)), 6));
    if (!drain_xs.isEmpty()) {
      auto* d = step_plot_->addGraph();
      d->setName(labels[i] + ": drain (left out)");
      d->setData(drain_xs, drain_ys);
      d->setLineStyle(QCPGraph::lsNone);
      d->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, QPen(session_color(i), 1.5), QBrush(Qt::white), 9));
    }
    // per measured step, as the table above: sessions of 17 and 22 steps compare (tester41 #3); a
    // session without a measured step has no bars
    QVector<double> ranks, exposed;
    for (const auto& r : stats[i].ranks) {
      if (stats[i].steps <= 0) break;
      ranks << r.rank;
      exposed << static_cast<double>(r.exposed_comm_ns) / static_cast<double>(std::max<int64_t>(1, stats[i].counted_steps())) / exposed_unit.ns;
    }
    for (const auto& r : stats[i].ranks) max_ranks = std::max(max_ranks, r.rank + 1);  // every rank on the axis:
                                                                                      // B's only rank may be 1
    auto* bars = new QCPBars(exposed_plot_->xAxis, exposed_plot_->yAxis);
    bars->setName(labels[i]);
    bars->setData(ranks, exposed);
    bars->setWidth(0.8 / static_cast<double>(std::max<size_t>(1, stats.size())));
    bars->setBrush(session_color(i));
    bars->setPen(Qt::NoPen);
    bars->setBarsGroup(group);
  }
  step_plot_->xAxis->setTicker(integer_ticker());
  step_plot_->xAxis->setLabel("measured step (0: each session's first)");
  step_plot_->yAxis->setLabel(QString("step time (%1)").arg(step_unit.name));
  step_plot_->rescaleAxes();
  step_plot_->xAxis->setRange(step_plot_->xAxis->range().lower - 0.5, step_plot_->xAxis->range().upper + 0.5);
  step_plot_->yAxis->setRange(0, step_plot_->yAxis->range().upper * 1.1);
  exposed_plot_->xAxis->setLabel("rank (exposed communication per measured step)");
  exposed_plot_->yAxis->setLabel(QString("exposed comm (%1)").arg(exposed_unit.name));  // short: a short plot cut the long title (tester35 D7)
  exposed_plot_->xAxis->setTicker(integer_ticker());
  exposed_plot_->rescaleAxes();
  exposed_plot_->xAxis->setRange(-0.6, max_ranks - 0.4);
  exposed_plot_->yAxis->setRange(0, std::max(1e3 / exposed_unit.ns, exposed_plot_->yAxis->range().upper * 1.1));  // at least 1 us
  charts->addWidget(step_plot_);
  charts->addWidget(exposed_plot_);
  fl->addLayout(charts, 1);
  // no session with a measured step (memory snapshots, traces without ProfilerStep#N): the two
  // charts would be bare axes (tester37 #20); say why instead
  if (std::all_of(stats.begin(), stats.end(), [](const sessions::RunStats& st) { return st.steps == 0; })) {
    step_plot_->hide();
    exposed_plot_->hide();
    auto* why = new QLabel("No step-time or exposed-communication chart: none of these sessions has a measured step (a "
                           "memory snapshot has none; a profiler trace needs ProfilerStep#N spans).",
                           figures);
    why->setWordWrap(true);
    why->setObjectName("no_steps_note");
    fl->addWidget(why);
  }

}

}  // namespace embedscope::ui

#include "views/summary_view.h"

#include <map>
#include <filesystem>
#include <optional>
#include <set>

#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QScrollArea>
#include <QScrollBar>
#include <QTableView>
#include <QTreeView>
#include <QVBoxLayout>

#include <algorithm>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/rebalance_marks.h"
#include "core/throughput.h"
#include "core/timeline_math.h"
#include "jobs/analysis_job.h"
#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/analysis/stats.h"
#include "embedscope/sessions/analysis/flight_recorder.h"
#include "embedscope/sessions/analysis/gpu_kernels.h"
#include "embedscope/sessions/analysis/kernel_breakdown.h"
#include "embedscope/sessions/analysis/gpu_run.h"  // gpu_run_text
#include "embedscope/sessions/analysis/gpu_sharing.h"
#include "embedscope/sessions/analysis/memory_analysis.h"
#include "embedscope/sessions/analysis/run_end.h"  // exported_run_text
#include "models/critical_path_model.h"
#include "models/gpu_kernels_model.h"
#include "models/rank_stats_model.h"
#include "models/sharding_plan_model.h"
#include "models/table_storage_model.h"
#include "views/summary_peer_tables.h"
#include "views/summary_stats_lines.h"
#include "embedscope/sessions/analysis/table_storage.h"
#include "embedscope/engine/cost/run_setup_text.h"
#include "embedscope/engine/workload/lm_spec.h"
#include "embedscope/engine/workload/spec.h"
#include "embedscope/sessions/model/hot_row_replica.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/model/units.h"
#include "embedscope/sessions/model/unit_ladder.h"  // format_rate

namespace embedscope::ui {

namespace {
// A table of a few rows (one per rank) is as tall as its rows, no taller: the space left goes to
// the panes that need it (critical path, sharding plan).
// At least kMinRows rows (all when fewer) show at any window size: the page scrolls instead
// (tester63a F5: at 1280x800 the critical path and collectives got 2.5 rows each).
constexpr int kMinRows = 8;

// The px of `rows` rows of `t` with its header, frame and horizontal scroll bar.
int rows_px(QAbstractItemView* t, QHeaderView* header, int row_px, int rows) {
  return header->sizeHint().height() + rows * row_px + 2 * t->frameWidth() + t->horizontalScrollBar()->sizeHint().height();
}

// A table at least min(its rows, kMinRows) rows tall.
void hold_min_rows(QTableView* t) {
  const int rows = t->model() ? t->model()->rowCount() : 0;
  t->setMinimumHeight(rows_px(t, t->horizontalHeader(), t->verticalHeader()->defaultSectionSize(), std::min(rows, kMinRows)));
}

void fit_to_rows(QTableView* t) {
  const int rows = t->model() ? t->model()->rowCount() : 0;
  t->setMaximumHeight(rows_px(t, t->horizontalHeader(), t->verticalHeader()->defaultSectionSize(), rows));
  hold_min_rows(t);
}

// What the summary shows: the run's figures, for a session with GPU lanes HTA's, and what the
// ranks' flight recorder dumps say (empty without dumps).
struct SummaryFigures {
  sessions::RunStats stats;
  std::vector<sessions::RankKernelFigures> kernels;
  sessions::FlightAnalysis flight;
  std::string rebalances_brief;  ///< core/rebalance_marks.h, with the median steps around each move; "" without
  std::vector<sessions::MemoryEvent> ooms;  ///< the out-of-memory entries a memory snapshot recorded (tester37 #7)
  /// A memory snapshot's ranks: the fragmentation column's header ("" the plain one); its figures
  /// are then those the Memory page and `stats` give at peak allocated, where every rank has a
  /// history, else the dump's (tester37 #14: the dump's 30.5 % sat unlabelled beside two peaks)
  QString fragmentation_label;
  /// An imported memory snapshot whose program ran out of memory: how it ended, as `stats` heads
  /// it (sessions::recorded_oom_text; tester52 F9: the Summary said "complete"); "" otherwise
  std::string recorded_oom;
  /// A GPU run's GPU busy, host and GPU trace lines (sessions::gpu_run_text, as `stats` prints
  /// them; ux41 #6); "" for a cpu run
  std::string gpu_lines;
  /// HTA's GPU kernel breakdown over the GPU events `stats` counts, and its kernels' whole names
  /// (summary_peer_tables.h); no events without GPU lanes
  sessions::KernelBreakdown breakdown;
  std::vector<std::string> kernel_names;
};

// A line per live rebalance that moved tables, with the median step time before and after it
// (analysis/rebalance_effect.h), under the run's figures, which span both plans: "live rebalance
// after step 2: 3 table(s) moved, ids max/mean 3.91 -> 1.01 observed after; median step 155.12
// ms -> 121.40 ms". "" without rebalances.
QString rebalance_lines(const SummaryFigures& f) {
  if (f.rebalances_brief.empty()) return {};
  return QString("<br>%1 (the figures above span the whole run; `embedscope stats` lists each rebalance)")
      .arg(QString::fromStdString(f.rebalances_brief).toHtmlEscaped());
}

// The flight recorder paragraph: its findings (red), else that every rank completed what it
// entered, and the collective each rank waits in. "" without dumps.
QString flight_text(const sessions::FlightAnalysis& a) {
  if (a.empty()) return {};
  QStringList reasons;
  for (const auto& r : a.ranks)
    if (r.dumped && !reasons.contains(QString::fromStdString(r.reason))) reasons << QString::fromStdString(r.reason);
  QString t = QString("<b>Flight recorder</b> (each rank's last dump of its last collectives: %1)")
                  .arg(reasons.join(", ").toHtmlEscaped());
  for (const auto& f : a.findings)
    t += QString("<br><span style=\"color:#d01010\">%1</span>").arg(QString::fromStdString(f.text).toHtmlEscaped());
  if (!a.in_flight_note.empty()) t += "<br>" + QString::fromStdString(a.in_flight_note).toHtmlEscaped();
  QStringList waiting;
  for (const auto& r : a.ranks) {
    QStringList in;  // every collective the rank is inside (tester36 D9: a dist and the dense all-reduce)
    for (const auto& e : r.in_flight)
      in << QString("%1 '%2' (group %3, sequence %4)")
                .arg(QString::fromStdString(e.op), QString::fromStdString(e.name).toHtmlEscaped(),
                     QString::fromStdString(e.group).toHtmlEscaped())
                .arg(e.sequence);
    if (!in.isEmpty()) waiting << QString("rank %1 in %2").arg(r.rank).arg(in.join(" and "));
  }
  if (a.findings.empty() && waiting.isEmpty()) t += "<br>every rank completed every collective it entered";
  if (!waiting.isEmpty()) t += "<br>waiting: " + waiting.join("; ");
  return t;
}

// "IMPORTED from kineto_json (PyTorch Profiler (0)): trace.json.gz (1.5 MB)" for an imported
// session, else "".
QString import_origin(const sessions::SessionReader& s) {
  if (s.meta(sessions::meta::kImported) != "1") return {};
  QStringList files;
  std::set<std::string> folders;
  int64_t total = 0;
  try {
    for (const auto& src : nlohmann::json::parse(s.meta(sessions::meta::kImportSources, "[]")))
      if (src.is_object() && src.contains("file") && src["file"].is_string()) {
        const std::string file = src["file"].get<std::string>();
        const int64_t bytes = src.value("bytes", int64_t{0});
        total += bytes;
        folders.insert(std::filesystem::path(file).parent_path().string());
        files << QString("%1 (%2)")
                     .arg(QString::fromStdString(file).toHtmlEscaped())
                     .arg(QString::fromStdString(sessions::format_bytes(bytes)));
      }
  } catch (const std::exception&) {
    files << "(sources unreadable)";
  }
  // many rank files (a directory import): their count and folder, not a wall of names (tester34 D23)
  QString sources = files.join(", ");
  if (files.size() > 4)
    sources = QString("%1 files (%2)%3")
                  .arg(files.size())
                  .arg(QString::fromStdString(sessions::format_bytes(total)))
                  .arg(folders.size() == 1 ? QString(" in %1").arg(QString::fromStdString(*folders.begin()).toHtmlEscaped())
                                           : QString());
  return QString("<b>IMPORTED</b> from %1 (%2): %3")
      .arg(QString::fromStdString(s.meta(sessions::meta::kImportFormat)).toHtmlEscaped())
      .arg(QString::fromStdString(s.meta(sessions::meta::kImportProducer)).toHtmlEscaped())
      .arg(sources);
}

// The import problems of an imported session (its import_stats table, as `embedscope import`
// and `stats` print them): one line per problem, severity, count, name and first example (an
// event that did not end says it is kept as a zero-length op marked "(did not end)"); "" when the
// session is not imported, "import problems: none" when it has none.
QString import_problems_text(const sessions::SessionReader& s) {
  if (s.meta(sessions::meta::kImported) != "1") return {};
  const auto problems = s.import_stats();
  if (problems.empty()) return "<b>Import problems</b>: none";
  QString t = "<b>Import problems</b> (counted, as `embedscope stats` lists them):";
  for (const auto& p : problems) {
    const QString example = QString::fromStdString(p.example);
    t += QString("<br>%1 &nbsp; %2 &times; <b>%3</b>: %4")
             .arg(QString::fromStdString(p.severity).toHtmlEscaped())
             .arg(p.count)
             .arg(QString::fromStdString(p.name).toHtmlEscaped())
             .arg((example.size() > 240 ? example.left(240) + "..." : example).toHtmlEscaped());
  }
  return t;
}

// "<br>hot rows (replicated on every rank, trained data-parallel): t_c 4 rows, 11.3 ids a step
// kept off the input all-to-all, 208 B all-reduced a step" from table_storage_json, as `stats`
// prints them (tester35 D11); "" without hot rows. Where hot_ids is null (simulated) the ids are
// the replicas' load counters (sessions::hot_row_replica_ids, retest49 R4), "-" without them.
QString hot_rows_line(const sessions::SessionReader& s, int64_t steps) {
  const auto tables = nlohmann::json::parse(s.meta(sessions::meta::kTableStorageJson, ""), nullptr, false);
  if (!tables.is_array()) return {};
  QStringList parts;
  std::optional<std::map<int32_t, int64_t>> counted;  // the replicas' load counters, read once
  for (size_t i = 0; i < tables.size(); ++i) {
    const auto& t = tables[i];
    if (!t.is_object() || !t.contains("hot_rows") || !t["hot_rows"].is_number_integer() || t["hot_rows"].get<int64_t>() <= 0)
      continue;
    const auto ids = t.find("hot_ids");
    QString per_step = ids != t.end() && ids->is_number() && steps > 0
                           ? QString::number(ids->get<double>() / static_cast<double>(steps), 'f', 1)
                           : QString("-");
    if (per_step == "-" && steps > 0) {
      if (!counted) counted = sessions::hot_row_replica_ids(s.load(), steps);
      if (const auto c = counted->find(static_cast<int32_t>(i)); c != counted->end())
        per_step = QString::number(static_cast<double>(c->second) / static_cast<double>(steps), 'f', 1);
    }
    parts << QString("%1 %2 rows, %3 ids a step kept off the input all-to-all, %4 all-reduced a step")
                 .arg(QString::fromStdString(t.value("table", "")).toHtmlEscaped())
                 .arg(t["hot_rows"].get<int64_t>())
                 .arg(per_step)
                 .arg(QString::fromStdString(sessions::format_bytes(t.value("hot_all_reduce_bytes", int64_t{0}))));
  }
  return parts.isEmpty() ? QString() : "<br>hot rows (replicated on every rank, trained data-parallel): " + parts.join("; ");
}

// "network: intra_node unlimited; inter_node 10 MB/s, 0 ns latency &nbsp; dense: fp32 (fp32 GEMMs)<br>",
// for a simulated run "network: simulated: nvlink4 within a node, ... (hardware profile h100_sxm)":
// the lines `stats` prints under "pipeline", from the same function (engine::run_setup_text) and
// the same source, the stored workload (tester50 F8: a report of a run whose cross-node link was
// held to 10 MB/s never said so). "" for a session without a stored table workload (an import,
// an lm_embedding run, whose header says its shape).
QString run_setup_line(const sessions::SessionReader& s) {
  const std::string stored = s.meta(sessions::meta::kWorkloadJson, "");
  if (stored.empty()) return {};
  try {
    const auto j = nlohmann::json::parse(stored);
    if (engine::is_lm_workload(j)) return {};
    const engine::RunSetupText t = engine::run_setup_text(engine::parse_workload(j, sessions::meta::kWorkloadJson));
    QString line = "network: " + QString::fromStdString(t.network).toHtmlEscaped();
    if (!t.dense.empty()) line += " &nbsp; dense: " + QString::fromStdString(t.dense).toHtmlEscaped();
    return line + "<br>";
  } catch (const std::exception& e) {  // as `stats` says it
    return "network: - (the stored workload is unreadable: " + QString::fromStdString(e.what()).toHtmlEscaped() + ")<br>";
  }
}

// "; no trace of rank 1" / "; no trace of ranks 2, 3" / "; no trace of ranks 1-19999" / "" (imported sessions)
QString untraced_text(const std::vector<int32_t>& untraced) {
  if (untraced.empty()) return {};
  return QString("; no trace of rank%1 %2 in this session")
      .arg(untraced.size() == 1 ? "" : "s", QString::fromStdString(sessions::rank_list(untraced)));
}

// "4 ranks", or for one process's session of a rank-per-process run (`own_sessions`) "1 rank (rank 1
// of 3; ranks 0, 2 are in their own sessions: merge them for the whole run)" (tester36 D3), or for
// another session whose metadata world_size counts ranks it holds nothing of "2 ranks (ranks 0, 1
// of 3; the metadata world_size counts rank 2, but the session holds no record of it)" (tester54 F3).
QString process_ranks_text(const sessions::RunStats& st, bool own_sessions) {
  QString t = st.ranks.size() == 1 ? QString("1 rank") : QString("%1 ranks").arg(st.ranks.size());
  if (st.untraced_ranks.empty()) return t;
  std::vector<int32_t> here;
  for (const auto& r : st.ranks) here.push_back(r.rank);
  const auto& away = st.untraced_ranks;
  if (!own_sessions)
    return t + QString(" (rank%1 %2 of %3; the metadata world_size counts rank%4 %5, but the session holds no record "
                       "of %6)")
                   .arg(here.size() == 1 ? "" : "s", QString::fromStdString(sessions::rank_list(here)))
                   .arg(st.world_size)
                   .arg(away.size() == 1 ? "" : "s", QString::fromStdString(sessions::rank_list(away)),
                        away.size() == 1 ? "it" : "them");
  return t + QString(" (rank%1 %2 of %3; rank%4 %5 in %6 own session%7: merge them for the whole run)")
                 .arg(here.size() == 1 ? "" : "s", QString::fromStdString(sessions::rank_list(here)))
                 .arg(st.world_size)
                 .arg(away.size() == 1 ? "" : "s", QString::fromStdString(sessions::rank_list(away)),
                      away.size() == 1 ? "its" : "their", away.size() == 1 ? "" : "s");
}

// The steps the sharding plan's ids and bytes cover, as stats counts them: "measured steps", or for
// a pipeline that drained "the 18 counted steps 0-17; the drain steps 18-19 left out, as stats".
QString counted_steps_caption(const sessions::RunStats& st) {
  if (st.drain_steps <= 0 || st.counted_steps() <= 0) return "measured steps";
  const int64_t c = st.counted_steps();
  return QString("the %1 counted step%2 0-%3; the drain %4 left out, as stats")
      .arg(c)
      .arg(c == 1 ? "" : "s")
      .arg(c - 1)
      .arg(st.drain_steps == 1 ? QString("step %1").arg(c) : QString("steps %1-%2").arg(c).arg(st.steps - 1));
}

// The px a table's columns need to show whole (its first column as set, the others the width
// of their header or widest cell, whichever is more), with its frame and a vertical scroll bar.
int table_content_width(QTableView* view) {
  const auto* m = view->model();
  auto* items = static_cast<QAbstractItemView*>(view);  // QTableView hides sizeHintForColumn
  int px = 2 * view->frameWidth() + view->verticalScrollBar()->sizeHint().width();
  for (int c = 0; m && c < m->columnCount(); ++c)
    px += c == 0 ? view->columnWidth(0)
                 : std::max(view->horizontalHeader()->sectionSizeHint(c), items->sizeHintForColumn(c));
  return px;
}

QWidget* summary_page(const sessions::SessionReader& s, SummaryFigures figures, QWidget* parent) {
  auto* page = new QWidget(parent);
  auto* layout = new QVBoxLayout(page);
  auto* model = new RankStatsModel(std::move(figures.stats), page);
  model->set_bytes_unknown(sessions::collective_bytes_unknown(s));
  model->set_fragmentation_label(figures.fragmentation_label);
  const auto& st = model->stats();
  const QString origin = import_origin(s);
  const std::optional<engine::LmWorkloadSpec> lm = lm_workload_of(s);
  const SessionThroughput rate = throughput_of(s, st);
  QString text = origin.isEmpty()
                     ? QString("<b>%1</b> on %2, %3, %4 &nbsp; <b>%5</b>%6<br>")
                           .arg(QString::fromStdString(s.meta(sessions::meta::kWorkloadName)))
                           // which ranks shared which GPU, as `stats` says it (tester38 #11)
                           .arg(process_ranks_text(st, !s.meta(sessions::meta::kProcessRank).empty()) + QString::fromStdString(sessions::gpus_text(s.ranks())).toHtmlEscaped())
                           .arg(QString::fromStdString(s.meta(sessions::meta::kBackend)))
                           .arg(lm ? QString("lm_embedding %1 x %2 %3, %4%5")
                                         .arg(lm->vocab_size)
                                         .arg(lm->hidden_size)
                                         .arg(engine::to_string(lm->data_type))
                                         .arg(engine::to_string(lm->sharding))
                                         .arg(lm->sequence_parallel ? " + sequence_parallel" : "")
                                   : QString("%1 pipeline (qcomms forward %2, backward %3)")
                                         .arg(QString::fromStdString(s.meta(sessions::meta::kPipeline, "base")))
                                         .arg(QString::fromStdString(s.meta(sessions::meta::kQcommsForwardPrecision, "fp32")))
                                         .arg(QString::fromStdString(s.meta(sessions::meta::kQcommsBackwardPrecision, "fp32"))))
                           .arg(QString::fromStdString(st.ended))
                           .arg(st.simulated ? " &nbsp; <b>SIMULATED</b>" : "")
                     : QString("%1<br>%2 traced (world size %3%4) &nbsp; <b>%5</b><br>")
                           .arg(origin)
                           .arg(st.ranks.size() == 1 ? QString("1 rank") : QString("%1 ranks").arg(st.ranks.size()))
                           .arg(QString::fromStdString(s.meta(sessions::meta::kWorldSize, "?")))
                           .arg(untraced_text(st.untraced_ranks))
                           .arg(QString::fromStdString(figures.recorded_oom.empty() ? st.ended : figures.recorded_oom)
                                    .toHtmlEscaped());
  if (origin.isEmpty()) text += run_setup_line(s);  // the network and dense lines of `stats` (tester50 F8)
  // an import of an Embedscope export: how the exported run ended, as `stats` says it ("source run")
  if (const std::string run = sessions::exported_run_text(st); !origin.isEmpty() && !run.empty())
    text += QString("source run: %1<br>").arg(QString::fromStdString(run).toHtmlEscaped());
  if (st.steps == 0 && s.meta(sessions::meta::kImportFormat) == "torch_memory_snapshot") {
    text += "a PyTorch memory snapshot: no ops or steps; its allocator history is on the Memory page";
    for (const auto& o : figures.ooms)  // the import completed; the job it recorded did not
      text += QString("<br><span style=\"color:#b00000\"><b>out of memory</b> recorded on rank %1: %2 requested "
                      "on stream %3 at %4 (the Memory page's trace entry of the OOM)</span>")
                  .arg(o.rank)
                  .arg(QString::fromStdString(sessions::format_bytes(o.requested > 0 ? o.requested : o.size)))
                  .arg(o.stream)
                  .arg(QString::fromStdString(format_duration(o.time_ns)));
  } else if (st.whole_trace) {  // `stats`' figures over the whole trace
    const bool comm = std::any_of(st.ranks.begin(), st.ranks.end(), [](const auto& r) { return r.comm_ns > 0; });
    text += QString("%1: figures over the whole trace (each rank's first op to its last; no step times "
                    "or throughput)<br>%2")
                .arg(QString(st.whole_trace_cut ? "no complete profiler step (the trace was cut short: every "
                                                  "ProfilerStep#N lost events to the cut)"
                                                : "no profiler steps"))
                .arg(comm ? QString("overlap %1 % (%2); exposed communication %3 per rank")
                                .arg(st.overlap_pct, 0, 'f', 1)
                                .arg(QString::fromStdString(sessions::overlap_definition(st)).toHtmlEscaped())
                                .arg(QString::fromStdString(format_duration(st.exposed_comm_ns)))
                          : QString("overlap n/a (no communication)"));
  } else if (st.steps == 0 && !origin.isEmpty()) {
    text += "no profiler steps in the trace (no ProfilerStep#N spans): no step times, thread-level overlap or throughput";
  } else if (st.steps == 0) {
    // no step completed its measurement: no step times, but the ops recorded are analysed
    const bool any_ops = !st.critical_paths.empty();
    if (st.ended == "running")  // a live session has not ended (tester43 F19): it is still before its first measured step
      text += QString("no complete measured step yet (the run is still %1): no step times, overlap or throughput")
                  .arg(any_ops ? QString("in step %1").arg(st.critical_paths.back().step) : QString("in its warm-up"));
    else
      text += QString("no complete measured step (the run ended %1 %2): no step times, overlap or throughput")
                  .arg(QString::fromStdString(st.ended))
                  .arg(any_ops ? QString("in step %1").arg(st.critical_paths.back().step) : QString("before its first measured step"));
    if (any_ops) text += st.ended == "running" ? "; the critical path and collectives below are those of the ops recorded so far"
                                               : "; the critical path and collectives below are those of the ops recorded before the end";
  }
  if (st.steps > 0)
    text += QString("%1 measured steps: step time mean %2, p50 %3, p99 %4; %5<br>"
                    "overlap %6 (%9); exposed communication %7 per rank; %8")
                .arg(st.steps)
                .arg(QString::fromStdString(format_duration(static_cast<int64_t>(st.step_time_ns.mean))))
                .arg(QString::fromStdString(format_duration(st.step_time_ns.p50)))
                .arg(QString::fromStdString(format_duration(st.step_time_ns.p99)))
                .arg(rate.unit.empty() ? QString("a trace has no samples")  // tokens for an LM run (stats: step_size)
                                       : QString("%1 %2/s").arg(QString::fromStdString(sessions::format_rate(rate.per_s))).arg(QString::fromStdString(rate.unit)))
                .arg(std::any_of(st.ranks.begin(), st.ranks.end(), [](const auto& r) { return r.comm_ns > 0; })
                         ? QString("%1 %").arg(st.overlap_pct, 0, 'f', 1)
                         : QString("n/a (no communication)"))
                .arg(QString::fromStdString(format_duration(st.exposed_comm_ns)))
                .arg(origin.isEmpty() ? QString("imbalance (ids looked up max/mean) %1 a step (each step's max/mean, "
                                                "mean over the steps; %2 of the run's totals); %3")
                                            .arg(st.lookups_max_over_mean_per_step, 0, 'f', 2)
                                            .arg(st.lookups_max_over_mean, 0, 'f', 2)
                                            .arg(lookup_time_imbalance_text(st))  // as stats (tester63a F4)
                                      : QString("load imbalance not measured (a trace has no load counters)"))
                .arg(QString::fromStdString(sessions::overlap_definition(st)).toHtmlEscaped());
  // a pipelined run's drain steps, left out of the figures above as `stats` says (tester46 F21)
  if (const std::string drain = sessions::drain_steps_text(st.pipeline, st.steps, st.drain_steps, st.all_drain); !drain.empty())
    text += "<br>" + QString::fromStdString(drain).trimmed().toHtmlEscaped();
  // the rank whose late arrival at the collectives cost its peers the most waiting: `stats`'
  // straggler line, from the same function (tester60c F2)
  if (const std::string straggler =
          sessions::straggler_text(st.peer_waits, st.whole_trace ? 1 : std::max<int64_t>(1, st.counted_steps()));
      !straggler.empty())
    text += "<br>straggler: " + QString::fromStdString(straggler).toHtmlEscaped();
  // ranks that hold different steps (a killed rank of a merged launch): the note `stats` prints
  // under its figures, from the same function (tester53 F10)
  if (const std::string unequal = sessions::unequal_rank_steps_note(st); !unequal.empty())
    text += "<br>" + QString::fromStdString(unequal).toHtmlEscaped();
  // a GPU run: how busy its streams were, its host threads' exposed communication beside the
  // streams' above, what its GPU trace lost; the lines of `embedscope stats` (ux41 #6)
  const QString gpu_lines = QString::fromStdString(figures.gpu_lines);
  for (const QString& line : gpu_lines.split('\n', Qt::SkipEmptyParts)) text += "<br>" + line.simplified().toHtmlEscaped();
  if (const QString held_out = held_out_line(s); !held_out.isEmpty()) text += "<br>" + held_out.toHtmlEscaped();
  text += rebalance_lines(figures);
  text += hot_rows_line(s, st.steps);
  if (!s.meta(sessions::meta::kEndMessage).empty()) text += "<br>" + QString::fromStdString(s.meta(sessions::meta::kEndMessage)).toHtmlEscaped();
  auto* label = new QLabel(text, page);
  label->setObjectName("summary_text");
  QLabel* flight = nullptr;
  if (const QString ft = flight_text(figures.flight); !ft.isEmpty()) {
    flight = new QLabel(ft, page);
    flight->setObjectName("flight_recorder");
    flight->setWordWrap(true);
    flight->setTextInteractionFlags(Qt::TextSelectableByMouse);
    flight->setToolTip("Every rank keeps its last collectives (group, sequence, state) and writes them into the session "
                       "when its run fails or on SIGUSR1 / SIGTERM; `embedscope stats` prints the same analysis.");
  }
  label->setWordWrap(true);
  label->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* table = new QTableView(page);
  table->setModel(model);
  table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table->verticalHeader()->hide();  // the rank column says it
  table->verticalHeader()->setDefaultSectionSize(table->fontMetrics().height() + 6);
  auto* plan = new QTreeView(page);
  auto* plan_model = new ShardingPlanModel(s, st, plan);
  plan->setModel(plan_model);
  if (const QString under = plan_model->under_planned_text(); !under.isEmpty())  // planned vs measured peak
    label->setText(label->text() + "<br>" + under);
  if (const QString near = plan_model->within_rounding_text(); !near.isEmpty())  // not red (tester46 F9)
    label->setText(label->text() + "<br>" + near.toHtmlEscaped());
  plan->setAlternatingRowColors(true);
  plan->expandAll();
  plan->header()->setSectionResizeMode(QHeaderView::ResizeToContents);
  plan->header()->setStretchLastSection(false);
  {  // the plan's first ranks and their shards, at least (12 rows: a rank and its tables)
    int drawn = 0;
    for (QModelIndex i = plan_model->index(0, 0); i.isValid() && drawn < 12; i = plan->indexBelow(i)) ++drawn;
    const int row = std::max(plan->fontMetrics().height() + 6, plan->sizeHintForRow(0));
    plan->setMinimumHeight(rows_px(plan, plan->header(), row, drawn));
    plan->setProperty("report_max_rows", 1024);  // report_layout.h: a whole 4-rank plan of 26 tables (tester63a F14)
  }
  // what bounded the steps, and what each collective cost (the tables of `embedscope stats`)
  auto* paths = new QHBoxLayout;
  // An empty table says why instead of showing bare headers (tester35 D13): no measured step
  // (a run that ended in warm-up, a trace without profiler steps), or none in the steps measured.
  const QString none_why = st.steps == 0 && st.critical_paths.empty() ? QString("none: the session has no measured step")
                                                                      : QString("none in the measured steps");
  auto add_table = [&](QAbstractItemModel* m, const QString& name, const QString& title, const QString& tip) {
    auto* box = new QVBoxLayout;
    auto* caption = new QLabel(m->rowCount() == 0 ? QString("%1<br><i>%2</i>").arg(title, none_why) : title, page);
    caption->setObjectName(name + "_caption");
    caption->setToolTip(tip);
    auto* view = new QTableView(page);
    view->setObjectName(name);
    view->setModel(m);
    m->setParent(view);
    view->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    // the name column: at most 48 characters wide (a C++ kernel name of an imported trace would
    // push the figures out of view), elided in the middle, whole in its tooltip
    view->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Interactive);
    view->setTextElideMode(Qt::ElideMiddle);
    view->setWordWrap(false);
    view->resizeColumnToContents(0);
    view->setColumnWidth(0, std::min(view->columnWidth(0), view->fontMetrics().averageCharWidth() * 48));  // a short kernel name whole
    view->verticalHeader()->hide();
    view->verticalHeader()->setDefaultSectionSize(view->fontMetrics().height() + 6);
    hold_min_rows(view);
    box->addWidget(caption);
    box->addWidget(view);
    if (m->rowCount() == 0) {
      view->hide();
      box->addStretch(1);  // the caption at the top, where the table would start
    }
    // the two panes share the width in proportion to what their columns need, not half each: the
    // Collectives' seven columns lost their last one to a scroll bar (and in a report image, to
    // nothing) while the Critical path pane beside it had 200 px to spare (tester50 F3); a report
    // widens its image when even that cannot show them (report_layout.h columns_cut)
    paths->addLayout(box, m->rowCount() == 0 ? 1 : std::max(1, table_content_width(view)));
    view->setProperty("report_every_column", true);  // report_layout.h columns_cut
  };
  add_table(new CriticalPathModel(st, s), "critical_path",
            (st.whole_trace ? QString("<b>Critical path</b>: what bounded the whole trace")
                            : QString("<b>Critical path</b>: what bounded the steps")) +
                (st.critical_path_ns > 0 ? ", " + critical_path_total_text(st) : QString()),
            "Walked back from the op that ended each step last; an op waits for the op of its rank that ended last "
            "before it started (or the op it was launched from), a collective for its last member (dependencies "
            "inferred). Summed over the measured steps.");
  add_table(new CollectiveTimesModel(st, s), "collectives",
            st.whole_trace ? "<b>Collectives</b> over the whole trace, summed over ranks"
                           : "<b>Collectives</b> per step, summed over ranks",
            "bytes sent: what the ranks sent to their peers (as the rank table's; a ring all-reduce of B bytes on "
            "n ranks sends 2(n-1)/n x B per rank, B itself at n = 2; in whole elements, 2(n-1) x B over the ranks), "
            "bytes received apart; exposed: time with no "
            "compute under it on its rank; waiting for peers: time from a rank joining a collective to its last "
            "member joining; NAME/split_check: Embedscope's all-gather of the split sizes before each all-to-all "
            "and reduce-scatter (TorchRec runs none), its count and bytes not in NAME's row, its time in NAME's");
  fit_to_rows(table);
  if (s.meta(sessions::meta::kImportFormat) == "torch_memory_snapshot") {  // its allocator's figures, no ops (tester34 D18)
    for (int c : {RankStatsModel::Compute, RankStatsModel::Comm, RankStatsModel::ExposedComm, RankStatsModel::Idle,
                  RankStatsModel::Overlap, RankStatsModel::IdsLookedUp, RankStatsModel::BytesSent, RankStatsModel::BytesReceived})
      table->setColumnHidden(c, true);
  } else if (!origin.isEmpty()) {  // a trace has no embedding lookups or allocator counters of Embedscope's own
    for (int c : {RankStatsModel::IdsLookedUp, RankStatsModel::BytesSent, RankStatsModel::BytesReceived,
                  RankStatsModel::PeakAllocated, RankStatsModel::PeakReserved, RankStatsModel::Fragmentation})
      table->setColumnHidden(c, true);
  }
  if (st.steps == 0 && !st.whole_trace) {  // no step windows: zeros in the time columns would read as measured (tester37 #12)
    for (int c : {RankStatsModel::Compute, RankStatsModel::Comm, RankStatsModel::ExposedComm, RankStatsModel::Idle,
                  RankStatsModel::Overlap})
      table->setColumnHidden(c, true);
    // a trace without profiler steps: nothing is left in the table but the rank
    if (!origin.isEmpty() && s.meta(sessions::meta::kImportFormat) != "torch_memory_snapshot") table->hide();
  }
  layout->addWidget(label);
  if (const QString problems = import_problems_text(s); !problems.isEmpty()) {
    auto* p = new QLabel(problems, page);
    p->setObjectName("import_problems");
    p->setWordWrap(true);
    p->setTextInteractionFlags(Qt::TextSelectableByMouse);
    p->setToolTip("What the import could not read as it was, and what it did with it (the session's import_stats "
                  "table; Perfetto's stats table is the model). Events that did not end are kept as zero-length ops "
                  "named '... (did not end)', drawn on the timeline with an open arrow.");
    layout->addWidget(p);
  }
  if (flight) layout->addWidget(flight);
  layout->addWidget(table, 1);
  add_category_table(layout, page, st, !origin.isEmpty());  // where the time goes, as stats (tester63a F4)
  if (!figures.kernels.empty()) {  // HTA's figures of the GPU kernels, beside the thread-level ones above
    auto* kernels_caption = new QLabel(
        QString("<b>GPU kernels</b> (Holistic Trace Analysis' definitions; %1%2): "
                "overlap = computation kernels running during communication kernels / communication kernel time; "
                "idle = first to last kernel minus the union of all kernels")
            .arg(figures.kernels.front().last_step_rule ? "last profiler step dropped, as HTA does"
                                                        : "every GPU event counted: fewer than two profiler steps")
            .arg(figures.kernels.front().microsecond_rounding ? "; times rounded to whole us as HTA rounds them" : ""),
        page);
    kernels_caption->setObjectName("gpu_kernels_caption");
    kernels_caption->setWordWrap(true);  // one unwrapped line made every report page 1,796 px wide (tester45 F12.8)
    layout->addWidget(kernels_caption);
    auto* kernels = new QTableView(page);
    kernels->setModel(new GpuKernelsModel(std::move(figures.kernels), kernels));
    kernels->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    kernels->verticalHeader()->hide();
    kernels->verticalHeader()->setDefaultSectionSize(kernels->fontMetrics().height() + 6);
    fit_to_rows(kernels);
    layout->addWidget(kernels, 1);
  }
  // each rank's waits for its peers and the GPU kernel breakdown: `stats`' tables (summary_peer_tables.h)
  add_peer_and_kernel_tables(layout, page, st, std::move(figures.breakdown), std::move(figures.kernel_names));
  layout->addLayout(paths, 1);
  // a rebalanced run: the plan it ended with, and what its planned / peak columns compare
  const bool no_plan = plan_model->rowCount() == 0;
  // the steps its figures cover: stats' window, the drain steps of a pipeline left out (tester60a F12)
  const QString window = counted_steps_caption(st);
  const QString plan_caption =
      no_plan ? QString("<b>Sharding plan</b>: none in this session (%1)")
                    .arg(s.meta(sessions::meta::kImported) == "1"
                             ? "a trace records what ran, not the embedding tables and where they were placed"
                             : "the run stored no plan")
      : plan_model->plan_changes() == 0
          ? QString(plan_model->lm()
                        ? "<b>Sharding plan</b>: per rank the shards it holds, its planned and peak memory, the ids it "
                          "looked up and the bytes its collectives received and sent (every rank all-reduces or "
                          "reduce-scatters the whole [tokens x hidden] partial sum, whatever ids it held; %1)"
                        : "<b>Sharding plan</b>: per rank the shards it holds, its planned and peak memory, and the ids "
                          "and bytes its lookups took in and gave out (%1)")
                .arg(window)
          : QString("<b>Sharding plan as the run ended</b>, after %1 live rebalance(s) that changed it (the Load view "
                    "shows the plan over time): per rank the shards it ended with, this plan's planned memory, the "
                    "peak over the run (compared with the estimate of the plan in force when it happened: its "
                    "tooltip says when), and the ids and bytes its lookups took in and gave out (%2; a "
                    "shard counts the steps it spent on that rank)")
                .arg(plan_model->plan_changes())
                .arg(window);
  auto* plan_label = new QLabel(plan_caption, page);
  plan_label->setObjectName("sharding_plan_caption");
  plan_label->setWordWrap(true);
  layout->addWidget(plan_label);
  if (no_plan) plan->hide();  // no empty table under the sentence
  else layout->addWidget(plan, 2);
  // how the tables are stored, when any is compressed, hashed, low rank or off the device: the
  // block `embedscope stats` prints, from the same analysis (tester42 F11)
  auto* storage = new TableStorageModel(sessions::table_storage_rows(s.meta(sessions::meta::kTableStorageJson, "[]"), st.steps), page);
  if (storage->worth_showing()) {
    auto* caption = new QLabel("<b>Table storage</b>: how each table is stored (bytes over all ranks), the stored rows' "
                               "error against their fp32 values, hash collisions per measured step and the device "
                               "cache's hit rate, as <tt>embedscope stats</tt> prints them",
                               page);
    caption->setObjectName("table_storage_caption");
    caption->setWordWrap(true);
    auto* view = new QTableView(page);
    view->setObjectName("table_storage");
    view->setModel(storage);
    view->verticalHeader()->hide();
    view->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    view->setMinimumHeight(80);
    layout->addWidget(caption);
    layout->addWidget(view, 1);
  }
  return page;
}
}  // namespace

SummaryView::SummaryView(std::shared_ptr<const sessions::SessionReader> session, QWidget* parent)
    : QWidget(parent), session_(std::move(session)), job_(new AnalysisJob(this)),
      status_(new QLabel("Analysing the session (step times, overlap, critical path)...", this)) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  status_->setAlignment(Qt::AlignCenter);
  status_->setWordWrap(true);
  layout->addWidget(status_);
  job_->start<SummaryFigures>(
      [file = session_->path()] {
        const sessions::SessionReader reader(file);
        SummaryFigures f{sessions::analyze(reader), sessions::gpu_kernel_figures(reader),
                         sessions::analyze_flight_records(reader), rebalances_brief(reader), {}, {}, {}, {}};
        f.gpu_lines = sessions::gpu_run_text(reader, f.stats);
        f.breakdown = sessions::gpu_kernel_breakdown(reader);
        for (const auto& k : f.breakdown.kernels) f.kernel_names.push_back(reader.name(k.name_id));
        if (reader.meta(sessions::meta::kImportFormat) == "torch_memory_snapshot") {
          for (auto& e : reader.memory_events())
            if (e.action == "oom") f.ooms.push_back(std::move(e));
          std::map<int32_t, double> at_peak;
          const auto memory = sessions::analyze_memory(reader);
          f.recorded_oom = sessions::recorded_oom_text(reader, memory);
          for (const auto& m : memory)
            if (m.entries > 0) at_peak[m.rank] = m.at_peak.external_fragmentation;
          bool all = true;
          for (const auto& r : f.stats.ranks) all = all && at_peak.count(r.rank) > 0;
          if (all) {
            for (auto& r : f.stats.ranks) r.fragmentation = at_peak[r.rank];
            f.fragmentation_label = "fragmentation at peak allocated";
          } else {
            f.fragmentation_label = "fragmentation at the dump";
          }
        }
        return f;
      },
      [this](SummaryFigures& stats) {
        delete status_;
        status_ = nullptr;
        // the page scrolls inside its tab below its panes' minimum heights, as Load and Memory
        // (tester63a F5), rather than squeeze the tables to 2 rows
        auto* scroll = new QScrollArea(this);
        scroll->setObjectName("summary_page_scroll");
        scroll->setFrameShape(QFrame::NoFrame);
        scroll->setWidgetResizable(true);
        scroll->setWidget(summary_page(*session_, std::move(stats), scroll));
        this->layout()->addWidget(scroll);
      },
      [this](const QString& error) { status_->setText(error); });
}

}  // namespace embedscope::ui

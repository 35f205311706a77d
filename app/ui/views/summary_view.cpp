#include "views/summary_view.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QTableView>
#include <QTreeView>
#include <QVBoxLayout>

#include <utility>

#include "core/timeline_math.h"
#include "jobs/analysis_job.h"
#include "embedscope/sessions/analysis/analysis.h"
#include "models/critical_path_model.h"
#include "models/rank_stats_model.h"
#include "models/sharding_plan_model.h"
#include "embedscope/sessions/model/metadata_keys.h"

namespace embedscope::ui {

namespace {
QWidget* summary_page(const sessions::SessionReader& s, sessions::RunStats stats, QWidget* parent) {
  auto* page = new QWidget(parent);
  auto* layout = new QVBoxLayout(page);
  auto* model = new RankStatsModel(std::move(stats), page);
  const auto& st = model->stats();
  QString text = QString("<b>%1</b> on %2 ranks, %3, %4 pipeline (qcomms forward %5, backward %6) &nbsp; <b>%7</b>%8<br>")
                     .arg(QString::fromStdString(s.meta(sessions::meta::kWorkloadName)))
                     .arg(st.ranks.size())
                     .arg(QString::fromStdString(s.meta(sessions::meta::kBackend)))
                     .arg(QString::fromStdString(s.meta(sessions::meta::kPipeline, "base")))
                     .arg(QString::fromStdString(s.meta(sessions::meta::kQcommsForwardPrecision, "fp32")))
                     .arg(QString::fromStdString(s.meta(sessions::meta::kQcommsBackwardPrecision, "fp32")))
                     .arg(QString::fromStdString(st.ended))
                     .arg(st.simulated ? " &nbsp; <b>SIMULATED</b>" : "");
  if (st.steps == 0) text += "no measured steps: nothing to analyse (the run ended before its first measured step)";
  if (st.steps > 0)
    text += QString("%1 measured steps: step time mean %2, p50 %3, p99 %4; %5 samples/s<br>"
                    "overlap %6 %; exposed communication %7 per rank; imbalance (ids looked up max/mean) %8")
                .arg(st.steps)
                .arg(QString::fromStdString(format_duration(static_cast<int64_t>(st.step_time_ns.mean))))
                .arg(QString::fromStdString(format_duration(st.step_time_ns.p50)))
                .arg(QString::fromStdString(format_duration(st.step_time_ns.p99)))
                .arg(st.samples_per_s, 0, 'f', 0)
                .arg(st.overlap_pct, 0, 'f', 1)
                .arg(QString::fromStdString(format_duration(st.exposed_comm_ns)))
                .arg(st.lookups_max_over_mean, 0, 'f', 2);
  if (!s.meta(sessions::meta::kEndMessage).empty()) text += "<br>" + QString::fromStdString(s.meta(sessions::meta::kEndMessage)).toHtmlEscaped();
  auto* label = new QLabel(text, page);
  label->setWordWrap(true);
  label->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* table = new QTableView(page);
  table->setModel(model);
  table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table->verticalHeader()->hide();  // the rank column says it
  table->verticalHeader()->setDefaultSectionSize(table->fontMetrics().height() + 6);
  auto* plan = new QTreeView(page);
  plan->setModel(new ShardingPlanModel(s, st, plan));
  plan->setAlternatingRowColors(true);
  plan->expandAll();
  plan->header()->setSectionResizeMode(QHeaderView::ResizeToContents);
  plan->header()->setStretchLastSection(false);
  // what bounded the steps, and what each collective cost (the tables of `embedscope stats`)
  auto* paths = new QHBoxLayout;
  auto add_table = [&](QAbstractItemModel* m, const QString& title, const QString& tip) {
    auto* box = new QVBoxLayout;
    auto* caption = new QLabel(title, page);
    caption->setToolTip(tip);
    auto* view = new QTableView(page);
    view->setModel(m);
    m->setParent(view);
    view->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    view->verticalHeader()->hide();
    view->verticalHeader()->setDefaultSectionSize(view->fontMetrics().height() + 6);
    box->addWidget(caption);
    box->addWidget(view);
    paths->addLayout(box, 1);
  };
  add_table(new CriticalPathModel(st, s), "<b>Critical path</b>: what bounded the steps",
            "Walked back from the op that ended each step last; an op waits for the op of its rank that ended last "
            "before it started (or the op it was launched from), a collective for its last member (dependencies "
            "inferred). Summed over the measured steps.");
  add_table(new CollectiveTimesModel(st, s), "<b>Collectives</b> per step, summed over ranks",
            "exposed: time with no compute under it on its rank; waiting for peers: time from a rank joining a "
            "collective to its last member joining");
  layout->addWidget(label);
  layout->addWidget(table, 1);
  layout->addLayout(paths, 1);
  layout->addWidget(new QLabel("<b>Sharding plan</b>: per rank the shards it holds, its planned and peak memory, and the ids "
                               "and bytes its lookups took in and gave out (measured steps)", page));
  layout->addWidget(plan, 2);
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
  job_->start<sessions::RunStats>(
      [file = session_->path()] { return sessions::analyze(sessions::SessionReader(file)); },
      [this](sessions::RunStats& stats) {
        delete status_;
        status_ = nullptr;
        this->layout()->addWidget(summary_page(*session_, std::move(stats), this));
      },
      [this](const QString& error) { status_->setText(error); });
}

}  // namespace embedscope::ui

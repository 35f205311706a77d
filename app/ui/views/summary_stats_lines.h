#pragma once
// The `embedscope stats` figures that answer "why is it slow" (tester63a F4: the Summary left them
// out): the time by op category, the lookup-time imbalance, the held-out AUC and loss, and the
// critical path's total. Each is worded and rounded as `stats` prints it, from the same fields of
// sessions::analyze (and the session's held_out_json) that `stats --json` writes.

#include <QString>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/store/session.h"

class QAbstractItemModel;
class QObject;
class QVBoxLayout;
class QWidget;

namespace embedscope::ui {

/// "lookup time max/mean 2.20" (RunStats::lookup_time_max_over_mean, 2 decimals as `stats`), or
/// "lookup time not recorded (no rank's load counters hold a lookup time)".
QString lookup_time_imbalance_text(const sessions::RunStats& st);

/// The held-out line of `stats` from the session's held_out_json: "held-out AUC 0.5263, loss 0.6081
/// on 8192 samples (2138 positive) of 4 generated batches training never saw", "held-out not
/// evaluated: REASON", or "" when the session has none (an import, an lm_embedding run).
QString held_out_line(const sessions::SessionReader& s);

/// The critical path's total as `stats` heads its table: "2691.95 ms over 10 steps" (format_ms of
/// RunStats::critical_path_ns; the counted steps), "2691.95 ms" for a whole trace; "" without one.
QString critical_path_total_text(const sessions::RunStats& st);

/// `stats`' "time by op category" table: one row per category with time (sessions::OpCategory
/// order, categories of 0 ns left out), columns "category", "summed over R ranks x N steps" (ms,
/// format_ms) and "per rank and step" (format_duration of the sum / (ranks x counted steps)); a
/// whole trace: "summed over R ranks" and "per rank". Values in Qt::UserRole: the ns.
QAbstractItemModel* category_times_model(const sessions::RunStats& st, QObject* parent);

/// The caption above category_times_model, as `stats` heads it ("time by op category (union per
/// category on each rank): summed over 4 ranks x 10 measured steps, and per rank and step").
QString category_times_caption(const sessions::RunStats& st, bool imported);

/// Adds the caption (object name "category_times_caption") and the table ("category_times", as tall
/// as its rows, as wide as its columns, on the left) of category_times_model to `layout`; nothing
/// when no category has time (a memory snapshot).
void add_category_table(QVBoxLayout* layout, QWidget* page, const sessions::RunStats& st, bool imported);

}  // namespace embedscope::ui

#pragma once
// The summary page of a session: how the run went (workload, ranks, backend, pipeline, how it
// ended), the `embedscope stats` figures, per-rank times (RankStatsModel), what bounded the
// steps (CriticalPathModel, CollectiveTimesModel) and the sharding plan with per-rank memory
// and load (ShardingPlanModel).

#include <QWidget>

#include "embedscope/sessions/session.h"

namespace embedscope::ui {

/// Builds the summary page of `s` as a child of `parent` (sessions::analyze runs once, here).
/// Throws sessions::SessionError on an unreadable file.
QWidget* summary_page(const sessions::SessionReader& s, QWidget* parent);

}  // namespace embedscope::ui

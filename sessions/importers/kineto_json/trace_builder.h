#pragma once
// From parsed rank traces to session records: lane numbers, steps, launch joins, categories,
// collective records; written through a SessionWriter.

#include <vector>

#include "embedscope/sessions/importers/common/import_problems.h"
#include "embedscope/sessions/importers/importer.h"
#include "importers/kineto_json/trace_model.h"

namespace embedscope::sessions::importers::kineto {

/// The trace ts (ns) of session time 0: the earliest event or step of any rank, rounded down to
/// a whole microsecond (so HTA's microsecond rounding of session times stays exact); 0 when
/// there are no events.
int64_t session_origin_ns(const std::vector<RankTrace>& ranks);

/// Writes every rank of `ranks` (ranks already unique) with times shifted by `origin_ns`, and
/// fills the summary's ranks, event counts and time range. Problems met here (partially
/// overlapping spans, too many lanes) go to `problems`.
void write_ranks(const std::vector<RankTrace>& ranks, const Interner& names, int64_t origin_ns, SessionWriter& w,
                 ImportProblems& problems, ImportSummary& summary);

}  // namespace embedscope::sessions::importers::kineto

#pragma once
// One Chrome-trace file that holds several ranks as processes named "rank N": what Embedscope's
// own export writes (`embedscope export --format chrome`, sessions/exporters/export.h), and what
// a user gets back after filtering that trace in Perfetto. Kineto writes one file per rank with
// distributedInfo.rank instead; without this, such a file was imported as one rank holding every
// rank's lanes, with no steps (tester42 F28).

#include <vector>

#include "embedscope/sessions/importers/common/import_problems.h"
#include "importers/kineto_json/trace_model.h"

namespace embedscope::sessions::importers::kineto {

/// The rank N of a process named "rank N" or "rank N (simulated)" (N a decimal integer in [0,
/// 2^31)); -1 for any other name.
int32_t rank_of_process_name(const std::string& name);

/// Splits `trace` into one RankTrace per process when it has no distributedInfo.rank and every
/// process its events are on is named "rank N" (process_name metadata) with a distinct N: each
/// part takes rank N (rank_known; categories_from_cat: host ops keep the category their `cat`
/// names, as the session had them), the events, lanes (renumbered), ProfilerStep#N windows and
/// record_param_comms args of that process, and the file's other fields. Lanes that held only
/// ProfilerStep spans (the export's step row) are left out: they become the rank's steps, as in
/// Kineto. Counts the info problem `ranks_from_process_names` naming the file and the ranks.
/// Otherwise returns `trace` alone, unchanged. Example: pids 0..3 named "rank 0".."rank 3", 286
/// X events each -> 4 traces of ranks 0..3.
std::vector<RankTrace> split_rank_processes(RankTrace&& trace, ImportProblems& problems);

}  // namespace embedscope::sessions::importers::kineto

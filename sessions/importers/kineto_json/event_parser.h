#pragma once
// The second pass: each framed event parsed on its own with simdjson On-Demand into a
// kineto::Event of its rank (trace_model.h). A bad event (invalid UTF-8, unescaped control
// bytes, broken JSON, a timestamp that is not a number) is skipped and counted with its line and
// column; nothing here throws for bad input.

#include <string>

#include "embedscope/sessions/importers/common/import_problems.h"
#include "importers/kineto_json/trace_model.h"

namespace embedscope::sessions::importers::kineto {

/// Reads one Kineto trace file (`.json` or gzip). Throws std::runtime_error only when the file
/// cannot be read at all; everything else is an import problem in `problems`.
RankTrace parse_trace_file(const std::string& path, Interner& names, ImportProblems& problems);

}  // namespace embedscope::sessions::importers::kineto

#include "embedscope/sessions/analysis/recorded_run.h"

#include <cerrno>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/model/metadata_keys.h"

namespace embedscope::sessions {

namespace {
/// A positive decimal integer that fills `text`; 0 otherwise.
int64_t positive_or_zero(const std::string& text) {
  if (text.empty()) return 0;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  return errno == 0 && end && *end == '\0' && v > 0 ? static_cast<int64_t>(v) : 0;
}
}  // namespace

RecordedRun recorded_run(const SessionReader& session) {
  RecordedRun r;
  const auto w = nlohmann::json::parse(session.meta(meta::kWorkloadJson), nullptr, false);
  const bool workload = w.is_object();
  r.pipeline = session.meta(meta::kPipeline);
  if (r.pipeline.empty() && workload && w.contains("pipeline") && w["pipeline"].is_string())
    r.pipeline = w["pipeline"].get<std::string>();  // sessions without the key: their workload's
  if (workload && w.contains("steps") && w["steps"].is_number_integer())
    r.planned_steps = std::max<int64_t>(0, w["steps"].get<int64_t>());
  else
    r.planned_steps = positive_or_zero(session.meta(meta::kExportedRunPlannedSteps));
  const std::string exported_ended = session.meta(meta::kExportedRunEnded);
  r.exported = session.meta(meta::kImported) == "1" && !exported_ended.empty();
  r.ended = r.exported ? exported_ended : session.status();
  r.end_message = session.meta(r.exported ? meta::kExportedRunEndMessage : meta::kEndMessage);
  return r;
}

}  // namespace embedscope::sessions

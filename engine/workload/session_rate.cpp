#include "embedscope/engine/workload/session_rate.h"

#include <nlohmann/json.hpp>

#include "embedscope/sessions/model/metadata_keys.h"

namespace embedscope::engine {

std::optional<LmWorkloadSpec> lm_workload_of(const sessions::SessionReader& s) {
  const auto wj = nlohmann::json::parse(s.meta(sessions::meta::kWorkloadJson, ""), nullptr, false);
  if (!wj.is_object() || !is_lm_workload(wj)) return std::nullopt;
  try {
    return parse_stored_lm_workload(wj, "workload_json");
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

sessions::SessionRate throughput_of(const sessions::SessionReader& s, const sessions::RunStats& st) {
  if (s.meta(sessions::meta::kImported) == "1") return {0, "", 0};
  if (const auto lm = lm_workload_of(s))
    return {st.step_time_ns.mean > 0 ? static_cast<double>(lm->tokens_per_step()) / (st.step_time_ns.mean * 1e-9) : 0.0,
            "tokens", lm->tokens_per_step()};
  return {st.samples_per_s, "samples", st.samples_per_step};
}

}  // namespace embedscope::engine

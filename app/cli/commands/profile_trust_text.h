#pragma once
// What run / plan / scaling say beside a simulated step time about how far to trust it
// (engine cost/profile_trust.h): a calibrated profile's error band, and a profile's assumed figures
// with the range the step takes when they move (the simulator run again on assumption_corner).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "embedscope/engine/cost/hardware_profile.h"

namespace embedscope::cli {

/// A simulated step's trust, for text and JSON.
struct StepTrust {
  std::optional<std::pair<int64_t, int64_t>> measured_band;   ///< measured_step_band of the step, ns
  std::optional<std::pair<int64_t, int64_t>> assumed_range;   ///< the step on the fast and slow corners, ns
};

/// The step `p50_ns` simulated with `hw`: its measured band and, when `hw` has assumed figures and
/// `p50_on` is given, the step p50 `p50_on` returns for each assumption_corner (fast, slow).
StepTrust step_trust(const engine::HardwareProfile& hw, int64_t p50_ns,
                     const std::function<int64_t(const engine::HardwareProfile&)>& p50_on);

/// The lines run prints under "throughput", each starting with a 13-column label ("profile",
/// "assumed"); "" when the profile is neither calibrated nor has assumed figures. `what` names the
/// figure the range is of ("step p50"; plan --auto: "critical path").
std::string step_trust_text(const engine::HardwareProfile& hw, const StepTrust& t, const std::string& what = "step p50");

/// profile_trust_json(hw) with "measured_step_band_ns" and "assumption_step_range_ns" ([low, high]
/// or null).
nlohmann::json step_trust_json(const engine::HardwareProfile& hw, const StepTrust& t);

/// The profile written to a temporary JSON file (TMPDIR, named after `tag` and this process) for
/// the simulator to load; the caller removes it. Throws SpecError when it cannot be written.
std::string write_temporary_profile(const engine::HardwareProfile& hw, const std::string& tag);

}  // namespace embedscope::cli

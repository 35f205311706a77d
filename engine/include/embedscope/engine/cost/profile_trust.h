#pragma once
// How far to trust a simulated figure made with a hardware profile:
//  - a calibrated profile's record of its fit (JSON "fit_quality", written by embedscope calibrate,
//    cost/calibration.h): the step-time errors of its checks (in-sample: its own calibration runs;
//    held-out: --check runs), the fitted values that ended at their search bound, the warnings;
//  - a profile's assumed figures: the fields whose "sources" citation starts with "assumption"
//    (the built-in GPU profiles' kernel efficiencies, launch and link latencies: never checked on
//    a GPU), and the same profile with each of them moved by a factor kAssumptionFactor either
//    way (assumption_corner), which the simulator runs again to give the range a step takes.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "embedscope/engine/cost/hardware_profile.h"

namespace embedscope::engine {

/// Relative step-time errors (simulated - measured) / measured of some checks: their count, least
/// and largest (0, 0 without checks).
struct ErrorRange {
  int runs = 0;
  double min = 0, max = 0;
};

/// A calibrated profile's fit_quality as its users need it.
struct ProfileErrorBand {
  ErrorRange in_sample;  ///< the profile against its own calibration runs
  ErrorRange held_out;   ///< against the runs given with --check
  int warnings = 0;      ///< calibrate's warnings about the fit
  /// JSON pointers of fitted values at their search bound (not determined by the data), e.g. "/cpu/sync_lag_ns"
  std::vector<std::string> at_bound;
  bool forced = false;   ///< written with --force though the fit was undetermined
};

/// The profile's fit_quality read; nullopt when it has none. Throws SpecError "ORIGIN:
/// /fit_quality/step_error/in_sample/min: must be a number" naming the field of a malformed one.
std::optional<ProfileErrorBand> profile_error_band(const HardwareProfile& hw, const std::string& origin = "profile");

/// Throws what profile_error_band throws (parse_hardware_profile calls it on a "fit_quality").
void check_fit_quality(const HardwareProfile& hw, const std::string& origin);

/// One line for people: "profile this_machine (calibrated): its simulated step missed its 4
/// calibration runs by -23.5% .. +148.8% and 9 held-out runs by -58.9% .. +73.8%; 10 warnings at
/// calibrate; at its search bound (not determined by the data): /cpu/sync_lag_ns"; "" without a
/// fit_quality.
std::string error_band_text(const HardwareProfile& hw);

/// The measured step a simulated one of `simulated_ns` stands for by the profile's error band:
/// measured = simulated / (1 + error), over every check (in-sample and held-out), {low, high} ns;
/// nullopt without checks or when an error is <= -100%.
std::optional<std::pair<int64_t, int64_t>> measured_step_band(const HardwareProfile& hw, int64_t simulated_ns);

/// The factor assumed figures are moved by, either way: efficiencies x 0.5 .. x 2 (at most 1),
/// latencies and launch x 2 .. x 0.5, assumed rates x 0.5 .. x 2.
inline constexpr double kAssumptionFactor = 2.0;

/// The JSON pointers of the profile's assumed figures this band moves: those of the fields below
/// whose sources citation starts with "assumption" (case-insensitive): /gpu/dense_efficiency,
/// tbe_forward_efficiency, tbe_backward_efficiency, memory_kernel_efficiency, dense_bf16_efficiency,
/// dense_tf32_efficiency, kernel_launch_ns, hbm_bandwidth_bytes_per_s, dense_flops_per_s,
/// /intra_node, /inter_node, /host_link latency_ns and bus_bandwidth_bytes_per_s. Sorted.
std::vector<std::string> assumed_figures(const HardwareProfile& hw);

/// The profile with every assumed figure moved by kAssumptionFactor: slow, each to its slower end
/// (efficiencies and rates / 2, latencies x 2); else to its faster end (efficiencies x 2 capped at
/// 1, rates x 2, latencies / 2). Name and sources kept; fit_quality dropped.
HardwareProfile assumption_corner(const HardwareProfile& hw, bool slow);

/// "h100_sxm: 11 of its figures are assumptions, not measurements (/gpu/dense_efficiency, ...);
/// its simulated times have not been checked against a GPU run" - "" without assumed figures.
std::string assumptions_text(const HardwareProfile& hw);

/// "with each assumed figure x0.5 .. x2 (efficiencies at most 1): 0.32 .. 0.58 ms"
std::string assumption_range_text(int64_t low_ns, int64_t high_ns);

/// {"assumed_figures": [...], "assumption_factor": 2, "error_band": {"in_sample": {"runs", "min",
/// "max"}, "held_out": {...}, "warnings", "at_bound", "forced"} or null, "note": the two texts above
/// joined}: what run / plan / scaling --json say of the profile.
nlohmann::json profile_trust_json(const HardwareProfile& hw);

}  // namespace embedscope::engine

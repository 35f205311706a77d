// How far to trust a simulated figure made with a hardware profile (cost/profile_trust.h).
#include "embedscope/engine/cost/profile_trust.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "embedscope/engine/workload/spec_error.h"

namespace embedscope::engine {

namespace {

using nlohmann::json;

// How an assumed figure moves: an efficiency (a fraction <= 1), a time, or a rate.
enum class Kind { efficiency, time, rate };

struct Movable {
  const char* pointer;
  Kind kind;
};

constexpr Movable kMovable[] = {
    {"/gpu/dense_efficiency", Kind::efficiency},         {"/gpu/tbe_forward_efficiency", Kind::efficiency},
    {"/gpu/tbe_backward_efficiency", Kind::efficiency},  {"/gpu/memory_kernel_efficiency", Kind::efficiency},
    {"/gpu/dense_bf16_efficiency", Kind::efficiency},    {"/gpu/dense_tf32_efficiency", Kind::efficiency},
    {"/gpu/kernel_launch_ns", Kind::time},               {"/gpu/hbm_bandwidth_bytes_per_s", Kind::rate},
    {"/gpu/dense_flops_per_s", Kind::rate},              {"/intra_node/latency_ns", Kind::time},
    {"/inter_node/latency_ns", Kind::time},              {"/host_link/latency_ns", Kind::time},
    {"/intra_node/bus_bandwidth_bytes_per_s", Kind::rate}, {"/inter_node/bus_bandwidth_bytes_per_s", Kind::rate},
    {"/host_link/bus_bandwidth_bytes_per_s", Kind::rate},
};

bool is_assumption(const std::string& citation) {
  const std::string_view word = "assumption";
  if (citation.size() < word.size()) return false;
  for (size_t i = 0; i < word.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(citation[i])) != word[i]) return false;
  return true;
}

// The field of `hw` a movable pointer names: an efficiency / rate (double) or a time (int64).
double* double_field(HardwareProfile& hw, const std::string& p) {
  if (p == "/gpu/dense_efficiency") return &hw.gpu.dense_efficiency;
  if (p == "/gpu/tbe_forward_efficiency") return &hw.gpu.tbe_forward_efficiency;
  if (p == "/gpu/tbe_backward_efficiency") return &hw.gpu.tbe_backward_efficiency;
  if (p == "/gpu/memory_kernel_efficiency") return &hw.gpu.memory_kernel_efficiency;
  if (p == "/gpu/dense_bf16_efficiency") return &hw.gpu.dense_bf16_efficiency;
  if (p == "/gpu/dense_tf32_efficiency") return &hw.gpu.dense_tf32_efficiency;
  if (p == "/gpu/hbm_bandwidth_bytes_per_s") return &hw.gpu.hbm_bandwidth_bytes_per_s;
  if (p == "/gpu/dense_flops_per_s") return &hw.gpu.dense_flops_per_s;
  if (p == "/intra_node/bus_bandwidth_bytes_per_s") return &hw.intra_node.bus_bandwidth_bytes_per_s;
  if (p == "/inter_node/bus_bandwidth_bytes_per_s") return &hw.inter_node.bus_bandwidth_bytes_per_s;
  if (p == "/host_link/bus_bandwidth_bytes_per_s") return &hw.host_link.bus_bandwidth_bytes_per_s;
  return nullptr;
}

int64_t* time_field(HardwareProfile& hw, const std::string& p) {
  if (p == "/gpu/kernel_launch_ns") return &hw.gpu.kernel_launch_ns;
  if (p == "/intra_node/latency_ns") return &hw.intra_node.latency_ns;
  if (p == "/inter_node/latency_ns") return &hw.inter_node.latency_ns;
  if (p == "/host_link/latency_ns") return &hw.host_link.latency_ns;
  return nullptr;
}

// fit_quality/step_error/<which>: {"runs", "min", "max"}, absent = no runs
ErrorRange read_range(const json& fq, const char* which, const std::string& origin) {
  ErrorRange r;
  if (!fq.contains("step_error") || !fq.at("step_error").is_object() || !fq.at("step_error").contains(which)) return r;
  const json& e = fq.at("step_error").at(which);
  const std::string where = fmt::format("{}: /fit_quality/step_error/{}", origin, which);
  if (!e.is_object()) throw SpecError(where + ": must be an object {\"runs\", \"min\", \"max\"}");
  for (const char* k : {"runs", "min", "max"})
    if (!e.contains(k) || !e.at(k).is_number())
      throw SpecError(fmt::format("{}/{}: must be a number", where, k));
  r.runs = e.at("runs").get<int>();
  r.min = e.at("min").get<double>();
  r.max = e.at("max").get<double>();
  if (r.runs < 0 || r.min > r.max) throw SpecError(where + ": runs must be >= 0 and min <= max");
  return r;
}

std::string range_text(const ErrorRange& r) {
  return fmt::format("{:+.1f}% .. {:+.1f}%", 100 * r.min, 100 * r.max);
}

}  // namespace

std::optional<ProfileErrorBand> profile_error_band(const HardwareProfile& hw, const std::string& origin) {
  if (hw.fit_quality_json.empty()) return std::nullopt;
  const json fq = json::parse(hw.fit_quality_json, nullptr, false);
  if (!fq.is_object()) throw SpecError(origin + ": /fit_quality: must be an object");
  ProfileErrorBand b;
  b.in_sample = read_range(fq, "in_sample", origin);
  b.held_out = read_range(fq, "held_out", origin);
  if (fq.contains("warnings")) {
    if (!fq.at("warnings").is_array()) throw SpecError(origin + ": /fit_quality/warnings: must be an array of strings");
    b.warnings = static_cast<int>(fq.at("warnings").size());
  }
  if (fq.contains("at_bound")) {
    if (!fq.at("at_bound").is_array()) throw SpecError(origin + ": /fit_quality/at_bound: must be an array");
    for (const json& a : fq.at("at_bound")) {
      if (!a.is_object() || !a.contains("field") || !a.at("field").is_string())
        throw SpecError(origin + ": /fit_quality/at_bound: each entry must be an object with a \"field\" (a JSON pointer)");
      b.at_bound.push_back(a.at("field").get<std::string>());
    }
  }
  if (fq.contains("forced")) {
    if (!fq.at("forced").is_boolean()) throw SpecError(origin + ": /fit_quality/forced: must be true or false");
    b.forced = fq.at("forced").get<bool>();
  }
  return b;
}

void check_fit_quality(const HardwareProfile& hw, const std::string& origin) { (void)profile_error_band(hw, origin); }

std::string error_band_text(const HardwareProfile& hw) {
  const auto b = profile_error_band(hw);
  if (!b) return "";
  std::string out = fmt::format("profile {} (calibrated): ", hw.name);
  if (b->in_sample.runs == 0 && b->held_out.runs == 0) {
    out += "no check of its step times recorded";
  } else {
    out += "its simulated step missed";
    if (b->in_sample.runs > 0)
      out += fmt::format(" its {} calibration run{} by {}", b->in_sample.runs, b->in_sample.runs == 1 ? "" : "s",
                         range_text(b->in_sample));
    if (b->held_out.runs > 0)
      out += fmt::format("{} {} held-out run{} by {}", b->in_sample.runs > 0 ? " and" : "", b->held_out.runs,
                         b->held_out.runs == 1 ? "" : "s", range_text(b->held_out));
  }
  if (b->warnings > 0) out += fmt::format("; {} warning{} at calibrate", b->warnings, b->warnings == 1 ? "" : "s");
  if (!b->at_bound.empty())
    out += fmt::format("; at its search bound (not determined by the data): {}", fmt::join(b->at_bound, ", "));
  if (b->forced) out += "; written with --force though the fit was undetermined";
  return out;
}

std::optional<std::pair<int64_t, int64_t>> measured_step_band(const HardwareProfile& hw, int64_t simulated_ns) {
  const auto b = profile_error_band(hw);
  if (!b || (b->in_sample.runs == 0 && b->held_out.runs == 0)) return std::nullopt;
  double lo = 1e300, hi = -1e300;
  for (const ErrorRange* r : {&b->in_sample, &b->held_out})
    if (r->runs > 0) lo = std::min(lo, r->min), hi = std::max(hi, r->max);
  if (lo <= -1.0) return std::nullopt;
  // simulated = measured x (1 + e): the largest error gives the smallest measured step
  return std::pair{std::llround(static_cast<double>(simulated_ns) / (1 + hi)),
                   std::llround(static_cast<double>(simulated_ns) / (1 + lo))};
}

std::vector<std::string> assumed_figures(const HardwareProfile& hw) {
  std::vector<std::string> out;
  for (const Movable& m : kMovable)
    if (const auto it = hw.sources.find(m.pointer); it != hw.sources.end() && is_assumption(it->second))
      out.emplace_back(m.pointer);
  std::sort(out.begin(), out.end());
  return out;
}

HardwareProfile assumption_corner(const HardwareProfile& hw, bool slow) {
  HardwareProfile out = hw;
  out.fit_quality_json.clear();
  const double f = kAssumptionFactor;
  for (const Movable& m : kMovable) {
    const auto it = hw.sources.find(m.pointer);
    if (it == hw.sources.end() || !is_assumption(it->second)) continue;
    if (m.kind == Kind::time) {
      int64_t* t = time_field(out, m.pointer);
      *t = std::llround(slow ? static_cast<double>(*t) * f : static_cast<double>(*t) / f);
    } else {
      double* v = double_field(out, m.pointer);
      if (*v <= 0) continue;  // an optional rate the profile does not give
      *v = slow ? *v / f : *v * f;
      if (m.kind == Kind::efficiency) *v = std::min(1.0, *v);
    }
  }
  return out;
}

std::string assumptions_text(const HardwareProfile& hw) {
  const std::vector<std::string> a = assumed_figures(hw);
  if (a.empty()) return "";
  return fmt::format("{}: {} of its figures are assumptions, not measurements ({}); its simulated times have not been "
                     "checked against a run on that hardware",
                     hw.name, a.size(), fmt::join(a, ", "));
}

std::string assumption_range_text(int64_t low_ns, int64_t high_ns) {
  return fmt::format("with each assumed figure x{:g} .. x{:g} (efficiencies at most 1): {:.3g} .. {:.3g} ms",
                     1 / kAssumptionFactor, kAssumptionFactor, static_cast<double>(low_ns) / 1e6,
                     static_cast<double>(high_ns) / 1e6);
}

json profile_trust_json(const HardwareProfile& hw) {
  json j = {{"assumed_figures", assumed_figures(hw)}, {"assumption_factor", kAssumptionFactor}, {"error_band", nullptr}};
  if (const auto b = profile_error_band(hw)) {
    auto range = [](const ErrorRange& r) { return json{{"runs", r.runs}, {"min", r.min}, {"max", r.max}}; };
    j["error_band"] = {{"in_sample", range(b->in_sample)}, {"held_out", range(b->held_out)}, {"warnings", b->warnings},
                       {"at_bound", b->at_bound}, {"forced", b->forced}};
  }
  std::string note = error_band_text(hw);
  if (const std::string a = assumptions_text(hw); !a.empty()) note += (note.empty() ? "" : "; ") + a;
  j["note"] = note;
  return j;
}

}  // namespace embedscope::engine

#include "embedscope/sessions/analysis/noise.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embedscope/sessions/model/held_out_key.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::sessions {

std::optional<double> auc_standard_error(double auc, int64_t positives, int64_t negatives) {
  if (positives < 1 || negatives < 1 || !(auc >= 0.0 && auc <= 1.0)) return std::nullopt;
  const double a = auc, a2 = auc * auc;
  const double q1 = a / (2.0 - a), q2 = 2.0 * a2 / (1.0 + a);
  const double np = static_cast<double>(positives), nn = static_cast<double>(negatives);
  const double var = (a * (1.0 - a) + (np - 1.0) * (q1 - a2) + (nn - 1.0) * (q2 - a2)) / (np * nn);
  return std::sqrt(std::max(0.0, var));
}

std::optional<double> held_out_auc_se(const SessionReader& session) {
  const auto h = nlohmann::json::parse(session.meta(meta::kHeldOutJson), nullptr, false);
  if (!h.is_object()) return std::nullopt;
  const auto number = [&](const char* k) { return h.contains(k) && h[k].is_number(); };
  if (!number("auc") || !number("samples") || !number("positives")) return std::nullopt;
  const auto samples = h["samples"].get<int64_t>(), positives = h["positives"].get<int64_t>();
  return auc_standard_error(h["auc"].get<double>(), positives, samples - positives);
}

AucDifference auc_difference(double auc, double se, double reference_auc, double reference_se) {
  AucDifference d;
  d.diff = auc - reference_auc;
  d.se = std::sqrt(se * se + reference_se * reference_se);
  d.within_noise = std::abs(d.diff) <= kAucNoiseSe * d.se;
  return d;
}

namespace {
std::string diff_number(double diff) {  // 4 decimals with a sign; "0" where that rounds to 0
  const std::string t = fmt::format("{:+.4f}", diff);
  return t == "+0.0000" || t == "-0.0000" ? std::string("0") : t;
}
}  // namespace

std::string auc_difference_cell(const AucDifference& d) { return diff_number(d.diff) + (d.within_noise ? " noise" : ""); }

std::string auc_difference_text(const AucDifference& d) {
  const std::string diff = diff_number(d.diff);
  return d.within_noise ? fmt::format("{} (within noise: {:g} SE = {:.4f})", diff, kAucNoiseSe, kAucNoiseSe * d.se)
                        : fmt::format("{} (> {:g} SE = {:.4f})", diff, kAucNoiseSe, kAucNoiseSe * d.se);
}

StepNoise step_time_noise(std::vector<int64_t> step_ns) {
  StepNoise n;
  n.steps = static_cast<int64_t>(step_ns.size());
  if (step_ns.empty()) return n;
  std::sort(step_ns.begin(), step_ns.end());
  n.median_ns = step_ns[(step_ns.size() - 1) / 2];
  std::vector<double> dev;
  for (const int64_t v : step_ns) dev.push_back(std::abs(static_cast<double>(v - n.median_ns)));
  std::sort(dev.begin(), dev.end());
  n.sigma_ns = 1.4826 * dev[(dev.size() - 1) / 2];
  if (n.known()) n.mean_diff_se_ns = n.sigma_ns * std::sqrt(2.0 / static_cast<double>(n.steps));
  return n;
}

bool gain_within_step_noise(double gain_ns, const StepNoise& noise) {
  return noise.known() && gain_ns <= 2.0 * noise.mean_diff_se_ns;
}

}  // namespace embedscope::sessions

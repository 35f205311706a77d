#include "embedscope/sessions/analysis/noise.h"

#include <algorithm>
#include <cmath>
#include <limits>

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

std::optional<BatchMeans> batch_means(const std::vector<int64_t>& series) {
  if (series.size() < 2) return std::nullopt;
  BatchMeans m;
  m.n = static_cast<int64_t>(series.size());
  m.batch_size = std::max<int64_t>(1, static_cast<int64_t>(std::floor(std::sqrt(static_cast<double>(m.n)))));
  // floor(sqrt(n)) can read one high for a perfect square through rounding: b^2 <= n
  while (m.batch_size > 1 && m.batch_size * m.batch_size > m.n) --m.batch_size;
  m.batches = m.n / m.batch_size;
  double sum = 0;
  for (const int64_t v : series) sum += static_cast<double>(v);
  m.mean = sum / static_cast<double>(m.n);
  std::vector<double> y(static_cast<size_t>(m.batches), 0.0);
  for (int64_t k = 0; k < m.batches; ++k) {
    for (int64_t i = 0; i < m.batch_size; ++i) y[static_cast<size_t>(k)] += static_cast<double>(series[static_cast<size_t>(k * m.batch_size + i)]);
    y[static_cast<size_t>(k)] /= static_cast<double>(m.batch_size);
  }
  double ybar = 0;
  for (const double v : y) ybar += v;
  ybar /= static_cast<double>(m.batches);
  double ss = 0;
  for (const double v : y) ss += (v - ybar) * (v - ybar);
  const double sigma2 = static_cast<double>(m.batch_size) / static_cast<double>(m.batches - 1) * ss;
  m.bm_se = std::sqrt(sigma2 / static_cast<double>(m.batches * m.batch_size));
  double dev2 = 0;
  for (const int64_t v : series) dev2 += (static_cast<double>(v) - m.mean) * (static_cast<double>(v) - m.mean);
  m.iid_se = std::sqrt(dev2 / static_cast<double>(m.n - 1) / static_cast<double>(m.n));
  m.se = std::max(m.bm_se, m.iid_se);
  m.df = static_cast<double>(m.batches - 1);
  return m;
}

double lag1_autocorrelation(const std::vector<int64_t>& series) {
  if (series.size() < 2) return 0.0;
  double m = 0;
  for (const int64_t v : series) m += static_cast<double>(v);
  m /= static_cast<double>(series.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < series.size(); ++i) {
    const double d = static_cast<double>(series[i]) - m;
    den += d * d;
    if (i + 1 < series.size()) num += d * (static_cast<double>(series[i + 1]) - m);
  }
  return den > 0 ? num / den : 0.0;
}

double white_noise_lag1_bound(int64_t n) {
  return n >= 1 ? 1.96 / std::sqrt(static_cast<double>(n)) : std::numeric_limits<double>::infinity();
}

StepNoise step_time_noise(const std::vector<int64_t>& step_ns) {
  StepNoise n;
  n.steps = static_cast<int64_t>(step_ns.size());
  if (step_ns.empty()) return n;
  std::vector<int64_t> sorted = step_ns;
  std::sort(sorted.begin(), sorted.end());
  n.median_ns = sorted[(sorted.size() - 1) / 2];
  if (!n.known()) return n;
  const std::optional<BatchMeans> m = batch_means(step_ns);  // known(): >= 3 steps, so batches
  n.mean_se_ns = m->se;
  n.batch_size = m->batch_size;
  n.mean_diff_se_ns = std::sqrt(2.0) * m->se;
  return n;
}

bool gain_within_step_noise(double gain_ns, const StepNoise& noise) {
  return noise.known() && gain_ns <= 2.0 * noise.mean_diff_se_ns;
}

double student_t_975(double df) {
  // NIST/SEMATECH e-Handbook of Statistical Methods, 1.3.6.7.2, column 0.975: df 1..30
  static constexpr double kSmall[30] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                                        2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
                                        2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  if (!(df >= 1.0)) return kSmall[0];  // nan too
  if (df < 31.0) return kSmall[static_cast<int>(std::floor(df)) - 1];
  if (df < 40.0) return kSmall[29];  // the row below: df 30's
  if (df < 60.0) return 2.021;
  if (df < 120.0) return 2.000;
  return df < std::numeric_limits<double>::infinity() ? 1.980 : 1.960;
}

WelchTest two_means_test(double mean_a, double var_a, double df_a, double mean_b, double var_b, double df_b) {
  WelchTest w;
  const double se = std::sqrt(var_a + var_b);
  const double diff = mean_b - mean_a;
  if (se > 0) {
    w.t = diff / se;
    w.df = (var_a + var_b) * (var_a + var_b) / (var_a * var_a / df_a + var_b * var_b / df_b);
  } else {  // no spread in either sample
    w.t = diff == 0 ? 0.0 : std::copysign(std::numeric_limits<double>::infinity(), diff);
    w.df = df_a + df_b;
  }
  w.critical = student_t_975(w.df);
  w.differs = std::abs(w.t) > w.critical;
  return w;
}

std::optional<WelchTest> welch_t_test(double mean_a, double sd_a, int64_t n_a, double mean_b, double sd_b, int64_t n_b) {
  if (n_a < kMinWelchSamples || n_b < kMinWelchSamples) return std::nullopt;
  const double na = static_cast<double>(n_a), nb = static_cast<double>(n_b);
  return two_means_test(mean_a, sd_a * sd_a / na, na - 1.0, mean_b, sd_b * sd_b / nb, nb - 1.0);
}

}  // namespace embedscope::sessions

#pragma once
// How far a measured figure moves by chance, so that a difference can be called "within noise":
// the held-out AUC's sampling error (tester42 F5: compressed runs "beat" fp32 by +0.06 with no
// hint of the error) and the step time's run-to-run noise (tester42 F8: `rebalance` said "worth
// it" for a 0.70 ms gain on a 149 ms step). Pure functions; the session helpers read metadata.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace embedscope::sessions {

class SessionReader;

/// Standard error of a ROC AUC estimated from `positives` positive and `negatives` negative
/// samples, by J. A. Hanley and B. J. McNeil, "The meaning and use of the area under a receiver
/// operating characteristic (ROC) curve", Radiology 143(1), 29-36 (1982), equation (2):
///   SE^2 = (A (1 - A) + (n+ - 1)(Q1 - A^2) + (n- - 1)(Q2 - A^2)) / (n+ n-),
///   Q1 = A / (2 - A),  Q2 = 2 A^2 / (1 + A)
/// (Q1: the chance that two random positives both score above a random negative; Q2: that a
/// random positive scores above two random negatives; both under the exponential model of the
/// paper). Example (tested): A 0.75, 10 positives, 20 negatives -> sqrt(0.0102589) = 0.10129.
/// nullopt when either count is < 1 or `auc` is outside [0, 1] or NaN (no AUC then).
std::optional<double> auc_standard_error(double auc, int64_t positives, int64_t negatives);

/// The held-out evaluation's AUC standard error of a session (metadata held_out_json: "auc",
/// "samples", "positives"; negatives = samples - positives). nullopt when the run was not
/// evaluated, the AUC is null, or a count is missing. Never throws (a malformed JSON is absent).
std::optional<double> held_out_auc_se(const SessionReader& session);

/// The difference of two held-out AUCs against their sampling noise.
struct AucDifference {
  double diff = 0;           ///< auc - reference_auc
  double se = 0;             ///< sqrt(se^2 + reference_se^2): the SE of the difference
  bool within_noise = true;  ///< |diff| <= kAucNoiseSe x se
};

/// Differences of at most this many standard errors read "within noise" (about a 95 % interval).
inline constexpr double kAucNoiseSe = 2.0;

/// The difference of `auc` (standard error `se`) from `reference_auc` (`reference_se`). The SE of
/// the difference treats the two AUCs as independent; runs scored on the same held-out samples
/// (every run of a scenario is) are positively correlated, so the true SE of their difference is
/// smaller (Hanley & McNeil 1983, Radiology 148(3)) and "within noise" errs on the side of not
/// claiming a difference. Example: 0.7517 (SE 0.0046) vs 0.6903 (SE 0.0048): diff 0.0614, se
/// 0.00665, not within noise; 0.6914 vs 0.6903 with the same SEs: within noise.
AucDifference auc_difference(double auc, double se, double reference_auc, double reference_se);

/// "+0.0614 (> 2 SE = 0.0133)" or "+0.0011 (within noise: 2 SE = 0.0133)"; the difference with 4
/// decimals and its sign, "0" where it rounds to 0 (then within noise).
std::string auc_difference_text(const AucDifference& d);

/// The same for a table cell: "+0.0614", "+0.0011 noise", "0 noise".
std::string auc_difference_cell(const AucDifference& d);

/// The standard error of the mean of a series whose values are not independent samples (step
/// times: the load on the machine drifts, so neighbouring steps are alike), by non-overlapping
/// batch means: J. M. Flegal and G. L. Jones, "Batch means and spectral variance estimators in
/// Markov chain Monte Carlo", Annals of Statistics 38(2), 1034-1070 (2010), section 2, with their
/// batch size b = floor(sqrt(n)). The first a x b values (a = floor(n / b) batches) form a
/// batches of b consecutive values with means Y_k; with Y their mean,
///   sigma^2_BM = b / (a - 1) x sum_k (Y_k - Y)^2,   se = sqrt(sigma^2_BM / (a x b)),
/// and a - 1 degrees of freedom. A drifting series has batch means that spread more than
/// independent values would, so its se is larger than sd / sqrt(n); for b = 1 (n < 4) it is
/// sd / sqrt(n). `se` is floored at that independent-samples SE (sd the sample standard
/// deviation of all n values): a few batches whose means happen to agree (1 slow step in each)
/// would otherwise claim no noise at all, and step times are not negatively correlated in
/// practice; the df stay a - 1. Example (tested): {10, 12, 11, 20, 22, 21, 30, 32, 31} (a drift): b 3, a 3,
/// batch means 11, 21, 31, mean 21: sigma^2_BM = 3 / 2 x 200 = 300, se sqrt(300 / 9) = 5.774
/// (the independent-samples se, sd / sqrt(9), is 2.901).
struct BatchMeans {
  int64_t n = 0;           ///< values given
  int64_t batch_size = 0;  ///< b
  int64_t batches = 0;     ///< a
  double mean = 0;         ///< the mean of all n values
  double bm_se = 0;        ///< sqrt(sigma^2_BM / (a x b)): the batch-means standard error of the mean
  double iid_se = 0;       ///< sd / sqrt(n): the standard error were the values independent
  double se = 0;           ///< max(bm_se, iid_se): the standard error used (the values' unit)
  double df = 0;           ///< a - 1
};

/// The batch means of `series` (in the order measured: step order). nullopt for fewer than 2
/// values (no batches to compare).
std::optional<BatchMeans> batch_means(const std::vector<int64_t>& series);

/// The lag-1 sample autocorrelation of `series` (in step order): with m the mean,
///   r1 = sum_{i=0}^{n-2} (x_i - m)(x_{i+1} - m) / sum_{i=0}^{n-1} (x_i - m)^2
/// (G. E. P. Box, G. M. Jenkins, G. C. Reinsel and G. M. Ljung, "Time Series Analysis:
/// Forecasting and Control", 5th ed., Wiley 2015, section 2.1.5, r_k at k = 1). 0 for fewer than
/// 2 values or values without spread. Example (tested): 100, 101, ..., 109 (a steady climb): 57.75
/// / 82.5 = 0.7; {100, 120, 80, 110, 90}: -700 / 1000 = -0.7.
double lag1_autocorrelation(const std::vector<int64_t>& series);

/// The bound within which the lag-1 autocorrelation of `n` independent values falls 95 % of the
/// time, 1.96 / sqrt(n) (Bartlett's approximation r_k ~ N(0, 1 / n) for white noise: P. J.
/// Brockwell and R. A. Davis, "Introduction to Time Series and Forecasting", 3rd ed., Springer
/// 2016, section 1.4.1). n 10: 0.6198. infinity for n < 1.
double white_noise_lag1_bound(int64_t n);

/// The step time's noise over measured steps (the slowest rank's time of each step).
struct StepNoise {
  int64_t steps = 0;       ///< step times given
  int64_t median_ns = -1;  ///< their median (the lower middle one for an even count); -1 none
  /// batch_means of the step times in step order: the standard error of the mean step, ns,
  /// with the steps' autocorrelation accounted for (the SE `compare` tests differences with)
  double mean_se_ns = 0;
  int64_t batch_size = 0;  ///< its batch size b (1: every step its own batch)
  /// The run-to-run noise of a mean over `steps` steps within a run: the SE of the difference of
  /// two such means, sqrt(2) x mean_se_ns; 0 when steps < kMinNoiseSteps.
  double mean_diff_se_ns = 0;
  bool known() const { return steps >= kMinNoiseSteps; }
  static constexpr int64_t kMinNoiseSteps = 3;  ///< fewer steps give no spread to speak of
};

/// The noise of the given step times (ns, in step order). Example (tested): {100, 104, 98, 110,
/// 101} -> median 101; b 2, a 2, batch means 102 and 104, mean 103: sigma^2_BM = 2 x 2 = 4,
/// bm_se sqrt(4 / 4) = 1, below iid_se sqrt(21.8 / 5) = 2.0881 (sd^2 21.8): se 2.0881,
/// mean_diff_se sqrt(2) x 2.0881 = 2.9530.
StepNoise step_time_noise(const std::vector<int64_t>& step_ns);

/// Whether a predicted gain of `gain_ns` a step is within the step time's noise: the noise is
/// known and gain_ns <= 2 x mean_diff_se_ns (a run of the new plan over as many steps could not
/// tell it from chance). false for an unknown noise (fewer than 3 steps: nothing to hold the gain
/// against). Example: gain 5.5 ns against {100, 104, 98, 110, 101}: 5.5 <= 5.906, within.
bool gain_within_step_noise(double gain_ns, const StepNoise& noise);

/// The two-sided 95 % critical value of Student's t distribution with `df` degrees of freedom,
/// t(0.975, df), from the table of the NIST/SEMATECH e-Handbook of Statistical Methods, section
/// 1.3.6.7.2 "Critical Values of the Student's t Distribution" (3 decimals; df 1-30, 40, 60, 120,
/// and 1.960 beyond): a df between two rows reads the row below it (a fractional Welch df 10.7
/// reads df 10's 2.228), the larger value, so the test errs on the side of "within noise".
/// Examples (tested): 1 -> 12.706, 10.7 -> 2.228, 30 -> 2.042, 45 -> 2.021, 1000 -> 1.980.
/// df < 1 (no spread to speak of) reads df 1's value.
double student_t_975(double df);

/// A test of two means, each with the squared standard error `var` (se^2) and `df` degrees of
/// freedom, two-sided at 95 %: t = (mean_b - mean_a) / sqrt(var_a + var_b) and the
/// Welch-Satterthwaite degrees of freedom df = (var_a + var_b)^2 / (var_a^2 / df_a + var_b^2 /
/// df_b) (B. L. Welch, Biometrika 34 (1947), 28-35); the means differ when |t| >
/// student_t_975(df). Without spread (var 0 both) df = df_a + df_b and they differ whenever the
/// means do. welch_t_test is this with var = sd^2 / n, df = n - 1; compare's step-time test is
/// this with batch-means SEs (batch_means: var = se^2, df = a - 1).
struct WelchTest {
  double t = 0;         ///< (mean_b - mean_a) / se; +-infinity when se is 0 and the means differ
  double df = 0;        ///< Welch-Satterthwaite degrees of freedom
  double critical = 0;  ///< student_t_975(df)
  bool differs = false; ///< |t| > critical: the means differ beyond the samples' noise
};
WelchTest two_means_test(double mean_a, double var_a, double df_a, double mean_b, double var_b, double df_b);

/// Welch's unequal-variances t-test of the means of two samples of independent values,
/// two-sided at 95 %: two_means_test with var = sd^2 / n and df = n - 1.
/// Samples smaller than this get no test (welch_t_test answers nullopt): a standard deviation of
/// fewer values says too little about the spread to call a difference noise.
inline constexpr int64_t kMinWelchSamples = 5;

/// Welch's test of sample B (mean_b, sd_b: the sample standard deviation, n - 1 in its
/// denominator; n_b values) against sample A, or nullopt when either has fewer than
/// kMinWelchSamples values. Example (tested): A {100, 120, 80, 110, 90} ms (mean 100, sd 15.81)
/// against B {200, 240, 160, 220, 180} ms (mean 200, sd 31.62): se 15.81, t 6.325, df 5.882
/// (reads df 5: 2.571): differs. A against {110, 130, 90, 120, 100} ms: t 1.0, df 8: within noise.
std::optional<WelchTest> welch_t_test(double mean_a, double sd_a, int64_t n_a, double mean_b, double sd_b, int64_t n_b);

}  // namespace embedscope::sessions

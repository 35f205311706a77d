// calibrate's least-squares fits (cost/calibration.h, calibration_detail.h): the compute ops'
// rates and launch, the collectives' latency and bus bandwidth, both by non-negative least squares.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "embedscope/sessions/analysis/stats.h"
#include "calibration_detail.h"
#include "embedscope/engine/cost/shared_cores.h"
#include "embedscope/engine/workload/spec_error.h"

namespace embedscope::engine::calib {

// Active-set non-negative least squares (calibration.h): the coefficients of X's columns, those
// taken out 0 and marked inactive. Columns are scaled to unit maximum for the solve.
std::vector<double> nnls(const Eigen::MatrixXd& X, const Eigen::VectorXd& y, std::vector<bool>& active) {
  const Eigen::Index k = X.cols();
  std::vector<double> scale(static_cast<size_t>(k), 1.0);
  for (Eigen::Index c = 0; c < k; ++c) {
    const double m = X.col(c).cwiseAbs().maxCoeff();
    if (m <= 0) active[static_cast<size_t>(c)] = false;
    else scale[static_cast<size_t>(c)] = m;
  }
  std::vector<double> beta(static_cast<size_t>(k), 0.0);
  for (;;) {
    std::vector<Eigen::Index> cols;
    for (Eigen::Index c = 0; c < k; ++c)
      if (active[static_cast<size_t>(c)]) cols.push_back(c);
    std::fill(beta.begin(), beta.end(), 0.0);
    if (cols.empty()) return beta;
    Eigen::MatrixXd A(X.rows(), static_cast<Eigen::Index>(cols.size()));
    for (size_t j = 0; j < cols.size(); ++j) A.col(static_cast<Eigen::Index>(j)) = X.col(cols[j]) / scale[static_cast<size_t>(cols[j])];
    const Eigen::VectorXd b = A.colPivHouseholderQr().solve(y);
    Eigen::Index worst = -1;
    for (size_t j = 0; j < cols.size(); ++j) {
      const double v = b(static_cast<Eigen::Index>(j)) / scale[static_cast<size_t>(cols[j])];
      beta[static_cast<size_t>(cols[j])] = v;
      if (!(v > 0) && (worst < 0 || v < beta[static_cast<size_t>(worst)])) worst = cols[j];
    }
    if (worst < 0) return beta;
    active[static_cast<size_t>(worst)] = false;
  }
}

double r_squared(const Eigen::MatrixXd& X, const Eigen::VectorXd& y, const std::vector<double>& beta) {
  Eigen::VectorXd b(static_cast<Eigen::Index>(beta.size()));
  for (size_t i = 0; i < beta.size(); ++i) b(static_cast<Eigen::Index>(i)) = beta[i];
  const double mean = y.mean();
  const double ss_tot = (y.array() - mean).square().sum();
  const double ss_res = (y - X * b).squaredNorm();
  return ss_tot > 0 ? 1.0 - ss_res / ss_tot : 1.0;
}

// the nearest-rank p50 that run and stats print (tester46 F13: the upper middle was taken here)
int64_t median(std::vector<int64_t> v) { return sessions::median_nearest_rank(std::move(v)); }

// The typical time of a collective or a hand-off over a run's steps: the mean. These are short
// (0.1-5 ms), summed a dozen times a step and heavy-tailed under load (a wake-up that waits for
// a core): a step holds their means, not their medians (calib15e, criteo_kaggle 4 ranks tw at
// G 1.33: the per-collective medians summed to 9.6 ms a step, the collectives' time in a step
// was 17.7 ms; the compute ops' medians summed to 103 ms against 101 ms measured, so compute
// ops keep the median, robust to a single descheduled op).
double mean_ns(const std::vector<int64_t>& v) {
  if (v.empty()) return 0;
  double sum = 0;
  for (int64_t x : v) sum += static_cast<double>(x);
  return sum / static_cast<double>(v.size());
}

namespace {

// Whether the item column of host work `work` is, over the rows of the classes its ops belong to,
// an affine function of those classes' work columns and of the item columns of lower kinds still
// in the fit (`active`; a lookup's row lines beside its bags) (relative residual of the least
// squares < 1e-6): then it is not identifiable beside them (calibration_detail.h fit_compute).
bool items_follow_the_bytes(const Eigen::MatrixXd& X, const std::vector<Sample>& compute, int work,
                            const std::vector<bool>& active) {
  std::array<bool, kClasses> cls{};
  for (const Sample& s : compute)
    if ((s.work == work && s.items > 0) || (s.work2 == work && s.items2 > 0)) cls[static_cast<size_t>(s.cls)] = true;
  std::vector<Eigen::Index> rows;
  for (size_t i = 0; i < compute.size(); ++i)
    if (cls[static_cast<size_t>(compute[i].cls)]) rows.push_back(static_cast<Eigen::Index>(i));
  std::vector<Eigen::Index> cols = {0};
  for (size_t c = 0; c < kClasses; ++c)
    if (cls[c]) cols.push_back(1 + static_cast<Eigen::Index>(c));
  for (int w = 1; w < work; ++w)
    if (active[static_cast<size_t>(kClasses + w)]) cols.push_back(kClasses + w);
  const auto m = static_cast<Eigen::Index>(rows.size());
  Eigen::MatrixXd A(m, static_cast<Eigen::Index>(cols.size()));
  Eigen::VectorXd b(m);
  for (Eigen::Index i = 0; i < m; ++i) {
    for (size_t j = 0; j < cols.size(); ++j) A(i, static_cast<Eigen::Index>(j)) = X(rows[static_cast<size_t>(i)], cols[j]);
    b(i) = X(rows[static_cast<size_t>(i)], kClasses + work);
  }
  for (Eigen::Index j = 0; j < A.cols(); ++j)  // unit columns for the solve
    if (const double mx = A.col(j).cwiseAbs().maxCoeff(); mx > 0) A.col(j) /= mx;
  const double norm = b.norm();
  if (!(norm > 0)) return true;
  const Eigen::VectorXd r = b - A * A.colPivHouseholderQr().solve(b);
  return r.norm() < 1e-6 * norm;
}

}  // namespace

// The compute ops' t / d[session] = launch + x / rate_class + items x item_ns (calibration.h), on
// relative errors.
ComputeFit fit_compute(const std::vector<Sample>& compute, const std::vector<double>& d) {
  ComputeFit f;
  const auto n = static_cast<Eigen::Index>(compute.size());
  Eigen::MatrixXd X = Eigen::MatrixXd::Zero(n, 1 + kClasses + kWorkKinds);
  Eigen::VectorXd y(n);
  std::array<double, kClasses> sum_x{}, sum_t{};
  for (Eigen::Index i = 0; i < n; ++i) {
    const Sample& s = compute[static_cast<size_t>(i)];
    const auto c = static_cast<size_t>(s.cls);
    X(i, 0) = 1.0;
    X(i, 1 + s.cls) = s.x;
    for (const auto& [w, items] : {std::pair{s.work, s.items}, std::pair{s.work2, s.items2}})
      if (w >= 1 && w <= kWorkKinds && items > 0) {
        X(i, kClasses + w) = items;  // column 1 + kClasses + (work - 1)
        ++f.item_count[static_cast<size_t>(w - 1)];
      }
    y(i) = s.t / (s.dilation > 0 ? s.dilation : d[static_cast<size_t>(s.session)]);  // conc46: the op's own
    ++f.count[c];
    sum_x[c] += s.x;
    sum_t[c] += y(i);
  }
  // relative errors: each row over its duration, so that a 0.1 ms permute weighs as much as
  // the dense part (an absolute fit would hand the small ops' time to the launch intercept)
  Eigen::MatrixXd Xw = X;
  Eigen::VectorXd yw = y;
  for (Eigen::Index i = 0; i < n; ++i) {
    const double w = 1.0 / std::max(1.0, y(i));
    Xw.row(i) *= w;
    yw(i) *= w;
  }
  std::vector<bool> active(1 + kClasses + kWorkKinds, true);
  for (size_t w = 0; w < kWorkKinds; ++w)
    if (f.item_count[w] > 0 && items_follow_the_bytes(X, compute, static_cast<int>(w) + 1, active)) {
      active[1 + kClasses + w] = false;  // it would trade off against its class's rate
      f.item_note[w] = "0, not fitted: in these sessions its items are a linear function of its ops' bytes (e.g. "
                       "table_wise alone with one id a bag: a lookup's bytes are 136 B a bag), so the two cannot "
                       "be told apart; add sessions of another sharding type or pooling factor";
    }
  const std::vector<double> beta = nnls(Xw, yw, active);
  f.r2 = r_squared(X, y, beta);  // of the durations themselves
  f.launch_ns = beta[0];
  for (size_t w = 0; w < kWorkKinds; ++w) f.item_ns[w] = active[1 + kClasses + w] ? beta[1 + kClasses + w] : 0.0;
  // the classes' summed time less their per-item work (for the fallback rates below)
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index w = 0; w < kWorkKinds; ++w)
      sum_t[static_cast<size_t>(compute[static_cast<size_t>(i)].cls)] -= X(i, 1 + kClasses + w) * f.item_ns[static_cast<size_t>(w)];
  for (size_t c = 0; c < kClasses; ++c)
    if (active[1 + c]) {
      f.rate[c] = 1e9 / beta[1 + c];
      f.fitted[c] = true;
      f.note[c] = fmt::format("least squares over {} (rank, op) medians", f.count[c]);
    }
  // classes without a usable slope: their mean x / (t - launch), else the memory kernels' rate
  for (int c : {kMemory, kLookup, kTbeBackward, kDense}) {
    const auto u = static_cast<size_t>(c);
    if (f.rate[u] > 0) continue;
    const double t = sum_t[u] - static_cast<double>(f.count[u]) * beta[0];
    if (f.count[u] > 0 && sum_x[u] > 0 && t > 0) {
      f.rate[u] = 1e9 * sum_x[u] / t;
      f.note[u] = fmt::format("no slope from the least squares: mean work / mean time over {} (rank, op) medians", f.count[u]);
    } else if (c != kMemory && f.rate[kMemory] > 0) {
      f.rate[u] = f.rate[kMemory];
      f.note[u] = f.count[u] == 0 ? "no op of this class in the sessions: the memory kernels' rate"
                                  : "no usable time: the memory kernels' rate";
    }
  }
  for (size_t c = 0; c < kClasses; ++c)
    if (!(f.rate[c] > 0))
      throw SpecError(fmt::format("calibrate: no rate for the {} ops could be fitted (their time is all launch cost)",
                                  kClassNames[c]));
  return f;
}

double effective_bytes(const CommSample& c, const std::vector<double>& f) {
  const int ranks = static_cast<int>(f.size()) - 1;
  if (c.members.empty() || static_cast<int>(c.members.size()) > ranks || !(f.back() > 0)) return c.x;
  return processor_sharing_time(c.members, ranks, [&](int m) { return f[static_cast<size_t>(m)]; }) / f.back();
}

// Collectives of one link class: t / d[session] = latency + x / busbw + share / d x wait (x
// effective on one node).
namespace {
// The least spread of the wait's column share / d over the samples for which it is fitted.
constexpr double kMinWaitLeverage = 0.25;
}  // namespace

LinkFit fit_link(const std::vector<CommSample>& comm, bool spans, const std::vector<double>& d,
                 const std::vector<std::vector<double>>& fm, const std::vector<double>& share) {
  LinkFit f;
  struct Point {
    double x, t, share, d;
  };
  std::vector<Point> pts;
  double lo = 1, hi = 0;
  for (const auto& c : comm)
    if (c.spans == spans) {
      const auto s = static_cast<size_t>(c.session);
      pts.push_back({spans ? c.x : effective_bytes(c, fm[s]), c.t / d[s], share[s], d[s]});
      lo = std::min(lo, share[s] / d[s]);
      hi = std::max(hi, share[s] / d[s]);
    }
  if (pts.size() < 2) return f;
  const auto m = static_cast<Eigen::Index>(pts.size());
  Eigen::MatrixXd A(m, 3);
  Eigen::VectorXd b(m);
  double sx = 0, st = 0;
  for (Eigen::Index i = 0; i < m; ++i) {
    const Point& p = pts[static_cast<size_t>(i)];
    A(i, 0) = 1.0;
    A(i, 1) = p.x;
    A(i, 2) = p.share / p.d;
    b(i) = p.t;
    sx += p.x;
    st += p.t;
  }
  // the wait's column share / d is told from the latency's (1) only where it differs between the
  // sessions: 2 and 4 ranks on 2 cores at no other load give 0 and 0.5; at 0.5 other groups they
  // give 0.5 / 1.5 and 1 / 3, the same, and the two would trade off
  std::vector<bool> act = {true, true, hi - lo >= kMinWaitLeverage};
  const std::vector<double> c = nnls(A, b, act);
  f.r2 = r_squared(A, b, c);
  f.link.latency_ns = std::llround(c[0]);
  f.wait_fitted = act[2];
  f.wait_ns = act[2] ? c[2] : 0.0;
  double rest = st - static_cast<double>(m) * c[0];
  for (const Point& p : pts) rest -= p.share / p.d * f.wait_ns;
  f.link.bus_bandwidth_bytes_per_s = act[1] ? 1e9 / c[1] : (sx > 0 && rest > 0 ? 1e9 * sx / rest : 0.0);
  // above 1e15 B/s (the profile's limit, hardware_profile.cpp) the bytes explain none of the time:
  // no bandwidth, as 0 (a profile with it would not parse: tester39's small sessions)
  f.ok = f.link.bus_bandwidth_bytes_per_s > 0 && f.link.bus_bandwidth_bytes_per_s <= 1e15;
  f.fitted = act[1];
  f.samples = static_cast<int>(m);
  f.note = act[1] ? fmt::format("least squares over {} (rank, collective) call times (means over the steps)", m)
                  : "no slope from the least squares: mean bytes / mean time";
  return f;
}

}  // namespace embedscope::engine::calib

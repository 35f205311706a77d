// Calibration of this machine's cost-model coefficients from measured sessions (cost/calibration.h).
#include "embedscope/engine/cost/calibration.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <tuple>

#include <Eigen/Dense>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embedscope/engine/exec/backend.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/program/step_program.h"
#include "embedscope/engine/sharding/plan_json.h"
#include "embedscope/engine/workload/spec_error.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::engine {

namespace {

using nlohmann::json;
namespace ss = embedscope::sessions;

// The cpu executor's most ranks: the calibrated "node" holds them all.
constexpr int kRanksPerMachine = 64;

struct Loaded {
  WorkloadSpec spec;
  ShardingPlan plan;
  int local = 1;  // ranks per node (sharding.local_world_size, resolved)
};

Loaded load_session(const ss::SessionReader& reader, const std::string& path) {
  if (reader.meta(ss::meta::kSimulated) == "1")
    throw SpecError(fmt::format("{}: a simulated session: its times are the cost model's, not measured", path));
  const std::string workload = reader.meta(ss::meta::kWorkloadJson);
  const std::string plan_text = reader.meta(ss::meta::kShardingPlanJson);
  if (workload.empty() || plan_text.empty())
    throw SpecError(fmt::format("{}: no workload_json or sharding_plan_json metadata (an imported trace, or not a "
                                "session Embedscope ran): nothing to pair its ops with",
                                path));
  const json w = json::parse(workload, nullptr, false);
  if (w.is_discarded()) throw SpecError(fmt::format("{}: workload_json is not JSON", path));
  if (w.is_object() && w.value("model", "") == "lm_embedding")
    throw SpecError(fmt::format("{}: an lm_embedding session (calibration pairs DLRM step programs only)", path));
  Loaded l;
  l.spec = parse_workload(w, path + " (workload_json)");
  l.plan = plan_from_json(l.spec, json::parse(plan_text), path + " (sharding_plan_json)");
  l.local = l.spec.sharding.local_world_size > 0 ? l.spec.sharding.local_world_size : l.spec.devices.count;
  return l;
}

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

// Compute classes (calibration.h): column 1 + class of the design matrix; column 0 the launch.
enum Class { kLookup = 0, kTbeBackward, kDense, kMemory, kClasses };
constexpr std::array<const char*, kClasses> kClassNames = {"lookup", "tbe_backward", "dense", "memory_kernels"};

struct Sample {
  int cls;
  double x, t;
};

int64_t median(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "this machine";
  return buf;
}

}  // namespace

json to_json(const HardwareProfile& p) {
  auto link = [](const LinkProfile& l) {
    return json{{"name", l.name}, {"bus_bandwidth_bytes_per_s", l.bus_bandwidth_bytes_per_s}, {"latency_ns", l.latency_ns}};
  };
  json j = {{"name", p.name},
            {"description", p.description},
            {"gpu",
             {{"name", p.gpu.name},
              {"memory_bytes", p.gpu.memory_bytes},
              {"hbm_bandwidth_bytes_per_s", p.gpu.hbm_bandwidth_bytes_per_s},
              {"dense_flops_per_s", p.gpu.dense_flops_per_s},
              {"dense_efficiency", p.gpu.dense_efficiency},
              {"tbe_forward_efficiency", p.gpu.tbe_forward_efficiency},
              {"tbe_backward_efficiency", p.gpu.tbe_backward_efficiency},
              {"memory_kernel_efficiency", p.gpu.memory_kernel_efficiency},
              {"kernel_launch_ns", p.gpu.kernel_launch_ns}}},
            {"cluster", {{"gpus_per_node", p.gpus_per_node}, {"max_nodes", p.max_nodes}}},
            {"intra_node", link(p.intra_node)},
            {"inter_node", link(p.inter_node)},
            {"host_link", link(p.host_link)}};
  if (!p.sources.empty()) j["sources"] = p.sources;
  return j;
}

Calibration calibrate(const std::vector<std::string>& session_paths, const std::string& name) {
  if (session_paths.empty()) throw SpecError("calibrate: no sessions given");
  Calibration cal;
  std::vector<Sample> compute;
  // collective members: (spans nodes, x = max(sent, received) bytes, transfer ns)
  std::vector<std::tuple<bool, double, double>> comm;
  int64_t memory_bytes = 0;
  for (const std::string& path : session_paths) {
    const ss::SessionReader reader(path);
    const Loaded l = load_session(reader, path);
    memory_bytes = std::max(memory_bytes, l.spec.devices.memory_bytes);
    cal.sessions.push_back(path);
    // the session's compute-lane ops per (rank, measured step), in time order
    std::map<std::pair<int, int>, std::string> lane_name;
    for (const auto& ln : reader.lanes()) lane_name[{ln.rank, ln.lane}] = ln.name;
    std::map<std::pair<int, int64_t>, std::vector<const ss::OpRecord*>> ops;
    std::map<std::tuple<int, int, size_t>, std::pair<Sample, std::vector<int64_t>>> durations;
    const std::vector<ss::OpRecord> all = reader.all_ops();
    for (const auto& op : all)
      if (op.step >= 0 && lane_name[{op.rank, op.lane}] == "compute") ops[{op.rank, op.step}].push_back(&op);
    if (ops.empty()) throw SpecError(fmt::format("{}: no compute op of a measured step", path));
    const auto& names = reader.strings();
    for (auto& [key, list] : ops) {
      std::sort(list.begin(), list.end(), [](auto* a, auto* b) { return a->start_ns < b->start_ns; });
      const StepProgram p = build_step_program(l.spec, l.plan, key.first, key.second + l.spec.warmup_steps);
      const std::vector<const ProgramOp*> planned = p.lane(ss::Lane::compute);
      bool same = planned.size() == list.size();
      for (size_t i = 0; same && i < list.size(); ++i) {
        const auto id = static_cast<size_t>(list[i]->name_id);
        same = id < names.size() && names[id] == planned[i]->name;
      }
      if (!same) {
        ++cal.skipped_rank_steps;
        continue;
      }
      for (size_t i = 0; i < list.size(); ++i) {
        const ProgramOp& op = *planned[i];
        Sample s{kMemory, static_cast<double>(op.bytes), 0.0};
        if (op.flops > 0) s = {kDense, static_cast<double>(op.flops), 0.0};
        else if (op.category == ss::OpCategory::lookup) s.cls = kLookup;
        else if (op.category == ss::OpCategory::optimizer && op.rows > 0) s.cls = kTbeBackward;
        auto& d = durations[{key.first, place_in_run(l.spec, key.second + l.spec.warmup_steps), i}];
        d.first = s;
        d.second.push_back(list[i]->end_ns - list[i]->start_ns);
      }
    }
    // one sample per (rank, place in the run, op): the median over its steps, robust to the
    // scheduling outliers of rank threads sharing cores
    for (auto& [key, d] : durations) {
      Sample s = d.first;
      s.t = static_cast<double>(median(d.second));
      compute.push_back(s);
    }
    // every member of every collective: its transfer time after the last member arrived
    std::map<std::pair<std::string, uint64_t>, std::vector<ss::CollectiveRecord>> by_call;
    for (auto& c : reader.collectives())
      if (c.step >= 0) by_call[{c.group, c.sequence}].push_back(std::move(c));
    // one sample per (rank, place in the run, collective name, its occurrence in the step):
    // the medians over the steps, as for the compute ops
    std::map<std::tuple<int, int, std::string, int>, std::tuple<bool, std::vector<int64_t>, std::vector<int64_t>>> calls;
    std::map<std::tuple<int, int64_t, std::string>, int> occurrence;
    for (const auto& [key, members] : by_call) {
      int64_t last = 0;
      for (const auto& m : members) last = std::max(last, m.start_ns);
      bool spans = false;
      for (int32_t peer : members[0].peers) spans = spans || peer / l.local != members[0].peers[0] / l.local;
      for (const auto& m : members) {
        const int k = occurrence[{m.rank, m.step, m.name}]++;
        auto& [sp, xs, ts] = calls[{m.rank, place_in_run(l.spec, m.step + l.spec.warmup_steps), m.name, k}];
        sp = spans;
        xs.push_back(std::max(m.bytes_sent, m.bytes_received));
        ts.push_back(m.end_ns - last);
      }
    }
    for (auto& [key, c] : calls)
      comm.emplace_back(std::get<0>(c), static_cast<double>(median(std::get<1>(c))), static_cast<double>(median(std::get<2>(c))));
  }
  if (compute.empty())
    throw SpecError("calibrate: no (rank, step) of the sessions matched its step program (nothing to fit)");
  if (comm.empty()) throw SpecError("calibrate: the sessions recorded no collective (give runs of 2 or more ranks)");

  // ---- compute: t = launch + sum_c x_c / rate_c
  const auto n = static_cast<Eigen::Index>(compute.size());
  Eigen::MatrixXd X = Eigen::MatrixXd::Zero(n, 1 + kClasses);
  Eigen::VectorXd y(n);
  std::array<int, kClasses> count{};
  std::array<double, kClasses> sum_x{}, sum_t{};
  for (Eigen::Index i = 0; i < n; ++i) {
    const Sample& s = compute[static_cast<size_t>(i)];
    X(i, 0) = 1.0;
    X(i, 1 + s.cls) = s.x;
    y(i) = s.t;
    ++count[static_cast<size_t>(s.cls)];
    sum_x[static_cast<size_t>(s.cls)] += s.x;
    sum_t[static_cast<size_t>(s.cls)] += s.t;
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
  std::vector<bool> active(1 + kClasses, true);
  const std::vector<double> beta = nnls(Xw, yw, active);
  cal.compute_r2 = r_squared(X, y, beta);  // of the durations themselves
  cal.compute_ops = static_cast<int>(n);
  cal.kernel_launch_ns = std::llround(beta[0]);
  std::array<double, kClasses> rate{};
  std::array<std::string, kClasses> note{};
  for (int c = 0; c < kClasses; ++c)
    if (active[static_cast<size_t>(1 + c)]) {
      rate[static_cast<size_t>(c)] = 1e9 / beta[static_cast<size_t>(1 + c)];
      note[static_cast<size_t>(c)] = fmt::format("least squares over {} (rank, op) medians", count[static_cast<size_t>(c)]);
    }
  // classes without a usable slope: their mean x / (t - launch), else the memory kernels' rate
  for (int c : {kMemory, kLookup, kTbeBackward, kDense}) {
    const auto u = static_cast<size_t>(c);
    if (rate[u] > 0) continue;
    const double t = sum_t[u] - static_cast<double>(count[u]) * beta[0];
    if (count[u] > 0 && sum_x[u] > 0 && t > 0) {
      rate[u] = 1e9 * sum_x[u] / t;
      note[u] = fmt::format("no slope from the least squares: mean work / mean time over {} (rank, op) medians", count[u]);
    } else if (c != kMemory && rate[kMemory] > 0) {
      rate[u] = rate[kMemory];
      note[u] = count[u] == 0 ? "no op of this class in the sessions: the memory kernels' rate"
                              : "no usable time: the memory kernels' rate";
    }
  }
  for (int c = 0; c < kClasses; ++c)
    if (!(rate[static_cast<size_t>(c)] > 0))
      throw SpecError(fmt::format("calibrate: no rate for the {} ops could be fitted (their time is all launch cost)",
                                  kClassNames[static_cast<size_t>(c)]));
  for (int c = 0; c < kClasses; ++c)
    cal.fits.push_back({kClassNames[static_cast<size_t>(c)], count[static_cast<size_t>(c)], rate[static_cast<size_t>(c)],
                        active[static_cast<size_t>(1 + c)], note[static_cast<size_t>(c)]});

  // ---- collectives: t = latency + x / busbw, within a node and across nodes
  auto fit_link = [&](bool spans, LinkProfile& link, double* r2) {
    std::vector<std::pair<double, double>> pts;
    for (const auto& [s, x, t] : comm)
      if (s == spans) pts.emplace_back(x, t);
    if (pts.size() < 2) return false;
    const auto m = static_cast<Eigen::Index>(pts.size());
    Eigen::MatrixXd A(m, 2);
    Eigen::VectorXd b(m);
    double sx = 0, st = 0;
    for (Eigen::Index i = 0; i < m; ++i) {
      A(i, 0) = 1.0;
      A(i, 1) = pts[static_cast<size_t>(i)].first;
      b(i) = pts[static_cast<size_t>(i)].second;
      sx += pts[static_cast<size_t>(i)].first;
      st += pts[static_cast<size_t>(i)].second;
    }
    std::vector<bool> act(2, true);
    const std::vector<double> c = nnls(A, b, act);
    if (r2) *r2 = r_squared(A, b, c);
    link.latency_ns = std::llround(c[0]);
    const double rest = st - static_cast<double>(m) * c[0];
    link.bus_bandwidth_bytes_per_s = act[1] ? 1e9 / c[1] : (sx > 0 && rest > 0 ? 1e9 * sx / rest : 0.0);
    if (!(link.bus_bandwidth_bytes_per_s > 0)) return false;
    cal.fits.push_back({spans ? "inter_node" : "intra_node", static_cast<int>(m), link.bus_bandwidth_bytes_per_s, act[1],
                        act[1] ? fmt::format("least squares over {} (rank, collective) medians", m)
                               : "no slope from the least squares: mean bytes / mean time"});
    return true;
  };
  HardwareProfile& hw = cal.profile;
  const bool intra = fit_link(false, hw.intra_node, &cal.collective_r2);
  const bool inter = fit_link(true, hw.inter_node, nullptr);
  if (!intra && !inter) throw SpecError("calibrate: the collectives' times give no bandwidth (all latency)");
  if (!intra) hw.intra_node = hw.inter_node;
  if (!inter) hw.inter_node = hw.intra_node;
  const std::string host = host_name();
  hw.intra_node.name = fmt::format("Gloo between rank threads on {} (fitted)", host);
  hw.inter_node.name = inter ? fmt::format("Gloo across emulated nodes on {} (fitted)", host) : hw.intra_node.name;

  // ---- the profile
  const double hbm = std::max({rate[kLookup], rate[kTbeBackward], rate[kMemory]});
  hw.name = name;
  hw.description = fmt::format("cpu ranks of {}, fitted by embedscope calibrate from {} session(s)", host,
                               cal.sessions.size());
  hw.gpu.name = fmt::format("cpu ranks of {}", host);
  hw.gpu.memory_bytes = memory_bytes;
  hw.gpu.hbm_bandwidth_bytes_per_s = hbm;
  hw.gpu.tbe_forward_efficiency = rate[kLookup] / hbm;
  hw.gpu.tbe_backward_efficiency = rate[kTbeBackward] / hbm;
  hw.gpu.memory_kernel_efficiency = rate[kMemory] / hbm;
  hw.gpu.dense_flops_per_s = rate[kDense];
  hw.gpu.dense_efficiency = 1.0;
  hw.gpu.kernel_launch_ns = cal.kernel_launch_ns;
  hw.gpus_per_node = kRanksPerMachine;
  hw.max_nodes = kRanksPerMachine;
  std::string list;
  for (const auto& s : cal.sessions) list += (list.empty() ? "" : ", ") + s;
  const std::string from = fmt::format("embedscope calibrate from {} ({} compute ops, R^2 {:.3f})", list, cal.compute_ops,
                                       cal.compute_r2);
  auto fit_of = [&](const char* what) {
    for (const auto& f : cal.fits)
      if (f.what == what) return f.note;
    return std::string("copied from the other link: no collective of this kind in the sessions");
  };
  hw.sources = {
      {"/gpu/memory_bytes", "the sessions' devices.memory_bytes (the largest)"},
      {"/gpu/hbm_bandwidth_bytes_per_s", "the largest of the fitted lookup, TBE backward and memory-kernel rates; " + from},
      {"/gpu/tbe_forward_efficiency", "fitted lookup rate / hbm_bandwidth: " + fit_of("lookup")},
      {"/gpu/tbe_backward_efficiency", "fitted TBE backward rate / hbm_bandwidth: " + fit_of("tbe_backward")},
      {"/gpu/memory_kernel_efficiency", "fitted memory-kernel rate / hbm_bandwidth: " + fit_of("memory_kernels")},
      {"/gpu/dense_flops_per_s", "fitted dense rate (efficiency 1): " + fit_of("dense")},
      {"/gpu/kernel_launch_ns", "the fit's intercept (one fixed cost for every compute op); " + from},
      {"/cluster/gpus_per_node", "one machine holds every cpu rank (devices.count <= 64)"},
      {"/cluster/max_nodes", "emulated nodes (sharding.local_world_size) of the same machine"},
      {"/intra_node/bus_bandwidth_bytes_per_s", fit_of("intra_node") + fmt::format(" (R^2 {:.3f})", cal.collective_r2)},
      {"/intra_node/latency_ns", "the collective fit's intercept"},
      {"/inter_node/bus_bandwidth_bytes_per_s", fit_of("inter_node")},
  };
  return cal;
}

CalibrationCheck check_calibration(const std::string& session_path, const std::string& profile_path) {
  const ss::SessionReader reader(session_path);
  const Loaded l = load_session(reader, session_path);
  CalibrationCheck c;
  c.session = session_path;
  c.workload = fmt::format("{}, {} ranks, {}, {}", l.spec.name, l.spec.devices.count, to_string(l.spec.sharding.default_type),
                           to_string(l.spec.pipeline));
  std::map<int64_t, int64_t> slowest;
  for (const auto& s : reader.steps())
    if (s.step >= 0) slowest[s.step] = std::max(slowest[s.step], s.end_ns - s.start_ns);
  std::vector<int64_t> measured;
  for (const auto& [step, t] : slowest) measured.push_back(t);
  if (measured.empty()) throw SpecError(fmt::format("{}: no measured step", session_path));
  c.measured_ns = median(measured);
  WorkloadSpec sim = l.spec;
  sim.devices.backend = Backend::simulated;
  sim.devices.hardware = profile_path;
  sim.sharding.local_world_size = l.local;
  sim.rebalance = {};
  sim = with_resolved_backend(sim, session_path);
  const RunResult r = run_training(sim, l.plan, TrainerOptions{});
  if (r.ended != RunEnd::complete)
    throw SpecError(fmt::format("{}: the simulation did not complete: {}", session_path, r.error));
  c.simulated_ns = median(r.step_time_ns);
  return c;
}

}  // namespace embedscope::engine

// Calibration of this machine's cost-model coefficients from measured sessions (cost/calibration.h).
#include "embedscope/engine/cost/calibration.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <thread>
#include <tuple>

#include <Eigen/Dense>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embedscope/engine/cost/cost_model.h"
#include "embedscope/engine/cost/handoff.h"
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
// Runnable threads of a computing cpu rank: its compute thread (exec/threaded/executor.cpp).
constexpr double kThreadsPerRank = 1.0;
// The background load searched: up to this many runnable threads per core.
constexpr double kMaxBackgroundPerCore = 8.0;
// The oversubscription penalty searched: up to 2 (three times as slow as fair sharing).
constexpr double kMaxPenalty = 2.0;

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
  int session;  // index of its session
};

int64_t median(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

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
  if (p.cpu.cores > 0)
    j["cpu"] = {{"cores", p.cpu.cores}, {"threads_per_rank", p.cpu.threads_per_rank},
                {"background_threads", p.cpu.background_threads},
                {"oversubscription_penalty", p.cpu.oversubscription_penalty}, {"other_groups", p.cpu.other_groups},
                {"handoff_ns", p.cpu.handoff_ns}};
  if (!p.sources.empty()) j["sources"] = p.sources;
  return j;
}

namespace {

// One measured session as calibrate uses it.
struct SessionData {
  std::string path;
  Loaded l;
  int ranks = 1;            // devices.count: every rank a thread of this machine
  int cores = 0;            // metadata cpu_cores; 0 when absent (sessions before 2026-12)
  std::string load;         // metadata load_average_1m
  double groups = -1;       // measured other load in task groups (calibration.h); -1 unknown
  int64_t measured_ns = 0;  // median over measured steps of the slowest rank's step time
};

// The run's other load as task groups (calibration.h, hardware_profile.h CpuContention
// other_groups): the cores other processes kept busy / the cores this one did (metadata
// cpu_other_cores, cpu_self_cores): with autogroup each busy group gets an equal share, so the
// others are that many groups' worth; -1 without them. (The sampled runnable-thread counts
// cpu_other_runnable / cpu_own_runnable are not used: the scheduler shares per group, not per
// thread - measured here, the process got the same cores at 2 and 8 ranks.)
double measured_other_groups(const ss::SessionReader& reader) {
  const std::string self = reader.meta(ss::meta::kCpuSelfCores, ""), other = reader.meta(ss::meta::kCpuOtherCores, "");
  if (self.empty() || other.empty()) return -1;
  const double s = std::atof(self.c_str()), o = std::atof(other.c_str());
  if (!(s > 0) || !(o >= 0)) return -1;
  return o / s;
}

int64_t measured_step_ns(const ss::SessionReader& reader, const std::string& path) {
  std::map<int64_t, int64_t> slowest;
  for (const auto& s : reader.steps())
    if (s.step >= 0) slowest[s.step] = std::max(slowest[s.step], s.end_ns - s.start_ns);
  std::vector<int64_t> t;
  for (const auto& [step, ns] : slowest) t.push_back(ns);
  if (t.empty()) throw SpecError(fmt::format("{}: no measured step", path));
  return median(t);
}

// The collectives' time of a session (CalibrationCheck::measured_comm_ns): per measured step and
// rank the sum of its collectives' call times (the last member's end - the last member's start:
// what the simulator gives every member), the mean over ranks, the median over steps. 0 without
// collectives.
int64_t comm_step_ns(const ss::SessionReader& reader) {
  std::map<std::pair<std::string, uint64_t>, std::vector<ss::CollectiveRecord>> by_call;
  for (auto& c : reader.collectives())
    if (c.step >= 0) by_call[{c.group, c.sequence}].push_back(std::move(c));
  std::map<int64_t, std::map<int, int64_t>> sum;  // step -> rank -> ns
  for (const auto& [key, members] : by_call) {
    int64_t last = 0, call_end = 0;
    for (const auto& m : members) last = std::max(last, m.start_ns), call_end = std::max(call_end, m.end_ns);
    for (const auto& m : members) sum[m.step][m.rank] += std::max<int64_t>(0, call_end - last);
  }
  std::vector<int64_t> per_step;
  for (const auto& [step, ranks] : sum) {
    int64_t total = 0;
    for (const auto& [r, ns] : ranks) total += ns;
    per_step.push_back(total / static_cast<int64_t>(ranks.size()));
  }
  return median(per_step);
}

// A session's workload and plan simulated with the profile file `profile_path`: the median
// slowest-rank step time; the session written to `session_out` when not empty.
int64_t simulate_session(const Loaded& l, const std::string& path, const std::string& profile_path,
                         const std::string& session_out) {
  WorkloadSpec sim = l.spec;
  sim.devices.backend = Backend::simulated;
  sim.devices.hardware = profile_path;
  sim.sharding.local_world_size = l.local;
  sim.rebalance = {};
  sim.network = {};  // the simulated backend takes it as a floor (TrainerOptions)
  sim = with_resolved_backend(sim, path);
  TrainerOptions o;
  o.simulated_network_floor = l.spec.network;
  o.trace = !session_out.empty();
  o.session_path = session_out;
  o.session_overwrite = true;
  const RunResult r = run_training(sim, l.plan, o);
  if (r.ended != RunEnd::complete) throw SpecError(fmt::format("{}: the simulation did not complete: {}", path, r.error));
  return median(r.step_time_ns);
}

struct ComputeFit {
  double launch_ns = 0;
  std::array<double, kClasses> rate{};
  std::array<bool, kClasses> fitted{};
  std::array<std::string, kClasses> note{};
  std::array<int, kClasses> count{};
  double r2 = 0;
};

// The compute ops' t / d[session] = launch + x / rate_class (calibration.h), on relative errors.
ComputeFit fit_compute(const std::vector<Sample>& compute, const std::vector<double>& d) {
  ComputeFit f;
  const auto n = static_cast<Eigen::Index>(compute.size());
  Eigen::MatrixXd X = Eigen::MatrixXd::Zero(n, 1 + kClasses);
  Eigen::VectorXd y(n);
  std::array<double, kClasses> sum_x{}, sum_t{};
  for (Eigen::Index i = 0; i < n; ++i) {
    const Sample& s = compute[static_cast<size_t>(i)];
    const auto c = static_cast<size_t>(s.cls);
    X(i, 0) = 1.0;
    X(i, 1 + s.cls) = s.x;
    y(i) = s.t / d[static_cast<size_t>(s.session)];
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
  std::vector<bool> active(1 + kClasses, true);
  const std::vector<double> beta = nnls(Xw, yw, active);
  f.r2 = r_squared(X, y, beta);  // of the durations themselves
  f.launch_ns = beta[0];
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

struct CommSample {
  int session;
  bool spans;    // the group spans (emulated) nodes
  double x, t;   // max(sent, received) bytes; transfer ns after the last member arrived
};

struct LinkFit {
  bool ok = false, fitted = false;
  LinkProfile link;
  int samples = 0;
  std::string note;
  double r2 = 0;
};

// Collectives of one link class: t / d[session] = latency + x / busbw.
LinkFit fit_link(const std::vector<CommSample>& comm, bool spans, const std::vector<double>& d) {
  LinkFit f;
  std::vector<std::pair<double, double>> pts;
  for (const auto& c : comm)
    if (c.spans == spans) pts.emplace_back(c.x, c.t / d[static_cast<size_t>(c.session)]);
  if (pts.size() < 2) return f;
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
  f.r2 = r_squared(A, b, c);
  f.link.latency_ns = std::llround(c[0]);
  const double rest = st - static_cast<double>(m) * c[0];
  f.link.bus_bandwidth_bytes_per_s = act[1] ? 1e9 / c[1] : (sx > 0 && rest > 0 ? 1e9 * sx / rest : 0.0);
  f.ok = f.link.bus_bandwidth_bytes_per_s > 0;
  f.fitted = act[1];
  f.samples = static_cast<int>(m);
  f.note = act[1] ? fmt::format("least squares over {} (rank, collective) call times (means over the steps)", m)
                  : "no slope from the least squares: mean bytes / mean time";
  return f;
}

// This process's usable cores (its affinity set), >= 1.
int usable_cores_here() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// Removes a file when it goes out of scope.
struct TempFile {
  std::string path;
  ~TempFile() {
    if (!path.empty()) std::remove(path.c_str());
  }
};

}  // namespace

Calibration calibrate(const std::vector<std::string>& session_paths, const std::string& name) {
  if (session_paths.empty()) throw SpecError("calibrate: no sessions given");
  Calibration cal;
  std::vector<Sample> compute;
  std::vector<CommSample> comm;
  std::vector<std::pair<int, double>> handoffs;  // (session, gap ns): medians per (rank, place, op)
  std::vector<SessionData> data;
  int64_t memory_bytes = 0;
  for (const std::string& path : session_paths) {
    const ss::SessionReader reader(path);
    SessionData sd;
    sd.path = path;
    sd.l = load_session(reader, path);
    const Loaded& l = sd.l;
    sd.ranks = l.spec.devices.count;
    sd.cores = std::atoi(reader.meta(ss::meta::kCpuCores, "0").c_str());
    sd.load = reader.meta(ss::meta::kLoadAverage, "");
    sd.groups = measured_other_groups(reader);
    sd.measured_ns = measured_step_ns(reader, path);
    const int session = static_cast<int>(data.size());
    memory_bytes = std::max(memory_bytes, l.spec.devices.memory_bytes);
    cal.sessions.push_back(path);
    // the session's compute-lane ops per (rank, measured step), in time order
    std::map<std::pair<int, int>, std::string> lane_name;
    for (const auto& ln : reader.lanes()) lane_name[{ln.rank, ln.lane}] = ln.name;
    std::map<std::pair<int, int64_t>, std::vector<const ss::OpRecord*>> ops, comm_ops;
    std::map<std::tuple<int, int, size_t>, std::pair<Sample, std::vector<int64_t>>> durations;
    std::map<std::tuple<int, int, int>, std::vector<int64_t>> gaps;  // (rank, place, op id) -> hand-off gaps
    std::map<std::pair<int, int64_t>, int64_t> step_start;
    for (const auto& st : reader.steps()) step_start[{st.rank, st.step}] = st.start_ns;
    const std::vector<ss::OpRecord> all = reader.all_ops();
    for (const auto& op : all) {
      if (op.step < 0) continue;
      const std::string& lane = lane_name[{op.rank, op.lane}];
      if (lane == "compute") ops[{op.rank, op.step}].push_back(&op);
      else if (lane == "comm") comm_ops[{op.rank, op.step}].push_back(&op);
    }
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
        Sample s{kMemory, static_cast<double>(op.bytes), 0.0, session};
        if (op.flops > 0) s = {kDense, static_cast<double>(op.flops), 0.0, session};
        else if (op.category == ss::OpCategory::lookup) s.cls = kLookup;
        else if (op.category == ss::OpCategory::optimizer && op.rows > 0) s.cls = kTbeBackward;
        auto& d = durations[{key.first, place_in_run(l.spec, key.second + l.spec.warmup_steps), i}];
        d.first = s;
        d.second.push_back(list[i]->end_ns - list[i]->start_ns);
      }
      // the gaps where a thread waited to be woken by the other (cost/handoff.h)
      auto spans = [&](std::vector<const ss::OpRecord*>& v) {
        std::sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->start_ns < b->start_ns; });
        std::vector<MeasuredSpan> out;
        for (const auto* o : v)
          out.push_back({static_cast<size_t>(o->name_id) < names.size() ? names[static_cast<size_t>(o->name_id)] : "",
                         o->start_ns, o->end_ns});
        return out;
      };
      const auto start = step_start.find(key);
      if (start == step_start.end()) continue;
      if (const auto g = handoff_gaps(p, spans(list), spans(comm_ops[key]), start->second))
        for (const HandoffGap& h : *g)
          gaps[{key.first, place_in_run(l.spec, key.second + l.spec.warmup_steps), h.op}].push_back(h.gap_ns);
    }
    for (auto& [key, v] : gaps) handoffs.emplace_back(session, mean_ns(v));
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
    // the bytes' median and the times' mean over the steps (mean_ns)
    std::map<std::tuple<int, int, std::string, int>, std::tuple<bool, std::vector<int64_t>, std::vector<int64_t>>> calls;
    std::map<std::tuple<int, int64_t, std::string>, int> occurrence;
    for (const auto& [key, members] : by_call) {
      // the simulator's collective lasts its largest member's time for every member (exec/simulated/:
      // all leave at the last arrival + the longest member's cost), so every member's sample is the
      // call's time - the last member's end after the last arrival - with the largest member's
      // bytes. (Until 2026-12-04 each member's own end was used: the median member, which under
      // load left 0.8 ms after the last arrival of a tw4 output all-to-all whose last member left
      // after 5.5 ms; the next collective waits for that last member.)
      int64_t last = 0, largest = 0, call_end = 0;
      for (const auto& m : members) {
        last = std::max(last, m.start_ns);
        call_end = std::max(call_end, m.end_ns);
        largest = std::max({largest, m.bytes_sent, m.bytes_received});
      }
      bool spans = false;
      for (int32_t peer : members[0].peers) spans = spans || peer / l.local != members[0].peers[0] / l.local;
      for (const auto& m : members) {
        const int k = occurrence[{m.rank, m.step, m.name}]++;
        auto& [sp, xs, ts] = calls[{m.rank, place_in_run(l.spec, m.step + l.spec.warmup_steps), m.name, k}];
        sp = spans;
        xs.push_back(largest);
        ts.push_back(call_end - last);
      }
    }
    for (auto& [key, c] : calls)
      comm.push_back({session, std::get<0>(c), static_cast<double>(median(std::get<1>(c))),
                      mean_ns(std::get<2>(c))});
    data.push_back(std::move(sd));
  }
  if (compute.empty())
    throw SpecError("calibrate: no (rank, step) of the sessions matched its step program (nothing to fit)");
  if (comm.empty()) throw SpecError("calibrate: the sessions recorded no collective (give runs of 2 or more ranks)");

  // ---- the cores the ranks shared (calibration.h): the sessions' cpu_cores, else this process's
  int cores = 0;
  bool all_recorded = true;
  for (const auto& sd : data) {
    cores = std::max(cores, sd.cores);
    all_recorded = all_recorded && sd.cores > 0;
  }
  std::string cores_source = "the sessions' cpu_cores metadata (the cores of each run's CPU affinity set)";
  if (cores <= 0) {
    cores = usable_cores_here();
    cores_source = "this process's CPU affinity set: the sessions record no cpu_cores (written since 2026-12)";
  } else if (!all_recorded) {
    cores_source += "; sessions without it counted with that many";
  }
  // every session's background load measured (cpu_self_cores / cpu_other_cores): each session
  // is normalized with its own, else one background for all is fitted
  bool measured = true;
  for (const auto& sd : data) measured = measured && sd.groups >= 0;
  double penalty = 0;  // oversubscription_penalty: searched when the backgrounds are measured
  // the load of a session in the profile's terms: measured, its other groups (no background
  // threads); else the one fitted background in threads
  auto load_of = [&](const SessionData& sd, double level) {
    return measured ? CpuContention{0, kThreadsPerRank, 0.0, penalty, sd.groups}
                    : CpuContention{0, kThreadsPerRank, level, penalty, 0.0};
  };
  auto dilation = [&](double background) {
    std::vector<double> d;
    for (const auto& sd : data) {
      HardwareProfile one;
      one.cpu = load_of(sd, background);
      one.cpu.cores = sd.cores > 0 ? sd.cores : cores;
      d.push_back(contention_factor(one, sd.ranks));
    }
    return d;
  };

  const std::string host = host_name();
  std::string list;
  for (const auto& s : cal.sessions) list += (list.empty() ? "" : ", ") + s;
  // the profile for a background load and a step scale (compute and collectives scale * slower)
  ComputeFit cf;
  LinkFit intra, inter;
  auto profile_for = [&](double background, double scale) {
    const std::vector<double> d = dilation(background);
    cf = fit_compute(compute, d);
    intra = fit_link(comm, false, d);
    inter = fit_link(comm, true, d);
    if (!intra.ok && !inter.ok) throw SpecError("calibrate: the collectives' times give no bandwidth (all latency)");
    HardwareProfile hw;
    hw.intra_node = intra.ok ? intra.link : inter.link;
    hw.inter_node = inter.ok ? inter.link : intra.link;
    for (LinkProfile* link : {&hw.intra_node, &hw.inter_node}) {
      link->latency_ns = std::llround(static_cast<double>(link->latency_ns) * scale);
      link->bus_bandwidth_bytes_per_s /= scale;
    }
    hw.intra_node.name = fmt::format("Gloo between rank threads on {} (fitted)", host);
    hw.inter_node.name = inter.ok ? fmt::format("Gloo across emulated nodes on {} (fitted)", host) : hw.intra_node.name;
    std::array<double, kClasses> rate{};
    for (size_t c = 0; c < kClasses; ++c) rate[c] = cf.rate[c] / scale;
    const double hbm = std::max({rate[kLookup], rate[kTbeBackward], rate[kMemory]});
    hw.name = name;
    hw.description = fmt::format("cpu ranks of {}, fitted by embedscope calibrate from {} session(s)", host, data.size());
    hw.gpu.name = fmt::format("cpu ranks of {}", host);
    // the memory a simulated rank has: this machine's physical memory, which its cpu ranks share;
    // the sessions' devices.memory_bytes is a setting of their workloads (tiny's 64 MiB), and a
    // profile that kept it refused every larger workload (tester33 D8)
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    hw.gpu.memory_bytes = pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : memory_bytes;
    hw.gpu.hbm_bandwidth_bytes_per_s = hbm;
    hw.gpu.tbe_forward_efficiency = rate[kLookup] / hbm;
    hw.gpu.tbe_backward_efficiency = rate[kTbeBackward] / hbm;
    hw.gpu.memory_kernel_efficiency = rate[kMemory] / hbm;
    hw.gpu.dense_flops_per_s = rate[kDense];
    hw.gpu.dense_efficiency = 1.0;
    hw.gpu.kernel_launch_ns = std::llround(cf.launch_ns * scale);
    hw.gpus_per_node = kRanksPerMachine;
    hw.max_nodes = kRanksPerMachine;
    hw.cpu = measured ? CpuContention{cores, kThreadsPerRank, 0.0, penalty, background}
                      : CpuContention{cores, kThreadsPerRank, background, penalty, 0.0};
    // the hand-off: the mean over (rank, place, op) of the gaps' means (mean_ns), each over its
    // session's contention factor as the op durations (cost/handoff.h)
    double handoff = 0;
    for (const auto& [session, gap] : handoffs) handoff += gap / d[static_cast<size_t>(session)];
    if (!handoffs.empty()) handoff /= static_cast<double>(handoffs.size());
    hw.cpu.handoff_ns = std::llround(handoff * scale);
    return hw;
  };

  // ---- background load and step scale: the sessions simulated with the profile of each
  // candidate background b; log(measured / simulated) per session should be one constant (the
  // step scale), so b minimizes their spread (calibration.h)
  std::vector<int> rank_counts;
  for (const auto& sd : data) rank_counts.push_back(sd.ranks);
  std::sort(rank_counts.begin(), rank_counts.end());
  rank_counts.erase(std::unique(rank_counts.begin(), rank_counts.end()), rank_counts.end());
  TempFile file{(std::filesystem::temp_directory_path() / fmt::format("embedscope_calibrate_fit_{}.json", getpid())).string()};
  std::vector<double> log_k(data.size());
  auto spread = [&](double background) {
    HardwareProfile hw = profile_for(background, 1.0);
    double mean = 0;
    for (size_t i = 0; i < data.size(); ++i) {
      const int64_t handoff = hw.cpu.handoff_ns;  // fitted, not a load
      hw.cpu = load_of(data[i], background);
      hw.cpu.cores = cores;
      hw.cpu.handoff_ns = handoff;
      {
        std::ofstream f(file.path);
        if (!(f << to_json(hw).dump())) throw SpecError(fmt::format("calibrate: cannot write {}", file.path));
      }
      const int64_t sim = simulate_session(data[i].l, data[i].path, file.path, "");
      log_k[i] = std::log(static_cast<double>(data[i].measured_ns) / static_cast<double>(std::max<int64_t>(1, sim)));
      mean += log_k[i] / static_cast<double>(data.size());
    }
    double ss = 0;
    for (double v : log_k) ss += (v - mean) * (v - mean);
    return ss;
  };
  // one-dimensional search of f over [0, hi]: a grid of `step`, then golden-section search
  // around the best grid point to `tol`
  auto search = [&](const std::function<double(double)>& f, double hi, double step, double tol) {
    double best = 0, best_ss = f(0.0);
    for (double v = step; v <= hi + 1e-9; v += step)
      if (const double ss = f(v); ss < best_ss) best_ss = ss, best = v;
    double a = std::max(0.0, best - step), c = std::min(hi, best + step);
    const double g = (std::sqrt(5.0) - 1) / 2;
    double x1 = c - g * (c - a), x2 = a + g * (c - a), f1 = f(x1), f2 = f(x2);
    while (c - a > tol) {
      if (f1 <= f2) c = x2, x2 = x1, f2 = f1, x1 = c - g * (c - a), f1 = f(x1);
      else a = x1, x1 = x2, f1 = f2, x2 = a + g * (c - a), f2 = f(x2);
    }
    const double mid = (a + c) / 2;
    return f(mid) < best_ss ? mid : best;
  };
  const double hi = kMaxBackgroundPerCore * cores;
  double best = 0;
  if (measured) {  // the profile's: the calibration runs' median; the penalty fitted
    std::vector<double> b;
    for (const auto& sd : data) b.push_back(sd.groups);
    std::sort(b.begin(), b.end());
    best = b[b.size() / 2];
    if (rank_counts.size() >= 2)
      penalty = search([&](double v) { penalty = v; return spread(best); }, kMaxPenalty, 0.1, 1e-3);
  } else if (rank_counts.size() >= 2) {
    best = search(spread, hi, cores / 4.0, 1e-3 * cores);
  }
  spread(best);  // log_k at the chosen background and penalty
  double mean_log_k = 0;
  for (double v : log_k) mean_log_k += v / static_cast<double>(log_k.size());
  cal.step_scale = std::exp(mean_log_k);
  cal.profile = profile_for(best, cal.step_scale);
  HardwareProfile& hw = cal.profile;
  cal.cores = cores;
  cal.background_threads = measured ? 0.0 : best;
  cal.other_groups = measured ? best : 0.0;
  cal.background_measured = measured;
  cal.oversubscription_penalty = penalty;
  cal.compute_r2 = cf.r2;
  cal.compute_ops = static_cast<int>(compute.size());
  cal.kernel_launch_ns = hw.gpu.kernel_launch_ns;
  cal.handoff_ns = hw.cpu.handoff_ns;
  cal.handoff_samples = static_cast<int>(handoffs.size());
  for (size_t c = 0; c < kClasses; ++c)
    cal.fits.push_back({kClassNames[c], cf.count[c], cf.rate[c] / cal.step_scale, cf.fitted[c], cf.note[c]});
  if (intra.ok) cal.fits.push_back({"intra_node", intra.samples, hw.intra_node.bus_bandwidth_bytes_per_s, intra.fitted, intra.note});
  if (inter.ok) cal.fits.push_back({"inter_node", inter.samples, hw.inter_node.bus_bandwidth_bytes_per_s, inter.fitted, inter.note});
  cal.collective_r2 = intra.ok ? intra.r2 : inter.r2;

  // ---- where each number comes from
  std::string loads;
  for (const auto& sd : data) loads += (loads.empty() ? "" : ", ") + (sd.load.empty() ? std::string("?") : sd.load);
  const std::string from = fmt::format("embedscope calibrate from {} ({} compute ops, R^2 {:.3f})", list, cal.compute_ops,
                                       cal.compute_r2);
  const std::string per_core = fmt::format(
      "; per op with the node to itself: each session's durations divided by its contention factor (/cpu), and "
      "times the step scale {:.3f} (the sessions' measured / simulated step time, geometric mean: what per-op medians "
      "miss, e.g. the slowest rank's share of the cores)",
      cal.step_scale);
  auto fit_of = [&](const char* what) {
    for (const auto& f : cal.fits)
      if (f.what == what) return f.note;
    return std::string("copied from the other link: no collective of this kind in the sessions");
  };
  hw.sources = {
      {"/gpu/memory_bytes", "this machine's physical memory (sysconf _SC_PHYS_PAGES x _SC_PAGE_SIZE), which its cpu ranks "
                            "share"},
      {"/gpu/hbm_bandwidth_bytes_per_s", "the largest of the fitted lookup, TBE backward and memory-kernel rates; " + from + per_core},
      {"/gpu/tbe_forward_efficiency", "fitted lookup rate / hbm_bandwidth: " + fit_of("lookup")},
      {"/gpu/tbe_backward_efficiency", "fitted TBE backward rate / hbm_bandwidth: " + fit_of("tbe_backward")},
      {"/gpu/memory_kernel_efficiency", "fitted memory-kernel rate / hbm_bandwidth: " + fit_of("memory_kernels")},
      {"/gpu/dense_flops_per_s", "fitted dense rate (efficiency 1): " + fit_of("dense") + per_core},
      {"/gpu/kernel_launch_ns", "the fit's intercept (one fixed cost for every compute op); " + from + per_core},
      {"/cluster/gpus_per_node", "one machine holds every cpu rank (devices.count <= 64)"},
      {"/cluster/max_nodes", "emulated nodes (sharding.local_world_size) of the same machine"},
      {"/intra_node/bus_bandwidth_bytes_per_s",
       fit_of("intra_node") + fmt::format(" (R^2 {:.3f}), divided by the contention factor as the compute ops", cal.collective_r2) +
           per_core},
      {"/intra_node/latency_ns", "the collective fit's intercept" + per_core},
      {"/inter_node/bus_bandwidth_bytes_per_s", fit_of("inter_node")},
      {"/cpu/cores", cores_source},
      {"/cpu/threads_per_rank",
       "1: the cpu executor runs each rank's compute ops on one thread (engine exec/threaded/executor.cpp); its comm "
       "thread (Gloo) mostly waits while it computes"},
      {"/cpu/handoff_ns",
       fmt::format("the mean over {} (rank, place in the run, op) of the mean gap between an op and the end of its "
                   "dependency on the other thread (compute <-> comm: the wake-up, cost/handoff.h), each over its "
                   "session's contention factor",
                   handoffs.size()) +
           per_core},
      {"/cpu/oversubscription_penalty",
       measured && rank_counts.size() >= 2
           ? fmt::format("fitted: the value in [0, {:g}] for which the sessions' log(measured / simulated step time) "
                         "spread least (least squares; sessions of {} rank counts, each at its measured background)",
                         kMaxPenalty, rank_counts.size())
           : std::string("0, not fitted: it needs the sessions' measured load (cpu_self_cores, cpu_other_cores) and "
                         "two or more rank counts")},
      {"/cpu/other_groups",
       measured ? fmt::format("measured: the median over the sessions of cpu_other_cores / cpu_self_cores (the cores "
                              "other processes kept busy during each run over the cores it did: with the scheduler's "
                              "autogroup each busy task group gets an equal share); each session was normalized "
                              "with its own; load average at the runs' start: {}",
                              loads)
                : std::string("0: the sessions do not record their load (cpu_self_cores, cpu_other_cores)")},
      {"/cpu/background_threads",
       measured
           ? std::string("0: the sessions' measured load is in other_groups")
       : rank_counts.size() >= 2
           ? fmt::format("fitted: the value in [0, {:g}] for which the sessions' log(measured / simulated step time) "
                         "spread least (least squares; sessions of {} rank counts); load average at the runs' start: {}",
                         hi, rank_counts.size(), loads)
           : fmt::format("0, not fitted: the sessions have one rank count ({}), which does not tell contention from "
                         "speed; load average at the runs' start: {}",
                         rank_counts.front(), loads)},
  };
  return cal;
}

CalibrationCheck check_calibration(const std::string& session_path, const std::string& profile_path) {
  const ss::SessionReader reader(session_path);
  const Loaded l = load_session(reader, session_path);
  CalibrationCheck c;
  c.session = session_path;
  c.ranks = l.spec.devices.count;
  c.workload = fmt::format("{}, {} ranks, {}, {}{}", l.spec.name, l.spec.devices.count,
                           to_string(l.spec.sharding.default_type), to_string(l.spec.pipeline),
                           l.spec.network.limited() ? ", emulated network" : "");
  c.measured_ns = measured_step_ns(reader, session_path);
  c.measured_comm_ns = comm_step_ns(reader);
  TempFile out{(std::filesystem::temp_directory_path() / fmt::format("embedscope_calibrate_check_{}.db", getpid())).string()};
  c.simulated_ns = simulate_session(l, session_path, profile_path, out.path);
  c.simulated_comm_ns = comm_step_ns(ss::SessionReader(out.path));
  for (const char* suffix : {"-wal", "-shm"}) std::remove((out.path + suffix).c_str());
  c.other_groups = measured_other_groups(reader);
  c.background = c.other_groups >= 0 ? c.ranks * c.other_groups : -1.0;
  HardwareProfile hw = load_hardware_profile(profile_path);
  if (c.other_groups >= 0 && hw.cpu.cores > 0) {  // the same profile at the load this run had
    hw.cpu.background_threads = 0;
    hw.cpu.other_groups = c.other_groups;
    TempFile at_load{(std::filesystem::temp_directory_path() / fmt::format("embedscope_calibrate_load_{}.json", getpid())).string()};
    std::ofstream(at_load.path) << to_json(hw).dump();
    c.simulated_at_run_load_ns = simulate_session(l, session_path, at_load.path, "");
  }
  return c;
}

}  // namespace embedscope::engine

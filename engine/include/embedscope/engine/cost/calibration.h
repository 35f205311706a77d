#pragma once
// Calibration (issue 15, `this_machine`): the cost model's coefficients (cost_model.h) fitted
// to the ops and collectives that measured sessions of this engine recorded, written as a
// hardware profile that `--simulate PROFILE.json` and `scaling` accept, and a check of that
// profile: each session simulated with it, its median step time against the measured one.
//
// Compute ops: the session's compute-lane ops of every measured step, paired in order with the
// StepProgram's ops of that rank and step (the threaded executor runs the program's compute ops
// in program order; a (rank, step) whose names differ - a reshard, say - is skipped and counted).
// One sample per (rank, place in the run, op): the median of its durations over the measured
// steps (rank threads sharing cores have scheduling outliers of 10x). Each sample's duration t
// is fitted to the cost model's form
//   t = launch + x / rate_class
// by least squares on relative errors (each row divided by t, so that a 0.1 ms permute weighs
// as much as the dense part; an absolute fit hands the small ops' time to the intercept)
// with x the op's bytes (lookup: TBE forward; optimizer with rows: TBE backward; the rest:
// memory kernels) or flops (ops with flops: dense), one launch for all (the profile has one
// kernel_launch_ns). A coefficient the fit makes <= 0 (too few or too uniform samples) is taken
// out and the fit repeated (an active-set non-negative least squares, Lawson & Hanson 1974,
// "Solving Least Squares Problems", ch. 23); a class without a usable slope gets the memory
// kernels' rate (or its own mean x / t) and says so in the profile's sources.
// Per-item host work (lookup44; cost_model.h host_work_ns): three more columns of the same
// least squares, each nonzero only for its op - the lookup's bags pooled (empty ones included),
// the input op's ids, bucketize's scanned bags and ids (ProgramOp::work_items) - so that
//   t = launch + x / rate_class + items x item_ns
// (the profile's gpu.lookup_bag_ns, input_id_ns, bucketize_item_ns; a coefficient the fit makes
// <= 0 is taken out and left 0).
// Collectives: every member of every recorded collective: the call's time = the last member's
// end - the last member's start (the simulator gives every member the call's time: all leave at
// the last arrival + the longest member's cost; the next collective waits for the last to leave),
// the mean per rank, place, name and occurrence in the step (short, summed a dozen times a step
// and heavy-tailed under load, so a step holds their means), the waiting for peers left out
// (the simulator adds waits itself), fitted to latency + max(bytes sent, bytes received) / busbw
// (nccl-tests' model, cost_model.h; the bytes of the call's largest member), separately for
// groups within a node and groups that span nodes (sharding.local_world_size); without
// cross-node samples inter_node copies intra_node. A call within a node is fitted as the
// simulator times it (cost/shared_cores.h, calib39: processor sharing of the node's cores by
// its members, each member's own bytes): t / d = latency + x_eff / busbw with x_eff =
// processor_sharing_time(members' bytes, N, f) / f(N), f(m) the session's contention factor
// with m ranks runnable (x_eff = the largest member's bytes for a balanced call). Until 2026-12-04 each member's own end and
// the median were used: under load (criteo_kaggle 4 ranks tw, G 1.33) the member medians summed
// to 9.6 ms a step where the calls took 17.7.
// Hand-offs (cost/handoff.h): the gaps where an op waited for its thread to be woken after a
// dependency on the other thread (compute <-> comm), the mean per (rank, place, op) over the
// steps, each over its session's contention factor, averaged: the profile's cpu.handoff_ns.
// Until then these gaps (~6% of a step under load) were in no term but the step scale.
// Contention (the profile's "cpu", hardware_profile.h CpuContention): the N ranks of a session
// are threads on this machine's C cores (C: the sessions' cpu_cores metadata, else this
// process's affinity set), with b runnable threads of other work beside them, so each op of a
// session runs d = max(1, (N x 1 + b) / C) times slower than with the machine to itself (one
// compute thread per rank; a fair scheduler's processor sharing). Every compute duration and
// collective transfer time is divided by its session's d before the fits above, and the
// simulator multiplies them back (cost_model.h contention_factor), so one profile serves 2, 4
// or 8 ranks. b is fitted at the step level: for a candidate b the profile is fitted, every
// session simulated with it, and k_s = measured / simulated step time computed per session;
// a right b makes k_s the same for all sessions, so b minimizes the spread of log k_s (a grid of
// C / 4 over [0, 8 C], then golden-section search; sessions of one rank count cannot tell b from
// speed: b = 0). When every session records the load it shared the machine with (metadata
// cpu_self_cores, cpu_other_cores: sessions since 2026-12), the load is measured per session
// instead, as task groups: G_s = other / self (Linux's autogroup scheduling shares the cores
// equally between busy task groups, not threads, so the others were G_s groups' worth of us;
// CpuContention other_groups: the N ranks then run as N (1 + G_s) threads would, b = 0). Until
// 2026-12-04 the measured load was b_s = N x other / self threads, the same factor at the run's
// own N, but a profile's b taken from 2- and 4-rank runs was too small for 8 ranks: under load
// here the process got 0.37-0.61 of 2 cores at 2, 4 and 8 ranks alike (G 2.3-4.4), while
// N x other / self grew from 6.5 to 35. Each session is normalized with its own G_s, the
// profile's G is their median; then, with two or more rank
// counts, the oversubscription penalty p (CpuContention: time slicing's own cost once runnable
// threads outnumber the cores) is searched the same way as b otherwise is (grid 0.1 over
// [0, 2], golden-section), G being known. The geometric mean of k_s at that load is the step scale: every compute and
// collective coefficient (and the hand-off) is made that much slower (the simulated step is a
// max-plus system of the durations, so it scales exactly): what the step has beside them (the
// waits for the slowest rank in each step, which vary from step to step, the compute ops' tails).
// It was 1.29-1.36 with member medians and no hand-off, 1.04-1.10 since (calib15e).
// The profile: hbm_bandwidth = the largest of the three memory rates, efficiencies = each rate
// over it, dense_flops = the dense rate at efficiency 1, one node of 64 ranks (the cpu
// executor's most) with the sessions' devices.memory_bytes, max_nodes 1: this machine.
// Fits are honest only for what the sessions covered: the machine's other load b is the
// calibration runs' (a busier or idler machine later moves every step).

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/cost/dense_microbench.h"

namespace embedscope::engine {

/// One fitted coefficient set t = intercept_ns + x / rate, with its samples and fit quality.
struct CalibrationFit {
  /// "lookup", "tbe_backward", "dense", "memory_kernels", "lookup_bag", "input_id", "bucketize_item",
  /// "intra_node", "inter_node"
  std::string what;
  int samples = 0;          ///< ops (or collective members) of this class
  double rate = 0;          ///< bytes/s, or flop/s for dense, items/s for the per-item host work (0: none)
  bool fitted = false;      ///< false: the rate was taken from elsewhere (see note)
  std::string note;         ///< how the rate was obtained
  /// The coefficients the samples determine it with: a compute class's rate, the item
  /// coefficients fitted beside it on its ops and the launch all classes share (so 2 at least);
  /// an item coefficient 2, its own and the rate its ops' bytes carry (the launch is pinned by
  /// every op); a link's latency and bandwidth (+ the call's wait
  /// for a core when fitted). Fewer samples than parameters: the fit is undetermined.
  int parameters = 0;
  double r2 = 0;            ///< R^2 of the least squares it is part of (the compute fit, or the link's)
};

/// A fitted value that ended at the top of its search interval: the data's optimum lies beyond
/// it, so the value is not determined by the data (e.g. the sync lag at 3 ms on a noisy machine).
struct BoundHit {
  std::string field;  ///< the profile's JSON pointer, e.g. "/cpu/sync_lag_ns"
  double value = 0, bound = 0;
};

/// A session's steps as the fit's quality checks see them (calibration_quality.cpp).
struct SessionSteps {
  std::string session;
  int measured = 0;         ///< measured steps (steps >= 0)
  int warmup = 0;           ///< warm-up steps recorded (steps < 0)
  int64_t median_ns = 0;    ///< the nearest-rank p50 of the slowest rank's step times, ns
  int64_t slowest_ns = 0;   ///< the slowest measured step, ns
  int ranks = 0;
  std::string types;        ///< the plan's sharding types, as compare says them ("26 table_wise")
};

/// The result of calibrate.
struct Calibration {
  HardwareProfile profile;
  std::vector<CalibrationFit> fits;
  int64_t kernel_launch_ns = 0;    ///< the fitted fixed cost of a compute op
  double compute_r2 = 0;           ///< coefficient of determination of the compute fit, in (-inf, 1]
  double collective_r2 = 0;        ///< the same of the intra-node collective fit
  int compute_ops = 0;             ///< op samples used
  int skipped_rank_steps = 0;      ///< (rank, step) pairs whose ops did not match the program
  std::vector<std::string> sessions;
  int cores = 0;                   ///< the cores the ranks shared (profile.cpu.cores)
  double background_threads = 0;   ///< the fitted other load, runnable threads (profile.cpu)
  double step_scale = 1;           ///< measured / simulated step time before scaling, geometric mean
  bool background_measured = false;  ///< from the sessions' cpu_other_cores / cpu_self_cores, not fitted
  double oversubscription_penalty = 0;  ///< fitted when background_measured (profile.cpu), else 0
  double other_groups = 0;         ///< the measured other load in task groups (profile.cpu), 0 when not measured
  int64_t handoff_ns = 0;          ///< the fitted cross-thread hand-off (profile.cpu.handoff_ns), ns, step scale included
  int handoff_samples = 0;         ///< (rank, place, op) hand-off gaps it is the mean of (cost/handoff.h)
  double sync_lag_ns = 0;          ///< the fitted scheduling lag at a collective (profile.cpu.sync_lag_ns), ns
  /// The dense microbenchmark calibrate ran (dense_measured) and weighed the dense op's parts by.
  DenseMicrobench dense_bench;
  bool dense_measured = false;
  /// Why the bench gave no rates (its SpecError, e.g. no element-wise time left beside the
  /// GEMMs), the dense op then fitted at one rate; empty otherwise.
  std::string dense_bench_error;
  std::vector<BoundHit> at_bound;          ///< fitted values at their search bound (F2)
  std::vector<SessionSteps> session_steps;  ///< each fit session's steps, in the order given
};

/// What calibrate measures the dense op's rates with: measure_dense_rates in the CLI; tests give
/// fixed rates. Called once, with the first fit session's workload that has a dense part.
using DenseBench = std::function<DenseMicrobench(const WorkloadSpec&)>;

/// Fits this machine's profile (named `name`) from sessions this engine recorded on cpu ranks.
/// Simulates every session up to some 40 times (the fitted background's search; once when the
/// sessions record their load): seconds for a few sessions.
/// Throws SpecError naming the file for a session without workload_json / sharding_plan_json,
/// a simulated or imported session, an lm_embedding session, one process's session of a
/// multi-process run (sessions::partial_rank_session: "X.rank1.db: the session of rank 1 alone
/// of a 2-rank run ...; calibrate from the merged session X.db ..."), or one without a measured step;
/// and when all sessions together give no compute op or no collective to fit.
/// With `dense_bench` (dense44): the dense op is fitted in parts. Its rates measured by the bench
/// (GEMM flop/s Rg, interaction ops/s Ri, element-wise ops/s Re), each dense sample's work is
///   x = gemm_flops + interaction_ops x Rg / Ri + elementwise_ops x Rg / Re
/// (GEMM-rate flops), the fitted rate is the GEMM rate (dense_flops_per_s, step-scaled as
/// before), and the profile's dense_interaction_ops_per_s / dense_elementwise_ops_per_s are it
/// x Ri / Rg and x Re / Rg: the bench gives the ratios, the sessions the scale. Without it (or
/// when no session has a dense part, or the bench throws SpecError: Calibration::dense_bench_error
/// says why), one rate for all of the op's flops, as before.
Calibration calibrate(const std::vector<std::string>& session_paths, const std::string& name = "this_machine",
                      const DenseBench& dense_bench = {});

/// A hardware profile as the JSON parse_hardware_profile reads (round trip).
nlohmann::json to_json(const HardwareProfile& p);

/// One session simulated with a profile: the median over measured steps of the slowest rank's
/// step time, measured (the session's steps table) and simulated; and the collectives' time:
/// per step and rank the sum of its collectives' transfer times (end - the last member's
/// start, waiting for peers left out), the mean over ranks, the median over steps, both ns.
struct CalibrationCheck {
  std::string session;
  /// for people: name, ranks, the types of the plan run (sessions::plan_types, as compare says
  /// them) and the pipeline: "criteo_kaggle, 4 ranks, 26 row_wise, base",
  /// "tiny, 2 ranks, 5 table_wise + 1 row_wise + 2 column_wise, base"
  std::string workload;
  /// workload plus the batch size per rank: two checks of one config are runs of one workload
  /// ("criteo_kaggle, 2 ranks, 26 table_wise, base, batch 512")
  std::string config;
  int ranks = 0;
  int64_t measured_ns = 0, simulated_ns = 0;
  int64_t measured_comm_ns = 0, simulated_comm_ns = 0;
  /// The run's own other load: other_groups = cpu_other_cores / cpu_self_cores (-1 when the
  /// session does not record them), background = ranks x other_groups (its equivalent in
  /// runnable threads, -1 likewise), and the step simulated with the profile at that load
  /// instead of the profile's (0 when not simulated): what the model says for the machine as
  /// busy as it was.
  double other_groups = -1;
  double background = -1;
  int64_t slowest_ns = 0;  ///< the run's slowest measured step (its slowest rank), ns: a bursty run's is many medians
  int64_t simulated_at_run_load_ns = 0;
  double error_at_run_load() const {  ///< (simulated at the run's load - measured) / measured; 0 without
    return measured_ns > 0 && simulated_at_run_load_ns > 0
               ? static_cast<double>(simulated_at_run_load_ns - measured_ns) / static_cast<double>(measured_ns)
               : 0.0;
  }
  double error() const {       ///< (simulated - measured) / measured
    return measured_ns > 0 ? static_cast<double>(simulated_ns - measured_ns) / static_cast<double>(measured_ns) : 0.0;
  }
  double comm_error() const {  ///< (simulated - measured) / measured collectives' time; 0 without
    return measured_comm_ns > 0
               ? static_cast<double>(simulated_comm_ns - measured_comm_ns) / static_cast<double>(measured_comm_ns)
               : 0.0;
  }
};

/// Simulates the session's workload and plan with the profile file `profile_path` (its
/// devices.backend set to simulated; its emulated network, if any, kept: the simulator floors
/// each collective at the emulation's time) and compares step and collective times. Writes
/// and removes a temporary session in the temp directory. Throws what calibrate throws for
/// the session, and SpecError when the simulation does not complete.
CalibrationCheck check_calibration(const std::string& session_path, const std::string& profile_path);

/// The steps of a measured session (SessionSteps). Throws SpecError naming `path` for a session
/// without a measured step or without workload_json / sharding_plan_json.
SessionSteps session_steps(const std::string& path);

/// Below this many measured steps a session's per-op medians are few (calibrate warns).
inline constexpr int kMinCalibrationSteps = 5;
/// A session whose slowest step is this many times its median ran on a machine busy in bursts.
inline constexpr double kBurstySpread = 4.0;

/// What calibrate says about its own fit: warnings (one sentence each: a session of few steps or
/// no warm-up, a bursty session, one rank count or one sharding type over the sessions, a rate
/// class with fewer than 2 samples per parameter, a collective fit of R^2 < 0.5, a value at its
/// search bound), and `undetermined` (a rate with fewer samples than parameters: calibrate
/// refuses to write the profile without --force).
struct FitAssessment {
  std::vector<std::string> warnings;
  std::vector<std::string> undetermined;
};
FitAssessment assess_fit(const Calibration& cal);

/// One sentence for a check run whose slowest step is >= kBurstySpread x its median: its "at
/// load" figure applies the run's mean load to its median step (F9); "" otherwise.
std::string bursty_check_text(const CalibrationCheck& c);

/// The profile's "fit_quality" object (cost/profile_trust.h reads it): {"sessions", "steps":
/// [{"session", "measured", "warmup", "median_ns", "slowest_ns"}], "rates": [{"what", "points",
/// "parameters", "r2", "fitted"}], "at_bound": [{"field", "value", "bound"}], "checks":
/// [{"session", "in_sample", "error", "error_at_load" (null without), "slowest_over_median"}],
/// "step_error": {"in_sample": {"runs", "min", "max"}, "held_out": {...}} (a key only with runs),
/// "warnings", "forced"}. checks: (check, in sample).
nlohmann::json fit_quality_json(const Calibration& cal, const std::vector<std::pair<CalibrationCheck, bool>>& checks,
                                const std::vector<std::string>& warnings, bool forced);

}  // namespace embedscope::engine

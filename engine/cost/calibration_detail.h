#pragma once
// The parts of calibrate (cost/calibration.h) shared by its source files; private to engine/cost.
//   calibration_fit.cpp       the least-squares fits: compute ops' rates, collectives' links
//   calibration_sessions.cpp  reading measured sessions into samples, simulating a session
//   calibration.cpp           calibrate (load, step scale, the profile and its sources), the check
#include <array>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <Eigen/Dense>

#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/model/dense_work.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::sessions {
class SessionReader;
}

namespace embedscope::engine::calib {

/// A session's workload and sharding plan as calibrate pairs its ops with.
struct Loaded {
  WorkloadSpec spec;
  ShardingPlan plan;
  int local = 1;  ///< ranks per node (sharding.local_world_size, resolved)
};

/// The session's workload_json and sharding_plan_json parsed. Throws SpecError naming `path` for a
/// simulated session, one without those metadata (imported), non-JSON, or an lm_embedding session.
Loaded load_session(const sessions::SessionReader& reader, const std::string& path);

/// Active-set non-negative least squares (Lawson & Hanson 1974, ch. 23): the coefficients of X's
/// columns (X: rows x k, y: rows); columns made <= 0 are taken out, set to 0 and marked false in
/// `active` (size k, all true on entry). Columns are scaled to unit maximum for the solve.
std::vector<double> nnls(const Eigen::MatrixXd& X, const Eigen::VectorXd& y, std::vector<bool>& active);

/// Coefficient of determination of y ~ X beta, in (-inf, 1]; 1 when y is constant.
double r_squared(const Eigen::MatrixXd& X, const Eigen::VectorXd& y, const std::vector<double>& beta);

/// The median of v (ns, or any integer): the nearest-rank p50, the lower middle of an even count, as
/// run and stats print it (sessions::median_nearest_rank; tester46 F13); 0 for an empty v.
int64_t median(std::vector<int64_t> v);

/// The mean of v, ns; 0 for an empty v. The typical time of a collective or a hand-off over a
/// run's steps (short, summed a dozen times a step and heavy-tailed under load: a step holds
/// their means; compute ops keep the median, calib15e).
double mean_ns(const std::vector<int64_t>& v);

/// Compute classes: column 1 + class of the compute fit's design matrix; column 0 the launch.
enum Class { kLookup = 0, kTbeBackward, kDense, kMemory, kClasses };
inline constexpr std::array<const char*, kClasses> kClassNames = {"lookup", "tbe_backward", "dense", "memory_kernels"};

/// One compute sample: the (rank, place, op)'s median duration t (ns) and its work x (bytes, or
/// flops for kDense), of session `session` (an index into calibrate's sessions).
/// work / items: the op's per-item host work (program/step_program.h HostWork as an int,
/// ProgramOp::work_items; 0 / 0 for none), a column of its own in the compute fit; work2 /
/// items2: its second term (ProgramOp::work2, work2_items: the lookup's row lines), another.
struct Sample {
  int cls;
  double x, t;
  int session;
  DenseWork dense{};  ///< kDense: the op's work by kind (x is then its flops until calibrate weighs the parts)
  int work = 0;
  double items = 0;
  int work2 = 0;
  double items2 = 0;
  /// busy[k]: the share of the op's measured time (over its steps) during which k compute ops
  /// were running on its node, itself included (k >= 1; busy[0] unused; the shares sum to 1;
  /// empty when not measured): its measured concurrency (cost/shared_cores.h compute_concurrency, conc46)
  std::vector<double> busy;
  /// the op's own contention factor (> 0: set by calibrate from `busy`, shared_cores.h op_dilation), what the
  /// compute fit divides t by; 0: the session's d
  double dilation = 0;
};

/// The per-item host-work kinds the compute fit has a column for: HostWork values 1..5
/// (lookup_bags, input_ids, bucketize_items, update_row_lines, lookup_row_lines), column
/// 1 + kClasses + (work - 1).
inline constexpr int kWorkKinds = 5;
inline constexpr std::array<const char*, kWorkKinds> kWorkNames = {"lookup_bag", "input_id", "bucketize_item",
                                                                   "update_line", "lookup_line"};

/// One collective sample: the (rank, place, name, occurrence)'s mean call time t (ns) and the
/// call's largest member's bytes x; spans: the group spans (emulated) nodes; members: each
/// member's bytes (max of sent and received; the medians over the steps of the sorted lists),
/// for the processor-sharing form of a call on one node (cost/shared_cores.h).
struct CommSample {
  int session;
  bool spans;
  double x, t;
  std::vector<double> members;
};

/// The compute fit: launch (ns) and one rate per class (bytes/s, flop/s for dense), whether
/// the least squares gave it, how it was obtained, its samples, and R^2 of the durations.
struct ComputeFit {
  double launch_ns = 0;
  std::array<double, kClasses> rate{};
  std::array<bool, kClasses> fitted{};
  std::array<std::string, kClasses> note{};
  std::array<int, kClasses> count{};
  double r2 = 0;
  /// per-item host work (kWorkNames), ns per item, 0 when the fit took it out; samples of each
  std::array<double, kWorkKinds> item_ns{};
  std::array<int, kWorkKinds> item_count{};
  /// why an item coefficient was not fitted (empty when it was)
  std::array<std::string, kWorkKinds> item_note{};
};

/// The compute ops' t / d[session] = launch + x / rate_class + items x item_ns[work] (calibration.h),
/// on relative errors; an item column that is an affine function of its classes' bytes over their
/// rows (not identifiable: it would trade off against the rate) is left out, item_ns 0, item_note says so;
/// d: each session's contention factor. Throws SpecError when a class gets no rate at all.
ComputeFit fit_compute(const std::vector<Sample>& compute, const std::vector<double>& d);

/// A link fit: ok when it gives a bandwidth; fitted when the least squares gave the slope.
struct LinkFit {
  bool ok = false, fitted = false;
  LinkProfile link;
  /// a call's wait for a core on an oversubscribed node (hardware_profile.h call_wait_ns), ns;
  /// wait_fitted: the samples' oversubscribed shares spread enough to fit it (else 0)
  double wait_ns = 0;
  bool wait_fitted = false;
  int samples = 0;
  std::string note;
  double r2 = 0;
};

/// Collectives of one link class (`spans`: across nodes): t / d[session] = latency + x / busbw +
/// share[session] / d[session] x wait (share: the session's oversubscribed_share, shared_cores.h;
/// wait: call_wait_ns, fitted only when the samples' share / d span >= 0.25, e.g. 2 and 4 ranks on 2
/// cores at no other load (0 and 0.5), else 0: it would trade off against the latency),
/// with, for a call on one node (not spans) whose members' bytes are known, x the effective
/// bytes of processor sharing (cost/shared_cores.h: with w_i = latency + x_i / busbw the call
/// takes latency x f(R) + processor_sharing_time(x, R, f) / busbw, so x = that sum / f(R));
/// f[session][m]: the session's contention factor with m ranks runnable (m = 0..its ranks),
/// d[session] = f[session][ranks]. Not ok with fewer than 2 samples or no bandwidth.
LinkFit fit_link(const std::vector<CommSample>& comm, bool spans, const std::vector<double>& d,
                 const std::vector<std::vector<double>>& f, const std::vector<double>& share);

/// The effective bytes of a one-node call (see fit_link): processor_sharing_time(members, R, f)
/// / f[R] with R = f.size() - 1 the session's ranks; `x` (the largest member's) when members is
/// empty or has more entries than R.
double effective_bytes(const CommSample& c, const std::vector<double>& f);

/// One measured session as calibrate uses it.
struct SessionData {
  std::string path;
  Loaded l;
  int ranks = 1;            ///< devices.count: every rank a thread of this machine
  int cores = 0;            ///< metadata cpu_cores; 0 when absent (sessions before 2026-12)
  std::string load;         ///< metadata load_average_1m
  double groups = -1;       ///< measured other load in task groups (calibration.h); -1 unknown
  int64_t measured_ns = 0;  ///< median over measured steps of the slowest rank's step time
  double wait_ns = 0;       ///< mean_wait_ns of the session: its members' mean wait for the last arrival
};

/// What the sessions give the fits: compute samples, collective samples, hand-off gaps
/// ((session, mean gap ns) per (rank, place, op)), and (rank, step)s that did not match their program.
struct CalibrationSamples {
  std::vector<Sample> compute;
  std::vector<CommSample> comm;
  std::vector<std::pair<int, double>> handoffs;
  int skipped_rank_steps = 0;
};

/// Reads the measured session `path` (index `session` among calibrate's sessions): its data, and
/// its samples appended to `out` (calibration.h: compute ops paired with the StepProgram, the
/// collectives' call times, the hand-off gaps). Throws SpecError naming the file (load_session's
/// errors, no measured step, no compute op of a measured step).
SessionData read_session(const std::string& path, int session, CalibrationSamples& out);

/// The run's other load as task groups: cpu_other_cores / cpu_self_cores; -1 without them.
double measured_other_groups(const sessions::SessionReader& reader);

/// The median over measured steps of the slowest rank's step time, ns. Throws SpecError naming
/// `path` without a measured step.
int64_t measured_step_ns(const sessions::SessionReader& reader, const std::string& path);

/// The collectives' waits of a session, ns: per call of a measured step the mean over its
/// members of (the last member's arrival - the member's arrival), the mean over the calls; 0
/// without collectives. A measured session's is what calibrate fits the sync lag to.
double mean_wait_ns(const sessions::SessionReader& reader);

/// The collectives' time of a session (CalibrationCheck::measured_comm_ns), ns; 0 without collectives.
int64_t comm_step_ns(const sessions::SessionReader& reader);

/// A session's workload and plan simulated with the profile file `profile_path`: the median
/// slowest-rank step time, ns; the session written to `session_out` when not empty. Throws
/// SpecError naming `path` when the simulation does not complete.
int64_t simulate_session(const Loaded& l, const std::string& path, const std::string& profile_path,
                         const std::string& session_out);

/// gethostname, or "this machine".
std::string host_name();

/// Removes a file when it goes out of scope.
struct TempFile {
  std::string path;
  ~TempFile() {
    if (!path.empty()) std::remove(path.c_str());
  }
};

}  // namespace embedscope::engine::calib

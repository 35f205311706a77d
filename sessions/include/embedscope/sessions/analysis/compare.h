#pragma once
// The figures that Compare sets side by side (`embedscope compare`, the workbench's File >
// Compare Sessions and its --compare --report): one value per figure and session, and each
// session's difference from the first (the baseline), with the text both print. The CLI and the
// workbench's CompareModel read every number and every cell's text from here, so they cannot
// disagree.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/analysis/noise.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::sessions {

/// A session's throughput in its own unit: `per_s` units a second over the mean step time;
/// `unit` "samples" (a DLRM run), "tokens" (an lm_embedding run), or "" where the session has
/// none (an imported trace; then per_s is 0). The engine computes it (engine::throughput_of), as
/// only it knows what an lm_embedding step holds.
struct SessionRate {
  double per_s = 0;
  std::string unit;
  /// The units a step trains (samples or tokens; 0: not known, e.g. an imported trace). Two
  /// sessions that train different amounts a step have throughputs that no step-time noise
  /// explains (tester52 F2).
  int64_t per_step = 0;
};

/// What the bytes-on-the-wire figures need beside a session's analysis (wire_facts).
struct WireFacts {
  /// collective_bytes_unknown(session) (analysis.h): an imported trace whose collectives carry
  /// no byte, so its wire figures read "unknown" (text) / null (JSON), not 0 B.
  bool bytes_unknown = false;
  /// The bytes sent by Embedscope's split checks ("<name>/split_check" all-gathers of the split
  /// sizes before each all-to-all and reduce-scatter), every rank's, over the counted steps (the
  /// steps of RunStats::per_step not drained): left out of the bytes per token, as `run`, `plan`
  /// and `scenario` leave them out (Megatron and TorchRec run none).
  int64_t split_check_bytes = 0;
};
/// The wire facts of `session`, whose analysis is `stats` (analyze(session)). Reads the
/// session's collectives; throws SessionError on an unreadable file.
WireFacts wire_facts(const SessionReader& session, const RunStats& stats);

/// One session as Compare sees it: its analysis (analyze), its throughput, and whether it was
/// imported (meta imported = 1: no host-thread figures beside its GPU streams').
struct ComparedSession {
  RunStats stats;
  SessionRate rate;
  bool imported = false;
  /// An imported trace's comm/comp overlap as Holistic Trace Analysis computes it (hta_overlap_pct,
  /// the figure `import` and `stats` print in their GPU kernels table); none for an engine run or
  /// a trace without communication kernels (tester48 F13).
  std::optional<double> hta_overlap_pct = std::nullopt;
  WireFacts wire = {};  ///< for WireBytesPerStep / WireBytesPerToken (wire_facts)
  /// Set by apply_run_to_run_noise: the index, among the compared sessions, of the first one
  /// that ran the same configuration as this one (same_configuration; itself when none before
  /// it did); -1 when not set or the session has no counted step.
  int configuration = -1;
  /// Set by apply_run_to_run_noise: the comparison's run-to-run noise of the mean step time, in %
  /// of the faster run (RunToRunNoise::spread_pct); none when no two compared sessions ran the
  /// same configuration (the verdicts are within-run only then).
  std::optional<double> run_to_run_pct = std::nullopt;
};

/// The mean over ranks with communication kernels of HTA's comm/comp overlap (gpu_kernels.h
/// gpu_kernel_figures, the last profiler step dropped as HTA and `stats` do: 100 * |computation
/// kernels ∩ communication kernels| / |communication kernels|, in %), for an imported session
/// (meta imported = 1); none for an engine run or where no rank has communication kernels.
/// trace_diff_test.json.gz: 68.80; nccl_data.json.gz: 14.31. Reads the stream lanes' ops.
/// Throws SessionError on an unreadable file.
std::optional<double> hta_overlap_pct(const SessionReader& session);

/// The rows of a comparison, in order. Units of the raw values: ns (step times, exposed
/// communication per rank and counted step: RunStats::counted_steps), units/s (throughput), % (overlap, GPU busy),
/// bytes (peaks, bytes on the wire), a ratio (imbalances), nats (loss: binary cross-entropy), a
/// fraction (AUC).
enum class CompareFigure : int {
  StepMean,             ///< RunStats::step_time_ns.mean
  StepP50,              ///< RunStats::step_time_ns.p50
  StepP99,              ///< RunStats::step_time_ns.p99
  StepMin,              ///< RunStats::step_time_ns.min: with StepMax the spread of the measured steps
  StepMax,              ///< RunStats::step_time_ns.max (tester41 #4)
  Throughput,           ///< SessionRate::per_s
  ExposedComm,          ///< RunStats::exposed_comm_ns / steps (a GPU run's: its streams')
  HostExposedComm,      ///< the host threads' exposed comm / steps: a GPU run's gpu_busy_figures
                        ///< host_exposed_comm_ns, a cpu or simulated run's exposed_comm_ns
  GpuBusy,              ///< gpu_busy_figures mean_pct (GPU runs only)
  Overlap,              ///< RunStats::overlap_pct
  HtaOverlap,           ///< ComparedSession::hta_overlap_pct (imported traces only; tester48 F13)
  PeakAllocated,        ///< RunStats::peak_allocated_bytes (the largest rank)
  PeakReserved,         ///< RunStats::peak_reserved_bytes (the largest rank)
  /// RunStats::lookups_max_over_mean_per_step: each step's max/mean, averaged over the steps
  LookupImbalancePerStep,
  LookupImbalance,      ///< RunStats::lookups_max_over_mean (the run's totals)
  LookupTimeImbalance,  ///< RunStats::lookup_time_max_over_mean
  Loss,                 ///< RunStats::loss of the last measured step (tester41 #20)
  HeldOutAuc,           ///< RunStats::held_out_auc
  /// Bytes sent per step, all ranks: the ranks' bytes_sent over the counted steps (RunStats::ranks,
  /// the session's collective rows as `stats` and `scenario` count them, split checks included) /
  /// RunStats::counted_steps. "unknown" where WireFacts::bytes_unknown.
  WireBytesPerStep,
  /// (those bytes - WireFacts::split_check_bytes) / (SessionRate::per_step x counted steps), for
  /// a session whose rate is in tokens (an lm_embedding run) - `run`'s "bytes on the wire per
  /// token": vocab_parallel 4 ranks V 1000, H 16, S 32, B 2, fp32: 840; data_parallel 1,525.6.
  WireBytesPerToken,
  Count
};
inline constexpr int kCompareFigureCount = static_cast<int>(CompareFigure::Count);

/// The row's name for people: "step time mean", ..., "exposed communication (per rank and step)",
/// "exposed communication, host threads (per rank and step)", "GPU busy (mean over ranks)", ...
const char* compare_figure_name(CompareFigure f);
/// The row's key in `embedscope compare --json`: "step_time_mean_ns", "throughput_per_s",
/// "exposed_comm_ns_per_rank_step", "host_exposed_comm_ns_per_rank_step", "gpu_busy_pct", ...
const char* compare_figure_key(CompareFigure f);

/// The raw value of `f` for `s`, or none where the session did not measure it: no measured step
/// (every figure but the peaks), no memory counters (the peaks: a trace), no load counters (the
/// imbalances: a trace), no unit (throughput: a trace), no GPU streams (GPU busy), an imported
/// trace's host threads (host exposed communication), unknown collective bytes (the wire
/// figures: WireFacts::bytes_unknown), no tokens (bytes per token). Never throws.
std::optional<double> compare_value(const ComparedSession& s, CompareFigure f);

/// `v` (a raw value of `f`) as text: durations on format_duration's ladder ("1.20 ms"), rates as
/// format_rate writes them with the unit ("691 samples/s"; `unit` "samples"), "12.5 %",
/// bytes as format_bytes, ratios with two decimals.
std::string compare_value_text(CompareFigure f, double v, const std::string& unit = "");

/// A session's cell: its value's text, or "-" where compare_value has none ("unknown" for the
/// wire figures of a session with measured steps whose collective bytes are unknown).
std::string compare_cell_text(const ComparedSession& s, CompareFigure f);

/// The difference of `other` from `base` in one figure.
struct CompareDelta {
  std::optional<double> diff;     ///< other - base (raw units); none when either is unmeasured or units differ
  std::optional<double> percent;  ///< 100 * diff / base; none for overlap and GPU busy (points), a 0 base
  /// "+1.20 ms (+15.3 %)", "-4.2 points" (overlap, GPU busy: a difference of percentages),
  /// "-2000 tokens/s (-50.0 %)", "-" (unmeasured), "units differ (tokens/s vs samples/s)";
  /// "-0.000003 (-0.0004 %)" where the two values' texts differ but the difference would round
  /// to zero (loss 0.66410 vs 0.66409: tester50 F12), with the decimals it needs, up to 12.
  std::string text;
  bool within_noise = false;  ///< StepMean / StepP50 / Throughput: see within_noise()
  /// Set where the two values measure different things, so no difference is computed (diff and
  /// percent none, text "not comparable (GPU streams vs host threads)"): figure_level's of
  /// `other` vs `base` ("GPU streams vs host threads"); "" otherwise.
  std::string not_comparable;
};
/// The difference of `other` from `base` in `f`. Where the two sessions' figures of `f` are of
/// different levels (figure_level: exposed communication and overlap of GPU streams against
/// those of host threads or simulated ranks; tester54 F5: a trace's -69.2 % against a cpu run's
/// read as a finding) none is computed: CompareDelta::not_comparable says why.
CompareDelta compare_delta(const ComparedSession& base, const ComparedSession& other, CompareFigure f);

/// What the session's value of `f` measures, where sessions can differ in it: for ExposedComm
/// and Overlap (their communication and compute are the ops of a lane level) "GPU streams"
/// (RunStats::stream_ranks: kernels and copies of an imported trace or a cuda run), "simulated
/// ranks" (the cost model's ops of a simulation) or "host threads" (a cpu run's spans); "" for
/// every other figure, which measures the same in every session (HostExposedComm is the host
/// threads' in all that have it). Two sessions whose levels differ are not compared in `f`
/// (compare_delta), except "simulated ranks" against "host threads": a simulation's ops are
/// modelled per rank as a cpu run's threads run them, the comparison a simulation is made for.
std::string figure_level(const ComparedSession& s, CompareFigure f);

/// The line that says where compared sessions' communication, overlap and idle figures are of
/// different levels (GPU streams beside host threads or simulated ranks; tester38 #1, tester45
/// F12.2), "" where they are not: "not the same measure: the communication, overlap and idle
/// figures of B are its GPU streams' (kernels and copies), those of A its host threads' spans;
/// differences between GPU-stream figures and the others are not computed (not comparable); " then, where every
/// session has host-thread figures (a cuda run records its threads beside its streams), "the row
/// 'exposed communication, host threads' compares the host threads of all"; else which sessions
/// have none (an imported trace's host threads are not analysed: tester54 F5, the row it named
/// was empty) and that no row compares them like for like with the host-thread and simulated
/// sessions ("no row compares B like for like with A: B has no host-thread figures ...").
/// `labels` as many as `sessions`. Plain text: the CLI prints it, the workbench escapes it.
std::string measure_note(const std::vector<ComparedSession>& sessions, const std::vector<std::string>& labels);

/// How the within-run test judges a mean step time's standard error.
enum class StepTestMethod {
  /// Welch's t on the steps as independent values (var sd^2 / n, df n - 1): where neither
  /// series' lag-1 autocorrelation exceeds the white-noise bound (white_noise_lag1_bound), so the
  /// steps show no sign of the drift that batch means guards against, and the test has the n - 1
  /// degrees of freedom the data has (tester63a F2: 10 steps a run gave batch means df 2.4).
  WelchSteps,
  /// Batch means (noise.h batch_means, Flegal & Jones 2010, df a - 1 a run): where either
  /// series' lag-1 autocorrelation exceeds the bound (the steps drift, so they are not
  /// independent samples).
  BatchMeans,
};
/// "welch_steps", "batch_means".
const char* step_test_method_key(StepTestMethod m);

/// Fewer batches than this in either series leave the batch-means test without power to tell a
/// difference (df a - 1 < 4 a run: critical t 2.78 to 12.7): where it then finds none, the
/// verdict is "too few steps to tell" (StepVerdict::TooFewSteps), not "within noise".
inline constexpr int64_t kMinPoweredBatches = 5;
/// The step count from which every run has kMinPoweredBatches batches: a = floor(n / floor(sqrt(n)))
/// is 5 at n 15 but 4 at n 16-19, and >= 5 from n 20 on.
inline constexpr int64_t kMinPoweredBatchSteps = 20;

/// The within-run test of two series of per-step times (ns, in step order), two-sided at 95 %
/// (two_means_test, Welch-Satterthwaite df): by Welch's t on the steps where both series' lag-1
/// autocorrelations are within 1.96 / sqrt(n) (StepTestMethod::WelchSteps), else by each mean's
/// batch-means standard error (StepTestMethod::BatchMeans).
struct StepTimeTest {
  StepTestMethod method = StepTestMethod::BatchMeans;
  double base_lag1 = 0;   ///< lag1_autocorrelation of the baseline's series
  double other_lag1 = 0;  ///< of the other session's
  double base_bound = 0;  ///< white_noise_lag1_bound of the baseline's step count
  double other_bound = 0; ///< of the other's
  BatchMeans base;      ///< the baseline's batch means (n, mean and iid_se hold for either method)
  BatchMeans other;     ///< the other session's
  double diff_ns = 0;   ///< other.mean - base.mean
  double se_ns = 0;     ///< the standard error of diff_ns the test used
  WelchTest test;       ///< t = diff_ns / se_ns, df, critical, differs
  /// BatchMeans with fewer than kMinPoweredBatches batches in either series and no difference
  /// found: the test could not have told a difference (StepVerdict::TooFewSteps).
  bool powerless = false;
};

/// The test above of two series; nullopt when either has fewer than kMinWelchSamples values.
/// Example (tested; tester63a F2, ms): A 212.1 220.5 225.6 242.1 310.1 219.3 237.8 242.7 364.9
/// 445.9 (r1 0.3669), B 516.8 615.5 562.5 579.4 649.2 279.7 784.6 725.6 768.0 589.4 (r1
/// -0.1863), both within 0.6198: WelchSteps, t 6.406, df 13.73 (critical 2.160): differs.
std::optional<StepTimeTest> step_series_test(const std::vector<int64_t>& base, const std::vector<int64_t>& other);

/// step_series_test of the two sessions' counted steps (RunStats::step_series_ns); nullopt when
/// either has fewer than kMinWelchSamples counted steps, or either session is simulated (a cost
/// model's steps have no noise to test: step_verdict says Simulated or ModelVsMeasured).
std::optional<StepTimeTest> step_time_test(const ComparedSession& base, const ComparedSession& other);

/// Whether two sessions ran the same configuration, so that the difference of their step times
/// is run-to-run noise: both are runs (not imported), recorded the same workload (workload_json,
/// as JSON, every setting but "steps": pipeline, precisions, tables, batch, seed ...), the same
/// sharding plan (sharding_plan_json, as JSON), world size, backend, simulated or not, and host
/// (metadata host, where both recorded one). What comparison_warnings and differing_settings
/// call "not like-for-like" or list as differing is never the same configuration. Never throws.
bool same_configuration(const SessionReader& a, const SessionReader& b);

/// The run-to-run noise a comparison measured: the sessions that repeat a configuration.
struct RunToRunNoise {
  struct Group {
    std::vector<size_t> sessions;  ///< indices of the compared sessions of one configuration (>= 2)
    double fastest_mean_ns = 0;    ///< the smallest of their mean step times
    double spread_ns = 0;          ///< the largest minus the smallest mean step time
    double spread_pct = 0;         ///< 100 x spread_ns / fastest_mean_ns
  };
  std::vector<Group> groups;  ///< in order of each group's first session; empty: not measured
  /// The largest group's spread in %, the noise other pairs are held against (0: not measured),
  /// and the spread in ns of that group.
  double spread_pct = 0;
  double spread_ns = 0;
  /// The compared sessions with counted steps that are simulated / measured: simulated ones are
  /// in no group (a cost model repeats its step times exactly: no run-to-run noise to measure).
  int simulated_sessions = 0;
  int measured_sessions = 0;
  bool baseline_simulated = false;  ///< the first compared session is simulated
  bool measured() const { return !groups.empty(); }
};

/// Groups the compared sessions (`sessions[i]` the reader of `cs[i]`) by same_configuration,
/// among the measured (not simulated) ones with counted steps (the same file twice is no repeat), and sets each ComparedSession's `configuration` and
/// `run_to_run_pct`. Example (tested): mean steps A 20 ms, B (A's configuration) 26 ms, C 30
/// ms: one group {A, B}, spread 6 ms = 30 %; C's +50 % is beyond it. Never throws.
RunToRunNoise apply_run_to_run_noise(std::vector<ComparedSession>& cs, const std::vector<const SessionReader*>& sessions);

/// What a comparison says of a step-time difference.
enum class StepVerdict {
  NotTested,          ///< fewer than kMinWelchSamples counted steps in either, no run-to-run noise
  /// The within-run test had no power (StepTimeTest::powerless) and found no difference, and no
  /// run-to-run noise decides it: "too few steps to tell", never "within noise"
  TooFewSteps,
  /// Both sessions simulated: a cost model's step times do not vary from run to run, so the
  /// difference is the model's, exact; no test
  Simulated,
  /// One session simulated, the other measured: a model-vs-measurement comparison; the relative
  /// difference is the model's error against that run, with no significance verdict
  ModelVsMeasured,
  SameConfiguration,  ///< a repeat of the baseline's configuration: the difference is run-to-run noise
  WithinStepNoise,    ///< the within-run test finds no difference
  WithinRunToRun,     ///< |difference| <= run_to_run_pct of the faster mean: noise on this machine
  Differ,             ///< beyond the within-run noise and (where measured) the run-to-run noise
};
/// "not_tested", "too_few_steps", "simulated", "model_vs_measured", "same_configuration",
/// "within_step_noise", "within_run_to_run_noise", "differ".
const char* step_verdict_key(StepVerdict v);

/// The verdict on `other`'s mean step time against `base`'s: Simulated where both are simulated
/// (RunStats::simulated), ModelVsMeasured where one is; SameConfiguration where both have the
/// same `configuration` (>= 0); else the within-run test (step_time_test); a difference it finds
/// is held against the run-to-run noise where apply_run_to_run_noise measured it
/// (`other.run_to_run_pct`): |diff| <= that % of the faster of the two means is WithinRunToRun. Without a test
/// but with the run-to-run noise, the difference is judged against that alone. A powerless test
/// that finds no difference (StepTimeTest::powerless) is TooFewSteps unless the run-to-run noise
/// covers the difference.
StepVerdict step_verdict(const ComparedSession& base, const ComparedSession& other);

/// Whether a step-time difference between two sessions is noise: step_verdict is
/// SameConfiguration, WithinStepNoise or WithinRunToRun. compare_delta of StepMean, StepP50 and
/// Throughput appends ", within noise" to a non-zero difference then (CompareDelta::within_noise),
/// ", too few steps to tell" for TooFewSteps, ", exact (simulated)" for Simulated and ", model vs
/// measured" for ModelVsMeasured (a figure of one model, not a verdict);
/// for Throughput only when both train the same units a step (SessionRate::per_step equal, or
/// either unknown): 4x the tokens a step is 4x the throughput whatever the noise of the steps.
bool within_noise(const ComparedSession& base, const ComparedSession& other);

/// The line `compare` prints per session after the baseline, by step_verdict:
///  - "step times B vs A: the same configuration; +6.75 ms (+30.8 %) is run-to-run noise"
///  - "step times C vs A (batch means, 95 %): +1.20 ms (+5.0 %), t 2.10, df 5.3, critical 2.571:
///    within the steps' noise"
///  - "...: t 9.10, ...: the steps differ, but by less than the run-to-run noise (30.8 %, 6.75 ms
///    of the faster mean here): noise on this machine"
///  - "...: they differ, beyond the run-to-run noise (30.8 %)", or without repeats "...: they
///    differ within this run pair; run-to-run noise not measured (run the baseline twice to
///    measure it)"
///  - "step times B vs A: no within-run test (A has 3 counted steps; it needs 5 in each)";
///  - the method names itself: "(Welch's t on the steps, 95 %; lag-1 autocorrelation 0.37 and
///    -0.19, within +-0.62)" or "(batch means, 95 %; lag-1 autocorrelation 0.70 above +-0.62)";
///  - TooFewSteps: "...: too few steps to tell (the steps drift, so only batch means test them,
///    and 3 batches a run leave df 4.0); run >= 20 steps";
///  - Simulated: "step times B vs A: both simulated: -1.20 ms (-5.0 %) is the cost model's
///    difference, exact (a simulation's steps do not vary from run to run: no noise test)";
///  - ModelVsMeasured: "step times B vs A: a model-vs-measurement comparison (B simulated, A
///    measured): the simulated mean step is 33.7 % below the measured one (-212.54 ms); no
///    significance verdict (the simulation has no noise, and the measurement's noise is not the
///    model's error)": the model's error relative to the measured run, whichever is the baseline.
std::string step_time_test_text(const ComparedSession& base, const ComparedSession& other, const std::string& base_label,
                                const std::string& label);

/// The comparison's run-to-run line: per group "run-to-run noise: two runs of the same
/// configuration (A, B) differ by 6.75 ms (30.8 %): differences below that are noise on this
/// machine" (three or more: "3 runs ... (A, C, D) differ by up to"), then where several groups
/// "differences are held against the largest, 30.8 %"; without groups "run-to-run noise: not
/// measured (no two sessions ran the same configuration): the verdicts below are within-run only;
/// run the baseline twice to measure it" ("run a measured configuration twice" where the baseline
/// is simulated); where every session is simulated "run-to-run noise: none (every session is
/// simulated: the cost model gives the same step times every run; the differences are the
/// model's, exact)". `labels` as many as the compared sessions.
std::string run_to_run_text(const RunToRunNoise& noise, const std::vector<std::string>& labels);

/// The dense part's time per counted step (ns): per step, the mean over its ranks of
/// RankStepTimes::by_category_ns[dense] (the MLPs' forward and backward: dense_forward_backward),
/// in step order, drain steps left out. Empty without counted steps.
std::vector<int64_t> dense_series_ns(const RunStats& st);

/// Where two measured runs spent the same dense work (dense_work_alike) in times that differ
/// beyond the steps' noise: the machine, not what differs between the runs, changed it (tester63a
/// F6: the dense MLP 2.3x slower under other jobs' load read as "row_wise makes the step 2.2x slower").
struct MachineDifference {
  double base_dense_ns = 0;   ///< the baseline's mean dense time per rank and counted step
  double other_dense_ns = 0;  ///< the other session's
  double ratio = 0;           ///< other / base
  StepTimeTest test;          ///< step_series_test of the two dense_series_ns: differs
};

/// A dense-part difference counts where the test says the means differ and they are at least
/// this far apart (10 %: smaller shifts are within what the runs' own threads, another
/// communication pattern on the same cores, can do to a CPU run's compute).
inline constexpr double kMachineDifferenceMin = 0.10;

/// Whether two sessions' dense parts do the same work a step: both measured runs (not simulated,
/// not imported) with the same workload (workload_json) apart from the settings that leave the
/// dense part alone ("sharding", "steps", "warmup_steps", "rebalance", "seed"), the same world
/// size and backend. Never throws (a malformed workload is not alike).
bool dense_work_alike(const SessionReader& a, const SessionReader& b);

/// The machine difference of `other` from `base` (the readers `ra`, `rb` of the two), or none:
/// dense work not alike, fewer than kMinWelchSamples counted steps, no dense time, no difference
/// beyond the test or below kMachineDifferenceMin. Example (tested): dense 100 ms a step in A,
/// 230 ms in B, 10 steps each, +-1 ms: ratio 2.30, differs.
std::optional<MachineDifference> machine_difference(const SessionReader& ra, const ComparedSession& base,
                                                    const SessionReader& rb, const ComparedSession& other);

/// The line for a machine difference: "the machine differed between the runs: the dense part
/// (the same MLPs on the same batch, which no sharding changes) took 2.31x as long a step in B
/// (B 432.28 ms, A 187.39 ms per rank and step, beyond the steps' noise: Welch's t 9.10, df
/// 12.0); other processes' runnable threads 13.033 in B vs 5.049 in A; the step times carry that:
/// rerun both on an equally loaded machine before blaming the difference on the settings" (the load clause
/// where both sessions recorded cpu_other_runnable, else cpu_other_cores, else left out).
std::string machine_difference_text(const MachineDifference& d, const SessionReader& ra, const SessionReader& rb,
                                    const std::string& base_label, const std::string& label);

/// Warnings about what a comparison sets side by side (tester41 #5 and #14), one line per
/// session after the first (`labels[0]`, the baseline) that needs one: "B is the same file as A
/// (d/s.db): every difference is 0 by construction" (std::filesystem::equivalent: a link or
/// "d/./s.db" too); "C is not like-for-like with A: another workload (tiny vs criteo_kaggle),
/// another world size (2 vs 4 ranks); its differences mix both" (what_it_ran; metadata
/// world_size, else the ranks recorded). `labels` as many as `sessions`. Never throws.
std::vector<std::string> comparison_warnings(const std::vector<const SessionReader*>& sessions,
                                             const std::vector<std::string>& labels);

/// What a session ran, for a comparison's header: its workload's name ("unnamed workload" when
/// the key is missing); an imported session's kind first, then its name: "imported PyTorch
/// profiler (Kineto) trace" ("imported PyTorch profiler trace (legacy, no Kineto)" for what torch's
/// legacy profiler wrote: import_producer), "imported Nsight Systems export", "imported memory
/// snapshot x.pickle".
std::string what_it_ran(const SessionReader& s);

/// The settings in which compared sessions differ, per session (tester41 #2: runs of one workload
/// with another pipeline, sharding or step count all read "criteo_kaggle, complete on 4 ranks").
/// A setting is a leaf of the workload the session recorded (workload_json, named by its JSON
/// pointer without the leading '/': "pipeline", "sharding/default", "tables/3/data_type"), or
/// "plan": the sharding plan (metadata sharding_plan_json), or "measured steps": the steps the
/// session holds (distinct step numbers >= 0 of table `steps`, as `stats` counts them; 33 for a
/// run of 60 cancelled after 33, 0 before its first), not the workload's planned steps. out[i] lists,
/// for session i, "NAME VALUE" of each setting that differs between any two sessions, in the
/// workload's key order, at most `max_settings` of them then "and K more settings"; "" where
/// nothing differs, or for a session without a recorded workload (an imported trace: not
/// compared). The baseline is the first compared session.
/// By default (tester42 F13: "sharding/tables/cold_0/ranks/0 (none) ... placement 1 vs 2"):
///  - the plan reads "plan 7 table_wise" for the baseline (its types: "20 table_wise + 6
///    row_wise"), and for another session what moved, table by table, from the baseline's
///    (plan_diff.h plan_changes): "plan vs the baseline: hot_1: rank 3 -> rank 0 (table_wise);
///    hot_2: rank 3 -> rank 1 (table_wise)" (at most 4 tables, then "; and K more tables"), or
///    "plan as the baseline's";
///  - the workload's per-table sharding overrides ("sharding/tables/...") are left out when
///    every compared session recorded a plan (the plan says where the tables went);
///  - an empty object or array counts as absent, and a setting a session lacks reads as its
///    nearest recorded ancestor ("rebalance off" where another has "rebalance/when/window 3"),
///    else as the shortest absent pointer, once: "rebalance not set".
/// `verbose` gives the raw list instead: every leaf by its JSON pointer, "(none)" where absent,
/// the plan as its types with numbered placements ("plan 2 table_wise, placement 1" /
/// ", placement 2"), no cap. Never throws (a malformed JSON value counts as missing).
std::vector<std::string> differing_settings(const std::vector<const SessionReader*>& sessions, size_t max_settings = 6,
                                            bool verbose = false);

/// The types of a sharding plan (a session's sharding_plan_json: "tables" of "sharding_type"),
/// counted in order of first appearance: "26 table_wise", "20 table_wise + 6 row_wise" ("?" for a
/// table without a type; "" when the plan has no "tables" array). How compare names a session's
/// plan ("plan 7 table_wise") and calibrate labels its checks (tester55 F7). Never throws.
std::string plan_types(const nlohmann::json& plan);

/// What a comparison calls each of several session files: the file name, or where two files
/// share it (run1/criteo.db, run3/criteo.db: tester40 #1), the shortest tail of their paths that
/// tells them apart ("run1/criteo.db"); the same path twice (after lexical normalisation: "d/s.db"
/// and "d/./s.db") stays the same name. One name per path, '/'-separated. Never throws except
/// std::bad_alloc. Cost: O(n^2 x depth) comparisons.
std::vector<std::string> distinct_file_names(const std::vector<std::string>& paths);

}  // namespace embedscope::sessions

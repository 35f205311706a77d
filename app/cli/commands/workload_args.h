#pragma once
// The workload options that run and plan share (a workload file or --preset, and the flags that
// override its fields), and load(), which reads the workload and applies them.

#include <map>
#include <string>
#include <vector>

#include <cmath>

#include <CLI/CLI.hpp>

#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/workload/lm_spec.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::cli {

/// The preset used when neither a workload file nor --preset is given.
constexpr const char* kDefaultPreset = "criteo_kaggle";

/// Checked before a CLI::Range, which alone calls a word "not in range" ("--steps: Value abc not
/// in range 1 to ..."): a non-number is named as such.
inline const CLI::Validator kInteger = CLI::TypeValidator<int64_t>("INTEGER");
/// A latency in ns from 0 to `max`, written as an integer or in the number forms
/// --network-bandwidth takes ("1e6", "5.0e4"): the text becomes the integer ("1000000") for the
/// option's int64. Refusals name the flag (CLI11 prefixes it): "--network-latency: 1.5 ns is not a
/// whole number of ns; give e.g. 1", "--network-latency: -1 ns is out of range: give 0 to 1e+10 ns
/// (10 s), e.g. 5e4", "--network-latency: not a number of ns (got 'abc'); give e.g. 50000 or 5e4"
/// (tester51 F12: "1e6" was "Failed parsing 1e6 as a INT"). Add it with Option::transform (check()
/// makes a validator non-modifying: the integer text would not reach the option).
CLI::Validator latency_ns_value(int64_t max);

/// An integer option of at least `min`, said as "--window: must be >= 1, got 0" or "--window:
/// must be an integer >= 1, got 'abc'" (CLI::PositiveNumber and CLI::NonNegativeNumber said
/// "Value 0 not in range 0.000000 to " and DBL_MAX's 309 digits, for words too: tester42 F6).
inline CLI::Validator at_least(int64_t min) {
  return CLI::Validator(
      [min](std::string& text) -> std::string {
        int64_t v = 0;
        if (!CLI::detail::lexical_cast(text, v))
          return "must be an integer >= " + std::to_string(min) + ", got '" + text + "'";
        if (v < min) return "must be >= " + std::to_string(min) + ", got " + std::to_string(v);
        return "";
      },
      "INT>=" + std::to_string(min), "AT_LEAST");
}

/// A byte-count option (use with ->transform): a whole number of bytes in [min, max], written as an
/// integer or in exponent notation ("1e9", rewritten to "1000000000" for the int64_t it binds).
/// Errors say bytes and, below `min`, why (`min_why`): "--max-split-size: 4194304 bytes is below
/// the minimum 20971520 (20 MiB: PyTorch's ...)" (CLI::Range said "Value 4194304 not in range
/// 20971520 to 1125899906842624", and the int parse refused "1e9": tester43 F11).
inline CLI::Validator bytes_in_range(int64_t min, int64_t max, const std::string& min_why) {
  return CLI::Validator(
      [min, max, min_why](std::string& text) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(text, v) || !std::isfinite(v))
          return "must be a number of bytes (e.g. 1073741824 or 1e9), got '" + text + "'";
        if (v != std::floor(v)) return "must be a whole number of bytes, got " + text;
        if (v < static_cast<double>(min))
          return text + " bytes is below the minimum " + std::to_string(min) + " (" + min_why + ")";
        if (v > static_cast<double>(max)) return text + " bytes is above the maximum " + std::to_string(max);
        text = std::to_string(static_cast<int64_t>(v));
        return "";
      },
      "BYTES", "BYTES_IN_RANGE");
}

/// The values of the workload options after parsing (add_workload_options binds them).
struct WorkloadArgs {
  std::string file;
  std::string preset;
  int devices = 0;
  std::string sharding;
  int64_t steps = 0;
  int64_t warmup = -1;
  int64_t batch_size = 0;
  int local_world_size = -1;
  std::string pipeline, qcomms, backend;
  std::string dense_precision;   // --dense-precision (dense.precision)
  std::string simulate;          // --simulate PROFILE
  int nodes = 0, gpus_per_node = 0;
  double network_bandwidth = 0;  // a double so that 1e9 is accepted
  int64_t network_latency = 0;
  bool sequence_parallel = false;  // --sequence-parallel (lm_embedding workloads)
  /// One rank per process: the world size (run --world-size, or the launcher's variable named
  /// by world_size_from); it sets devices.count. 0: not such a run.
  int world_size = 0;
  std::string world_size_from = "--world-size";
  /// Set with local_world_size when a launcher's environment (not --local-world-size) gave it.
  std::string local_world_size_from;
  std::map<std::string, CLI::Option*> given;  // flag -> option, to tell "absent" from "empty"
  /// The values of the options hide_workload_options replaced (flag -> text), never read: the
  /// command refuses those flags (refuse_hidden_workload_options).
  std::map<std::string, std::string> hidden_values;
  /// Whether load() resolves devices.backend on this machine (auto -> cpu or cuda; cuda refused
  /// without a GPU: with_resolved_backend). false for a command that runs nothing on a backend
  /// (inspect-input reads the input only): the backend is left as written.
  bool resolve_backend = true;
  std::string origin;                         // set by load(): the file or "preset NAME"
  /// Set by load(): the backend the workload and flags asked for, before auto was resolved.
  engine::Backend requested_backend = engine::Backend::cpu;
  bool was_given(const std::string& flag) const {
    auto it = given.find(flag);
    return it != given.end() && it->second->count() > 0;
  }
};

/// Adds the positional `workload` and --preset, --devices, --sharding, --local-world-size,
/// --steps, --warmup-steps, --batch-size, --backend, --pipeline, --qcomms, --dense-precision, --network-bandwidth,
/// --network-latency, --simulate, --nodes, --gpus-per-node to `cmd`, bound to `a` (which must
/// outlive parsing). The enumerated flags
/// list and check the spellings of engine/workload/enums.h.
void add_workload_options(CLI::App* cmd, WorkloadArgs& a);

/// Replaces the workload options `flags` of `cmd` (added by add_workload_options: "--devices",
/// "--backend", ...) with hidden ones that take any value (a flag for "--sequence-parallel"):
/// --help no longer lists them, and the command refuses them itself with its reason
/// (refuse_hidden_workload_options), rather than CLI11's "The following arguments were not
/// expected". For a command that sets those fields itself (scaling) or has no use for them
/// (inspect-input).
void hide_workload_options(CLI::App* cmd, WorkloadArgs& a, const std::vector<std::string>& flags);

/// Throws engine::SpecError "FLAG: WHY" for the first of `flags` that was given (bad input, exit 2).
void refuse_hidden_workload_options(const WorkloadArgs& a, const std::vector<std::string>& flags, const std::string& why);

/// The built-in presets as every command lists them (its --help, an empty or unknown --preset;
/// tester46 F3: the empty case named the DLRM ones only): "criteo_kaggle, ..., tiny; lm_embedding
/// (run, plan, program and scaling only): gpt2_small_embedding, ...".
std::string preset_list_text();

/// Loads the workload (file, --preset or kDefaultPreset), applies the flags, validates, and
/// resolves backend auto (unless a.resolve_backend is false). Throws engine::SpecError; a validation error about a field that a
/// flag set names the flag too (" (set by --devices)").
engine::WorkloadSpec load(WorkloadArgs& a);

/// The hardware profile --simulate names (engine::load_hardware_profile); its refusal names the
/// flag, "--simulate h100: unknown hardware profile ...", not the JSON pointer of a workload the
/// user never wrote (tester49 F9). Throws engine::SpecError.
engine::HardwareProfile simulate_profile(const WorkloadArgs& a);

/// What backend auto became on this machine and why, for run's and plan's text; "" when the
/// backend asked for (a.requested_backend, set by load()) was not auto. `resolved` is the spec
/// load() returned. E.g. "auto picked cpu: no CUDA device here (cudaGetDeviceCount failed:
/// cudaErrorNoDevice (no CUDA-capable device is detected))", "auto picked cpu: no CUDA device here
/// (built without CUDA (EMBEDSCOPE_WITH_CUDA=OFF))", "auto picked cuda: 2 CUDA devices". Never throws.
std::string auto_backend_note(const WorkloadArgs& a, const engine::WorkloadSpec& resolved);

/// Why `run --rank/--world-size/--rendezvous/--run-id/--host`, a launcher's environment and
/// `embedscope launch` are refused for an lm_embedding workload (tester43 F18): one process runs
/// all its ranks as threads (exec/lm_run.h), so a rank per process would train the whole job in
/// every process.
inline constexpr const char* kLmRanksAreThreads =
    "an lm_embedding workload's ranks are threads of one process: --rank/--world-size/--rendezvous and launch are "
    "for DLRM workloads";

/// Whether the workload the arguments name (file or --preset) is an lm_embedding workload
/// (workload/lm_spec.h); reads the file. Throws SpecError for an unreadable file.
bool is_lm_args(const WorkloadArgs& a);
/// Loads the lm_embedding workload and applies --devices, --sharding (vocab_parallel,
/// data_parallel, row_wise), --sequence-parallel, --steps, --batch-size (micro_batch_size);
/// refuses the flags that have no meaning for it (bad input naming the flag; run's --rank,
/// --world-size, --rendezvous, --run-id and --host among them, kLmRanksAreThreads), before
/// anything is written. Throws SpecError.
/// `simulate_flags`: also --simulate PROFILE, and with it --nodes and --gpus-per-node (the
/// cluster: world_size = nodes x GPUs per node, up to kMaxSimulatedRanks; a.gpus_per_node is set
/// to the GPUs per node) (plan: the simulated step of the program on that hardware,
/// program/lm_program.h; run: a simulated session, simulate_lm).
engine::LmWorkloadSpec load_lm(WorkloadArgs& a, bool simulate_flags = false);

/// With --plan FILE the plan gives every table's sharding type and the ranks per node, so
/// --sharding and --local-world-size would be ignored (and recorded in the session's workload as
/// if they had run): refuses them (bad input, exit 2). Does nothing when plan_file is empty.
void refuse_flags_the_plan_overrides(const WorkloadArgs& a, const std::string& plan_file);

// Runs f; a SpecError that starts with a JSON pointer (plan, memory and backend errors name
// pointers only) is rethrown with the workload's origin in front ("x.json: /devices/count: ...").
template <class F>
auto with_origin(const std::string& origin, F&& f) {
  try {
    return f();
  } catch (const engine::SpecError& e) {
    const std::string msg = e.what();
    if (!msg.empty() && msg[0] == '/') throw engine::SpecError(origin + ": " + msg);
    throw;
  }
}

}  // namespace embedscope::cli

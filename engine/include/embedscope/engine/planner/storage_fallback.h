#pragma once
// Storage options the planner may use when no plan of the workload as written fits (issue 16:
// "a plan that fits only with int8 or with host_cached is found and explained"); `embedscope
// plan --auto --allow-storage fp16,int8,host_cached` and `run --plan auto --allow-storage ...`.
//
// Opt-in, as TorchRec's planner: it never changes a table's data_type by itself (the user's
// EmbeddingBagConfig.data_type), and it puts a table in UVM caching only when the table's
// ParameterConstraints.compute_kernels allow FUSED_UVM_CACHING. Here the allowance is one flag
// for every table (the options below), so the workload file stays what the user wrote and the
// plan JSON carries the tables whose storage changed ("storage_changes", which `run --plan FILE`
// applies before it validates the plan: the run is exactly the plan that was printed).
//
// Search (plan_search_with_storage): first the workload as written (plan_search). When that
// throws NoPlanFits, each allowed option in the order of its accuracy cost (fp16 rows, bf16
// optimizer state, int8 rows, then host_cached placement, whose training is exact but whose
// misses cost host-link time):
//  1. the eligible tables (below) ordered by their device bytes as written (weights + optimizer
//     state of the whole table), largest first; ties: spec order;
//  2. all of them with the option: no plan fits -> the next option (host_cached: at each
//     cache_load_factor of kHostCacheLoadFactors in turn, the first that fits is kept);
//  3. a plan fits -> the smallest k such that the k largest with the option fit (binary search:
//     more tables changed never need more bytes), the others as written. "Fits" here keeps
//     kStorageHeadroom of the device free (the search would otherwise stop at the limit).
// The result is the search's best plan for the changed workload. Options are not combined (an
// option on some tables, another on others); a table changes at most once.
// Eligible: placement device, no low_rank_dim, and fp16: data_type fp32; bf16_state: an
// optimizer with state (not sgd) and optimizer_state_type fp32; int8: data_type fp32, fp16 or
// bf16; host_cached: data_type and optimizer_state_type fp32, no live rebalancing. A
// changed workload that validate() refuses (e.g. host bytes beyond devices.host_memory_bytes) is
// treated as not fitting.
// Cost: 1 + (options tried) + ceil(log2 tables) + 1 plan_search calls at most (host_cached: up to
// kHostCacheLoadFactors more); criteo_kaggle on 4 ranks: 0.5 s each on the shared machine.

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/planner/search.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine {

/// A storage change the planner may make to a table (the --allow-storage values): its rows in
/// fp16, its optimizer state in bf16 (bf16_state: Adam's two moments or rowwise_adagrad's one
/// value a row take half the bytes; the weights stay as written), its rows in int8, or the
/// table in host memory behind a device cache. In the order of their accuracy cost.
enum class StorageOption { fp16, bf16_state, int8, host_cached };
/// Every option, in that order.
inline constexpr StorageOption kStorageOptions[] = {StorageOption::fp16, StorageOption::bf16_state, StorageOption::int8,
                                                    StorageOption::host_cached};

/// The cache_load_factors the host_cached option tries, largest first (0.2 is FBGEMM's default).
inline constexpr double kHostCacheLoadFactors[] = {0.2, 0.1, 0.05, 0.02, 0.01};
/// The share of devices.memory_bytes a plan found by changing storage leaves free: such a plan
/// "fits" only when its fullest rank's estimate is <= (1 - kStorageHeadroom) x memory_bytes. The
/// search picks the smallest change, so without it the plan sits at the limit: criteo_kaggle on
/// 4 x 300 MiB was estimated at 299.6 MiB and its run needed ~308 MiB (the caching allocator's
/// blocks; the estimate's error there, 2.8 %), and ran out of memory. TorchRec's planner keeps
/// 15 % (HeuristicalStorageReservation's default) for all that it does not model; this estimate
/// models the allocator, so 5 % covers its measured error with room to spare.
inline constexpr double kStorageHeadroom = 0.05;

/// "fp16", "bf16_state", "int8", "host_cached".
const char* to_string(StorageOption o);

/// Parses --allow-storage values (any order, repeats ignored) into the order of accuracy cost
/// (fp16, bf16_state, int8, host_cached). Throws SpecError "--allow-storage: unknown option 'x'
/// (expected fp16, bf16_state, int8, host_cached)".
std::vector<StorageOption> storage_options_from_strings(const std::vector<std::string>& values);

/// Bytes of one table over all its shards (every data_parallel replica counted), as
/// estimate_table_storage has them: weights and optimizer_state are device bytes of a device
/// table, 0 for a table in host memory; cache the device caches (host_cached); host its rows,
/// state and cache index in host memory (8 bytes a row, 16 under lfu).
struct TableBytes {
  int64_t weights = 0, optimizer_state = 0, cache = 0, host = 0;
  int64_t device() const { return weights + optimizer_state + cache; }
};

/// One table the planner changed.
struct StorageChange {
  int table = 0;             ///< index into WorkloadSpec::tables
  std::string name;
  StorageOption option = StorageOption::fp16;
  TableDataType data_type_before = TableDataType::fp32, data_type_after = TableDataType::fp32;
  TablePlacement placement_before = TablePlacement::device, placement_after = TablePlacement::device;
  OptimizerStateType state_before = OptimizerStateType::fp32, state_after = OptimizerStateType::fp32;  ///< bf16_state
  double cache_load_factor = 0;  ///< host_cached: the load factor chosen; else 0
  TableBytes before, after;      ///< under the plan found (its shards), bytes
};

/// plan_search_with_storage's result.
struct StoragePlanResult {
  WorkloadSpec spec;              ///< the workload that was planned: as written, or with `changes`
  PlanSearchResult search;        ///< plan_search of `spec`
  std::vector<StorageChange> changes;  ///< empty: the workload fit as written
  /// When `changes` is not empty: why the workload as written did not fit (NoPlanFits::what() of
  /// it, naming the nearest candidate, the rank and the term).
  std::string why;
  int searches = 0;               ///< plan_search calls made
};

/// The search of the file's header: plan_search of `spec`, then, when nothing fits, the allowed
/// options (in the order of kStorageOptions, whatever the order of `allowed`). Throws what
/// plan_search throws for bad input; when no plan fits even with the allowed options, NoPlanFits
/// of the workload as written (its "to try: `plan --auto` ..." line, advice to run what was just
/// run, replaced by "more devices or a larger devices.memory_bytes") whose message adds the
/// allowed options' outcomes and storage_suggestions of the options not allowed (all of them
/// with `allowed` empty), so that the refusal says what each would take.
StoragePlanResult plan_search_with_storage(const WorkloadSpec& spec, const HardwareProfile& hw,
                                           const PlanSearchOptions& options, const std::vector<StorageOption>& allowed);

/// The lines a refusal adds: for each option (all four when `allowed` is empty, else the
/// allowed ones), exactly what `--allow-storage OPTION` alone would give (the same search as
/// plan_search_with_storage, kStorageHeadroom included): the tables it changes (the k largest of
/// the eligible ones; host_cached: at the first load factor that fits), their device bytes as
/// written -> changed, and the plan it would print (proposer, fullest rank); when none fits with
/// every eligible table changed (host_cached: at the smallest load factor), whether a plan fits
/// only past the headroom, or the nearest candidate's overflow. Runs the search of one option per
/// line (1 + ceil(log2 tables) plan_search calls when it fits). Example (criteo_kaggle x 4 at 300
/// MiB): "  --allow-storage host_cached: the 3 largest of 26 tables at cache_load_factor 0.2,
/// 1.5 GiB -> 311.6 MiB on the devices; a plan fits (uniform:column_wise, fullest rank 224.5 MiB)"
/// (before plan47b the line put every eligible table in and took any fit: "26 tables ... (grid,
/// fullest rank 146.8 MiB)", not the plan the flag gave).
std::string storage_suggestions(const WorkloadSpec& spec, const HardwareProfile& hw, const PlanSearchOptions& options,
                                const std::vector<StorageOption>& allowed);

/// `plan --auto --json`'s "storage_changes": [{"table", "option", "data_type", "placement",
/// "cache_load_factor" (host_cached), "optimizer_state_type" (bf16_state; then in both sides
/// too), "before": {"data_type", "placement", "weights_bytes",
/// "optimizer_state_bytes", "cache_bytes", "host_bytes"}, "after": {the same}}, ...], plus
/// "storage_reason" (StoragePlanResult::why) and "storage_searches" (plan_search calls). Empty
/// object when nothing changed.
nlohmann::json storage_changes_json(const StoragePlanResult& r);

/// The same as text: a line per changed table with its bytes before -> after, and the reason.
/// Empty when nothing changed.
std::string storage_changes_text(const StoragePlanResult& r);

/// Applies a plan document's "storage_changes" (storage_changes_json; absent: nothing) to `spec`:
/// each named table gets its data_type, placement and cache_load_factor; then validate(spec).
/// Throws SpecError "<origin>: /storage_changes/<i>/<key>: <reason>" (unknown table, bad value).
void apply_storage_changes(WorkloadSpec& spec, const nlohmann::json& plan_doc, const std::string& origin);

/// `run --plan FILE` / `plan --plan FILE`: the plan file at `plan_file` read whole and its
/// "storage_changes" applied to `spec` (apply_storage_changes), so that a plan `plan --auto
/// --allow-storage` printed is run and shown with its storage. A file that is not JSON is left as
/// it is (load_plan_file names its line). Throws SpecError "--plan FILE: ..." when the file
/// cannot be read (a directory, missing), and apply_storage_changes' errors.
void apply_plan_file_storage(WorkloadSpec& spec, const std::string& plan_file);

}  // namespace embedscope::engine

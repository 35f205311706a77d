#pragma once
// One session from per-rank sessions (`embedscope merge A.db B.db ... -o ALL.db`): imported
// traces of one rank each, or sessions Embedscope processes wrote on different hosts.
//
// Each input's ranks are taken as its `ranks` table names them; a rank present in two inputs is
// refused naming both files. Copied per rank: the rank, its lanes, ops, steps, collectives, load
// and memory counters, memory events and snapshots (moved as the rank's ops are), id histogram
// buckets; the sharding plan rows once when every input that has them has the same rows (the
// ranks of one run: `embedscope launch`); the inputs' import problems are added up by name. Not
// merged (said as the info problem `not_merged`): memory timelines (imported snapshots), and
// plan rows that differ between inputs. Times: each input's session time + its own time base (metadata
// import_origin_ns where present, else wall_anchor_unix_ns moved onto rank 0's clock by
// clock_offset_to_rank0_ns where that is larger than its uncertainty, else 0) is its recorded time; the
// merged session's time 0 is the earliest recorded event of any input rounded down to a whole
// microsecond (what a directory import of the same traces gives), or, with align
// "collectives", every rank shifted by its clock offset as `import --align collectives` does
// (importers/common/clock_align.h); with "none", a rank whose collectives end more than 2 ms apart from
// the reference rank's by their median is counted as the problem clock_disagreement (error: the
// times are kept; the remedy, --align collectives, is named). Metadata: the first input's, with world_size, steps, the
// import keys and merged_from_json recomputed (each input's file, ranks, shift and how it ended), and the
// measured load (cpu_self_cores, cpu_other_cores, cpu_own_runnable, cpu_other_runnable) the run's from every
// input's, with cpu_load_merged saying so (merged_load.h), or left out when an input did not record it.

#include <cstdint>
#include <string>
#include <vector>

namespace embedscope::sessions {

struct MergeOptions {
  std::string align = "none";  ///< "none" or "collectives"
  bool overwrite = false;      ///< replace `output` if it exists (never an input, never a live writer's)
  /// merge ranks whose time ranges do not overlap (align "none"; the problem
  /// disjoint_time_ranges: traces of different jobs?) instead of refusing them
  bool allow_disjoint = false;
};

struct MergeSummary {
  std::vector<std::string> files;
  std::vector<int32_t> ranks;                    ///< ascending
  int64_t ops = 0;                               ///< ops written
  std::string alignment_json, alignment_text;    ///< align "collectives"; "" otherwise
};

/// Writes `output` from `inputs` (at least two sessions). Throws SessionError (bad input, exit 2)
/// naming the files for: a rank in two inputs ("b.db: rank 0 is also in a.db ..."), inputs of
/// different import formats, an output that is one of the inputs, an output that exists
/// without `overwrite` or that a live writer holds, an unreadable input, and (align "none",
/// without `allow_disjoint`, inputs that are not the rank sessions of one run - the same run_id -)
/// ranks whose time ranges do not overlap (importers'
/// disjoint_refusal: "<file>: refused: rank 1 (b.db) spans ... they do not overlap (... apart)
/// ... or --allow-disjoint to merge them anyway"); nothing is written then.
MergeSummary merge_sessions(const std::vector<std::string>& inputs, const std::string& output, const MergeOptions& options);

/// The metadata `table_storage_json` of per-rank sessions as one (each input's array: one object
/// per table, in table order, as engine/exec/table_storage_json.h writes it; each process fills
/// only its own ranks). Per table: per-rank arrays (weight_bytes, optimizer_state_bytes,
/// host_bytes, cache_bytes) and counts (master_copy_bytes, hash_collisions, hot_ids, cache_hits,
/// cache_misses, rows_fetched, bytes_h2d, bytes_d2h, prefetched_rows, prefetch_bytes_h2d) summed
/// over the inputs; max_abs_error and
/// relative_error the largest (the relative error of the whole cannot be recovered from the
/// parts: the largest part's is an upper bound's stand-in); every other field (names, types,
/// settings) the first input's. Inputs that are empty or not an array of tables are skipped;
/// "" when none is left. Example: weight_bytes [64, 0] and [0, 32] -> [64, 32].
std::string merge_table_storage_json(const std::vector<std::string>& inputs);

}  // namespace embedscope::sessions

#pragma once
// Text and JSON shared by the commands: the JSON dump every --json output uses, durations in
// ms, the sharding plan table, and the pipeline / comm precision / network lines of a workload.

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::cli {

/// One line of JSON (no indent) that survives invalid UTF-8 in file names and messages
/// (replaced by U+FFFD).
std::string dump(const nlohmann::json& j);

/// A duration in ns as "12.34 ms" (two decimals) below 10 minutes, so that a table's column reads
/// in one unit; from 10 minutes on as the workbench writes it (sessions::format_duration):
/// "12.5 min", "13.05 h", "51.61 d". The JSON outputs keep their numbers in ns.
std::string ms(double ns);
std::string ms(int64_t ns);

/// One line: "intra_node 1 GB/s, 5.00 us latency; inter_node unlimited" (a latency in ns below
/// 1 us, in us below 1 ms, else in ms: tester50 F12).
std::string network_text(const engine::NetworkSpec& n);

/// The overlap settings of a workload, two lines ending in '\n':
/// "pipeline     base; qcomms forward fp32 backward fp32\nnetwork      <network_text>\n",
/// and a third for a workload with a dense part: "dense        <engine::dense_precision_text>\n"
/// (its dense.precision; on a simulated profile the rate its GEMMs are timed at).
std::string pipeline_text(const engine::WorkloadSpec& spec);

/// {"pipeline", "qcomms", "network"} as to_json(spec) writes them and "dense_precision" (the dense
/// part's dense.precision, "fp32" | "tf32" | "bf16" | "fp16"; null without a dense part): plan
/// --json's keys, which a plan file read back accepts when they match the workload
/// (sharding/plan_json.cpp plan_from_json).
nlohmann::json pipeline_json(const engine::WorkloadSpec& spec);

/// The plan as a table: a header line, then per table its name, sharding type and shards
/// ("rank: rows x cols @ row,col"), each line ending in '\n'.
std::string plan_table(const engine::WorkloadSpec& spec, const engine::ShardingPlan& plan);

/// The planned storage per table (engine::estimate_table_storage) as a table: a header line,
/// then per table its name, data_type, stored rows, low_rank_dim ("-" for a full table), bytes
/// a row over its column shards (TableStorageEstimate::row_bytes: an int8 / int4 column shard's
/// scale and bias each; of A for a low-rank table), weights and optimizer state
/// (format_bytes), each line ending in '\n'.
std::string table_storage_text(const engine::WorkloadSpec& spec, const engine::ShardingPlan& plan);

/// The same as a JSON array: [{"table", "data_type", "rows", "low_rank_dim", "row_bytes", "weight_bytes",
/// "optimizer_state_bytes"}] (bytes), `plan --json`'s "table_storage".
nlohmann::json table_storage_estimate_json(const engine::WorkloadSpec& spec, const engine::ShardingPlan& plan);

/// The held-out evaluation (engine held_out_json: `run`'s result, `stats`'s session metadata
/// held_out_json) as one line ending in '\n': "held-out     AUC 0.7312, loss 0.5012 on 8192
/// samples (2048 positive) of 4 generated batches training never saw", "held-out     not
/// evaluated: <why>", or "" for null / not an object (no evaluation asked for, older files).
std::string held_out_text(const nlohmann::json& held_out);

/// The tables placed in host memory (placement host / host_cached), from table_storage_json's
/// array (`embedscope run`, and `stats` from the session's table_storage_json): per table its
/// placement, cache policy and load factor, the device cache and host bytes over all ranks, the
/// cache hit rate (hits / (hits + misses) of the lookups' distinct rows; "-" for placement host,
/// which has no cache, and for a cache that saw no lookup), and per measured step
/// (totals / steps) the rows fetched and the bytes moved host -> device and back, and the rows
/// the prefetches fetched of those (a prefetch_pipeline table; "-" otherwise). "" when every
/// table is on the device (or the array is older and has no placement).
std::string host_placement_text(const nlohmann::json& tables, int64_t steps);

}  // namespace embedscope::cli

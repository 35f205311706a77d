// parse_workload's errors: one case per class, exact message.

#include "spec_test_support.h"

namespace es = embedscope::engine;
using nlohmann::json;
using namespace spec_testing;

namespace {

struct ErrorCase {
  const char* id;
  const char* patch;    ///< RFC 6902 JSON Patch applied to base_spec()
  const char* message;  ///< expected SpecError text
};

class SpecErrorTest : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(SpecErrorTest, ExactMessage) {
  const ErrorCase& c = GetParam();
  const json j = base_spec().patch(json::parse(c.patch));
  EXPECT_EQ(parse_error(j), c.message);
}

const ErrorCase kErrorCases[] = {
    // Shape: root, unknown keys, required keys, types.
    {"root_not_object", R"([{"op": "replace", "path": "", "value": [1]}])",
     "test.json: /: must be an object, got array"},
    {"unknown_top_key", R"([{"op": "add", "path": "/batchsize", "value": 1}])",
     "test.json: /batchsize: unknown key"},
    {"unknown_nested_key", R"([{"op": "add", "path": "/tables/0/num_embedings", "value": 1}])",
     "test.json: /tables/0/num_embedings: unknown key"},
    {"unknown_devices_key", R"([{"op": "add", "path": "/devices/gpus", "value": 1}])",
     "test.json: /devices/gpus: unknown key"},
    {"unknown_ids_key", R"([{"op": "add", "path": "/features/0/ids", "value": {"distribution": "zipf", "s": 1}}])",
     "test.json: /features/0/ids/s: unknown key"},
    {"missing_tables", R"([{"op": "remove", "path": "/tables"}])", "test.json: /tables: required"},
    {"missing_batch_size", R"([{"op": "remove", "path": "/batch_size"}])",
     "test.json: /batch_size: required"},
    {"missing_table_name", R"([{"op": "remove", "path": "/tables/1/name"}])",
     "test.json: /tables/1/name: required"},
    {"missing_num_embeddings", R"([{"op": "remove", "path": "/tables/0/num_embeddings"}])",
     "test.json: /tables/0/num_embeddings: required"},
    {"missing_feature_names", R"([{"op": "remove", "path": "/tables/0/feature_names"}])",
     "test.json: /tables/0/feature_names: required"},
    {"missing_feature_entry_name", R"([{"op": "remove", "path": "/features/1/name"}])",
     "test.json: /features/1/name: required"},
    {"missing_bottom_mlp", R"([{"op": "remove", "path": "/dense/bottom_mlp"}])",
     "test.json: /dense/bottom_mlp: required"},
    {"batch_size_string", R"([{"op": "replace", "path": "/batch_size", "value": "8"}])",
     "test.json: /batch_size: must be an integer, got string"},
    {"batch_size_bool", R"([{"op": "replace", "path": "/batch_size", "value": true}])",
     "test.json: /batch_size: must be an integer, got boolean"},
    {"batch_size_fraction", R"([{"op": "replace", "path": "/batch_size", "value": 8.5}])",
     "test.json: /batch_size: must be an integer, got 8.5"},
    {"batch_size_too_big_float", R"([{"op": "replace", "path": "/batch_size", "value": 1e19}])",
     "test.json: /batch_size: must be <= 9223372036854775807, got 1e+19"},
    {"batch_size_too_big_uint", R"([{"op": "replace", "path": "/batch_size", "value": 18446744073709551615}])",
     "test.json: /batch_size: must be <= 9223372036854775807, got 18446744073709551615"},
    {"tables_not_array", R"([{"op": "replace", "path": "/tables", "value": {}}])",
     "test.json: /tables: must be an array, got object"},
    {"tables_empty", R"([{"op": "replace", "path": "/tables", "value": []}])",
     "test.json: /tables: must not be empty"},
    {"table_not_object", R"([{"op": "replace", "path": "/tables/1", "value": "t1"}])",
     "test.json: /tables/1: must be an object, got string"},
    {"name_not_string", R"([{"op": "add", "path": "/name", "value": 3}])",
     "test.json: /name: must be a string, got number"},
    {"name_empty", R"([{"op": "add", "path": "/name", "value": ""}])",
     "test.json: /name: must not be empty"},
    {"learning_rate_string", R"([{"op": "add", "path": "/optimizer", "value": {"learning_rate": "fast"}}])",
     "test.json: /optimizer/learning_rate: must be a number, got string"},
    {"permute_not_bool", R"([{"op": "add", "path": "/features/0/ids", "value": {"distribution": "zipf", "permute": "yes"}}])",
     "test.json: /features/0/ids/permute: must be a boolean, got string"},
    {"features_not_array", R"([{"op": "replace", "path": "/features", "value": {"f0": {}}}])",
     "test.json: /features: must be an array, got object"},
    {"mlp_not_array", R"([{"op": "replace", "path": "/dense/top_mlp", "value": 1}])",
     "test.json: /dense/top_mlp: must be an array, got number"},
    {"dense_not_object", R"([{"op": "replace", "path": "/dense", "value": true}])",
     "test.json: /dense: must be an object, got boolean"},

    // Enumerations.
    {"pooling_none", R"([{"op": "add", "path": "/tables/0/pooling", "value": "none"}])",
     "test.json: /tables/0/pooling: must be one of sum, mean, got \"none\""},
    {"data_type_unknown", R"([{"op": "add", "path": "/tables/0/data_type", "value": "int2"}])",
     "test.json: /tables/0/data_type: must be one of fp32, fp16, bf16, int8, int4, got \"int2\""},
    {"data_type_not_string", R"([{"op": "add", "path": "/tables/1/data_type", "value": 8}])",
     "test.json: /tables/1/data_type: must be a string, got number"},
    {"cuda_data_type_rebalance", R"([{"op": "add", "path": "/devices/backend", "value": "cuda"},
                           {"op": "add", "path": "/tables/1/data_type", "value": "int8"},
                           {"op": "add", "path": "/rebalance", "value": {"every": 2}}])",
     "test.json: /tables/1/data_type: int8 (table \"t1\") with live rebalancing (/rebalance) is not supported on the "
     "cuda backend yet (fp32 only)"},
    {"optimizer_state_type_unknown", R"([{"op": "add", "path": "/tables/0/optimizer_state_type", "value": "int8"}])",
     "test.json: /tables/0/optimizer_state_type: must be one of fp32, fp16, bf16, got \"int8\""},
    {"optimizer_state_type_with_sgd", R"([{"op": "add", "path": "/tables/1/optimizer_state_type", "value": "fp16"}])",
     "test.json: /tables/1/optimizer_state_type: fp16 (table \"t1\") with /optimizer/type sgd, which keeps no state: "
     "leave it out (fp32) or use rowwise_adagrad or adam"},
    {"cuda_optimizer_state_type_rebalance", R"([{"op": "add", "path": "/devices/backend", "value": "cuda"},
                                     {"op": "add", "path": "/optimizer", "value": {"type": "adam"}},
                                     {"op": "add", "path": "/tables/1/optimizer_state_type", "value": "bf16"},
                                     {"op": "add", "path": "/rebalance", "value": {"every": 2}}])",
     "test.json: /tables/1/optimizer_state_type: bf16 (table \"t1\") with live rebalancing (/rebalance) is not "
     "supported on the cuda backend yet (fp32 only)"},
    {"hash_size_zero", R"([{"op": "add", "path": "/tables/0/hash_size", "value": 0}])",
     "test.json: /tables/0/hash_size: must be in [1, num_embeddings = 10], got 0 (leave it out for no hashing)"},
    // past int64 (tester42 F15): the table's bound, not int64's; 2**64 + 1 is a float to the JSON
    // parser (above uint64), 2**63 an unsigned integer
    {"hash_size_2_pow_70", R"([{"op": "add", "path": "/tables/1/hash_size", "value": 1180591620717411303424}])",
     "test.json: /tables/1/hash_size: must be in [1, num_embeddings = 20], got 1.18059e+21"},
    {"hash_size_2_pow_63", R"([{"op": "add", "path": "/tables/1/hash_size", "value": 9223372036854775808}])",
     "test.json: /tables/1/hash_size: must be in [1, num_embeddings = 20], got 9223372036854775808"},
    {"hash_size_above_rows", R"([{"op": "add", "path": "/tables/1/hash_size", "value": 21}])",
     "test.json: /tables/1/hash_size: must be in [1, num_embeddings = 20], got 21"},
    {"hash_size_negative", R"([{"op": "add", "path": "/tables/1/hash_size", "value": -3}])",
     "test.json: /tables/1/hash_size: must be in [1, num_embeddings = 20], got -3"},
    {"hash_size_fraction", R"([{"op": "add", "path": "/tables/0/hash_size", "value": 2.5}])",
     "test.json: /tables/0/hash_size: must be an integer, got 2.5"},
    {"optimizer_type", R"([{"op": "add", "path": "/optimizer", "value": {"type": "adagrad"}}])",
     "test.json: /optimizer/type: must be one of sgd, rowwise_adagrad, adam, got \"adagrad\""},
    {"backend", R"([{"op": "add", "path": "/devices/backend", "value": "tpu"}])",
     "test.json: /devices/backend: must be one of cpu, cuda, auto, simulated, got \"tpu\""},
    // Several ranks on one GPU (issue 14): cuda / auto only, 0..count.
    {"ranks_per_gpu_cpu", R"([{"op": "add", "path": "/devices/ranks_per_gpu", "value": 2}])",
     "test.json: /devices/ranks_per_gpu: ranks share a GPU on the cuda backend (or auto) only, got backend cpu"},
    {"ranks_per_gpu_negative", R"([{"op": "add", "path": "/devices/backend", "value": "cuda"},
                                   {"op": "add", "path": "/devices/ranks_per_gpu", "value": -1}])",
     "test.json: /devices/ranks_per_gpu: must be in [0, 64], got -1"},
    {"ranks_per_gpu_above_count", R"([{"op": "add", "path": "/devices/backend", "value": "cuda"},
                                      {"op": "add", "path": "/devices/ranks_per_gpu", "value": 3}])",
     "test.json: /devices/ranks_per_gpu: must be in [0, 2], got 3"},
    // What the cuda backend does not run yet is refused at validation, naming the field.
    {"cuda_qcomms", R"([{"op": "add", "path": "/devices/backend", "value": "cuda"},
                        {"op": "add", "path": "/qcomms", "value": {"backward_precision": "bf16"}}])",
     "test.json: /qcomms/backward_precision: bf16 is not supported on the cuda backend yet (fp32 only: the NCCL collectives of ranks with a GPU each do not "
     "quantize)"},
    {"cuda_network", R"([{"op": "add", "path": "/devices/backend", "value": "cuda"},
                         {"op": "add", "path": "/network", "value": {"inter_node": {"latency_ns": 5}}}])",
     "test.json: /network: network emulation is not supported on the cuda backend yet"},
    {"cuda_compaction", R"([{"op": "add", "path": "/devices/backend", "value": "cuda"},
                            {"op": "add", "path": "/memory", "value": {"compaction": 2}}])",
     "test.json: /memory/compaction: compaction is not supported on the cuda backend yet"},
    {"cuda_async_on_cpu", R"([{"op": "add", "path": "/memory", "value": {"allocator": "cuda_async"}}])",
     "test.json: /memory/allocator: cuda_async (cudaMallocAsync pools) needs devices.backend cuda, got cpu"},
    {"interaction", R"([{"op": "add", "path": "/dense/interaction", "value": "dotp"}])",
     "test.json: /dense/interaction: must be one of dot, cat, dcn, got \"dotp\""},
    {"invalid_ids", R"([{"op": "add", "path": "/invalid_ids", "value": "skip"}])",
     "test.json: /invalid_ids: must be one of error, clamp, drop, got \"skip\""},
    {"ids_distribution", R"([{"op": "add", "path": "/features/0/ids", "value": "gauss"}])",
     "test.json: /features/0/ids: must be one of uniform, zipf, got \"gauss\""},
    {"sharding_default", R"([{"op": "add", "path": "/sharding", "value": {"default": "rw"}}])",
     "test.json: /sharding/default: must be one of data_parallel, table_wise, row_wise, "
     "column_wise, table_row_wise, table_column_wise, grid_shard, got \"rw\""},

    // Ranges.
    {"num_embeddings_zero", R"([{"op": "replace", "path": "/tables/1/num_embeddings", "value": 0}])",
     "test.json: /tables/1/num_embeddings: must be > 0, got 0"},
    {"embedding_dim_zero", R"([{"op": "replace", "path": "/tables/1/embedding_dim", "value": 0}])",
     "test.json: /tables/1/embedding_dim: must be > 0, got 0"},
    {"batch_size_zero", R"([{"op": "replace", "path": "/batch_size", "value": 0}])",
     "test.json: /batch_size: must be > 0, got 0"},
    {"steps_zero", R"([{"op": "add", "path": "/steps", "value": 0}])",
     "test.json: /steps: must be > 0, got 0"},
    {"warmup_negative", R"([{"op": "add", "path": "/warmup_steps", "value": -1}])",
     "test.json: /warmup_steps: must be >= 0, got -1"},
    {"seed_negative", R"([{"op": "add", "path": "/seed", "value": -1}])",
     "test.json: /seed: must be >= 0, got -1"},
    {"devices_zero", R"([{"op": "replace", "path": "/devices/count", "value": 0}])",
     "test.json: /devices/count: must be in [1, 64], got 0"},
    {"devices_65", R"([{"op": "replace", "path": "/devices/count", "value": 65}])",
     "test.json: /devices/count: must be in [1, 64], got 65"},
    {"devices_huge", R"([{"op": "replace", "path": "/devices/count", "value": 1e10}])",
     "test.json: /devices/count: must be in [1, 64], got 10000000000"},
    {"memory_zero", R"([{"op": "add", "path": "/devices/memory_bytes", "value": 0}])",
     "test.json: /devices/memory_bytes: must be > 0, got 0"},
    {"learning_rate_zero", R"([{"op": "add", "path": "/optimizer", "value": {"learning_rate": 0}}])",
     "test.json: /optimizer/learning_rate: must be > 0, got 0"},
    {"dense_learning_rate_negative", R"([{"op": "add", "path": "/optimizer", "value": {"dense_learning_rate": -0.5}}])",
     "test.json: /optimizer/dense_learning_rate: must be > 0, got -0.5"},
    {"eps_zero", R"([{"op": "add", "path": "/optimizer", "value": {"eps": 0}}])",
     "test.json: /optimizer/eps: must be > 0, got 0"},
    {"beta1_one", R"([{"op": "add", "path": "/optimizer", "value": {"beta1": 1}}])",
     "test.json: /optimizer/beta1: must be in [0, 1), got 1"},
    {"beta2_negative", R"([{"op": "add", "path": "/optimizer", "value": {"beta2": -0.1}}])",
     "test.json: /optimizer/beta2: must be in [0, 1), got -0.1"},
    {"timeout_zero", R"([{"op": "add", "path": "/collective_timeout_ms", "value": 0}])",
     "test.json: /collective_timeout_ms: must be in [100, 86400000], got 0"},
    {"pipeline_unknown", R"([{"op": "add", "path": "/pipeline", "value": "async"}])",
     "test.json: /pipeline: must be one of base, sparse_dist, semi_sync, got \"async\""},
    {"qcomms_unknown_key", R"([{"op": "add", "path": "/qcomms", "value": {"fwd": "bf16"}}])",
     "test.json: /qcomms/fwd: unknown key"},
    {"qcomms_precision", R"([{"op": "add", "path": "/qcomms", "value": {"backward_precision": "int8"}}])",
     "test.json: /qcomms/backward_precision: must be one of fp32, fp16, bf16, got \"int8\""},
    {"network_unknown_class", R"([{"op": "add", "path": "/network", "value": {"nvlink": {}}}])",
     "test.json: /network/nvlink: unknown key"},
    {"network_bandwidth_zero", R"([{"op": "add", "path": "/network", "value": {"intra_node": {"bandwidth_bytes_per_s": 0}}}])",
     "test.json: /network/intra_node/bandwidth_bytes_per_s: must be > 0, got 0"},
    {"network_latency_negative", R"([{"op": "add", "path": "/network", "value": {"inter_node": {"latency_ns": -1}}}])",
     "test.json: /network/inter_node/latency_ns: must be >= 0, got -1"},
    {"network_latency_huge", R"([{"op": "add", "path": "/network", "value": {"inter_node": {"latency_ns": 1e11}}}])",
     "test.json: /network/inter_node/latency_ns: must be <= 10000000000, got 100000000000"},
    {"network_not_object", R"([{"op": "add", "path": "/network", "value": {"inter_node": 5}}])",
     "test.json: /network/inter_node: must be an object, got number"},
    {"bucket_cap_zero", R"([{"op": "add", "path": "/dense/bucket_cap_bytes", "value": 0}])",
     "test.json: /dense/bucket_cap_bytes: must be > 0, got 0"},
    {"compaction_negative", R"([{"op": "add", "path": "/memory", "value": {"compaction": -1}}])",
     "test.json: /memory/compaction: must be >= 0, got -1"},
    {"max_split_small", R"([{"op": "add", "path": "/memory", "value": {"max_split_size": 1024}}])",
     "test.json: /memory/max_split_size: must be 0 (unlimited) or in [20971520, 1125899906842624], got 1024"},
    {"gc_threshold_one", R"([{"op": "add", "path": "/memory", "value": {"garbage_collection_threshold": 1.0}}])",
     "test.json: /memory/garbage_collection_threshold: must be > 0 and < 1 (a fraction of devices.memory_bytes, as "
     "PyTorch's PYTORCH_CUDA_ALLOC_CONF takes it), or 0 for none; got 1"},
    {"gc_threshold_negative", R"([{"op": "add", "path": "/memory", "value": {"garbage_collection_threshold": -0.5}}])",
     "test.json: /memory/garbage_collection_threshold: must be > 0 and < 1 (a fraction of devices.memory_bytes, as "
     "PyTorch's PYTORCH_CUDA_ALLOC_CONF takes it), or 0 for none; got -0.5"},
    {"gc_threshold_expandable",
     R"([{"op": "add", "path": "/memory", "value": {"allocator": "expandable", "garbage_collection_threshold": 0.6}}])",
     "test.json: /memory/garbage_collection_threshold: applies to the caching allocator only, got memory.allocator "
     "expandable: an expandable range has no whole free segment to release (PyTorch collects none)"},
    {"gc_threshold_string", R"([{"op": "add", "path": "/memory", "value": {"garbage_collection_threshold": "0.6"}}])",
     "test.json: /memory/garbage_collection_threshold: must be a number, got string"},
    {"allocator_unknown", R"([{"op": "add", "path": "/memory", "value": {"allocator": "buddy"}}])",
     "test.json: /memory/allocator: must be one of caching, expandable, direct, cuda_async, got \"buddy\""},
    {"timeout_huge", R"([{"op": "add", "path": "/collective_timeout_ms", "value": 9223372036854775807}])",
     "test.json: /collective_timeout_ms: must be in [100, 86400000], got 9223372036854775807"},
    {"rows_huge", R"([{"op": "replace", "path": "/tables/0/num_embeddings", "value": 2305843009213693952}])",
     "test.json: /tables/0/num_embeddings: must be <= 1099511627776, got 2305843009213693952"},
    {"dim_huge", R"([{"op": "replace", "path": "/tables/0/embedding_dim", "value": 100000}])",
     "test.json: /tables/0/embedding_dim: must be <= 65536, got 100000"},
    {"batch_huge", R"([{"op": "replace", "path": "/batch_size", "value": 288230376151711744}])",
     "test.json: /batch_size: must be <= 16777216, got 288230376151711744"},
    {"steps_huge", R"([{"op": "add", "path": "/steps", "value": 9223372036854775807}])",
     "test.json: /steps: must be <= 1000000000, got 9223372036854775807"},
    {"pooling_factor_huge", R"([{"op": "add", "path": "/features", "value": [{"name": "f0", "pooling_factor": 9223372036854775807}]}])",
     "test.json: /features/0/pooling_factor: must be <= 1048576, got 9.223372036854776e+18"},
    {"lr_huge", R"([{"op": "add", "path": "/optimizer", "value": {"learning_rate": 1e300}}])",
     "test.json: /optimizer/learning_rate: must be <= 1e+30, got 1e+300"},
    {"num_dense_features_zero", R"([{"op": "replace", "path": "/dense/num_dense_features", "value": 0}])",
     "test.json: /dense/num_dense_features: must be > 0, got 0"},
    {"bottom_width_zero", R"([{"op": "replace", "path": "/dense/bottom_mlp", "value": [4, 0, 4]}])",
     "test.json: /dense/bottom_mlp/1: must be > 0, got 0"},
    {"bottom_width_huge", R"([{"op": "replace", "path": "/dense/bottom_mlp/0", "value": 3e9}])",
     "test.json: /dense/bottom_mlp/0: must be <= 2147483647, got 3000000000"},
    {"bottom_empty", R"([{"op": "replace", "path": "/dense/bottom_mlp", "value": []}])",
     "test.json: /dense/bottom_mlp: must not be empty"},
    {"top_empty", R"([{"op": "replace", "path": "/dense/top_mlp", "value": []}])",
     "test.json: /dense/top_mlp: must not be empty"},
    {"top_last_not_one", R"([{"op": "replace", "path": "/dense/top_mlp", "value": [8, 2]}])",
     "test.json: /dense/top_mlp/1: the last layer must have width 1 (one logit), got 2"},
    {"dcn_without_dcn_interaction",
     R"([{"op": "add", "path": "/dense/dcn", "value": {"num_layers": 3}}])",
     "test.json: /dense/dcn: only allowed when interaction is \"dcn\", not \"dot\""},
    {"dcn_layers_zero",
     R"([{"op": "add", "path": "/dense/interaction", "value": "dcn"},
         {"op": "add", "path": "/dense/dcn", "value": {"num_layers": 0}}])",
     "test.json: /dense/dcn/num_layers: must be >= 1, got 0"},
    {"dcn_rank_zero",
     R"([{"op": "add", "path": "/dense/interaction", "value": "dcn"},
         {"op": "add", "path": "/dense/dcn", "value": {"low_rank_dim": 0}}])",
     "test.json: /dense/dcn/low_rank_dim: must be >= 1, got 0"},
    {"dot_dim_mismatch", R"([{"op": "replace", "path": "/tables/1/embedding_dim", "value": 8}])",
     "test.json: /dense/interaction: dot needs every table's embedding_dim to equal the last "
     "bottom_mlp width (4); table \"t1\" has embedding_dim 8"},

    // Pooling factors and ids.
    {"pooling_factor_fraction", R"([{"op": "add", "path": "/features/0/pooling_factor", "value": 1.5}])",
     "test.json: /features/0/pooling_factor: a fixed pooling factor must be an integer (use "
     "{\"mean\": 1.5, \"max\": N} for bags of varying length), got 1.5"},
    {"pooling_factor_negative", R"([{"op": "add", "path": "/features/0/pooling_factor", "value": -1}])",
     "test.json: /features/0/pooling_factor: must be >= 0, got -1"},
    {"pooling_factor_string", R"([{"op": "add", "path": "/features/0/pooling_factor", "value": "3"}])",
     "test.json: /features/0/pooling_factor: must be a number or an object {\"mean\", \"max\"}, got string"},
    {"pooling_factor_mean_above_max",
     R"([{"op": "add", "path": "/features/0/pooling_factor", "value": {"mean": 3, "max": 2}}])",
     "test.json: /features/0/pooling_factor/mean: must be <= max (2), got 3"},
    {"pooling_factor_mean_negative",
     R"([{"op": "add", "path": "/features/0/pooling_factor", "value": {"mean": -1, "max": 2}}])",
     "test.json: /features/0/pooling_factor/mean: must be >= 0, got -1"},
    {"pooling_factor_max_fraction",
     R"([{"op": "add", "path": "/features/0/pooling_factor", "value": {"mean": 1, "max": 2.5}}])",
     "test.json: /features/0/pooling_factor/max: must be an integer, got 2.5"},
    {"pooling_factor_max_missing",
     R"([{"op": "add", "path": "/features/0/pooling_factor", "value": {"mean": 1}}])",
     "test.json: /features/0/pooling_factor/max: required"},
    {"pooling_factor_unknown_key",
     R"([{"op": "add", "path": "/features/0/pooling_factor", "value": {"mean": 1, "max": 2, "min": 0}}])",
     "test.json: /features/0/pooling_factor/min: unknown key"},
    {"ids_not_string_or_object", R"([{"op": "add", "path": "/features/0/ids", "value": 1.15}])",
     "test.json: /features/0/ids: must be a string or an object, got number"},
    {"ids_distribution_missing", R"([{"op": "add", "path": "/features/0/ids", "value": {"alpha": 1.2}}])",
     "test.json: /features/0/ids/distribution: required"},
    {"ids_alpha_zero",
     R"([{"op": "add", "path": "/features/1/ids", "value": {"distribution": "zipf", "alpha": 0}}])",
     "test.json: /features/1/ids/alpha: must be > 0, got 0"},
    {"ids_permute_seed_negative",
     R"([{"op": "add", "path": "/features/1/ids", "value": {"distribution": "zipf", "permute_seed": -3}}])",
     "test.json: /features/1/ids/permute_seed: must be >= 0, got -3"},

    // Names and cross references.
    {"table_name_empty", R"([{"op": "replace", "path": "/tables/0/name", "value": ""}])",
     "test.json: /tables/0/name: must not be empty"},
    {"duplicate_table", R"([{"op": "replace", "path": "/tables/1/name", "value": "t0"}])",
     "test.json: /tables/1/name: duplicate table name \"t0\""},
    {"feature_names_empty", R"([{"op": "replace", "path": "/tables/1/feature_names", "value": []},
                               {"op": "remove", "path": "/features/1"}])",
     "test.json: /tables/1/feature_names: must not be empty"},
    {"feature_name_empty_in_table", R"([{"op": "add", "path": "/tables/1/feature_names/-", "value": ""}])",
     "test.json: /tables/1/feature_names/1: must not be empty"},
    {"feature_entry_name_empty", R"([{"op": "add", "path": "/features/-", "value": {"name": ""}}])",
     "test.json: /features/2/name: must not be empty"},
    {"duplicate_feature", R"([{"op": "add", "path": "/features/-", "value": {"name": "f0"}}])",
     "test.json: /features/2/name: duplicate feature name \"f0\""},
    {"feature_used_by_two_tables", R"([{"op": "replace", "path": "/tables/1/feature_names", "value": ["f0"]},
                                     {"op": "remove", "path": "/features/1"}])",
     "test.json: /tables/1/feature_names/0: feature \"f0\" is already used by table \"t0\" (/tables/0/feature_names/0); a "
     "feature feeds one table"},
    {"feature_listed_twice_in_table", R"([{"op": "add", "path": "/tables/0/feature_names/-", "value": "f0"}])",
     "test.json: /tables/0/feature_names/1: feature \"f0\" is already used by table \"t0\" (/tables/0/feature_names/0); a "
     "feature feeds one table"},
    {"unused_feature", R"([{"op": "add", "path": "/features/1", "value": {"name": "orphan"}}])",
     "test.json: /features/1: feature \"orphan\" is not used by any table"},

    // Sharding.
    {"sharding_unknown_key", R"([{"op": "add", "path": "/sharding", "value": {"type": "row_wise"}}])",
     "test.json: /sharding/type: unknown key"},
    {"sharding_unknown_table", R"([{"op": "add", "path": "/sharding", "value": {"tables": {"foo": {"type": "row_wise"}}}}])",
     "test.json: /sharding/tables/foo: no table named \"foo\""},
    {"sharding_unknown_table_escaped", R"([{"op": "add", "path": "/sharding", "value": {"tables": {"a/b~c": {"type": "row_wise"}}}}])",
     "test.json: /sharding/tables/a~1b~0c: no table named \"a/b~c\""},
    {"sharding_tables_not_object", R"([{"op": "add", "path": "/sharding", "value": {"tables": ["t0"]}}])",
     "test.json: /sharding/tables: must be an object, got array"},
    {"sharding_type_missing", R"([{"op": "add", "path": "/sharding", "value": {"tables": {"t0": {"ranks": [0]}}}}])",
     "test.json: /sharding/tables/t0/type: required"},
    {"sharding_type_unknown", R"([{"op": "add", "path": "/sharding", "value": {"tables": {"t0": {"type": "grid"}}}}])",
     "test.json: /sharding/tables/t0/type: must be one of data_parallel, table_wise, row_wise, "
     "column_wise, table_row_wise, table_column_wise, grid_shard, got \"grid\""},
    {"grid_shard_node", R"([{"op": "add", "path": "/sharding", "value": {"tables": {"t0": {"type": "grid_shard", "node": 0}}}}])",
     "test.json: /sharding/tables/t0/node: only allowed for table_row_wise and table_column_wise, not grid_shard"},
    {"table_wise_two_ranks", R"([{"op": "add", "path": "/sharding", "value": {"tables": {"t0": {"type": "table_wise", "ranks": [0, 1]}}}}])",
     "test.json: /sharding/tables/t0/ranks: table_wise takes exactly 1 rank, got 2"},
    {"table_wise_no_ranks", R"([{"op": "add", "path": "/sharding", "value": {"tables": {"t0": {"type": "table_wise", "ranks": []}}}}])",
     "test.json: /sharding/tables/t0/ranks: table_wise takes exactly 1 rank, got 0"},
    {"column_wise_too_many_ranks",
     R"([{"op": "add", "path": "/sharding", "value": {"tables": {"t1": {"type": "column_wise", "ranks": [0, 1, 0, 1, 0]}}}}])",
     "test.json: /sharding/tables/t1/ranks: column_wise takes 1 to 4 ranks (the table's "
     "embedding_dim), got 5"},
    {"column_wise_no_ranks", R"([{"op": "add", "path": "/sharding", "value": {"tables": {"t1": {"type": "column_wise", "ranks": []}}}}])",
     "test.json: /sharding/tables/t1/ranks: column_wise takes at least 1 rank, got 0"},
    {"row_wise_ranks", R"([{"op": "add", "path": "/sharding", "value": {"tables": {"t0": {"type": "row_wise", "ranks": [0]}}}}])",
     "test.json: /sharding/tables/t0/ranks: not allowed for row_wise"},
    {"data_parallel_ranks", R"([{"op": "add", "path": "/sharding", "value": {"tables": {"t0": {"type": "data_parallel", "ranks": [0]}}}}])",
     "test.json: /sharding/tables/t0/ranks: not allowed for data_parallel"},
    {"table_row_wise_ranks", R"([{"op": "add", "path": "/sharding", "value": {"tables": {"t0": {"type": "table_row_wise", "ranks": [0]}}}}])",
     "test.json: /sharding/tables/t0/ranks: not allowed for table_row_wise"},
    {"rank_out_of_range", R"([{"op": "add", "path": "/sharding", "value": {"tables": {"t0": {"type": "table_wise", "ranks": [2]}}}}])",
     "test.json: /sharding/tables/t0/ranks/0: must be in [0, 2), got 2 (devices.count is 2)"},
    {"rank_negative", R"([{"op": "add", "path": "/sharding", "value": {"tables": {"t1": {"type": "column_wise", "ranks": [0, -1]}}}}])",
     "test.json: /sharding/tables/t1/ranks/1: must be >= 0, got -1"},
    {"node_not_twrw", R"([{"op": "add", "path": "/sharding", "value": {"tables": {"t0": {"type": "row_wise", "node": 0}}}}])",
     "test.json: /sharding/tables/t0/node: only allowed for table_row_wise and table_column_wise, not row_wise"},
    {"node_out_of_range",
     R"([{"op": "replace", "path": "/devices/count", "value": 4},
         {"op": "add", "path": "/sharding", "value": {"local_world_size": 2, "tables": {"t0": {"type": "table_row_wise", "node": 2}}}}])",
     "test.json: /sharding/tables/t0/node: must be in [0, 2), got 2 (2 node(s) of local_world_size 2)"},
    {"node_one_node", R"([{"op": "add", "path": "/sharding", "value": {"tables": {"t0": {"type": "table_row_wise", "node": 1}}}}])",
     "test.json: /sharding/tables/t0/node: must be in [0, 1), got 1 (1 node(s) of local_world_size 2)"},
    {"node_negative", R"([{"op": "add", "path": "/sharding", "value": {"tables": {"t0": {"type": "table_row_wise", "node": -1}}}}])",
     "test.json: /sharding/tables/t0/node: must be >= 0, got -1"},
    {"local_world_size_not_divisor",
     R"([{"op": "replace", "path": "/devices/count", "value": 4},
         {"op": "add", "path": "/sharding", "value": {"local_world_size": 3}}])",
     "test.json: /sharding/local_world_size: must divide devices.count (4), got 3"},
    {"local_world_size_negative", R"([{"op": "add", "path": "/sharding", "value": {"local_world_size": -2}}])",
     "test.json: /sharding/local_world_size: must be >= 0, got -2"},
};

INSTANTIATE_TEST_SUITE_P(AllClasses, SpecErrorTest, ::testing::ValuesIn(kErrorCases),
                         [](const ::testing::TestParamInfo<ErrorCase>& p) {
                           return std::string(p.param.id);
                         });

TEST(SpecErrors, BaseSpecIsValid) { EXPECT_EQ(parse_error(base_spec()), "<no error>"); }

TEST(SpecErrors, OriginPrefixesEveryMessage) {
  json j = base_spec();
  j["tables"][1]["embedding_dim"] = 0;
  EXPECT_EQ(parse_error(j, "preset criteo"),
            "preset criteo: /tables/1/embedding_dim: must be > 0, got 0");
}

// Every pipeline runs on the cuda backend (issue 14: the next batch's input dist, and with
// semi_sync its lookup and output dist, under the dense part); what the cuda backend still
// does not run is refused next to it, naming the field.
TEST(SpecErrors, CudaRunsSparseDistAndSemiSync) {
  for (const std::string pipeline : {"sparse_dist", "semi_sync"}) {
    const json cuda = base_spec().patch(json::array({{{"op", "add"}, {"path", "/devices/backend"}, {"value", "cuda"}},
                                                     {{"op", "add"}, {"path", "/pipeline"}, {"value", pipeline}}}));
    EXPECT_EQ(parse_error(cuda), "<no error>") << pipeline;
    const json fp16 = cuda.patch(json::parse(R"([{"op": "add", "path": "/qcomms", "value": {"forward_precision": "fp16"}}])"));
    EXPECT_EQ(parse_error(fp16), "test.json: /qcomms/forward_precision: fp16 is not supported on the cuda backend yet (fp32 "
                                 "only: the NCCL collectives of ranks with a GPU each do not quantize)")
        << pipeline;
  }
}

}  // namespace

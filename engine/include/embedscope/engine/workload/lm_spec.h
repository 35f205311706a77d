#pragma once
// LmWorkloadSpec: a workload with `"model": "lm_embedding"` - an LLM's token embedding (one
// vocabulary table, pooling none: one row per token), a small stand-in for the transformer body
// and the output projection with next-token cross-entropy over the vocabulary (issue 19).
// Read by parse_lm_workload / load_lm_workload_file (engine/workload/lm_reader.cpp); the
// trainer is engine/model/lm_embedding.h, the vocabulary split engine/sharding/vocab_parallel.h.
//
// JSON (every key but the four shapes optional; docs/llm.md):
//   {"model": "lm_embedding", "name", "description", "source",
//    "vocab_size": V, "hidden_size": H, "sequence_length": S, "micro_batch_size": B,
//    "data_type": "fp32" | "bf16" | "fp16",     // default fp32; bf16/fp16: fp32 master copy
//    "tie_word_embeddings": true,              // default true (Hugging Face's default)
//    "padding_id": -1,                         // -1: none; else in [0, V): no gradient
//    "body_layers": 2,                         // residual dense layers h += tanh(h W + b)
//    "token_ids": {"distribution": "zipf", "alpha": 1.0},   // or {"file": "ids.bin", "dtype": "uint16"}
//    "sharding": {"type": "vocab_parallel" | "data_parallel" | "row_wise",
//                 "sequence_parallel": false, "make_vocab_size_divisible_by": 1},
//    "devices": {"count": p}, "optimizer": {"type": "sgd", "learning_rate": 0.1},
//    "steps": 3, "seed": 0}

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "embedscope/engine/input/token_file.h"
#include "embedscope/engine/workload/spec_error.h"

namespace embedscope::engine {

/// The most ranks a measured lm_embedding run has (run_lm: one CPU thread each); a simulated
/// one (simulate_lm) models up to kMaxSimulatedRanks.
inline constexpr int kMaxLmCpuRanks = 64;

/// How the vocabulary table (and an untied output projection) is split over the p ranks.
enum class LmSharding {
  /// Megatron VocabParallelEmbedding: rank r owns rows [floor(r V'/p), floor((r+1) V'/p)) of the
  /// (padded) vocabulary V'; every rank sees the same tokens (one tensor-parallel group); the
  /// lookups are combined by all-reduce (or reduce-scatter with sequence_parallel); the output
  /// projection is vocab-parallel with a vocab-parallel cross-entropy.
  vocab_parallel,
  /// The whole table replicated; each rank its own micro batch; gradients all-reduced.
  data_parallel,
  /// TorchRec row_wise: rows split as vocab_parallel, each rank its own micro batch; ids and
  /// rows travel by all-to-all; the output projection over the same row shards on all-gathered
  /// hidden states (vocab-parallel cross-entropy), hidden-state gradients reduce-scattered back.
  row_wise,
};
const char* to_string(LmSharding s);

/// Precision of the rows the forward pass reads. bf16 / fp16: an fp32 master copy is trained,
/// and the table and the output projection are rounded to the type (round to nearest even)
/// where the forward pass reads them.
enum class LmDataType { fp32, bf16, fp16 };
const char* to_string(LmDataType t);

/// The optimizer of every parameter (the tables, the output projection and the body):
/// sgd      p -= lr g
/// adam     torch.optim.Adam without weight decay (Kingma & Ba 2015, Algorithm 1, as PyTorch
///          computes it): two fp32 states per parameter element, m = b1 m + (1 - b1) g,
///          v = b2 v + (1 - b2) g^2, then at step t (1-based)
///          p -= (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps).
/// JSON "optimizer": {"type": "sgd" | "adam", "learning_rate", "beta1", "beta2", "eps"}.
enum class LmOptimizer { sgd, adam };
const char* to_string(LmOptimizer o);

struct LmWorkloadSpec {
  std::string name = "lm_embedding";
  std::string description;
  std::string source;                 ///< where the shapes come from (presets: the HF config.json)
  int64_t vocab_size = 0;             ///< V, >= 2
  int64_t hidden_size = 0;            ///< H, > 0
  int64_t sequence_length = 0;        ///< S tokens per sequence, > 0
  int64_t micro_batch_size = 1;       ///< B sequences per rank (per tensor-parallel group for vocab_parallel)
  LmDataType data_type = LmDataType::fp32;
  bool tie_word_embeddings = true;    ///< output projection = the embedding table
  int64_t padding_id = -1;            ///< -1 none; else in [0, V): its row starts at 0, gets no gradient, and targets equal to it are ignored
  int body_layers = 2;                ///< residual dense layers on [tokens x hidden], >= 0
  /// Token ids: P(k-th most frequent token) ~ 1/k^alpha, token id = k (frequent tokens at low
  /// ids, as BPE numbers its merges in order of frequency; Sennrich et al. 2016). Default
  /// alpha = 1.0, Zipf's law as measured on natural-language text (Piantadosi 2014, "Zipf's word
  /// frequency law in natural language: a critical review and future directions", Psychon. Bull.
  /// Rev. 21:1112-1130); BPE drives token frequencies toward the same law (Berman & Stapleton
  /// 2026, arXiv:2601.03368). Realistic ids from a
  /// SentencePiece model: `embedscope tokenize` writes a token file (below).
  double token_zipf_alpha = 1.0;
  /// Token ids from a file instead (JSON "token_ids": {"file": PATH, "dtype": "uint16" |
  /// "uint32"}, or a 1-D .npy of uint16 / uint32 / int32 / int64 that says its own dtype;
  /// input/token_file.h), e.g. written by `embedscope tokenize`. A relative PATH resolves against
  /// the workload file's directory. Read in order: global sequence n (n = step x
  /// global_sequences_per_step() + sequence) takes the S + 1 ids from offset n x S, wrapping
  /// around the end of the file. Every id must be < vocab_size (SpecError naming the file and the
  /// offset). "" = the Zipf ids above.
  std::string token_file;
  TokenDtype token_file_dtype = TokenDtype::uint16;
  /// the file's ids, read by parse_lm_workload; null for a stored workload (parse_stored_lm_workload)
  std::shared_ptr<const std::vector<int64_t>> token_file_ids;
  LmSharding sharding = LmSharding::vocab_parallel;
  /// vocab_parallel only (Megatron --sequence-parallel): the lookup is reduce-scattered into
  /// token slices, the body runs on a rank's slice, an all-gather precedes the output projection.
  /// Needs sequence_length divisible by the rank count.
  bool sequence_parallel = false;
  /// Megatron's --make-vocab-size-divisible-by: the table gets V' = ceil(V / (m p)) * m p rows
  /// (the padded rows are never looked up but take part in the softmax, as in Megatron).
  /// Default 1 = no padding (Megatron's own default is 128); the plan states V'.
  int64_t make_vocab_size_divisible_by = 1;
  /// devices.count: 1..kMaxSimulatedRanks (spec.h) in the file; a measured run (run_lm: CPU
  /// threads of one process) takes at most kMaxLmCpuRanks of them
  int world_size = 1;
  LmOptimizer optimizer = LmOptimizer::sgd;
  double learning_rate = 0.1;         ///< > 0
  double adam_beta1 = 0.9;            ///< adam: in [0, 1) (torch's default 0.9)
  double adam_beta2 = 0.999;          ///< adam: in [0, 1) (torch's default 0.999)
  double adam_eps = 1e-8;             ///< adam: > 0 (torch's default 1e-8)
  int64_t steps = 3;                  ///< > 0
  uint64_t seed = 0;

  /// True when the ids come from a token file (token_file set, or its ids given by hand): the
  /// estimates take each vocabulary range's share of the rows instead of the Zipf mass. A stored
  /// workload (parse_stored_lm_workload) has the file's name but not its ids.
  bool ids_from_file() const { return token_file_ids != nullptr || !token_file.empty(); }
  /// V' (the padded vocabulary), as Megatron-LM's _vocab_size_with_padding: ceil(V / (m t)) * m t
  /// with t = tensor_parallel_size(), or V when m == 1. Data-parallel ranks add no padding:
  /// V 128,256, m 128 stays 128,256 under data_parallel at any p (a multiple of 128), and becomes
  /// 129,024 under vocab_parallel on 8 ranks (a multiple of 1,024).
  int64_t padded_vocab_size() const;
  /// The tensor-parallel size Megatron pads the vocabulary by: world_size for vocab_parallel (one
  /// tensor-parallel group), 1 for data_parallel and row_wise (every rank its own micro batch: data
  /// parallel; row_wise's uneven row blocks need no padding).
  int tensor_parallel_size() const { return sharding == LmSharding::vocab_parallel ? world_size : 1; }
  /// Tokens one rank's micro batch holds: B x S.
  int64_t tokens_per_micro_batch() const { return micro_batch_size * sequence_length; }
  /// Tokens a step trains: the micro batch, times the ranks unless vocab_parallel splits the
  /// table (not the batch) over them.
  int64_t tokens_per_step() const {
    return tokens_per_micro_batch() * (sharding == LmSharding::vocab_parallel ? 1 : world_size);
  }
  /// Sequences of one step over all ranks: B for vocab_parallel (one tensor-parallel group sees
  /// the same batch), B x p for data_parallel and row_wise.
  int64_t global_sequences_per_step() const {
    return sharding == LmSharding::vocab_parallel ? micro_batch_size : micro_batch_size * world_size;
  }
};

/// Parses and validates; SpecError "<origin>: <json pointer>: <reason>" naming the field and,
/// for a divisibility problem, the values that would be valid. `j` must have "model":
/// "lm_embedding".
/// `base_dir`: where a relative "token_ids" file is looked for ("": the current directory).
LmWorkloadSpec parse_lm_workload(const nlohmann::json& j, const std::string& origin, const std::string& base_dir = "");
/// A workload as a session stored it (meta workload_json), for the readers of saved sessions
/// (`stats`, engine/workload/session_rate.h, the workbench's plan model): the same shape checks
/// and validate() as parse_lm_workload, but no input-time check that depends on files outside the
/// session, which may have moved, changed or be gone since the run (fixa49, tester49 F-A): the
/// token file is not opened (token_file as recorded, token_file_ids null, ids_from_file() true),
/// its "dtype" is taken as recorded (uint16, uint32, int32 or int64; a session written before
/// 811a50e2 stored e.g. "uint16" beside a .npy of int64, which the input parse refuses) and may
/// be absent beside a raw file. SpecError "<origin>: <json pointer>: <reason>" as above.
LmWorkloadSpec parse_stored_lm_workload(const nlohmann::json& j, const std::string& origin);
/// Reads a file (SpecError names the file; JSON syntax errors its line).
LmWorkloadSpec load_lm_workload_file(const std::string& path);
/// Re-validates after command-line overrides (devices.count, sharding).
void validate(const LmWorkloadSpec& spec, const std::string& origin);
/// Serializes back (round-trips through parse_lm_workload).
nlohmann::json to_json(const LmWorkloadSpec& spec);
/// True when `j` is an object whose "model" is "lm_embedding".
bool is_lm_workload(const nlohmann::json& j);
/// Reads `path` (SpecError as load_lm_workload_file for an unreadable file or bad JSON) and
/// tells whether it is an lm_embedding workload.
bool is_lm_workload_file(const std::string& path);

/// The built-in lm_embedding presets (resources/workloads/lm/*.json, embedded at build time):
/// gpt2_small_embedding, llama3_8b_embedding, llama3_8b_embedding_scaled.
std::vector<std::string> lm_preset_names();
bool is_lm_preset(const std::string& name);
/// Parsed and validated (origin "preset NAME"); SpecError listing the names for an unknown one.
LmWorkloadSpec load_lm_preset(const std::string& name);

}  // namespace embedscope::engine

// The lm_embedding workload: parsing, defaults, round trip, and bad input naming the field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "embedscope/engine/workload/lm_spec.h"

using namespace embedscope::engine;
using nlohmann::json;

namespace {

json base() {
  return json{{"model", "lm_embedding"}, {"vocab_size", 50257}, {"hidden_size", 768}, {"sequence_length", 1024}};
}

std::string error_of(const json& j) {
  try {
    parse_lm_workload(j, "w.json");
  } catch (const SpecError& e) {
    return e.what();
  }
  return "";
}

TEST(LmSpec, DefaultsAndRoundTrip) {
  const LmWorkloadSpec s = parse_lm_workload(base(), "w.json");
  EXPECT_EQ(s.vocab_size, 50257);
  EXPECT_EQ(s.micro_batch_size, 1);
  EXPECT_TRUE(s.tie_word_embeddings);
  EXPECT_EQ(s.padding_id, -1);
  EXPECT_EQ(s.sharding, LmSharding::vocab_parallel);
  EXPECT_EQ(s.make_vocab_size_divisible_by, 1);
  EXPECT_EQ(s.padded_vocab_size(), 50257);  // no padding unless asked for
  EXPECT_DOUBLE_EQ(s.token_zipf_alpha, 1.0);
  const LmWorkloadSpec back = parse_lm_workload(to_json(s), "again");
  EXPECT_EQ(to_json(back), to_json(s));
  EXPECT_TRUE(is_lm_workload(base()));
  EXPECT_FALSE(is_lm_workload(json{{"tables", json::array()}}));
}

TEST(LmSpec, AdamWithTorchDefaultsAndItsBadInput) {
  json j = base();
  j["optimizer"] = {{"type", "adam"}, {"learning_rate", 0.001}};
  const LmWorkloadSpec s = parse_lm_workload(j, "w.json");
  EXPECT_EQ(s.optimizer, LmOptimizer::adam);
  EXPECT_DOUBLE_EQ(s.adam_beta1, 0.9);
  EXPECT_DOUBLE_EQ(s.adam_beta2, 0.999);
  EXPECT_DOUBLE_EQ(s.adam_eps, 1e-8);
  EXPECT_EQ(to_json(s)["optimizer"], (json{{"type", "adam"}, {"learning_rate", 0.001}, {"beta1", 0.9},
                                           {"beta2", 0.999}, {"eps", 1e-8}}));
  EXPECT_EQ(to_json(parse_lm_workload(to_json(s), "again")), to_json(s));
  j["optimizer"]["beta2"] = 1.0;
  EXPECT_EQ(error_of(j), "w.json: /optimizer/beta2: must be in [0, 1), got 1");
  j["optimizer"] = {{"type", "sgd"}, {"beta1", 0.5}};
  EXPECT_EQ(error_of(j), "w.json: /optimizer/beta1: only with optimizer type adam");
  j["optimizer"] = {{"type", "adagrad"}};
  EXPECT_EQ(error_of(j), "w.json: /optimizer/type: unknown value \"adagrad\"; valid: sgd, adam");
}

TEST(LmSpec, MegatronPaddingIsAMultipleOf128TimesTheRanks) {
  json j = base();
  j["sharding"] = {{"make_vocab_size_divisible_by", 128}};
  j["devices"] = {{"count", 4}};
  // GPT-2: 50257 -> ceil(50257 / 512) * 512 = 50688 (Megatron's padded GPT-2 vocabulary at TP 4)
  EXPECT_EQ(parse_lm_workload(j, "w").padded_vocab_size(), 50688);
  j["devices"] = {{"count", 1}};
  EXPECT_EQ(parse_lm_workload(j, "w").padded_vocab_size(), 50304);  // nanoGPT's 50304
}

TEST(LmSpec, BadInputNamesTheField) {
  json j = base();
  j["vocab_size"] = 1;
  EXPECT_EQ(error_of(j), "w.json: /vocab_size: must be in [2, 2147483648], got 1");
  j = base();
  j["sequence_length"] = 0;
  EXPECT_EQ(error_of(j), "w.json: /sequence_length: must be > 0, got 0");
  j = base();
  j["sequence_length"] = 1022;
  j["sharding"] = {{"sequence_parallel", true}};
  j["devices"] = {{"count", 4}};
  EXPECT_EQ(error_of(j),
            "w.json: /sequence_length: sequence_parallel splits each sequence over the 4 ranks: must be a "
            "multiple of 4 (e.g. 1020 or 1024), got 1022");
  j = base();
  j["sharding"] = {{"type", "data_parallel"}, {"sequence_parallel", true}};
  EXPECT_EQ(error_of(j), "w.json: /sharding/sequence_parallel: only with sharding type vocab_parallel (got data_parallel)");
  j = base();
  j["padding_id"] = 50257;
  EXPECT_EQ(error_of(j), "w.json: /padding_id: must be -1 (none) or in [0, 50257), got 50257");
  j = base();
  j["data_type"] = "int8";
  EXPECT_EQ(error_of(j), "w.json: /data_type: unknown value \"int8\"; valid: fp32, bf16, fp16");
  j = base();
  j["sharding"] = {{"type", "table_wise"}};
  EXPECT_EQ(error_of(j), "w.json: /sharding/type: unknown value \"table_wise\"; valid: vocab_parallel, data_parallel, row_wise");
  j = base();
  j["hidden"] = 3;
  EXPECT_EQ(error_of(j), "w.json: /hidden: unknown key; valid keys: model, name, description, source, vocab_size, "
                         "hidden_size, sequence_length, micro_batch_size, data_type, tie_word_embeddings, padding_id, "
                         "body_layers, token_ids, sharding, devices, optimizer, steps, seed");
  // a DLRM table option at the top level: what it is, and the keys there are
  j = base();
  j["hash_size"] = 500;
  EXPECT_EQ(error_of(j), "w.json: /hash_size: not an lm_embedding key: \"hash_size\" is a DLRM table option "
                         "(docs/configuration.md, \"Smaller tables\"); valid keys: model, name, description, source, "
                         "vocab_size, hidden_size, sequence_length, micro_batch_size, data_type, tie_word_embeddings, "
                         "padding_id, body_layers, token_ids, sharding, devices, optimizer, steps, seed");
  j = base();
  j["placement"] = "host_cached";
  EXPECT_NE(error_of(j).find("/placement: not an lm_embedding key: \"placement\" is a DLRM table option "
                             "(docs/configuration.md, \"Tables in host memory\"); valid keys: model,"),
            std::string::npos)
      << error_of(j);
  j = base();
  j["embedding_dim"] = 16;
  EXPECT_NE(error_of(j).find("/embedding_dim: not an lm_embedding key: \"embedding_dim\" is a DLRM table's key; an "
                             "lm_embedding table's rows have hidden_size values; valid keys:"),
            std::string::npos);
  // inside an object: its own keys
  j = base();
  j["sharding"] = {{"type", "vocab_parallel"}, {"hash_size", 3}};
  EXPECT_EQ(error_of(j), "w.json: /sharding/hash_size: unknown key; valid keys: type, sequence_parallel, "
                         "make_vocab_size_divisible_by");
  j = base();
  j.erase("hidden_size");
  EXPECT_EQ(error_of(j), "w.json: /hidden_size: required");
  j = json{{"model", "lm_embedding"}, {"vocab_size", 3}, {"hidden_size", 4}, {"sequence_length", 4},
           {"devices", {{"count", 4}}}};
  EXPECT_EQ(error_of(j), "w.json: /devices/count: vocab_parallel splits the 3 vocabulary rows over the ranks: at most "
                         "3 ranks, got 4");
}

}  // namespace

namespace {
TEST(LmPresets, ShapesOfTheirSources) {
  EXPECT_EQ(lm_preset_names(), (std::vector<std::string>{"gpt2_small_embedding", "llama3_8b_embedding",
                                                         "llama3_8b_embedding_scaled"}));
  const LmWorkloadSpec gpt2 = load_lm_preset("gpt2_small_embedding");
  EXPECT_EQ(gpt2.vocab_size, 50257);
  EXPECT_EQ(gpt2.hidden_size, 768);
  EXPECT_EQ(gpt2.sequence_length, 1024);
  EXPECT_TRUE(gpt2.tie_word_embeddings);
  const LmWorkloadSpec llama = load_lm_preset("llama3_8b_embedding");
  EXPECT_EQ(llama.vocab_size, 128256);
  EXPECT_EQ(llama.hidden_size, 4096);
  EXPECT_EQ(llama.sequence_length, 8192);
  EXPECT_EQ(llama.data_type, LmDataType::bf16);
  EXPECT_FALSE(llama.tie_word_embeddings);
  const LmWorkloadSpec scaled = load_lm_preset("llama3_8b_embedding_scaled");
  EXPECT_EQ(scaled.vocab_size, 128256);
  EXPECT_EQ(scaled.world_size, 4);
  for (const std::string& n : lm_preset_names()) EXPECT_NE(load_lm_preset(n).source.find("config.json"), std::string::npos) << n;
  EXPECT_FALSE(is_lm_preset("tiny"));
  try {
    load_lm_preset("gpt3");
    FAIL();
  } catch (const SpecError& e) {
    EXPECT_STREQ(e.what(), "unknown lm_embedding preset \"gpt3\"; known: gpt2_small_embedding, llama3_8b_embedding, "
                           "llama3_8b_embedding_scaled");
  }
}
}  // namespace

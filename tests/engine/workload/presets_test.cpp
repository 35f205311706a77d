// The built-in presets: names, sources, and the figures each one states.

#include "spec_test_support.h"

namespace es = embedscope::engine;
using nlohmann::json;
using namespace spec_testing;

namespace {

TEST(SpecPresets, Names) {
  EXPECT_EQ(es::preset_names(),
            (std::vector<std::string>{"criteo_kaggle", "criteo_terabyte_10m", "mlperf_dlrm_dcnv2",
                                      "mlperf_dlrm_dcnv2_scaled", "tiny"}));
}

TEST(SpecPresets, UnknownPreset) {
  try {
    es::preset_json("criteo");
    FAIL() << "no error";
  } catch (const es::SpecError& e) {
    EXPECT_STREQ(e.what(),
                 "unknown preset \"criteo\"; known presets: criteo_kaggle, criteo_terabyte_10m, gpt2_small_embedding, "
                 "llama3_8b_embedding, llama3_8b_embedding_scaled, mlperf_dlrm_dcnv2, mlperf_dlrm_dcnv2_scaled, tiny");
  }
  EXPECT_THROW(es::load_preset("nope"), es::SpecError);
}

TEST(SpecPresets, EveryPresetCitesItsSourceAndIsNamedAfterItsFile) {
  for (const auto& name : es::preset_names()) {
    const es::WorkloadSpec s = es::load_preset(name);
    EXPECT_EQ(s.name, name);
    EXPECT_FALSE(s.source.empty()) << name;
    EXPECT_FALSE(s.description.empty()) << name;
    EXPECT_EQ(s.features.size(), [&] {
      size_t n = 0;
      for (const auto& t : s.tables) n += t.feature_names.size();
      return n;
    }()) << name;
  }
}

TEST(SpecPresets, CriteoKaggle) {
  const es::WorkloadSpec s = es::load_preset("criteo_kaggle");
  ASSERT_EQ(s.tables.size(), 26u);
  ASSERT_EQ(s.features.size(), 26u);
  EXPECT_EQ(total_rows(s), 33762577);
  // 2.01 GiB of fp32 weights at dim 16.
  EXPECT_NEAR(static_cast<double>(total_rows(s)) * 16 * 4 / kGiB, 2.01, 0.005);
  EXPECT_EQ(s.tables[0].name, "t_cat_0");
  EXPECT_EQ(s.tables[0].num_embeddings, 1460);
  EXPECT_EQ(s.tables[2].num_embeddings, 10131227);
  EXPECT_EQ(s.tables[8].num_embeddings, 3);
  EXPECT_EQ(s.tables[25].name, "t_cat_25");
  EXPECT_EQ(s.tables[25].num_embeddings, 142572);
  for (size_t i = 0; i < 26; ++i) {
    const auto& t = s.tables[i];
    EXPECT_EQ(t.embedding_dim, 16);
    EXPECT_EQ(t.pooling, es::Pooling::sum);
    EXPECT_EQ(t.feature_names, std::vector<std::string>{"cat_" + std::to_string(i)});
    const auto& f = s.features[i];
    EXPECT_EQ(f.name, "cat_" + std::to_string(i));
    EXPECT_EQ(s.table_of_feature(i), static_cast<int>(i));
    EXPECT_TRUE(f.pooling_factor.fixed);
    EXPECT_EQ(f.pooling_factor.max, 1);
    EXPECT_EQ(f.ids.kind, es::IdDistributionKind::zipf);
    EXPECT_EQ(f.ids.alpha, 1.15);
    EXPECT_TRUE(f.ids.permute);
  }
  EXPECT_EQ(s.batch_size, 512);
  EXPECT_EQ(s.steps, 20);
  EXPECT_EQ(s.warmup_steps, 2);
  EXPECT_EQ(s.seed, 1u);
  EXPECT_EQ(s.devices.count, 4);
  EXPECT_EQ(s.devices.memory_bytes, 4 * kGiB);
  EXPECT_EQ(s.optimizer.type, es::OptimizerType::sgd);
  EXPECT_EQ(s.optimizer.learning_rate, 0.1);
  EXPECT_EQ(s.optimizer.dense_learning_rate, 0.1);
  ASSERT_TRUE(s.dense.has_value());
  EXPECT_EQ(s.dense->num_dense_features, 13);
  EXPECT_EQ(s.dense->bottom_mlp, (std::vector<int>{512, 256, 64, 16}));
  EXPECT_EQ(s.dense->interaction, es::Interaction::dot);
  EXPECT_EQ(s.dense->top_mlp, (std::vector<int>{512, 256, 1}));
  EXPECT_EQ(s.sharding.default_type, es::ShardingType::table_wise);
  EXPECT_TRUE(s.sharding.per_table.empty());
  EXPECT_NE(s.source.find("facebookresearch/dlrm"), std::string::npos);
}

TEST(SpecPresets, CriteoTerabyte10M) {
  const es::WorkloadSpec s = es::load_preset("criteo_terabyte_10m");
  ASSERT_EQ(s.tables.size(), 26u);
  EXPECT_EQ(total_rows(s), 49126297);
  // 11.7 GiB of fp32 weights at dim 64.
  EXPECT_NEAR(static_cast<double>(total_rows(s)) * 64 * 4 / kGiB, 11.7, 0.05);
  for (const auto& t : s.tables) {
    EXPECT_EQ(t.embedding_dim, 64);
    EXPECT_LE(t.num_embeddings, 10000000);
  }
  EXPECT_EQ(s.tables[0].num_embeddings, 9980333);
  EXPECT_EQ(s.tables[25].num_embeddings, 36);
  EXPECT_EQ(s.batch_size, 512);
  EXPECT_EQ(s.steps, 20);
  EXPECT_EQ(s.devices.count, 4);
  EXPECT_EQ(s.devices.memory_bytes, 16 * kGiB);
  EXPECT_EQ(s.optimizer.type, es::OptimizerType::sgd);
  EXPECT_EQ(s.optimizer.learning_rate, 0.1);
  EXPECT_EQ(s.features[7].ids.kind, es::IdDistributionKind::zipf);
  EXPECT_EQ(s.features[7].ids.alpha, 1.15);
  ASSERT_TRUE(s.dense.has_value());
  EXPECT_EQ(s.dense->bottom_mlp, (std::vector<int>{512, 256, 64}));
  EXPECT_EQ(s.dense->top_mlp, (std::vector<int>{512, 512, 256, 1}));
  EXPECT_EQ(s.dense->interaction, es::Interaction::dot);
  EXPECT_EQ(s.sharding.default_type, es::ShardingType::table_wise);
  EXPECT_NE(s.source.find("facebookresearch/dlrm"), std::string::npos);
}

const std::vector<int64_t> kMlperfRows = {
    40000000, 39060, 17295, 7424, 20265, 3,        7122,     1543,     63,     40000000, 3067956, 405282, 10,
    2209,     11938, 155,   4,    976,   14,       40000000, 40000000, 40000000, 590152, 12973,   108,    36};
const std::vector<int64_t> kMlperfHot = {3, 2, 1,  2, 6, 1, 1, 1,   1,  7,  3, 8, 1,
                                         6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1};

TEST(SpecPresets, MlperfDlrmDcnv2) {
  const es::WorkloadSpec s = es::load_preset("mlperf_dlrm_dcnv2");
  ASSERT_EQ(s.tables.size(), 26u);
  EXPECT_EQ(total_rows(s), 204184588);
  // 97.4 GiB of fp32 weights at dim 128.
  EXPECT_NEAR(static_cast<double>(total_rows(s)) * 128 * 4 / kGiB, 97.4, 0.05);
  EXPECT_EQ(total_pooling(s), 214.0);  // lookups per sample
  for (size_t i = 0; i < 26; ++i) {
    EXPECT_EQ(s.tables[i].num_embeddings, kMlperfRows[i]) << i;
    EXPECT_EQ(s.tables[i].embedding_dim, 128);
    EXPECT_TRUE(s.features[i].pooling_factor.fixed);
    EXPECT_EQ(s.features[i].pooling_factor.max, kMlperfHot[i]) << i;
  }
  EXPECT_EQ(s.optimizer.type, es::OptimizerType::rowwise_adagrad);
  EXPECT_EQ(s.optimizer.learning_rate, 0.005);
  EXPECT_EQ(s.batch_size, 8192);
  EXPECT_EQ(s.devices.count, 8);
  EXPECT_EQ(s.batch_size * s.devices.count, 65536);  // the global batch
  EXPECT_EQ(s.devices.memory_bytes, 80 * kGiB);
  ASSERT_TRUE(s.dense.has_value());
  EXPECT_EQ(s.dense->interaction, es::Interaction::dcn);
  EXPECT_EQ(s.dense->dcn_num_layers, 3);
  EXPECT_EQ(s.dense->dcn_low_rank_dim, 512);
  EXPECT_EQ(s.dense->bottom_mlp, (std::vector<int>{512, 256, 128}));
  EXPECT_EQ(s.dense->top_mlp, (std::vector<int>{1024, 1024, 512, 256, 1}));
  EXPECT_EQ(s.sharding.default_type, es::ShardingType::row_wise);
  EXPECT_NE(s.source.find("mlcommons/training"), std::string::npos);
  EXPECT_NE(s.description.find("97.4 GiB"), std::string::npos);
}

TEST(SpecPresets, MlperfDlrmDcnv2Scaled) {
  const es::WorkloadSpec full = es::load_preset("mlperf_dlrm_dcnv2");
  const es::WorkloadSpec s = es::load_preset("mlperf_dlrm_dcnv2_scaled");
  ASSERT_EQ(s.tables.size(), full.tables.size());
  for (size_t i = 0; i < s.tables.size(); ++i) {
    const int64_t n = full.tables[i].num_embeddings;
    const int64_t want = n > 1000 ? (n + 99) / 100 : n;
    EXPECT_EQ(s.tables[i].num_embeddings, want) << s.tables[i].name;
    EXPECT_EQ(s.tables[i].embedding_dim, 128);
    EXPECT_EQ(s.features[i].pooling_factor.max, full.features[i].pooling_factor.max);
  }
  EXPECT_EQ(s.tables[0].num_embeddings, 400000);
  EXPECT_EQ(s.tables[7].num_embeddings, 16);  // ceil(1543 / 100)
  EXPECT_EQ(s.tables[17].num_embeddings, 976);
  EXPECT_EQ(total_rows(s), 2043207);
  EXPECT_EQ(s.batch_size, 256);
  EXPECT_EQ(s.devices.count, 4);
  EXPECT_EQ(s.devices.memory_bytes, 4 * kGiB);
  EXPECT_EQ(s.steps, 20);
  EXPECT_EQ(s.optimizer.type, es::OptimizerType::rowwise_adagrad);
  EXPECT_EQ(s.dense->interaction, es::Interaction::dcn);
  EXPECT_NE(s.description.find("1/100"), std::string::npos);
}

TEST(SpecPresets, Tiny) {
  const es::WorkloadSpec s = es::load_preset("tiny");
  ASSERT_EQ(s.tables.size(), 4u);
  EXPECT_EQ(s.tables[0].name, "t_small");
  EXPECT_EQ(s.tables[0].num_embeddings, 1);
  EXPECT_EQ(s.tables[0].embedding_dim, 4);
  EXPECT_EQ(s.tables[1].name, "t_a");
  EXPECT_EQ(s.tables[1].num_embeddings, 10);
  EXPECT_EQ(s.tables[1].embedding_dim, 8);
  EXPECT_EQ(s.tables[1].pooling, es::Pooling::mean);
  EXPECT_EQ(s.tables[2].name, "t_b");
  EXPECT_EQ(s.tables[2].num_embeddings, 100);
  EXPECT_EQ(s.tables[2].embedding_dim, 6);
  EXPECT_EQ(s.tables[2].feature_names, (std::vector<std::string>{"f_b0", "f_b1"}));
  EXPECT_EQ(s.tables[3].name, "t_c");
  EXPECT_EQ(s.tables[3].num_embeddings, 1000);
  EXPECT_EQ(s.tables[3].embedding_dim, 12);
  ASSERT_EQ(s.features.size(), 5u);
  const int b1 = s.feature_index("f_b1");
  ASSERT_GE(b1, 0);
  EXPECT_EQ(s.table_of_feature(static_cast<size_t>(b1)), 2);
  EXPECT_FALSE(s.features[b1].pooling_factor.fixed);  // Poisson lengths: empty bags happen
  EXPECT_EQ(s.features[b1].pooling_factor.mean, 3.0);
  EXPECT_EQ(s.features[b1].pooling_factor.max, 6);
  const auto& fc = s.features[s.feature_index("f_c")];
  EXPECT_EQ(fc.ids.kind, es::IdDistributionKind::zipf);
  EXPECT_EQ(fc.ids.alpha, 1.1);
  ASSERT_TRUE(s.dense.has_value());
  EXPECT_EQ(s.dense->num_dense_features, 4);
  EXPECT_EQ(s.dense->bottom_mlp, std::vector<int>{8});
  EXPECT_EQ(s.dense->interaction, es::Interaction::cat);
  EXPECT_EQ(s.dense->top_mlp, (std::vector<int>{16, 1}));
  EXPECT_EQ(s.batch_size, 8);
  EXPECT_EQ(s.steps, 30);
  EXPECT_EQ(s.warmup_steps, 0);
  EXPECT_EQ(s.devices.count, 2);
  EXPECT_EQ(s.devices.memory_bytes, int64_t{64} << 20);
  EXPECT_EQ(s.optimizer.type, es::OptimizerType::sgd);
  EXPECT_EQ(s.optimizer.learning_rate, 0.1);
  EXPECT_EQ(s.sharding.default_type, es::ShardingType::table_wise);
}

}  // namespace

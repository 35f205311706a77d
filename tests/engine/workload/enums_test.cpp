// The enums' spellings: to_string and *_from_string over the name tables (enums.h).

#include "spec_test_support.h"

#include "embedscope/engine/memory/allocator.h"

namespace es = embedscope::engine;
using nlohmann::json;
using namespace spec_testing;

namespace {

TEST(SpecEnums, ToStringSpellsEveryValue) {
  EXPECT_STREQ(es::to_string(es::Pooling::sum), "sum");
  EXPECT_STREQ(es::to_string(es::Pooling::mean), "mean");
  EXPECT_STREQ(es::to_string(es::ShardingType::data_parallel), "data_parallel");
  EXPECT_STREQ(es::to_string(es::ShardingType::table_wise), "table_wise");
  EXPECT_STREQ(es::to_string(es::ShardingType::row_wise), "row_wise");
  EXPECT_STREQ(es::to_string(es::ShardingType::column_wise), "column_wise");
  EXPECT_STREQ(es::to_string(es::ShardingType::table_row_wise), "table_row_wise");
  EXPECT_STREQ(es::to_string(es::ShardingType::table_column_wise), "table_column_wise");
  EXPECT_STREQ(es::to_string(es::ShardingType::grid_shard), "grid_shard");
  EXPECT_STREQ(es::to_string(es::OptimizerType::sgd), "sgd");
  EXPECT_STREQ(es::to_string(es::OptimizerType::rowwise_adagrad), "rowwise_adagrad");
  EXPECT_STREQ(es::to_string(es::OptimizerType::adam), "adam");
  EXPECT_STREQ(es::to_string(es::IdDistributionKind::uniform), "uniform");
  EXPECT_STREQ(es::to_string(es::IdDistributionKind::zipf), "zipf");
  EXPECT_STREQ(es::to_string(es::InvalidIdPolicy::error), "error");
  EXPECT_STREQ(es::to_string(es::InvalidIdPolicy::clamp), "clamp");
  EXPECT_STREQ(es::to_string(es::InvalidIdPolicy::drop), "drop");
  EXPECT_STREQ(es::to_string(es::Backend::cpu), "cpu");
  EXPECT_STREQ(es::to_string(es::Interaction::dot), "dot");
  EXPECT_STREQ(es::to_string(es::Interaction::cat), "cat");
  EXPECT_STREQ(es::to_string(es::Interaction::dcn), "dcn");
  EXPECT_STREQ(es::to_string(es::PipelineKind::base), "base");
  EXPECT_STREQ(es::to_string(es::PipelineKind::sparse_dist), "sparse_dist");
  EXPECT_STREQ(es::to_string(es::PipelineKind::semi_sync), "semi_sync");
  EXPECT_STREQ(es::to_string(es::CommPrecision::fp32), "fp32");
  EXPECT_STREQ(es::to_string(es::CommPrecision::fp16), "fp16");
  EXPECT_STREQ(es::to_string(es::CommPrecision::bf16), "bf16");
}

TEST(SpecEnums, ShardingTypeFromString) {
  for (auto t : {es::ShardingType::data_parallel, es::ShardingType::table_wise,
                 es::ShardingType::row_wise, es::ShardingType::column_wise,
                 es::ShardingType::table_row_wise, es::ShardingType::table_column_wise,
                 es::ShardingType::grid_shard}) {
    EXPECT_EQ(es::sharding_type_from_string(es::to_string(t), "--sharding"), t);
  }
  try {
    es::sharding_type_from_string("cw", "--sharding");
    FAIL() << "no error";
  } catch (const es::SpecError& e) {
    EXPECT_STREQ(e.what(),
                 "--sharding: must be one of data_parallel, table_wise, row_wise, column_wise, "
                 "table_row_wise, table_column_wise, grid_shard, got \"cw\"");
  }
}

// The one table per enum: every spelling in order, parsed back to its value, and the error
// text listing the accepted spellings.
TEST(SpecEnums, NameTablesListEverySpellingInOrder) {
  EXPECT_EQ(es::enum_names<es::ShardingType>(),
            (std::vector<std::string>{"data_parallel", "table_wise", "row_wise", "column_wise", "table_row_wise",
                                      "table_column_wise", "grid_shard"}));
  EXPECT_EQ(es::enum_names<es::AllocatorKind>(), (std::vector<std::string>{"caching", "expandable", "direct", "cuda_async"}));
  EXPECT_EQ(es::enum_names_joined<es::PipelineKind>(), "base, sparse_dist, semi_sync");
  EXPECT_EQ(es::enum_names_joined<es::CommPrecision>(" | "), "fp32 | fp16 | bf16");
  EXPECT_EQ(es::enum_names<es::Backend>(), (std::vector<std::string>{"cpu", "cuda", "auto", "simulated"}));
  EXPECT_EQ(es::enum_from_name<es::Backend>("auto"), es::Backend::auto_);
  EXPECT_EQ(es::enum_from_name<es::OptimizerType>("Adam"), std::nullopt);  // exact spelling only
  static_assert(es::enum_name(es::InvalidIdPolicy::drop) == std::string_view("drop"));
  try {
    es::allocator_kind_from_string("slab", "--allocator");
    FAIL() << "slab accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "--allocator: must be one of caching, expandable, direct, cuda_async, got \"slab\"");
  }
  // the spec's bound on memory.max_split_size is the allocator's large-segment size
  static_assert(es::kMinMaxSplitSizeBytes == es::kLargeBuffer);
}

}  // namespace

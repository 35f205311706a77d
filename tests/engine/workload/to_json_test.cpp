// to_json: the JSON round trip through parse_workload.

#include "spec_test_support.h"

namespace es = embedscope::engine;
using nlohmann::json;
using namespace spec_testing;

namespace {

TEST(SpecRoundTrip, EveryPreset) {
  for (const auto& name : es::preset_names()) {
    SCOPED_TRACE(name);
    const es::WorkloadSpec s = es::load_preset(name);
    const json j = es::to_json(s);
    // Through the typed spec and through text.
    const es::WorkloadSpec back = es::parse_workload(j, "roundtrip");
    expect_same(s, back);
    EXPECT_EQ(es::to_json(back), j);
    const es::WorkloadSpec from_text = es::parse_workload(json::parse(j.dump()), "roundtrip");
    expect_same(s, from_text);
  }
}

TEST(SpecRoundTrip, NullDenseAndVariablePooling) {
  json j = base_spec();
  j["dense"] = nullptr;
  j["features"][1]["pooling_factor"] = json::parse(R"({"mean": 0.25, "max": 3})");
  j["seed"] = 18446744073709551615ull;
  const es::WorkloadSpec s = es::parse_workload(j, "t.json");
  const json out = es::to_json(s);
  EXPECT_TRUE(out.at("dense").is_null());
  EXPECT_EQ(out.at("features").at(1).at("pooling_factor"), json::parse(R"({"mean": 0.25, "max": 3})"));
  expect_same(es::parse_workload(json::parse(out.dump()), "rt"), s);
}

// data_type and hash_size: written where they are not the default, read back; fp32 tables
// without hashing serialize without either key (as before the keys existed).
TEST(SpecRoundTrip, DataTypeAndHashSize) {
  json j = base_spec();
  j["tables"][1]["data_type"] = "int8";
  j["tables"][1]["hash_size"] = 7;
  const es::WorkloadSpec s = es::parse_workload(j, "t.json");
  EXPECT_EQ(s.tables[0].data_type, es::TableDataType::fp32);
  EXPECT_EQ(s.tables[1].data_type, es::TableDataType::int8);
  EXPECT_EQ(s.tables[1].hash_size, 7);
  EXPECT_EQ(s.tables[1].rows(), 7);
  EXPECT_EQ(s.tables[0].rows(), 10);
  const json out = es::to_json(s);
  EXPECT_FALSE(out.at("tables").at(0).contains("data_type"));
  EXPECT_FALSE(out.at("tables").at(0).contains("hash_size"));
  EXPECT_EQ(out.at("tables").at(1).at("data_type"), "int8");
  EXPECT_EQ(out.at("tables").at(1).at("hash_size"), 7);
  expect_same(es::parse_workload(json::parse(out.dump()), "rt"), s);
}

// optimizer_state_type: written where it is not fp32, read back.
TEST(SpecRoundTrip, OptimizerStateType) {
  json j = base_spec();
  j["optimizer"] = {{"type", "rowwise_adagrad"}};
  j["tables"][1]["optimizer_state_type"] = "bf16";
  const es::WorkloadSpec s = es::parse_workload(j, "t.json");
  EXPECT_EQ(s.tables[0].optimizer_state_type, es::OptimizerStateType::fp32);
  EXPECT_EQ(s.tables[1].optimizer_state_type, es::OptimizerStateType::bf16);
  const json out = es::to_json(s);
  EXPECT_FALSE(out.at("tables").at(0).contains("optimizer_state_type"));
  EXPECT_EQ(out.at("tables").at(1).at("optimizer_state_type"), "bf16");
  expect_same(es::parse_workload(json::parse(out.dump()), "rt"), s);
}

}  // namespace

// The cost model against hand-computed times, and the hardware profiles' parser.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "embedscope/engine/cost/cost_model.h"
#include "embedscope/engine/workload/spec_error.h"

namespace es = embedscope::engine;

namespace {

es::HardwareProfile round_numbers() { return es::load_hardware_profile(std::string(EMBEDSCOPE_TEST_DATA) + "/hardware/round_numbers.json"); }

std::string error_of(const std::string& text) {
  try {
    es::parse_hardware_profile(text, "p.json");
  } catch (const es::SpecError& e) {
    return e.what();
  }
  return "";
}

nlohmann::json valid() {
  std::ifstream f(std::string(EMBEDSCOPE_TEST_DATA) + "/hardware/round_numbers.json");
  return nlohmann::json::parse(f);
}

}  // namespace

TEST(HardwareProfile, BuiltInsParseAndCiteASourceForEveryNumber) {
  const auto names = es::hardware_profile_names();
  ASSERT_EQ(names, (std::vector<std::string>{"a100_sxm_80gb", "h100_sxm", "h200_sxm"}));
  for (const auto& n : names) {
    const es::HardwareProfile p = es::load_hardware_profile(n);
    EXPECT_EQ(p.name, n);
    EXPECT_EQ(p.gpus_per_node, 8) << n;
    for (const char* ptr : {"/gpu/memory_bytes", "/gpu/hbm_bandwidth_bytes_per_s", "/gpu/dense_flops_per_s",
                            "/gpu/dense_efficiency", "/gpu/tbe_forward_efficiency", "/gpu/tbe_backward_efficiency",
                            "/gpu/memory_kernel_efficiency", "/gpu/kernel_launch_ns", "/cluster/gpus_per_node",
                            "/cluster/max_nodes", "/intra_node/bus_bandwidth_bytes_per_s", "/intra_node/latency_ns",
                            "/inter_node/bus_bandwidth_bytes_per_s", "/inter_node/latency_ns"})
      EXPECT_TRUE(p.sources.count(ptr)) << n << " cites no source for " << ptr;
  }
  const es::HardwareProfile h100 = es::load_hardware_profile("h100_sxm");
  EXPECT_EQ(h100.gpu.memory_bytes, int64_t{81559} << 20);
  EXPECT_DOUBLE_EQ(h100.gpu.hbm_bandwidth_bytes_per_s, 3.35e12);
}

TEST(HardwareProfile, BadProfilesNameTheJsonPointer) {
  auto j = valid();
  j["gpu"].erase("hbm_bandwidth_bytes_per_s");
  EXPECT_EQ(error_of(j.dump()), "p.json: /gpu/hbm_bandwidth_bytes_per_s: missing");
  j = valid();
  j["intra_node"]["bus_bandwidth_bytes_per_s"] = -1;
  EXPECT_EQ(error_of(j.dump()), "p.json: /intra_node/bus_bandwidth_bytes_per_s: must be in (0, 1e+15], got -1");
  j = valid();
  j["gpu"]["tbe_forward_efficiency"] = 1.5;
  EXPECT_EQ(error_of(j.dump()), "p.json: /gpu/tbe_forward_efficiency: must be in (0, 1], got 1.5");
  j = valid();
  j["cluster"]["gpus_per_node"] = 0;
  EXPECT_EQ(error_of(j.dump()), "p.json: /cluster/gpus_per_node: must be in [1, 1024], got 0");
  j = valid();
  j["gpu"]["hbm_bw"] = 1;
  EXPECT_NE(error_of(j.dump()).find("p.json: /gpu/hbm_bw: unknown key \"hbm_bw\""), std::string::npos);
  j = valid();
  j.erase("inter_node");
  EXPECT_EQ(error_of(j.dump()), "p.json: /inter_node: missing");
  EXPECT_EQ(error_of("[1, 2]"), "p.json: the document: must be an object, got array");
  try {
    es::load_hardware_profile("b200");
    FAIL() << "an unknown profile loaded";
  } catch (const es::SpecError& e) {
    EXPECT_STREQ(e.what(),
                 "/devices/hardware: unknown hardware profile \"b200\" (built in: a100_sxm_80gb, h100_sxm, h200_sxm; or "
                 "give a profile JSON file)");
  }
}

TEST(CostModel, AllReduceIsTheRingBytesOverTheBusBandwidth) {
  const auto hw = round_numbers();
  es::CollectiveCall c;
  c.kind = es::CollectiveKind::all_reduce;
  c.peers = {0, 1};
  c.count = 1000;  // 4,000 bytes on 2 ranks: 2 (n-1)/n x S = 4,000 bytes each way
  EXPECT_EQ(es::collective_ns(c, 0, 2, hw), 1000 + 40);  // latency + 4,000 B / 1e11 B/s
  c.peers = {0, 1, 2, 3};  // across two nodes: the NIC's bandwidth and latency, 6,000 bytes
  EXPECT_EQ(es::collective_ns(c, 0, 2, hw), 5000 + 600);
}

TEST(CostModel, AllToAllSplitsBytesBetweenTheNodeLinkAndTheNic) {
  const auto hw = round_numbers();
  es::CollectiveCall c;
  c.kind = es::CollectiveKind::all_to_all;
  c.peers = {0, 1, 2, 3};
  c.group_rank = 0;
  c.elem_bytes = 4;
  c.send_elements = {10, 20, 30, 40};  // own slice 40 B excluded; peer 1 on the node: 80 B; peers 2, 3: 280 B
  c.recv_elements = {5, 5, 500, 5};    // peer 1: 20 B; peers 2, 3: 2,020 B
  // latency of the NIC (the group spans nodes) + the slower side: 2,020 B / 1e10 B/s = 202 ns
  EXPECT_EQ(es::collective_ns(c, 0, 2, hw), 5000 + 202);
  // within one node of 4: everything over the node link, 2,040 B received / 1e11 = 20.4 ns
  EXPECT_EQ(es::collective_ns(c, 0, 4, hw), 1000 + 20);
}

TEST(CostModel, ComputeIsARooflineWithTheOpsEfficiency) {
  const auto hw = round_numbers();
  es::ProgramOp lookup;
  lookup.category = embedscope::sessions::OpCategory::lookup;
  lookup.bytes = 1'000'000;  // 1e6 B / (1e12 B/s x 0.5) = 2 us
  EXPECT_EQ(es::compute_ns(lookup, hw), 1000 + 2000);
  es::ProgramOp update = lookup;
  update.category = embedscope::sessions::OpCategory::optimizer;
  update.rows = 10;  // a row update: the TBE backward efficiency 0.25 -> 4 us
  EXPECT_EQ(es::compute_ns(update, hw), 1000 + 4000);
  update.rows = 0;  // the dense optimizer: a memory kernel at efficiency 1 -> 1 us
  EXPECT_EQ(es::compute_ns(update, hw), 1000 + 1000);
  es::ProgramOp dense;
  dense.category = embedscope::sessions::OpCategory::dense;
  dense.flops = 5'000'000'000;  // 5e9 / (1e13 x 0.5) = 1 ms, above its 1e6 B memory term
  dense.bytes = 1'000'000;
  EXPECT_EQ(es::compute_ns(dense, hw), 1000 + 1'000'000);
}

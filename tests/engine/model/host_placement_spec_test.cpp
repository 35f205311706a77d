// Tables in host memory in the spec and the estimates (TableSpec::placement, cache_load_factor,
// cache_policy, devices.host_memory_bytes): every bad input is an error naming its JSON pointer
// (the CLI exits 2 before anything runs), the round trip, and the device / host bytes of the
// memory estimate by hand, with a workload that fits the devices only with host_cached.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/planner/search.h"
#include "embedscope/engine/sharding/plan_json.h"
#include "embedscope/engine/sharding/sharding.h"
#include "engine/workload/spec_test_support.h"
#include "support/cli_run.h"

namespace es = embedscope::engine;
using nlohmann::json;
using namespace spec_testing;

namespace {

std::string host_patched_error(const char* patch) { return parse_error(base_spec().patch(json::parse(patch))); }

// "test.json: <pointer>: <reason>" with the reason starting as given
::testing::AssertionResult names(const std::string& err, const std::string& pointer, const std::string& reason) {
  const std::string head = "test.json: " + pointer + ": " + reason;
  if (err.rfind(head, 0) == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "error \"" << err << "\" does not start with \"" << head << "\"";
}

TEST(HostPlacementSpec, CacheLoadFactorOutsideZeroToOne) {
  for (const char* v : {"0", "-0.5", "1.5"}) {
    const std::string patch = std::string(R"([{"op": "add", "path": "/tables/0/placement", "value": "host_cached"},
                                             {"op": "add", "path": "/tables/0/cache_load_factor", "value": )") + v + "}]";
    EXPECT_TRUE(names(host_patched_error(patch.c_str()), "/tables/0/cache_load_factor",
                      std::string("must be in (0, 1] (the share of the rows the device cache holds), got ") + v));
  }
  EXPECT_TRUE(names(host_patched_error(R"([{"op": "add", "path": "/tables/0/placement", "value": "host_cached"},
                                           {"op": "add", "path": "/tables/0/cache_load_factor", "value": "a lot"}])"),
                    "/tables/0/cache_load_factor", "must be a number"));
  // 1 (every row cached) is allowed
  EXPECT_EQ(host_patched_error(R"([{"op": "add", "path": "/tables/0/placement", "value": "host_cached"},
                                   {"op": "add", "path": "/tables/0/cache_load_factor", "value": 1}])"),
            "<no error>");
}

TEST(HostPlacementSpec, CacheSettingsWithoutACacheAndUnknownNames) {
  EXPECT_EQ(host_patched_error(R"([{"op": "add", "path": "/tables/1/cache_load_factor", "value": 0.5}])"),
            "test.json: /tables/1/cache_load_factor: only allowed with placement \"host_cached\", not \"device\"");
  EXPECT_EQ(host_patched_error(R"([{"op": "add", "path": "/tables/1/placement", "value": "host"},
                                   {"op": "add", "path": "/tables/1/cache_policy", "value": "lfu"}])"),
            "test.json: /tables/1/cache_policy: only allowed with placement \"host_cached\", not \"host\"");
  EXPECT_EQ(host_patched_error(R"([{"op": "add", "path": "/tables/0/placement", "value": "disk"}])"),
            "test.json: /tables/0/placement: must be one of device, host, host_cached, got \"disk\"");
  EXPECT_EQ(host_patched_error(R"([{"op": "add", "path": "/tables/0/placement", "value": "host_cached"},
                                   {"op": "add", "path": "/tables/0/cache_policy", "value": "fifo"}])"),
            "test.json: /tables/0/cache_policy: must be one of lru, lfu, got \"fifo\"");
}

TEST(HostPlacementSpec, HostMemory) {
  EXPECT_TRUE(names(host_patched_error(R"([{"op": "add", "path": "/devices/host_memory_bytes", "value": 0}])"),
                    "/devices/host_memory_bytes", "must be > 0"));
  // t1: 20 rows x 4 fp32 = 320 bytes (sgd: no state) over 2 ranks is 160 a rank at best
  EXPECT_EQ(host_patched_error(R"([{"op": "add", "path": "/tables/1/placement", "value": "host"},
                                   {"op": "add", "path": "/devices/host_memory_bytes", "value": 159}])"),
            "test.json: /tables/1/placement: host (table \"t1\"): its rows and optimizer state need 160 bytes of host "
            "memory a rank even spread over all 2 ranks, more than /devices/host_memory_bytes = 159");
  EXPECT_EQ(host_patched_error(R"([{"op": "add", "path": "/tables/1/placement", "value": "host"},
                                   {"op": "add", "path": "/devices/host_memory_bytes", "value": 160}])"),
            "<no error>");
}

TEST(HostPlacementSpec, WhatHostTablesDoNotSupport) {
  EXPECT_TRUE(names(host_patched_error(R"([{"op": "add", "path": "/tables/0/placement", "value": "host"},
                                           {"op": "add", "path": "/tables/0/data_type", "value": "int8"}])"),
                    "/tables/0/placement", "host with data_type int8 (table \"t0\")"));
  // the cuda backend runs them too (the rows through the GPU's copies, model/host_cache.h)
  EXPECT_EQ(host_patched_error(R"([{"op": "add", "path": "/tables/0/placement", "value": "host_cached"},
                                   {"op": "add", "path": "/devices/backend", "value": "cuda"}])")
                .find("/tables/0/placement"),
            std::string::npos);
  EXPECT_TRUE(names(host_patched_error(R"([{"op": "add", "path": "/tables/0/placement", "value": "host"},
                                           {"op": "add", "path": "/tables/0/low_rank_dim", "value": 2}])"),
                    "/tables/0/placement", "host with low_rank_dim (table \"t0\")"));
  EXPECT_TRUE(names(host_patched_error(R"([{"op": "add", "path": "/tables/0/placement", "value": "host"},
                                           {"op": "add", "path": "/sharding", "value": {"tables": {"t0": {"type": "data_parallel"}}}}])"),
                    "/sharding/tables/t0/type", "data_parallel for table \"t0\" with placement host"));
  EXPECT_TRUE(names(host_patched_error(R"([{"op": "add", "path": "/tables/1/placement", "value": "host_cached"},
                                           {"op": "add", "path": "/sharding", "value": {"default": "table_row_wise"}}])"),
                    "/sharding/default", "table_row_wise for table \"t1\" with placement host_cached"));
}

TEST(HostPlacementSpec, RoundTrip) {
  json j = base_spec();
  j["tables"][0]["placement"] = "host_cached";
  j["tables"][0]["cache_load_factor"] = 0.25;
  j["tables"][0]["cache_policy"] = "lfu";
  j["tables"][1]["placement"] = "host";
  j["devices"]["host_memory_bytes"] = 1 << 20;
  const es::WorkloadSpec s = es::parse_workload(j, "test.json");
  EXPECT_EQ(s.tables[0].placement, es::TablePlacement::host_cached);
  EXPECT_EQ(s.tables[0].cache_load_factor, 0.25);
  EXPECT_EQ(s.tables[0].cache_policy, es::CachePolicy::lfu);
  EXPECT_EQ(s.tables[1].placement, es::TablePlacement::host);
  EXPECT_EQ(s.devices.host_memory_bytes, 1 << 20);
  const json back = es::to_json(s);
  EXPECT_EQ(back["tables"][0]["cache_policy"], "lfu");
  EXPECT_EQ(back["tables"][1]["placement"], "host");
  EXPECT_FALSE(back["tables"][1].contains("cache_load_factor"));
  const es::WorkloadSpec again = es::parse_workload(back, "back");
  EXPECT_EQ(again.tables[0].cache_load_factor, 0.25);
  EXPECT_EQ(again.devices.host_memory_bytes, 1 << 20);
  // the defaults: device, and 64 GiB of host memory a rank, not written back
  const es::WorkloadSpec d = es::parse_workload(base_spec(), "test.json");
  EXPECT_EQ(d.tables[0].placement, es::TablePlacement::device);
  EXPECT_EQ(d.devices.host_memory_bytes, int64_t{64} << 30);
  EXPECT_FALSE(es::to_json(d)["devices"].contains("host_memory_bytes"));
}

// A plan given by hand (or searched) that shards a table in host memory another way is refused.
TEST(HostPlacementSpec, PlanWithAnUnsupportedTypeIsRefused) {
  json j = base_spec();
  j["sharding"] = {{"default", "data_parallel"}};
  es::WorkloadSpec s = es::parse_workload(j, "test.json");
  const es::ShardingPlan plan = es::plan_sharding(s);
  s.tables[1].placement = es::TablePlacement::host;  // as a hand-edited plan file would pair them
  try {
    es::validate_plan(s, plan, "plan.json");
    ADD_FAILURE() << "a data_parallel table in host memory should be refused";
  } catch (const es::SpecError& e) {
    EXPECT_EQ(std::string(e.what()), "plan.json: /tables/1/sharding_type: table t1 (20 rows x 4 columns, data_parallel) has "
                                     "placement host: a table in host memory is sharded table_wise, row_wise or "
                                     "column_wise");
  }
}

// One table of 100,000 x 64 fp32 rows with rowwise_adagrad on one rank of 24 MiB: its rows
// (25.6 MB) do not fit; host_cached at 0.1 keeps 10,000 rows (2,560,000 bytes) on the device and
// the rows with their state (25,600,000 + 400,000 bytes) and the cache's row -> slot index
// (800,000) in host memory.
es::WorkloadSpec big_table_spec(es::TablePlacement placement) {
  json j = base_spec();
  j["tables"] = json::array({{{"name", "big"}, {"num_embeddings", 100000}, {"embedding_dim", 64}, {"feature_names", {"f0"}}}});
  j["features"] = json::array({{{"name", "f0"}}});
  j["devices"] = {{"count", 1}, {"memory_bytes", 24 << 20}};
  j["optimizer"] = {{"type", "rowwise_adagrad"}};
  j["dense"]["bottom_mlp"] = {64};  // dot interaction: the table's dim
  if (placement != es::TablePlacement::device) j["tables"][0]["placement"] = es::to_string(placement);
  if (placement == es::TablePlacement::host_cached) j["tables"][0]["cache_load_factor"] = 0.1;
  return es::parse_workload(j, "test.json");
}

TEST(HostPlacementEstimate, FitsTheDeviceOnlyWithHostCached) {
  const es::WorkloadSpec dev = big_table_spec(es::TablePlacement::device);
  const auto dplan = es::plan_sharding(dev);
  const auto de = es::estimate_memory(dev, dplan);
  EXPECT_EQ(de[0].weights, 25'600'000);
  EXPECT_EQ(de[0].host, 0);
  try {
    es::check_memory_fits(dev, de);
    ADD_FAILURE() << "the device placement should not fit";
  } catch (const es::SpecError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("/devices/memory_bytes: the workload does not fit", 0), 0u) << e.what();
  }
  const es::WorkloadSpec cached = big_table_spec(es::TablePlacement::host_cached);
  const auto plan = es::plan_sharding(cached);
  const auto ce = es::estimate_memory(cached, plan);
  EXPECT_EQ(ce[0].weights, 0);
  EXPECT_EQ(ce[0].optimizer_state, 0);
  EXPECT_EQ(ce[0].cache, 2'560'000);  // 10,000 x 64 x 4, a multiple of 512
  EXPECT_EQ(ce[0].host, 25'600'000 + 400'000 + 800'000);  // rows, state, row -> slot index
  EXPECT_GT(ce[0].buffers, 0);  // the fetch buffers among the batch's
  EXPECT_NO_THROW(es::check_memory_fits(cached, ce));
  const auto storage = es::estimate_table_storage(cached, plan);
  EXPECT_EQ(storage[0].placement, es::TablePlacement::host_cached);
  EXPECT_EQ(storage[0].cache_bytes, 2'560'000);
  EXPECT_EQ(storage[0].weight_bytes, 25'600'000);  // in host memory
  // and the host side has its own capacity
  es::WorkloadSpec small_host = cached;
  small_host.devices.host_memory_bytes = 25'000'000;
  try {
    es::check_memory_fits(small_host, es::estimate_memory(small_host, plan));
    ADD_FAILURE() << "the host side should not fit";
  } catch (const es::SpecError& e) {
    EXPECT_EQ(std::string(e.what()),
              "/devices/host_memory_bytes: the tables placed in host memory do not fit under this sharding plan:\n"
              "  rank 0: its tables in host memory (placement host / host_cached) need " +
                   es::format_bytes(26'800'000) + " > " + es::format_bytes(25'000'000));
  }
  // the run: its device arena's peak is within the estimate (whose fetch buffers are an upper
  // bound: min(ids received, rows) rows), and above the cache and dense part it holds throughout
  es::WorkloadSpec short_run = cached;
  short_run.steps = 2;
  es::TrainerOptions topt;
  topt.trace = false;
  const es::RunResult run = es::run_training(short_run, plan, topt);
  ASSERT_EQ(run.ended, es::RunEnd::complete) << run.error;
  EXPECT_LE(run.ranks[0].memory_bytes, ce[0].total());
  EXPECT_GE(run.ranks[0].memory_bytes, ce[0].cache + ce[0].dense);
  EXPECT_EQ(run.table_storage[0].cache_bytes[0], 2'560'000);
  EXPECT_EQ(run.table_storage[0].host_bytes[0], 26'800'000);
  // host: nothing of the table on the device but its fetch buffers
  const es::WorkloadSpec host = big_table_spec(es::TablePlacement::host);
  const auto he = es::estimate_memory(host, es::plan_sharding(host));
  EXPECT_EQ(he[0].weights + he[0].optimizer_state + he[0].cache, 0);
  EXPECT_EQ(he[0].host, 26'000'000);
}

// The search (plan --auto) counts a host_cached table by its cache: the device placement of the
// big table has no plan on one 24 MiB rank, host_cached has one, and it keeps the table on a
// type that runs from host memory.
TEST(HostPlacementEstimate, SearchFindsAPlanOnlyWithHostCached) {
  const es::WorkloadSpec dev = big_table_spec(es::TablePlacement::device);
  try {
    es::plan_search(dev, es::planning_profile(dev));
    ADD_FAILURE() << "no plan should fit on the device";
  } catch (const es::SpecError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("/devices/memory_bytes: no plan fits", 0), 0u) << e.what();
  }
  const es::WorkloadSpec cached = big_table_spec(es::TablePlacement::host_cached);
  const es::PlanSearchResult found = es::plan_search(cached, es::planning_profile(cached));
  const es::ShardingType type = found.plan.tables[0].type;
  EXPECT_TRUE(type == es::ShardingType::table_wise || type == es::ShardingType::row_wise ||
              type == es::ShardingType::column_wise);
  EXPECT_NO_THROW(es::check_memory_fits(cached, es::estimate_memory(cached, found.plan)));
}

// The CLI refuses bad input with exit status 2 before it runs anything.
TEST(HostPlacementSpec, CliExitsTwo) {
  const auto dir = std::filesystem::temp_directory_path() / ("host_placement_cli_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  json j = base_spec();
  j["name"] = "bad";
  j["tables"][0]["placement"] = "host_cached";
  j["tables"][0]["cache_load_factor"] = 2;
  std::ofstream(dir / "bad.json") << j.dump();
  auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "run " + (dir / "bad.json").string() + " -o " +
                                                                 (dir / "s.embedscope").string(), dir);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("/tables/0/cache_load_factor: must be in (0, 1]"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "s.embedscope"));
  // the host side of the plan does not fit: `plan` exits 2 naming /devices/host_memory_bytes
  json k = base_spec();
  k["name"] = "tight";
  k["tables"][1]["placement"] = "host";
  k["sharding"] = {{"tables", {{"t1", {{"type", "table_wise"}, {"ranks", {0}}}}}}};
  k["devices"]["host_memory_bytes"] = 200;  // t1 needs 320 on rank 0
  std::ofstream(dir / "tight.json") << k.dump();
  r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "plan " + (dir / "tight.json").string(), dir);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE((r.out + r.err).find("/devices/host_memory_bytes"), std::string::npos) << r.out << r.err;
  std::filesystem::remove_all(dir);
}

// `run` and `stats` print the block of tables in host memory, one line per such table with its
// hit rate; `plan` shows the placement and the device cache.
TEST(HostPlacementSpec, RunStatsAndPlanPrintTheTablesInHostMemory) {
  const auto dir = std::filesystem::temp_directory_path() / ("host_placement_out_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  json j = base_spec();
  j["name"] = "cached";
  j["steps"] = 3;
  j["tables"][1]["placement"] = "host_cached";
  j["tables"][1]["cache_load_factor"] = 0.5;
  j["tables"][1]["cache_policy"] = "lfu";
  std::ofstream(dir / "cached.json") << j.dump();
  const std::string session = (dir / "s.embedscope").string();
  auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "run " + (dir / "cached.json").string() + " -o " + session, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  for (const std::string& out : {r.out, embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "stats " + session, dir).out}) {
    const auto at = out.find("tables in host memory");
    ASSERT_NE(at, std::string::npos) << out;
    const std::string block = out.substr(at);
    EXPECT_NE(block.find("hit rate"), std::string::npos) << block;
    EXPECT_NE(block.find("t1                   host_cached lfu      0.50"), std::string::npos) << block;
    EXPECT_EQ(block.find("t0  "), std::string::npos) << "t0 is on the device: " << block;
  }
  r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "plan " + (dir / "cached.json").string(), dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("device cache"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("host_cached"), std::string::npos) << r.out;
  std::filesystem::remove_all(dir);
}

// The tester's findings (issue 16): a 1-slot cache reads the same in `plan` and in `stats` - its
// device bytes, the 512 B block the allocator gives its 1 x 16 x 4 = 64 B of rows; a table not
// host_cached has no cache policy in `run --json` (null), and placement host has no hit rate ("-",
// not 0.0%: it has no cache, though every row it fetches counts as a miss).
TEST(HostPlacementSpec, OneSlotCacheReadsTheSameEverywhere) {
  const auto dir = std::filesystem::temp_directory_path() / ("host_placement_slot_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  json j = base_spec();
  j["name"] = "one_slot";
  j["steps"] = 2;
  j["tables"][0]["embedding_dim"] = 16;
  j["dense"]["interaction"] = "cat";  // dot needs every dim equal
  j["tables"][0]["placement"] = "host_cached";
  j["tables"][0]["cache_load_factor"] = 0.1;  // ceil(0.1 x 10) = 1 slot
  j["tables"][1]["placement"] = "host";
  j["tables"].push_back({{"name", "t2"}, {"num_embeddings", 5}, {"embedding_dim", 4}, {"feature_names", {"f2"}}});
  j["features"].push_back({{"name", "f2"}});
  j["sharding"] = {{"tables", {{"t0", {{"type", "table_wise"}, {"ranks", {0}}}}}}};
  std::ofstream(dir / "one_slot.json") << j.dump();
  EXPECT_EQ(es::cache_device_bytes(0.1, 10, 16), 512);
  EXPECT_EQ(es::cache_device_bytes(1.0, 10'000, 64), 2'560'000);
  EXPECT_EQ(es::cache_device_bytes(0.5, 0, 16), 0);
  const std::string session = (dir / "s.embedscope").string();
  auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "run " + (dir / "one_slot.json").string() + " --json -o " + session, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const json out = json::parse(r.out);
  const json& tables = out.at("tables");
  ASSERT_EQ(tables.size(), 3u);
  EXPECT_EQ(tables[0]["cache_bytes"], json::array({512, 0}));
  EXPECT_EQ(tables[0]["cache_policy"], "lru");
  EXPECT_TRUE(tables[1]["cache_policy"].is_null()) << tables[1].dump();
  EXPECT_TRUE(tables[2]["cache_policy"].is_null()) << tables[2].dump();
  EXPECT_GT(tables[1]["cache_misses"].get<int64_t>(), 0);  // host: every distinct row fetched
  r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "stats " + session, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto at = r.out.find("tables in host memory");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string block = r.out.substr(at);
  const auto line = [&](const std::string& name) {
    const auto b = block.find("\n" + name + " ");
    return b == std::string::npos ? std::string() : block.substr(b + 1, block.find('\n', b + 1) - b - 1);
  };
  EXPECT_NE(line("t0").find("512 B"), std::string::npos) << block;
  EXPECT_EQ(line("t0").find(" 64 B"), std::string::npos) << block;
  const std::string t1 = line("t1");
  ASSERT_FALSE(t1.empty()) << block;
  EXPECT_EQ(t1.find('%'), std::string::npos) << "host has no hit rate: " << t1;
  r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "plan " + (dir / "one_slot.json").string() + " --json", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const json plan = json::parse(r.out);
  int64_t table_cache = -1, rank_cache = 0;
  for (const auto& t : plan.at("table_storage"))
    if (t["table"] == "t0") table_cache = t["cache_bytes"].get<int64_t>();
  for (const auto& m : plan.at("memory")) rank_cache += m["cache_bytes"].get<int64_t>();
  EXPECT_EQ(table_cache, 512);
  EXPECT_EQ(rank_cache, 512);
  std::filesystem::remove_all(dir);
}

}  // namespace

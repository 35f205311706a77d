// The simulated executor: step programs timed by the cost model, collectives matched across
// their groups, and the session it writes (marked simulated, with the planner's memory).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "embedscope/engine/cost/cost_model.h"
#include "embedscope/engine/exec/backend.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/program/step_program.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/sessions/analysis/gpu_kernels.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"

namespace es = embedscope::engine;
namespace ss = embedscope::sessions;
namespace fs = std::filesystem;

namespace {

const std::string kProfile = std::string(EMBEDSCOPE_TEST_DATA) + "/hardware/round_numbers.json";

es::WorkloadSpec simulated(const std::string& preset, int ranks, es::PipelineKind pipeline = es::PipelineKind::base) {
  es::WorkloadSpec s = es::load_preset(preset);
  s.devices.backend = es::Backend::simulated;
  s.devices.hardware = kProfile;
  s.devices.count = ranks;
  s.pipeline = pipeline;
  s.steps = 4;
  s.warmup_steps = 1;
  return es::with_resolved_backend(s, "test");
}

fs::path scratch(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("embedscope_simulated_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

es::RunResult run(const es::WorkloadSpec& s, const std::string& session = "") {
  es::TrainerOptions o;
  o.session_path = session;
  o.keep_events = true;
  return es::run_training(s, es::plan_sharding(s), o);
}

}  // namespace

TEST(SimulatedExecutor, OneRankStepIsTheSumOfItsSerialOps) {
  // One rank, base pipeline: every op waits for the one before on its lane and every comm op
  // is waited for, except the DDP buckets, which the dense optimizer waits for at the end. With
  // one rank each collective costs nothing (a group of one, tester44 F3).
  const es::WorkloadSpec s = simulated("tiny", 1);
  const es::RunResult r = run(s);
  ASSERT_EQ(r.ended, es::RunEnd::complete);
  ASSERT_EQ(r.step_time_ns.size(), 4u);
  const es::HardwareProfile hw = es::load_hardware_profile(kProfile);
  const es::StepProgram p = es::build_step_program(s, es::plan_sharding(s), 0, 1);
  int64_t expected = 0;
  int64_t buckets = 0;
  for (const auto& op : p.ops) {
    if (op.lane == ss::Lane::compute) expected += es::compute_ns(op, hw);
    else if (op.launched_by >= 0) ++buckets;
    else
      for (const auto& c : op.collectives) expected += es::collective_ns(c, 0, 1, hw);
  }
  ASSERT_EQ(buckets, 1) << "tiny has one DDP bucket";
  // that bucket is ready at the end of the backward pass and ends one latency later, before
  // the dense optimizer, which waits for it after the embedding backward
  for (int64_t t : r.step_time_ns) EXPECT_GE(t, expected);
  for (int64_t t : r.step_time_ns) EXPECT_LE(t, expected + hw.intra_node.latency_ns);
  EXPECT_TRUE(r.loss.empty()) << "a simulation trains nothing";
}

TEST(SimulatedExecutor, EveryMemberOfACollectiveEndsItTogether) {
  const fs::path dir = scratch("together");
  const es::WorkloadSpec s = simulated("criteo_kaggle", 4);
  const es::RunResult r = run(s, (dir / "s.db").string());
  ASSERT_EQ(r.ended, es::RunEnd::complete);
  ss::SessionReader reader((dir / "s.db").string());
  std::map<std::pair<std::string, uint64_t>, std::vector<ss::CollectiveRecord>> by_key;
  for (auto& c : reader.collectives()) {
    // a split check on a GPU profile is no call (cost_model.h split_check_timed, tester50 F1):
    // each member records it at its own arrival, with no duration, and waits in the call it checks
    if (c.name.ends_with("/split_check")) {
      EXPECT_EQ(c.end_ns, c.start_ns) << c.name;
      continue;
    }
    by_key[{c.group, c.sequence}].push_back(c);
  }
  ASSERT_FALSE(by_key.empty());
  int64_t waited = 0;
  for (const auto& [key, members] : by_key) {
    ASSERT_EQ(members.size(), 4u) << key.first << " #" << key.second;
    for (const auto& m : members) {
      EXPECT_EQ(m.end_ns, members[0].end_ns) << m.name;
      EXPECT_EQ(m.name, members[0].name);
      EXPECT_LE(m.start_ns, m.end_ns);
    }
    int64_t first = members[0].start_ns, last = members[0].start_ns;
    for (const auto& m : members) {
      first = std::min(first, m.start_ns);
      last = std::max(last, m.start_ns);
    }
    waited += last - first;
  }
  // criteo_kaggle's tables are not equal: ranks reach the output dist at different times
  EXPECT_GT(waited, 0);
  EXPECT_EQ(reader.meta(ss::meta::kSimulated), "1");
  EXPECT_EQ(reader.meta(ss::meta::kBackend), "simulated");
  const auto hw = nlohmann::json::parse(reader.meta(ss::meta::kSimulatedHardwareJson));
  EXPECT_EQ(hw.at("name"), "round_numbers");
  EXPECT_EQ(hw.at("nodes"), 2);  // 4 ranks on nodes of 2
  // memory: the planner's estimate of each rank at every step
  const auto est = es::estimate_memory(s, r.plan);
  for (const auto& st : reader.steps()) EXPECT_EQ(st.memory_peak_bytes, est[static_cast<size_t>(st.rank)].total());
  EXPECT_EQ(reader.steps().size(), 4u * 5u);
  EXPECT_FALSE(reader.load().empty());
  // HTA's figures read the simulated streams: the collectives are communication kernels
  const auto figures = ss::gpu_kernel_figures(reader, {});
  ASSERT_EQ(figures.size(), 4u);
  std::map<int, int64_t> warmup_ops, measured_ops;  // per rank, the simulated stream ops by step
  for (const auto& o : reader.all_ops()) (o.step < 0 ? warmup_ops : measured_ops)[o.rank]++;
  for (const auto& f : figures) {
    EXPECT_TRUE(f.has_comm) << "rank " << f.rank;
    EXPECT_GT(f.compute_ns, 0);
    // over the measured steps, as every other figure (tester33 D16): the warm-up step's ops left
    // out first, then HTA's last-step rule
    EXPECT_EQ(f.warmup_events, warmup_ops[f.rank]) << "rank " << f.rank;
    EXPECT_GT(f.warmup_events, 0);
    EXPECT_EQ(f.gpu_events + f.dropped_events, measured_ops[f.rank]) << "rank " << f.rank;
  }
}

// RunResult::events outlive the executor: their names (const char*) are those the session holds,
// read after the run returned (they pointed into the destroyed executor before, and read as garbage).
TEST(SimulatedExecutor, EventNamesOutliveTheRun) {
  const fs::path dir = scratch("names");
  const es::RunResult r = run(simulated("tiny", 2), (dir / "s.db").string());
  ASSERT_EQ(r.ended, es::RunEnd::complete);
  std::multiset<std::string> from_result, from_session;
  for (const auto& e : r.events) from_result.insert(std::to_string(e.rank) + " " + std::to_string(e.step) + " " + e.name);
  ss::SessionReader reader((dir / "s.db").string());
  for (const auto& o : reader.all_ops())
    from_session.insert(std::to_string(o.rank) + " " + std::to_string(o.step) + " " + reader.strings().at(static_cast<size_t>(o.name_id)));
  ASSERT_FALSE(from_result.empty());
  EXPECT_EQ(from_result, from_session);
  EXPECT_EQ(from_result.count("0 0 dense_all_reduce"), 1u);
}

TEST(SimulatedExecutor, PipelinesHideCommunicationUnderTheDensePart) {
  // shorter steps: the input dist (sparse_dist) and the output dist too (semi_sync) run under
  // the dense forward/backward of the batch before
  auto mean = [](const std::vector<int64_t>& v) {
    int64_t sum = 0;
    for (size_t i = 1; i < v.size(); ++i) sum += v[i];  // the steady state
    return sum / static_cast<int64_t>(v.size() - 1);
  };
  const auto base = run(simulated("criteo_kaggle", 4, es::PipelineKind::base));
  const auto sparse = run(simulated("criteo_kaggle", 4, es::PipelineKind::sparse_dist));
  const auto semi = run(simulated("criteo_kaggle", 4, es::PipelineKind::semi_sync));
  EXPECT_LT(mean(sparse.step_time_ns), mean(base.step_time_ns));
  EXPECT_LT(mean(semi.step_time_ns), mean(sparse.step_time_ns));
}

TEST(SimulatedExecutor, AThousandRanksOnH100sSimulate) {
  es::WorkloadSpec s = es::load_preset("criteo_kaggle");
  s.devices.backend = es::Backend::simulated;
  s.devices.hardware = "h100_sxm";
  s.devices.memory_bytes = es::load_hardware_profile("h100_sxm").gpu.memory_bytes;
  s.devices.count = 1024;
  s.steps = 2;
  s.warmup_steps = 0;
  s.sharding.default_type = es::ShardingType::row_wise;
  s = es::with_resolved_backend(s, "test");
  EXPECT_EQ(s.sharding.local_world_size, 8);
  es::TrainerOptions o;
  o.keep_events = false;
  const auto r = es::run_training(s, es::plan_sharding(s), o);
  ASSERT_EQ(r.ended, es::RunEnd::complete);
  ASSERT_EQ(r.step_time_ns.size(), 2u);
  EXPECT_GT(r.step_time_ns[1], 0);
}

TEST(SimulatedExecutor, BadClustersAreRefusedNamingTheField) {
  auto error_of = [](es::WorkloadSpec s) {
    try {
      es::with_resolved_backend(s, "w.json");
    } catch (const es::SpecError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  es::WorkloadSpec s = es::load_preset("tiny");
  s.devices.backend = es::Backend::simulated;
  EXPECT_EQ(error_of(s).rfind("w.json: /devices/hardware: backend simulated needs a hardware profile", 0), 0u) << error_of(s);
  s.devices.hardware = "h100_sxm";
  s.devices.count = 12;
  EXPECT_EQ(error_of(s),
            "/devices/count: 12 ranks do not fill nodes of 8 GPUs (hardware profile h100_sxm); give a multiple of 8 or "
            "set sharding.local_world_size (--gpus-per-node)");
  s.devices.hardware = kProfile;  // nodes of 2, at most 4 of them
  s.devices.count = 10;
  EXPECT_EQ(error_of(s),
            "/devices/count: 10 ranks need 5 nodes of 2 GPUs, but hardware profile round_numbers describes clusters of "
            "at most 4 nodes");
  s.devices.count = 2;
  s.network.inter_node.bandwidth_bytes_per_s = 1'000'000'000;
  EXPECT_EQ(error_of(s),
            "w.json: /network: a simulated cluster's links are its hardware profile's (devices.hardware); network "
            "emulation is for the cpu backend");
  s.network = {};
  s.devices.count = 1025;
  EXPECT_EQ(error_of(s), "w.json: /devices/count: must be in [1, 1024], got 1025");
  s.devices.backend = es::Backend::cpu;
  s.devices.count = 2;
  EXPECT_EQ(error_of(s), "w.json: /devices/hardware: a hardware profile is used by backend simulated only, got backend cpu");
}

TEST(SimulatedCli, RunSimulateWritesASimulatedSessionThatStatsReads) {
  const fs::path dir = scratch("cli");
  const std::string db = (dir / "s.db").string();
  auto r = embedscope::test_support::run_cli(
      EMBEDSCOPE_CLI, "run --preset criteo_kaggle --simulate h100_sxm --nodes 2 --steps 3 --json -o " + db, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("simulated"), true);
  EXPECT_EQ(j.at("world_size"), 16);
  EXPECT_TRUE(j.at("loss_first").is_null());
  EXPECT_NE(r.err.find("SIMULATED: 2 nodes x 8 GPUs of hardware profile h100_sxm"), std::string::npos) << r.err;
  r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "stats " + db, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("SIMULATED"), std::string::npos) << r.out;
  r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "stats --json " + db, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto sj = nlohmann::json::parse(r.out);
  EXPECT_EQ(sj.at("simulated"), true);
  EXPECT_TRUE(sj.at("loss").empty()) << "nothing was trained (tester33 D9): " << sj.at("loss").dump();
  r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "export " + db + " --format csv -o " + (dir / "csv").string(), dir);
  ASSERT_EQ(r.code, 0) << r.err;
  {
    std::ifstream f(dir / "csv" / "session.csv");
    const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("\nbackend,simulated\n"), std::string::npos) << text;
    EXPECT_NE(text.find("\nsimulated,1\n"), std::string::npos) << "the CSVs say they are simulated: " << text;
  }
  r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "run --preset tiny --nodes 2 -o " + db + "2", dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--nodes: only with --simulate PROFILE"), std::string::npos) << r.err;
  r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "run --preset tiny --simulate b200 -o " + db + "3", dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("unknown hardware profile \"b200\""), std::string::npos) << r.err;
  // the cluster is asked for once (tester33 D3): --devices in nodes of --gpus-per-node, and
  // flags that another would silently override are refused
  r = embedscope::test_support::run_cli(
      EMBEDSCOPE_CLI, "run --preset tiny --simulate h100_sxm --devices 12 --gpus-per-node 4 --steps 1 --json -o " + db + "4", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).at("world_size"), 12);
  EXPECT_NE(r.err.find("SIMULATED: 3 nodes x 4 GPUs"), std::string::npos) << r.err;
  for (const auto& [flags, error] : std::vector<std::pair<std::string, std::string>>{
           {"--devices 12 --gpus-per-node 8", "--devices 12 is not a whole number of nodes of --gpus-per-node 8"},
           {"--devices 4 --nodes 2 --gpus-per-node 8",
            "--devices 4 disagrees with --nodes 2 x 8 GPUs per node (16 ranks); give the ranks once"},
           {"--devices 8 --nodes 2", "--devices 8 disagrees with --nodes 2 x 8 GPUs per node (16 ranks)"},
           // --gpus-per-node alone keeps the workload's 2 ranks (tester45 F2: it was one node of G)
           {"--gpus-per-node 3", "the workload's devices.count 2 is not a whole number of nodes of --gpus-per-node 3"},
           {"--backend cpu", "--backend cpu: --simulate h100_sxm runs the workload on a modelled cluster"}}) {
    r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "run --preset tiny --simulate h100_sxm " + flags + " -o " + db + "5", dir);
    EXPECT_EQ(r.code, 2) << flags;
    EXPECT_NE(r.err.find(error), std::string::npos) << flags << ": " << r.err;
  }
  r = embedscope::test_support::run_cli(
      EMBEDSCOPE_CLI, "run --preset tiny --simulate h100_sxm --gpus-per-node 1 --steps 1 --json -o " + db + "7", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).at("world_size"), 2);
  EXPECT_NE(r.err.find("SIMULATED: 2 nodes x 1 GPU of"), std::string::npos) << r.err;  // singular (tester46 F18)
  // --backend simulated agrees with --simulate (run --help says to give both; tester39)
  r = embedscope::test_support::run_cli(
      EMBEDSCOPE_CLI, "run --preset tiny --backend simulated --simulate h100_sxm --steps 1 --json -o " + db + "6", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).at("world_size"), 2);
}

// Hot rows: a row-wise table of Zipf ids with permute = false has its hottest rows on rank 0,
// and the simulation sees it (input/id_share.h): the load counters of t_c (1,000 rows, 4
// shards of 250, f_c 2 ids a bag, 4 ranks x 1,000 bags) carry 8,000 x the Zipf(1.1) mass of each
// shard's rows, summed here term by term, and rank 0's lookup takes longer than with the hot
// rows spread by a permutation, rank 3's shorter.
TEST(SimulatedExecutor, RowWiseShardsOfZipfIdsGetTheirRowsMass) {
  auto spec_with = [](bool permute) {
    es::WorkloadSpec s = simulated("tiny", 4);
    s.batch_size = 1000;
    s.sharding.default_type = es::ShardingType::row_wise;
    s.features[4].ids.permute = permute;
    return s;
  };
  const fs::path dir = scratch("hot_rows");
  const es::WorkloadSpec hot = spec_with(false);
  const es::RunResult r = run(hot, (dir / "hot.db").string());
  ASSERT_EQ(r.ended, es::RunEnd::complete);
  auto H = [](int n) {
    double s = 0;
    for (int k = 1; k <= n; ++k) s += std::pow(static_cast<double>(k), -1.1);
    return s;
  };
  ss::SessionReader reader((dir / "hot.db").string());
  int seen = 0;
  for (const auto& c : reader.load()) {
    if (c.table != 3 || c.step != 0) continue;
    const double share = (H(250 * (c.rank + 1)) - H(250 * c.rank)) / H(1000);
    EXPECT_EQ(c.ids, std::llround(8000 * share)) << "rank " << c.rank;
    ++seen;
  }
  EXPECT_EQ(seen, 4);
  const es::RunResult spread = run(spec_with(true));
  auto lookup_ns = [](const es::RunResult& x, int rank) {
    for (const auto& e : x.events)
      if (e.rank == rank && e.step == 0 && std::string_view(e.name) == "lookup") return e.end_ns - e.start_ns;
    return int64_t{-1};
  };
  EXPECT_GT(lookup_ns(r, 0), lookup_ns(spread, 0));
  EXPECT_LT(lookup_ns(r, 3), lookup_ns(spread, 3));
  EXPECT_GT(lookup_ns(spread, 3), 0);
}

// What a simulated run says of its tables (tester33 D15): the bytes of the plan's shards per
// rank, equal to what a cpu run of the same plan allocates, the hot-row replicas on every rank
// and the host bytes of a host table; no error or collision figures (null in the session's
// table_storage_json: nothing was stored or hashed).
TEST(SimulatedExecutor, TableStorageIsWhatTheMeasuredRunAllocates) {
  es::WorkloadSpec s = simulated("tiny", 4);
  s.steps = 2;
  s.tables[0].data_type = es::TableDataType::fp16;
  s.tables[1].placement = es::TablePlacement::host;
  s.tables[2].placement = es::TablePlacement::host_cached;  // its row -> slot index counted too (tester35 D8)
  s.tables[2].cache_load_factor = 0.5;
  s.sharding.default_type = es::ShardingType::row_wise;
  es::TableSharding hot;
  hot.type = es::ShardingType::row_wise;
  hot.hot_rows = {0, 1, 2};
  s.sharding.per_table[s.tables[3].name] = hot;
  const fs::path dir = scratch("table_storage");
  const es::RunResult sim = run(s, (dir / "sim.db").string());
  ASSERT_EQ(sim.ended, es::RunEnd::complete);
  es::WorkloadSpec cpu = s;
  cpu.devices.backend = es::Backend::cpu;
  cpu.devices.hardware.clear();
  const es::RunResult measured = run(es::with_resolved_backend(cpu, "test"));
  ASSERT_EQ(measured.ended, es::RunEnd::complete);
  ASSERT_EQ(sim.table_storage.size(), s.tables.size());
  for (size_t t = 0; t < s.tables.size(); ++t) {
    SCOPED_TRACE(s.tables[t].name);
    const auto& a = sim.table_storage[t];
    const auto& b = measured.table_storage[t];
    EXPECT_EQ(a.weight_bytes, b.weight_bytes);
    EXPECT_EQ(a.optimizer_state_bytes, b.optimizer_state_bytes);
    EXPECT_EQ(a.hot_rows, b.hot_rows);
    EXPECT_EQ(a.hot_all_reduce_bytes, b.hot_all_reduce_bytes);
    EXPECT_EQ(a.placement, b.placement);
    EXPECT_EQ(a.host_bytes, b.host_bytes);
    EXPECT_EQ(a.cache_bytes, b.cache_bytes);
  }
  EXPECT_EQ(sim.table_storage[3].hot_rows, 3);
  int64_t host = 0;
  for (int64_t v : sim.table_storage[1].host_bytes) host += v;
  EXPECT_EQ(host, sim.table_storage[1].total_weight_bytes() + sim.table_storage[1].total_optimizer_state_bytes());
  const ss::SessionReader reader((dir / "sim.db").string());
  const auto tables = nlohmann::json::parse(reader.meta(ss::meta::kTableStorageJson));
  ASSERT_EQ(tables.size(), s.tables.size());
  EXPECT_TRUE(tables[0].at("max_abs_error").is_null());
  EXPECT_TRUE(tables[0].at("hash_collisions").is_null());
  EXPECT_TRUE(tables[3].at("hot_ids").is_null());
  EXPECT_EQ(tables[0].at("data_type"), "fp16");
  EXPECT_EQ(tables[0].at("weight_bytes"), nlohmann::json(sim.table_storage[0].weight_bytes));
}

// The CLI on a simulated run with reduced-precision tables and qcomms: the storage block with
// "-" where nothing was measured, no qcomms error, no unique rows (tester33 D9, D15).
TEST(SimulatedCli, StorageAndQcommsFiguresAreNotMeasured) {
  const fs::path dir = scratch("cli_storage");
  const std::string db = (dir / "s.db").string();
  auto r = embedscope::test_support::run_cli(
      EMBEDSCOPE_CLI, "run --preset tiny --simulate h100_sxm --devices 2 --steps 2 --qcomms fp16 --json -o " + db, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j.at("qcomms_error").is_null()) << j.at("qcomms_error").dump();
  EXPECT_TRUE(j.at("ranks").at(0).at("unique_ids").is_null());
  EXPECT_TRUE(j.at("tables").at(0).at("max_abs_error").is_null());
  EXPECT_GT(j.at("tables").at(0).at("weight_bytes").at(0).get<int64_t>() + j.at("tables").at(0).at("weight_bytes").at(1).get<int64_t>(), 0);
  r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "run --preset tiny --simulate h100_sxm --devices 2 --steps 2 --qcomms fp16 --force-overwrite -o " + db, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("qcomms error not measured (simulated"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("max abs 0"), std::string::npos) << r.out;
}

// The load counters' lookup_ns (tester33 D9: 0 in a simulation): each rank's simulated lookup
// time of a step, shared over its shards by their bytes (the cost model's lookup is
// memory-bound), so they sum to the lookup ops' time (up to one ns of rounding a shard).
TEST(SimulatedExecutor, LoadCountersShareEachRanksLookupTime) {
  es::WorkloadSpec s = simulated("tiny", 2);
  const fs::path dir = scratch("lookup_ns");
  const es::RunResult r = run(s, (dir / "s.db").string());
  ASSERT_EQ(r.ended, es::RunEnd::complete);
  const ss::SessionReader reader((dir / "s.db").string());
  std::map<std::pair<int, int64_t>, int64_t> ops_ns, load_ns, shards;
  for (const auto& o : reader.all_ops())
    if (o.category == ss::OpCategory::lookup) ops_ns[{o.rank, o.step}] += o.end_ns - o.start_ns;
  for (const auto& c : reader.load()) {
    load_ns[{c.rank, c.step}] += c.lookup_ns;
    ++shards[{c.rank, c.step}];
    EXPECT_GT(c.lookup_ns, 0) << "rank " << c.rank << " table " << c.table;
  }
  ASSERT_FALSE(ops_ns.empty());
  for (const auto& [key, ns] : ops_ns) {
    EXPECT_GT(ns, 0);
    EXPECT_LE(std::abs(load_ns[key] - ns), shards[key]) << "rank " << key.first << " step " << key.second;
  }
}

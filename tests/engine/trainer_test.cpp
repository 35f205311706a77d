#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <thread>
#include <filesystem>
#include <map>
#include <set>
#include <numeric>

#include "embedscope/engine/memory/memory.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/sessions/analysis/flight_recorder.h"
#include "embedscope/sessions/analysis/memory_analysis.h"
#include "embedscope/sessions/store/session.h"
#include "support/oom_snapshot.h"

using namespace embedscope::engine;

namespace {
WorkloadSpec tiny(int world, ShardingType type = ShardingType::table_wise) {
  WorkloadSpec s = load_preset("tiny");
  s.devices.count = world;
  s.sharding.default_type = type;
  s.sharding.per_table.clear();
  return s;
}
double mean(const std::vector<double>& v, size_t from, size_t to) {
  return std::accumulate(v.begin() + static_cast<long>(from), v.begin() + static_cast<long>(to), 0.0) /
         static_cast<double>(to - from);
}
}  // namespace

TEST(Trainer, LossFallsOnTinyWithFourRanks) {
  for (ShardingType type : {ShardingType::table_wise, ShardingType::row_wise}) {
    WorkloadSpec s = tiny(4, type);
    s.steps = 40;
    RunResult r = run_training(s, plan_sharding(s));
    ASSERT_EQ(r.ended, RunEnd::complete) << r.error;
    ASSERT_EQ(r.loss.size(), 40u);
    EXPECT_LT(mean(r.loss, 30, 40), mean(r.loss, 0, 10) - 0.05) << to_string(type);
  }
}

TEST(Trainer, LossFallsOnCriteoKaggleWithFourRanks) {
  WorkloadSpec s = load_preset("criteo_kaggle");
  s.devices.count = 4;
  s.steps = 15;
  s.warmup_steps = 0;
  TrainerOptions opt;
  opt.trace = false;
  opt.held_out_batches = 0;  // the training loss only: no held-out evaluation after the run
  RunResult r = run_training(s, plan_sharding(s), opt);
  ASSERT_EQ(r.ended, RunEnd::complete) << r.error;
  EXPECT_LT(mean(r.loss, 10, 15), mean(r.loss, 0, 5) - 0.02);
}

TEST(Trainer, CountersAddUp) {
  WorkloadSpec s = tiny(3);
  s.steps = 4;
  s.warmup_steps = 2;
  RunResult r = run_training(s, plan_sharding(s));
  ASSERT_EQ(r.ended, RunEnd::complete) << r.error;
  EXPECT_EQ(r.step_time_ns.size(), 4u);
  EXPECT_EQ(r.samples_per_step, 24);
  // table_wise: every id of every measured batch is looked up exactly once somewhere
  BatchGenerator gen(s);
  int64_t ids = 0;
  for (int64_t it = 2; it < 6; ++it)
    for (int rank = 0; rank < 3; ++rank) ids += static_cast<int64_t>(gen.make(it, rank).kjt.values.size());
  int64_t looked_up = 0, sent = 0, received = 0;
  for (const auto& rk : r.ranks) {
    looked_up += rk.ids_looked_up;
    sent += rk.bytes_sent;
    received += rk.bytes_received;
    EXPECT_GT(rk.memory_bytes, 0);
    EXPECT_LE(rk.memory_bytes, s.devices.memory_bytes);
  }
  EXPECT_EQ(looked_up, ids);
  EXPECT_EQ(sent, received);  // every byte sent is received by someone
  // spans on both lanes, with collectives carrying bytes
  bool comm_with_bytes = false, lookup = false;
  for (const auto& e : r.events) {
    comm_with_bytes |= e.lane == embedscope::sessions::Lane::comm && e.bytes > 0;
    lookup |= std::string(e.name) == "lookup";
    EXPECT_LE(e.start_ns, e.end_ns);
  }
  EXPECT_TRUE(comm_with_bytes);
  EXPECT_TRUE(lookup);
}

TEST(Trainer, RankThatNeverArrivesEndsTheRunAsHang) {
  WorkloadSpec s = tiny(3);
  s.collective_timeout_ms = 800;
  TrainerOptions opt;
  opt.vanish = {2, 4};  // rank 2 stops at the world group's 4th collective
  opt.session_path = (std::filesystem::temp_directory_path() / ("es_hang_" + std::to_string(getpid()) + ".db")).string();
  const auto t0 = std::chrono::steady_clock::now();
  RunResult r = run_training(s, plan_sharding(s), opt);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
  EXPECT_EQ(r.ended, RunEnd::hang);
  EXPECT_NE(r.error.find("sequence 4"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("input_dist/lengths"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("rank(s) 2 did not arrive"), std::string::npos) << r.error;
  // the session says how the run ended and keeps what ran until then
  embedscope::sessions::SessionReader session(opt.session_path);
  EXPECT_EQ(session.status(), "hang");
  EXPECT_EQ(session.meta("end_message"), r.error);
  EXPECT_GT(session.op_count(), 0);
  EXPECT_FALSE(session.collectives().empty());
  // the ranks that waited (0, 1) hold their tables in the step that hung: their memory is
  // recorded though no step ended (before, they had no counters and read "peak reserved 0 B");
  // the vanished rank, a dead process, records nothing
  std::map<int32_t, int64_t> reserved;
  for (const auto& m : session.memory_counters()) reserved[m.rank] = std::max(reserved[m.rank], m.peak_reserved);
  EXPECT_GT(reserved[0], 0);
  EXPECT_GT(reserved[1], 0);
  EXPECT_EQ(reserved.count(2), 0u);
  std::filesystem::remove(opt.session_path);
}

// The hang above, as the flight recorder tells it: every rank's ring is dumped into the session
// when the run ends "hang", and the analysis names the rank that did not arrive, the
// collective (group and sequence) and the ranks that waited in it.
TEST(Trainer, AHangDumpsEveryRanksFlightRecorderAndTheAnalysisNamesTheMissingRank) {
  WorkloadSpec s = tiny(3);
  s.collective_timeout_ms = 800;
  TrainerOptions opt;
  opt.vanish = {2, 4};  // rank 2 stops at the world group's 4th collective
  opt.session_path = (std::filesystem::temp_directory_path() / ("es_hang_fr_" + std::to_string(getpid()) + ".db")).string();
  RunResult r = run_training(s, plan_sharding(s), opt);
  ASSERT_EQ(r.ended, RunEnd::hang) << r.error;
  embedscope::sessions::SessionReader session(opt.session_path);
  const auto recs = session.flight_records();
  std::map<int32_t, std::vector<embedscope::sessions::FlightRecord>> by_rank;
  for (const auto& e : recs) by_rank[e.rank].push_back(e);
  ASSERT_EQ(by_rank.size(), 3u);
  for (int rank = 0; rank < 3; ++rank) {
    const auto& v = by_rank[rank];
    ASSERT_FALSE(v.empty()) << rank;
    EXPECT_EQ(v.front().reason, "collective timeout");
    EXPECT_EQ(v.front().dump, 0);
    std::vector<uint64_t> world;
    for (const auto& e : v)
      if (e.group == "world") world.push_back(e.sequence);
    // ranks 0 and 1 entered world#1..#4 (#4 never completed); rank 2 stopped before #4
    const std::vector<uint64_t> want = rank == 2 ? std::vector<uint64_t>{1, 2, 3} : std::vector<uint64_t>{1, 2, 3, 4};
    EXPECT_EQ(world, want) << rank;
    for (const auto& e : v) EXPECT_EQ(e.state, e.sequence == 4 ? "started" : "completed") << rank << " #" << e.sequence;
  }
  const auto a = embedscope::sessions::analyze_flight_records(session);
  ASSERT_FALSE(a.findings.empty());
  const auto& f = a.findings.front();
  EXPECT_EQ(f.kind, embedscope::sessions::FlightFinding::Kind::not_reached) << f.text;
  EXPECT_EQ(f.ranks, std::vector<int32_t>{2});
  EXPECT_EQ(f.sequences, std::vector<uint64_t>{4});
  EXPECT_NE(f.text.find("rank 2 did not reach "), std::string::npos) << f.text;
  EXPECT_NE(f.text.find("input_dist/lengths"), std::string::npos) << f.text;
  EXPECT_NE(f.text.find("(group world, sequence 4), which ranks 0, 1 wait in"), std::string::npos) << f.text;
  std::filesystem::remove(opt.session_path);
}

// A complete run writes no dump unless asked; a request (what SIGUSR1 makes) dumps every rank
// while the run goes on.
TEST(Trainer, AFlightDumpRequestDumpsEveryRankAndTheRunGoesOn) {
  WorkloadSpec s = tiny(2);
  s.steps = 6;
  FlightDumpRequest req;
  TrainerOptions opt;
  opt.flight_dump = &req;
  opt.session_path = (std::filesystem::temp_directory_path() / ("es_fr_req_" + std::to_string(getpid()) + ".db")).string();
  opt.on_step = [&](const StepProgress& p) {
    if (p.step == 2) {
      req.signal = SIGUSR1;
      req.count.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the watcher polls every 20 ms
    }
  };
  RunResult r = run_training(s, plan_sharding(s), opt);
  ASSERT_EQ(r.ended, RunEnd::complete) << r.error;
  embedscope::sessions::SessionReader session(opt.session_path);
  const auto recs = session.flight_records();
  std::set<int32_t> ranks;
  for (const auto& e : recs) {
    ranks.insert(e.rank);
    EXPECT_EQ(e.reason, "SIGUSR1");
    EXPECT_EQ(e.dump, 0);
    EXPECT_LE(e.step, 2);  // dumped after the second measured step, while rank 1 may be in the third
  }
  EXPECT_EQ(ranks, (std::set<int32_t>{0, 1}));
  std::filesystem::remove(opt.session_path);
  opt.flight_dump = nullptr;
  opt.on_step = nullptr;
  r = run_training(s, plan_sharding(s), opt);
  ASSERT_EQ(r.ended, RunEnd::complete) << r.error;
  EXPECT_TRUE(embedscope::sessions::SessionReader(opt.session_path).flight_records().empty());
  std::filesystem::remove(opt.session_path);
}

TEST(Trainer, InvalidIdsFailBeforeTheyAreSentAndNameTheFeature) {
  WorkloadSpec s = tiny(3);
  s.collective_timeout_ms = 20000;  // a hang would show as a 20 s test, the failure must be fast
  BatchGenerator gen(s);
  TrainerOptions opt;
  opt.batch_source = [&](int64_t it, int rank) -> std::optional<Batch> {
    Batch b = gen.make(it, rank);
    if (it == 1 && rank == 1) b.kjt.values[0] = 1000000;  // feature f_small has 1 row
    return b;
  };
  const auto t0 = std::chrono::steady_clock::now();
  RunResult r = run_training(s, plan_sharding(s), opt);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_EQ(r.ended, RunEnd::bad_input);  // the input's fault, not a crash (tester49 F11)
  EXPECT_TRUE(r.bad_input);
  EXPECT_NE(r.error.find("rank 1: feature 'f_small': 1 id(s) outside [0, 1)"), std::string::npos) << r.error;

  s.invalid_ids = InvalidIdPolicy::clamp;
  r = run_training(s, plan_sharding(s), opt);
  ASSERT_EQ(r.ended, RunEnd::complete) << r.error;
  EXPECT_EQ(r.ranks[1].invalid_ids, 1);
}

TEST(Trainer, MemoryThatCannotFitIsRejectedBeforeRunning) {
  WorkloadSpec s = tiny(2);
  s.devices.memory_bytes = 4096;
  try {  // below one segment of the caching allocator
    run_training(s, plan_sharding(s));
    FAIL() << "expected SpecError";
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("smaller than one 2.0 MiB segment of the caching allocator"), std::string::npos)
        << e.what();
  }
  s.memory.allocator = AllocatorKind::direct;
  try {
    run_training(s, plan_sharding(s));
    FAIL() << "expected SpecError";
  } catch (const SpecError& e) {
    // tiny's dense parameters and gradients (6.5 KiB) alone exceed the 4 KiB: one line, whatever
    // the plan (tester46 F10)
    EXPECT_NE(std::string(e.what()).find("no sharding type or storage option can fit it: the dense parameters and their "
                                         "gradients alone need 6.5 KiB"),
              std::string::npos)
        << e.what();
  }
  WorkloadSpec huge = load_preset("mlperf_dlrm_dcnv2");
  try {
    run_training(huge, plan_sharding(huge));
    FAIL() << "expected SpecError";
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("cpu backend runs all 8 ranks in this process"), std::string::npos) << e.what();
  }
}

TEST(DeviceArena, OomNamesRankRequestAndHolders) {
  DeviceArena a(2, AllocatorConfig{AllocatorKind::direct, 2048, 0, true});
  Allocation w = a.allocate("weights", 1000);  // 1024 with rounding
  try {
    a.allocate("kjt", 1500);
    FAIL();
  } catch (const OomError& e) {
    EXPECT_EQ(e.requested, 1500);
    EXPECT_FALSE(e.fragmentation);
    EXPECT_EQ(std::string(e.what()).rfind("rank 2: out of memory allocating 1.5 KiB for kjt (direct allocator): capacity: "
                                          "only 1.0 KiB of the device are free", 0),
              0u)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("most memory held by weights 1.0 KiB"), std::string::npos) << e.what();
  }
  {
    DeviceBuffer<float> b(&a, "kjt");
    b.assign(256, 2.0f);  // 1 KiB: fills the device
    EXPECT_EQ(a.in_use(), 2048);
    EXPECT_FLOAT_EQ(b[255], 2.0f);
    EXPECT_THROW(b.assign(257), OomError);
    EXPECT_EQ(b.size(), 256u);  // unchanged
    EXPECT_FLOAT_EQ(b[0], 2.0f);
  }
  EXPECT_EQ(a.in_use(), 1024);
  EXPECT_EQ(a.peak(), 2048);
  a.release(w);
  EXPECT_EQ(a.in_use(), 0);
}

TEST(Trainer, DivergedLossEndsTheRunOnEveryRank) {
  WorkloadSpec s = tiny(3);
  s.optimizer.learning_rate = 1e30;
  s.optimizer.dense_learning_rate = 1e30;
  s.steps = 10;
  RunResult r = run_training(s, plan_sharding(s));
  EXPECT_EQ(r.ended, RunEnd::crashed);
  EXPECT_FALSE(r.bad_input);
  EXPECT_NE(r.error.find("training diverged: the loss is"), std::string::npos) << r.error;
}

// The memory estimate is an upper bound of the bytes a rank allocates (the allocator's 512-byte
// rounding included): checked for every sharding type (every pipeline: planner/memory_estimate_test).
TEST(Trainer, EstimateBoundsWhatRanksAllocate) {
  for (ShardingType type : {ShardingType::data_parallel, ShardingType::table_wise, ShardingType::row_wise,
                            ShardingType::column_wise, ShardingType::table_row_wise}) {
    WorkloadSpec s = tiny(4, type);
    s.sharding.local_world_size = 2;
    s.optimizer.type = OptimizerType::adam;
    s.steps = 3;
    const auto est = estimate_memory(s, plan_sharding(s));
    RunResult r = run_training(s, plan_sharding(s));
    ASSERT_EQ(r.ended, RunEnd::complete) << to_string(type) << ": " << r.error;
    for (size_t i = 0; i < est.size(); ++i)
      EXPECT_LE(r.ranks[i].memory_bytes, est[i].total()) << to_string(type) << " rank " << i;
  }
}

// Periodic compaction rescues a run that fragments over its steps: under semi_sync the next
// batch's buffers stay alive across the step boundary, pinned between the step's freed
// temporaries, and the caching allocator of a 645 MiB device runs out of small-pool space in
// step 1 while 20 MiB are free; packing the device after step 0 lets the run complete.
TEST(Trainer, CompactionRescuesAFragmentingRun) {
  WorkloadSpec s = load_preset("criteo_kaggle");
  s.steps = 3;
  s.warmup_steps = 1;
  s.pipeline = PipelineKind::semi_sync;
  s.devices.memory_bytes = 645LL << 20;
  TrainerOptions opt;
  opt.keep_events = false;
  // how the runs end only: no op spans, no held-out evaluation of the rescued run (4 batches of
  // the full Criteo tables, after its steps and outside the allocator)
  opt.trace = false;
  opt.held_out_batches = 0;
  RunResult r = run_training(s, plan_sharding(s), opt);
  ASSERT_EQ(r.ended, RunEnd::oom) << r.error;
  EXPECT_NE(r.error.find("fragmentation: "), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("come from the small pool"), std::string::npos) << r.error;
  s.memory.compaction = 2;  // after iterations 1 and 3: the first measured step and the last
  r = run_training(s, plan_sharding(s), opt);
  EXPECT_EQ(r.ended, RunEnd::complete) << r.error;
}

// A mid-step OOM: the plan fits, the caching allocator's segments do not. The run ends "oom" with
// an explanation, and the session keeps the layout at the moment of failure (the step's buffers
// still alive) and the failed request in the memory history; the direct allocator runs.
TEST(Trainer, RuntimeOomEndsTheRunWithASnapshot) {
  WorkloadSpec s = tiny(2);
  // semi_sync on 28 MiB: the bytes and every segment the step needs fit (the plan's check), but
  // the batch kept ahead pins blocks between freed ones, and in step 1 the small pool has no
  // room while 16 MiB of the large pool are free - fragmentation, which only the run shows
  s.pipeline = PipelineKind::semi_sync;
  s.steps = 3;
  s.warmup_steps = 1;
  s.batch_size = 8000;
  s.devices.memory_bytes = 28 << 20;
  TrainerOptions opt;
  opt.session_path = (std::filesystem::temp_directory_path() / ("es_oom_" + std::to_string(getpid()) + ".db")).string();
  RunResult r = run_training(s, plan_sharding(s), opt);
  EXPECT_EQ(r.ended, RunEnd::oom);
  EXPECT_NE(r.error.find("out of memory allocating"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("(caching allocator)"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("Advice:"), std::string::npos) << r.error;
  {
    embedscope::sessions::SessionReader session(opt.session_path);
    EXPECT_EQ(session.status(), "oom");
    const auto snapshot_tags = embedscope::test_support::oom_snapshot_tags(session);
    ASSERT_TRUE(snapshot_tags) << "no snapshot taken for the OOM";
    const std::set<std::string>& tags = *snapshot_tags;
    EXPECT_TRUE(tags.count("weights"));
    EXPECT_GT(tags.size(), 2u) << "the step's buffers are part of the OOM layout";
    int ooms = 0;
    for (const auto& e : session.memory_events()) ooms += e.action == "oom";
    EXPECT_GE(ooms, 1);  // the failed request is in the memory history
    // the replay of the history classifies the OOM as the run did (tester32 D9): a request of at
    // most 1 MiB that only the small pool's 2 MiB segments can serve, while the large pool's
    // segment has megabytes free; the oom entry carries the device's free bytes
    EXPECT_NE(r.error.find("fragmentation: "), std::string::npos) << r.error;
    EXPECT_NE(r.error.find("come from the small pool"), std::string::npos) << r.error;
    EXPECT_NE(r.error.find("give the device at least "), std::string::npos) << r.error;
    int replay_ooms = 0;
    for (const auto& ra : embedscope::sessions::analyze_memory(session))
      for (const auto& o : ra.ooms) {
        ++replay_ooms;
        EXPECT_TRUE(o.fragmentation) << "rank " << ra.rank;
        EXPECT_TRUE(o.small_pool) << "rank " << ra.rank;
        EXPECT_LT(o.largest_free_in_pool, o.requested) << "rank " << ra.rank;
        EXPECT_GE(o.largest_free_block, o.requested) << "rank " << ra.rank << ": the large pool's block";
      }
    EXPECT_GE(replay_ooms, 1);
    // every rank's memory when the run ended (the hang test below is the one where a rank had no
    // counter before failed runs recorded them)
    std::map<int32_t, int64_t> reserved, allocated;
    for (const auto& m : session.memory_counters()) {
      reserved[m.rank] = std::max(reserved[m.rank], m.peak_reserved);
      allocated[m.rank] = std::max(allocated[m.rank], m.peak_allocated);
    }
    for (int32_t rank = 0; rank < 2; ++rank) {
      EXPECT_GE(reserved[rank], 2 << 20) << "rank " << rank << ": at least one 2 MiB segment";
      EXPECT_GT(allocated[rank], 0) << "rank " << rank;
    }
    std::set<int32_t> history;
    for (const auto& e : session.memory_events()) history.insert(e.rank);
    EXPECT_EQ(history, (std::set<int32_t>{0, 1})) << "both ranks' allocator history";
  }
  std::filesystem::remove(opt.session_path);
  s.memory.allocator = AllocatorKind::direct;
  opt.session_path += ".direct";
  r = run_training(s, plan_sharding(s), opt);
  EXPECT_EQ(r.ended, RunEnd::complete) << r.error;
  {  // replaying the memory history gives each rank's allocated bytes at the last step end
    embedscope::sessions::SessionReader session(opt.session_path);
    std::map<int32_t, int64_t> live;
    for (const auto& e : session.memory_events())
      live[e.rank] += e.action == "alloc" ? e.size : e.action == "free" ? -e.size : 0;
    const auto mc = session.memory_counters();
    ASSERT_EQ(mc.size(), 2u * static_cast<size_t>(s.warmup_steps + s.steps));  // (step, rank) rows
    for (size_t i = mc.size() - 2; i < mc.size(); ++i) EXPECT_EQ(live[mc[i].rank], mc[i].allocated) << mc[i].rank;
  }
  std::filesystem::remove(opt.session_path);
}

TEST(DeviceArena, CompactionPacksLiveBuffersAndKeepsTheirData) {
  constexpr int64_t MiB = int64_t{1} << 20;
  DeviceArena a(0, AllocatorConfig{AllocatorKind::caching, 64 * MiB, 0, true});
  DeviceBuffer<float> x(&a, "weights"), z(&a, "optimizer_state");
  {
    DeviceBuffer<float> y(&a, "kjt");
    x.assign(static_cast<size_t>(5 * MiB / 4), 1.0f);
    y.assign(static_cast<size_t>(5 * MiB / 4), 2.0f);
    z.assign(static_cast<size_t>(5 * MiB / 4), 3.0f);
  }  // y freed: a 5 MiB hole between x and z
  const auto before = a.allocator().stats();
  EXPECT_EQ(before.largest_free_block, 5 * MiB);
  const float* z_before = z.data();
  const auto c = a.compact();
  EXPECT_EQ(c.blocks_moved, 2);
  EXPECT_EQ(c.bytes_moved, 10 * MiB);
  EXPECT_EQ(c.largest_free_after, 10 * MiB);  // x and z packed at the start of one segment
  EXPECT_LE(c.reserved_after, c.reserved_before);
  EXPECT_NE(z.data(), z_before);
  EXPECT_FLOAT_EQ(x[0], 1.0f);
  EXPECT_FLOAT_EQ(x[x.size() - 1], 1.0f);
  EXPECT_FLOAT_EQ(z[0], 3.0f);
  EXPECT_FLOAT_EQ(z[z.size() - 1], 3.0f);
  EXPECT_EQ(a.in_use(), 10 * MiB);
}

// DDP buckets: one all-reduce per bucket per step. tiny's dense part (4 dense features, bottom
// [8], cat, top [16, 1]) has 6 tensors; a 4-byte cap gives each its own bucket, the default
// 25 MiB one bucket. The bytes all-reduced add up to the parameters plus loss and vote.
TEST(Trainer, DenseGradientsAllReducedPerBucket) {
  for (const auto& [cap, buckets] : {std::pair{int64_t{4}, 6}, std::pair{int64_t{25} << 20, 1}}) {
    WorkloadSpec s = tiny(2);
    s.steps = 2;
    s.dense->bucket_cap_bytes = cap;
    for (PipelineKind p : {PipelineKind::base, PipelineKind::semi_sync}) {
      s.pipeline = p;
      RunResult r = run_training(s, plan_sharding(s));
      ASSERT_EQ(r.ended, RunEnd::complete) << r.error;
      int count = 0;
      for (const auto& e : r.events)
        if (e.rank == 0 && e.step == 1 && std::string(e.name) == "dense_all_reduce") ++count;
      EXPECT_EQ(count, buckets) << "cap " << cap << " " << to_string(p);
    }
  }
}

// The cuda executor's device path with host memory standing in for the GPU runs the same
// arithmetic as the cpu backend, so the tables, dense parameters and losses are bit-equal; the
// session names the emulated device, and the memory history holds the device input dist's kjt
// buffers.
TEST(Trainer, EmulatedDevicePathTrainsExactlyAsTheCpuBackend) {
  WorkloadSpec s = tiny(2, ShardingType::row_wise);
  s.steps = 3;
  s.optimizer.type = OptimizerType::adam;
  TrainerOptions opt;
  opt.keep_tables = true;
  const RunResult cpu = run_training(s, plan_sharding(s), opt);
  opt.emulate_device = true;
  opt.session_path = (std::filesystem::temp_directory_path() / ("es_emulated_" + std::to_string(getpid()) + ".db")).string();
  const RunResult dev = run_training(s, plan_sharding(s), opt);
  ASSERT_EQ(cpu.ended, RunEnd::complete) << cpu.error;
  ASSERT_EQ(dev.ended, RunEnd::complete) << dev.error;
  EXPECT_EQ(dev.tables, cpu.tables);
  EXPECT_EQ(dev.dense_params, cpu.dense_params);
  EXPECT_EQ(dev.loss, cpu.loss);
  {
    embedscope::sessions::SessionReader session(opt.session_path);
    ASSERT_EQ(session.ranks().size(), 2u);
    EXPECT_EQ(session.ranks()[0].device, "host memory (emulated device 0)");
    EXPECT_EQ(session.ranks()[1].device, "host memory (emulated device 1)");
    int64_t kjt_allocs = 0, cpu_kjt_allocs = 0;
    for (const auto& e : session.memory_events()) kjt_allocs += e.action == "alloc" && e.tag == "kjt";
    // the cpu path allocates two kjt buffers per step and rank (received lengths and ids); the
    // device path's input dist on the device (tiny: a resident dense part, sum pooling) two as
    // well (each slot's offsets and the permuted ids, which every lookup reads there: no lookup
    // copies ids and offsets of its own; its send and receive buffers are outside the allocator)
    cpu_kjt_allocs = 2 * 2 * s.steps;
    EXPECT_EQ(kjt_allocs, cpu_kjt_allocs);
  }
  std::filesystem::remove(opt.session_path);
}

// An OOM on the device path (GPU arena: blocks without host access, host copies beside them)
// ends the run the same way: status oom and the layout at the failure in the session.
TEST(Trainer, EmulatedDevicePathOomEndsOomWithTheSnapshot) {
  WorkloadSpec s = tiny(2);
  s.pipeline = PipelineKind::semi_sync;  // as above: fragmentation in step 1
  s.steps = 3;
  s.warmup_steps = 1;
  s.batch_size = 8000;
  s.devices.memory_bytes = 28 << 20;
  TrainerOptions opt;
  opt.emulate_device = true;
  opt.session_path = (std::filesystem::temp_directory_path() / ("es_emulated_oom_" + std::to_string(getpid()) + ".db")).string();
  const RunResult r = run_training(s, plan_sharding(s), opt);
  EXPECT_EQ(r.ended, RunEnd::oom) << r.error;
  EXPECT_NE(r.error.find("out of memory allocating"), std::string::npos) << r.error;
  {
    embedscope::sessions::SessionReader session(opt.session_path);
    EXPECT_EQ(session.status(), "oom");
    const auto snapshot_tags = embedscope::test_support::oom_snapshot_tags(session);
    ASSERT_TRUE(snapshot_tags) << "no snapshot taken for the OOM";
    const std::set<std::string>& tags = *snapshot_tags;
    EXPECT_TRUE(tags.count("weights"));
  }
  std::filesystem::remove(opt.session_path);
}

// The host-testable parts of the cuda backend with one rank per process (exec/launch/nccl_setup.h):
// rank 0's NCCL unique ids through a real gloo FileStore to the other ranks (fake 128-byte ids,
// three ranks on threads, each with its own store connection as a process has), the waiting
// ranks' early ends (rank 0's error, cancel, a timeout), and the GPU choice by hand. The GPU twin
// (two processes, two GPUs) is tests/gpu/process_cuda_test.cpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "embedscope/engine/workload/spec_error.h"
#include "exec/launch/handshake.h"
#include "exec/launch/nccl_setup.h"
#include "exec/launch/store.h"
#include "support/cli_run.h"

namespace fs = std::filesystem;
namespace el = embedscope::engine::launch;

namespace {
fs::path nccl_setup_dir(const std::string& name) {
  const auto d = fs::temp_directory_path() / ("es_ncclsetup_" + std::to_string(getpid())) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}
// 128 bytes that differ per call, holding zero bytes and bytes >= 0x80 (what a text path would break)
std::string fake_nccl_id(int call) {
  std::string id(el::kNcclIdBytes, '\0');
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<char>((i * 37 + static_cast<size_t>(call) * 101) & 0xff);
  return id;
}
std::string expect_throw_text(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(nothing thrown)";
}
}  // namespace

TEST(NcclIdExchange, ThreeRanksGetRankZerosBytesThroughAFileStore) {
  const auto dir = nccl_setup_dir("three");
  const std::string url = "file://" + dir.string();
  const std::vector<std::string> groups{"world", "node0", "cross1"};
  std::atomic<int> calls{0};
  std::vector<std::map<std::string, std::string>> got(3);
  std::vector<std::string> errors(3);
  std::vector<std::thread> threads;
  for (int r = 2; r >= 0; --r)  // the readers first: they wait for rank 0
    threads.emplace_back([&, r] {
      try {
        el::RunStore store(url, "ncclids");
        got[static_cast<size_t>(r)] = el::exchange_nccl_ids(
            store, r, groups, [&] { return fake_nccl_id(calls.fetch_add(1)); }, std::chrono::milliseconds(20000));
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 3; ++r) ASSERT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
  EXPECT_EQ(calls.load(), 3);  // rank 0 made one id per group, the others none
  for (size_t g = 0; g < groups.size(); ++g)
    for (int r = 0; r < 3; ++r) {
      const auto& ids = got[static_cast<size_t>(r)];
      ASSERT_EQ(ids.count(groups[g]), 1u) << "rank " << r << " group " << groups[g];
      // rank 0 made the ids in group order: call g's bytes
      EXPECT_EQ(ids.at(groups[g]), fake_nccl_id(static_cast<int>(g))) << "rank " << r << " group " << groups[g];
    }
  EXPECT_NE(got[1].at("world"), got[1].at("node0"));
}

TEST(NcclIdExchange, RankZerosFailureEndsTheOthersAtOnceNamingIt) {
  const auto dir = nccl_setup_dir("fail");
  const std::string url = "file://" + dir.string();
  std::string waiter;
  const auto t0 = std::chrono::steady_clock::now();
  std::thread reader([&] {
    el::RunStore store(url, "ncclfail");
    waiter = expect_throw_text([&] {
      el::exchange_nccl_ids(store, 1, {"world"}, [] { return fake_nccl_id(0); }, std::chrono::milliseconds(20000));
    });
  });
  el::RunStore store0(url, "ncclfail");
  const std::string own = expect_throw_text([&] {
    el::exchange_nccl_ids(store0, 0, {"world"},
                          []() -> std::string { throw std::runtime_error("ncclGetUniqueId failed: unhandled system error"); },
                          std::chrono::milliseconds(20000));
  });
  reader.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(own, "ncclGetUniqueId failed: unhandled system error");
  EXPECT_NE(waiter.find("rank 0 could not create the NCCL unique id: ncclGetUniqueId failed: unhandled system error "
                        "(this is rank 1)"),
            std::string::npos)
      << waiter;
  EXPECT_LT(s, 10.0);  // not the 20 s timeout
}

TEST(NcclIdExchange, AMissingIdTimesOutNamingTheGroupsAndACancelEndsTheWait) {
  const auto dir = nccl_setup_dir("timeout");
  const std::string url = "file://" + dir.string();
  el::RunStore store(url, "nccltimeout");
  const std::string late = expect_throw_text([&] {
    el::exchange_nccl_ids(store, 2, {"world", "node1"}, [] { return fake_nccl_id(0); }, std::chrono::milliseconds(150));
  });
  EXPECT_NE(late.find("rank 0 did not publish the NCCL unique id of group(s) world, node1 within 150 ms (this is rank 2)"),
            std::string::npos)
      << late;
  EXPECT_NE(late.find("(run id nccltimeout)"), std::string::npos) << late;
  std::atomic<bool> cancel{true};
  EXPECT_THROW(el::exchange_nccl_ids(store, 1, {"world"}, [] { return fake_nccl_id(0); },
                                     std::chrono::milliseconds(20000), &cancel),
               el::RendezvousCancelled);
  // rank 0 with an id of the wrong size: a programming error, never published
  EXPECT_THROW(el::exchange_nccl_ids(store, 0, {"x"}, [] { return std::string(64, 'a'); }, std::chrono::milliseconds(10)),
               std::logic_error);
  EXPECT_FALSE(store.has("nccl_id/x"));
}

// Every rank says its host and GPU (PCI bus id) through the store; two ranks of one host on one
// GPU are refused on every rank naming the pair; the same bus id on two hosts is fine.
TEST(ProcessGpuChoice, TwoRanksOnOneGpuOfOneHostAreRefusedEverywhere) {
  const auto dir = nccl_setup_dir("distinct");
  const std::string url = "file://" + dir.string();
  auto run = [&](const std::string& run_id, const std::vector<std::pair<std::string, std::string>>& where) {
    std::vector<std::string> errors(where.size());
    std::vector<std::thread> threads;
    for (size_t r = 0; r < where.size(); ++r)
      threads.emplace_back([&, r] {
        el::RunStore store(url, run_id);
        errors[r] = expect_throw_text([&] {
          el::check_distinct_gpus(store, static_cast<int>(r), static_cast<int>(where.size()), where[r].first,
                                  where[r].second, "how " + std::to_string(r), std::chrono::milliseconds(20000));
        });
      });
    for (auto& t : threads) t.join();
    return errors;
  };
  const auto ok = run("distinct_ok", {{"h1", "0000:3b:00.0"}, {"h1", "0000:5e:00.0"}, {"h2", "0000:3b:00.0"}});
  for (size_t r = 0; r < ok.size(); ++r) EXPECT_EQ(ok[r], "(nothing thrown)") << "rank " << r;
  const auto dup = run("distinct_dup", {{"h1", "0000:3b:00.0"}, {"h2", "0000:3b:00.0"}, {"h1", "0000:5e:00.0"},
                                        {"h2", "0000:3b:00.0"}});
  for (size_t r = 0; r < dup.size(); ++r)
    EXPECT_NE(dup[r].find("ranks 1 and 3 both run on GPU 0000:3b:00.0 of host h2 (rank 1: how 1; rank 3: how 3): NCCL "
                          "cannot put one GPU in a communicator twice"),
              std::string::npos)
        << "rank " << r << ": " << dup[r];
  el::RunStore alone(url, "distinct_late");  // a rank that never says its GPU: named at the timeout
  EXPECT_NE(expect_throw_text([&] {
              el::check_distinct_gpus(alone, 0, 2, "h1", "0", "", std::chrono::milliseconds(100));
            }).find("rank(s) 1 did not say their GPU within 100 ms (this is rank 0)"),
            std::string::npos);
}

TEST(ProcessGpuChoice, HandCases) {
  el::GpuChoiceInput in;
  // torchrun on a node of 4 GPUs: local rank 1 of 2 takes GPU 1
  in = {5, 1, "LOCAL_RANK", 2, "LOCAL_WORLD_SIZE", 4, -1};
  EXPECT_EQ(el::choose_process_gpu(in).gpu, 1);
  EXPECT_EQ(el::choose_process_gpu(in).how, "local rank 1 (LOCAL_RANK) of the 4 GPUs visible");
  // by hand, no local rank: rank 5 modulo 4 GPUs
  in = {5, -1, "", 0, "", 4, -1};
  EXPECT_EQ(el::choose_process_gpu(in).gpu, 1);
  in = {6, -1, "", 0, "", 3, -1};
  EXPECT_EQ(el::choose_process_gpu(in).gpu, 0);
  // srun --gpus-per-task=1: CUDA_VISIBLE_DEVICES names one GPU, local rank 3 of 4 takes it
  in = {3, 3, "SLURM_LOCALID", 4, "SLURM_NTASKS_PER_NODE", 1, 1};
  EXPECT_EQ(el::choose_process_gpu(in).gpu, 0);
  // more local ranks than GPUs: refused on every local rank, naming both counts
  in = {0, 0, "LOCAL_RANK", 3, "LOCAL_WORLD_SIZE", 2, -1};
  EXPECT_NE(expect_throw_text([&] { el::choose_process_gpu(in); })
                .find("rank 0: 3 local ranks (LOCAL_WORLD_SIZE) on this node, but this process sees 2 GPUs: NCCL cannot "
                      "put one GPU in a communicator twice"),
            std::string::npos);
  // the local world unknown (embedscope launch): the local rank beyond the GPUs says how many at least
  in = {2, 2, "embedscope launch", 0, "", 2, -1};
  EXPECT_NE(expect_throw_text([&] { el::choose_process_gpu(in); })
                .find("rank 2 is local rank 2 (embedscope launch), but this process sees 2 GPUs: 3 or more local ranks "
                      "on a node of 2 GPUs"),
            std::string::npos);
  in = {1, 1, "OMPI_COMM_WORLD_LOCAL_RANK", 2, "OMPI_COMM_WORLD_LOCAL_SIZE", 1, 2};  // two listed, one usable
  EXPECT_NE(expect_throw_text([&] { el::choose_process_gpu(in); }).find("2 local ranks (OMPI_COMM_WORLD_LOCAL_SIZE)"),
            std::string::npos);
  in = {1, 0, "LOCAL_RANK", 1, "LOCAL_WORLD_SIZE", 0, 0};
  EXPECT_NE(expect_throw_text([&] { el::choose_process_gpu(in); })
                .find("rank 1: the cuda backend needs a GPU, but this process sees none (cudaGetDeviceCount reported 0; "
                      "CUDA_VISIBLE_DEVICES is empty)"),
            std::string::npos);
}

TEST(ProcessGpuChoice, FromTheLaunchersVariables) {
  auto in = el::gpu_choice_from_environment(
      {{"SLURM_LOCALID", "1"}, {"SLURM_NTASKS_PER_NODE", "2"}, {"CUDA_VISIBLE_DEVICES", "0,1"}}, 3, 2);
  EXPECT_EQ(in.rank, 3);
  EXPECT_EQ(in.local_rank, 1);
  EXPECT_EQ(in.local_rank_from, "SLURM_LOCALID");
  EXPECT_EQ(in.local_world_size, 2);
  EXPECT_EQ(in.listed_visible, 2);
  EXPECT_EQ(el::choose_process_gpu(in).gpu, 1);
  // Open MPI's variables before torchrun's; no CUDA_VISIBLE_DEVICES: -1
  in = el::gpu_choice_from_environment({{"LOCAL_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                                        {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}, 6, 4);
  EXPECT_EQ(in.local_rank, 2);
  EXPECT_EQ(in.local_world_from, "OMPI_COMM_WORLD_LOCAL_SIZE");
  EXPECT_EQ(in.listed_visible, -1);
  EXPECT_EQ(el::gpu_choice_from_environment({}, 0, 1).local_rank, -1);
  EXPECT_EQ(el::gpu_choice_from_environment({{"CUDA_VISIBLE_DEVICES", ""}}, 0, 0).listed_visible, 0);
  EXPECT_NE(expect_throw_text([] { el::gpu_choice_from_environment({{"LOCAL_RANK", "x1"}}, 0, 1); })
                .find("LOCAL_RANK=x1: give a whole number >= 0"),
            std::string::npos);
}

// The cpu-only refusal is gone: a rank per process on the cuda backend gets as far as the GPU
// check, which on a machine without one names cudaGetDeviceCount's answer (a build without
// CUDA: says so), exit 2, before anything is written.
TEST(ProcessGpuChoice, TheCudaBackendPerProcessIsRefusedOnlyForWantOfAGpu) {
  const auto dir = nccl_setup_dir("cli");
  const auto r = embedscope::test_support::run_cli(
      EMBEDSCOPE_CLI,
      "run --preset tiny --steps 1 --backend cuda --rank 0 --world-size 2 --rendezvous file://" + dir.string() +
          " --run-id nocuda -o " + (dir / "x.rank{rank}.db").string(),
      dir);
  if (r.code == 0) GTEST_SKIP() << "this machine has a GPU: tests/gpu/process_cuda_test.cpp covers the run";
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(r.err.find("cpu backend only"), std::string::npos) << r.err;
  EXPECT_TRUE(r.err.find("cuda needs a CUDA device") != std::string::npos ||
              r.err.find("built without CUDA") != std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir / "x.rank0.db"));
}

// Backend selection (backend.h) and the host-side pieces of GPU memory (allocator.h: segment
// sources, VMM page rounding): no device needed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/mman.h>
#include <sys/wait.h>

#include "embedscope/engine/memory/allocator.h"
#include "embedscope/engine/exec/backend.h"
#include "embedscope/engine/memory/memory.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/workload/presets.h"

namespace es = embedscope::engine;
using embedscope::profiler::CudaDevices;

namespace {
// what the no-GPU error ends with (engine/exec/backend.cpp)
constexpr const char* kNoGpuRemedy =
    "; without a GPU use backend cpu or auto, or plan and run for one on a modelled cluster with --simulate "
    "PROFILE (e.g. h200_sxm)";
std::string error_of(es::Backend b, int ranks, const CudaDevices& d, bool built) {
  try {
    es::resolve_backend(b, ranks, d, built);
  } catch (const es::SpecError& e) {
    return e.what();
  }
  return "";
}
CudaDevices gpus(int n) {
  CudaDevices d;
  d.count = n;
  d.names.assign(static_cast<size_t>(n), "NVIDIA H200");
  return d;
}
CudaDevices no_device() {
  CudaDevices d;
  d.error = "cudaGetDeviceCount failed: cudaErrorNoDevice (no CUDA-capable device is detected)";
  return d;
}
}  // namespace

TEST(Backend, AutoPicksCudaOnlyWithADeviceInACudaBuild) {
  EXPECT_EQ(es::resolve_backend(es::Backend::auto_, 2, gpus(2), true), es::Backend::cuda);
  EXPECT_EQ(es::resolve_backend(es::Backend::auto_, 2, no_device(), true), es::Backend::cpu);
  EXPECT_EQ(es::resolve_backend(es::Backend::auto_, 2, gpus(0), true), es::Backend::cpu);
  EXPECT_EQ(es::resolve_backend(es::Backend::auto_, 1, gpus(8), false), es::Backend::cpu);
  EXPECT_EQ(es::resolve_backend(es::Backend::cpu, 4, gpus(8), true), es::Backend::cpu);
  EXPECT_EQ(es::resolve_backend(es::Backend::cuda, 4, gpus(8), true), es::Backend::cuda);
}

TEST(Backend, CudaWithoutEnoughGpusIsBadInputNamingCudaGetDeviceCount) {
  EXPECT_EQ(error_of(es::Backend::cuda, 1, no_device(), true),
            "/devices/backend: cuda needs a CUDA device, but cudaGetDeviceCount failed: cudaErrorNoDevice (no "
            "CUDA-capable device is detected)" + std::string(kNoGpuRemedy));
  EXPECT_EQ(error_of(es::Backend::cuda, 1, gpus(0), true),
            "/devices/backend: cuda needs a CUDA device, but cudaGetDeviceCount reported 0 devices" +
                std::string(kNoGpuRemedy));
  // no driver at all: the runtime's "insufficient driver" is explained (tester40 #8)
  CudaDevices no_driver;
  no_driver.error = "cudaGetDeviceCount failed: cudaErrorInsufficientDriver (CUDA driver version is insufficient for "
                    "CUDA runtime version)";
  EXPECT_EQ(error_of(es::Backend::cuda, 1, no_driver, true),
            "/devices/backend: cuda needs a CUDA device, but " + no_driver.error +
                "; the CUDA runtime says so when this machine has no NVIDIA driver at all, or one older than the "
                "runtime needs" + kNoGpuRemedy);
  // more ranks than GPUs: they share the GPUs (devices.ranks_per_gpu; check_cuda_placement decides,
  // gpu_placement_test.cpp), and auto picks cuda with any GPU
  EXPECT_EQ(error_of(es::Backend::cuda, 4, gpus(2), true), "");
  EXPECT_EQ(es::resolve_backend(es::Backend::auto_, 3, gpus(1), true), es::Backend::cuda);
  EXPECT_EQ(error_of(es::Backend::cuda, 1, gpus(1), false),
            "/devices/backend: cuda: this embedscope was built without CUDA (EMBEDSCOPE_WITH_CUDA=OFF); use cpu or auto");
}

// On this machine: what cudaGetDeviceCount says decides (skipped where a GPU is present).
TEST(Backend, RunTrainingRefusesCudaWithoutADeviceBeforeWritingASession) {
  const auto& d = embedscope::profiler::cuda_devices();
  if (d.count > 0) GTEST_SKIP() << "a CUDA device is present (" << d.names[0] << "): the no-device error cannot happen";
  es::WorkloadSpec spec = es::load_preset("tiny");
  spec.devices.backend = es::Backend::cuda;
  es::TrainerOptions opt;
  opt.session_path = (std::filesystem::temp_directory_path() / ("es_backend_" + std::to_string(getpid()) + ".db")).string();
  std::string msg;
  try {
    es::run_training(spec, es::plan_sharding(spec), opt);
  } catch (const es::SpecError& e) {
    msg = e.what();
  }
#if EMBEDSCOPE_WITH_CUDA
  EXPECT_EQ(msg.rfind("/devices/backend: cuda needs a CUDA device, but " + d.error, 0), 0u) << msg;
  EXPECT_NE(msg.find(kNoGpuRemedy), std::string::npos) << msg;
  EXPECT_NE(msg.find("cudaGetDeviceCount"), std::string::npos) << msg;
#else
  EXPECT_EQ(msg, "/devices/backend: cuda: this embedscope was built without CUDA (EMBEDSCOPE_WITH_CUDA=OFF); use cpu or auto");
#endif
  EXPECT_FALSE(std::filesystem::exists(opt.session_path));
  // auto runs on the cpu here
  spec.devices.backend = es::Backend::auto_;
  EXPECT_EQ(es::with_resolved_backend(spec, "tiny").devices.backend, es::Backend::cpu);
}

TEST(Backend, CliBackendFlag) {
  const auto& d = embedscope::profiler::cuda_devices();
  if (d.count > 0) GTEST_SKIP() << "a CUDA device is present: --backend cuda would run";
  const auto dir = std::filesystem::temp_directory_path() / ("es_backend_cli_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto cli = [&](const std::string& args, std::string& err) {
    const std::string e = (dir / "err.txt").string();
    const int st = std::system((std::string(EMBEDSCOPE_CLI) + " " + args + " >/dev/null 2>" + e).c_str());
    std::ifstream f(e);
    std::stringstream s;
    s << f.rdbuf();
    err = s.str();
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  };
  std::string err;
  EXPECT_EQ(cli("run --preset tiny --backend cuda -o " + (dir / "s.db").string(), err), 2);
#if EMBEDSCOPE_WITH_CUDA
  EXPECT_NE(err.find("preset tiny: /devices/backend: cuda needs a CUDA device, but " + d.error), std::string::npos) << err;
  EXPECT_NE(err.find(std::string(kNoGpuRemedy) + " (set by --backend)"),
            std::string::npos)
      << err;
#else
  EXPECT_NE(err.find("preset tiny: /devices/backend: cuda: this embedscope was built without CUDA"), std::string::npos) << err;
#endif
  EXPECT_FALSE(std::filesystem::exists(dir / "s.db"));
  EXPECT_EQ(cli("plan --preset tiny --backend gpu", err), 2);
  EXPECT_NE(err.find("--backend"), std::string::npos) << err;
  EXPECT_EQ(cli("plan --preset tiny --backend auto", err), 0) << err;
  // cuda_async cannot be replayed
  EXPECT_EQ(cli("replay-memory " + std::string(EMBEDSCOPE_TEST_DATA) + "/memory/pinned_block.json --allocator cuda_async", err), 2);
  EXPECT_NE(err.find("--allocator: cuda_async cannot be replayed: its cudaMallocAsync pool needs a GPU and hides its layout"),
            std::string::npos)
      << err;
  std::filesystem::remove_all(dir);
}

TEST(VmmPages, CommitsWholePagesOfTheGranularity) {
  constexpr int64_t MiB = 1 << 20;
  es::VmmPages p(2 * MiB);
  EXPECT_EQ(p.grow_to(1), (std::pair<int64_t, int64_t>{0, 1}));   // 1 byte needs page 0
  EXPECT_EQ(p.grow_to(2 * MiB), (std::pair<int64_t, int64_t>{1, 1}));  // already mapped
  EXPECT_EQ(p.grow_to(5 * MiB), (std::pair<int64_t, int64_t>{1, 3}));  // 5 MiB -> 3 pages
  EXPECT_EQ(p.mapped_bytes(), 6 * MiB);
  EXPECT_EQ(p.shrink_to(3 * MiB), (std::pair<int64_t, int64_t>{2, 3}));  // 3 MiB still needs 2 pages
  EXPECT_EQ(p.shrink_to(3 * MiB), (std::pair<int64_t, int64_t>{2, 2}));
  EXPECT_EQ(p.shrink_to(0), (std::pair<int64_t, int64_t>{0, 2}));
  EXPECT_EQ(p.pages(), 0);
  // a granularity above the allocator's 2 MiB pages: a 2 MiB commit maps a whole 4 MiB page
  es::VmmPages big(4 * MiB);
  EXPECT_EQ(big.grow_to(2 * MiB), (std::pair<int64_t, int64_t>{0, 1}));
  EXPECT_EQ(big.grow_to(4 * MiB), (std::pair<int64_t, int64_t>{1, 1}));
  EXPECT_EQ(big.grow_to(6 * MiB), (std::pair<int64_t, int64_t>{1, 2}));
  EXPECT_EQ(big.round_up(6 * MiB + 1), 8 * MiB);
  EXPECT_THROW(es::VmmPages(0), std::invalid_argument);
}

namespace {
// A segment source on host memory that logs what the allocator asks of it.
class LoggingSource final : public es::SegmentSource {
 public:
  std::vector<std::string> log;
  const char* name() const override { return "logging"; }
  void* map(int64_t bytes) override {
    log.push_back("map " + std::to_string(bytes));
    return host()->map(bytes);
  }
  void unmap(void* p, int64_t bytes) override {
    log.push_back("unmap " + std::to_string(bytes));
    host()->unmap(p, bytes);
  }
  void* reserve_range(int64_t bytes) override {
    log.push_back("reserve " + std::to_string(bytes));
    return host()->reserve_range(bytes);
  }
  bool commit(void* base, int64_t from, int64_t to) override {
    log.push_back("commit " + std::to_string(from) + " " + std::to_string(to));
    return host()->commit(base, from, to);
  }
  void decommit(void* base, int64_t from, int64_t to) override {
    log.push_back("decommit " + std::to_string(from) + " " + std::to_string(to));
    host()->decommit(base, from, to);
  }
  void release_range(void* base, int64_t bytes) override {
    log.push_back("release " + std::to_string(bytes));
    host()->release_range(base, bytes);
  }

 private:
  static es::SegmentSource* host() { return es::host_segment_source().get(); }
};
}  // namespace

TEST(SegmentSource, CachingAndExpandableGetTheirMemoryFromTheSource) {
  constexpr int64_t MiB = 1 << 20;
  auto src = std::make_shared<LoggingSource>();
  {
    auto a = es::DeviceAllocator::create({es::AllocatorKind::caching, 64 * MiB, 0, true}, src);
    const es::Allocation x = a->allocate(1000, "kjt");  // small pool: one 2 MiB segment
    static_cast<char*>(x.ptr)[999] = 1;                  // real memory
    a->free(x);
    a->empty_cache();
  }
  EXPECT_EQ(src->log, (std::vector<std::string>{"map 2097152", "unmap 2097152"}));
  src->log.clear();
  {
    // the large pool's range: 64 MiB + 1/8 = 72 MiB, in 20 MiB pages: 80 MiB reserved as addresses
    auto a = es::DeviceAllocator::create({es::AllocatorKind::expandable, 64 * MiB, 0, true}, src);
    const es::Allocation x = a->allocate(3 * MiB, "weights");  // page [0, 20 MiB); 17 MiB left free
    static_cast<char*>(x.ptr)[3 * MiB - 1] = 1;
    // 40 MiB: the free 17 MiB at 3 MiB and two more pages, [20, 60 MiB); 17 MiB left at 43 MiB
    const es::Allocation y = a->allocate(40 * MiB, "weights");
    static_cast<char*>(y.ptr)[40 * MiB - 1] = 1;
    const es::Allocation z = a->allocate(3 * MiB, "kjt");  // at 43 MiB, from the free 17 MiB
    a->free(y);
    a->empty_cache();  // free [3, 43 MiB): its one whole page [20, 40 MiB) is unmapped, a hole
    // 20 MiB: the free 17 MiB at 3 MiB and the hole after it hold it; the hole's page is mapped again
    const es::Allocation w = a->allocate(20 * MiB, "activations");
    static_cast<char*>(w.ptr)[20 * MiB - 1] = 1;
    a->free(x);
    a->free(z);
    a->free(w);
    a->empty_cache();  // all 60 MiB free: unmapped, and the range goes back
  }
  EXPECT_EQ(src->log, (std::vector<std::string>{"reserve 83886080", "commit 0 20971520", "commit 20971520 62914560",
                                                "decommit 20971520 41943040", "commit 20971520 41943040",
                                                "decommit 0 62914560", "release 83886080"}));
  EXPECT_THROW(es::DeviceAllocator::create({es::AllocatorKind::cuda_async, 64 * MiB, 0, true}), std::invalid_argument);
}

namespace {
// The figures a cuda_async pool reports (allocated = used, reserved = the pool's), without a
// device: how its OOM is explained.
class FakePool final : public es::DeviceAllocator {
 public:
  FakePool(int64_t capacity, int64_t used, int64_t reserved)
      : DeviceAllocator({es::AllocatorKind::cuda_async, capacity, 0, true}), used_(used), reserved_(reserved) {}
  es::Allocation allocate(int64_t bytes, const std::string& tag) override { throw out_of_memory(bytes, tag); }
  void free(const es::Allocation&) override {}
  void empty_cache() override {}
  es::MemoryStats stats() const override {
    es::MemoryStats st;
    st.capacity = config_.capacity_bytes;
    st.allocated = used_;
    st.reserved = reserved_;
    es::fragmentation_of(snapshot(), st);
    return st;
  }
  int64_t allocated_bytes() const override { return used_; }
  int64_t reserved_bytes() const override { return reserved_; }
  std::vector<es::SegmentInfo> snapshot() const override {
    return {{0x1000, reserved_, false, {{0x1000, used_, used_, true, "weights"}, {0x1000 + used_, reserved_ - used_, 0, false, ""}}}};
  }

 private:
  int64_t used_, reserved_;
};
}  // namespace

TEST(CudaAsyncOom, CapacityOrPoolFragmentationByFreeBytesAgainstTheRequest) {
  constexpr int64_t MiB = 1 << 20;
  FakePool pool(100 * MiB, 90 * MiB, 96 * MiB);
  try {
    pool.allocate(20 * MiB, "kjt");
    FAIL();
  } catch (const es::DeviceOutOfMemory& e) {
    EXPECT_FALSE(e.fragmentation);
    EXPECT_EQ(e.free_bytes, 10 * MiB);
    EXPECT_NE(std::string(e.what()).find("capacity: only 10.0 MiB of the device are free (capacity 100.0 MiB - allocated "
                                         "90.0 MiB)"),
              std::string::npos)
        << e.what();
  }
  try {
    pool.allocate(5 * MiB, "kjt");
    FAIL();
  } catch (const es::DeviceOutOfMemory& e) {
    EXPECT_TRUE(e.fragmentation);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("out of memory allocating 5.0 MiB for kjt (cuda_async allocator): pool fragmentation: 10.0 MiB "
                       "are free, but the cudaMallocAsync pool (reserved 96.0 MiB) could not place 5.0 MiB in one piece"),
              std::string::npos)
        << msg;
    EXPECT_EQ(msg.find("max_split_size"), std::string::npos) << "no advice for a setting the pool does not have";
    EXPECT_NE(msg.find("most memory held by weights 90.0 MiB"), std::string::npos) << msg;
  }
}

// On an arena of GPU memory a DeviceBuffer's block is the device copy and data() a host copy
// of the same size (here the "GPU" is host memory, so both can be checked).
TEST(DeviceBuffer, OnAGpuArenaTheBlockIsTheDeviceCopyAndDataAHostCopy) {
  constexpr int64_t MiB = 1 << 20;
  es::DeviceArena arena(0, es::DeviceAllocator::create({es::AllocatorKind::caching, 64 * MiB, 0, true}), true);
  ASSERT_TRUE(arena.device_memory());
  {
    es::DeviceBuffer<float> b(&arena, "weights");
    b.assign(1000, 2.0f);  // 4000 bytes, a 4096-byte block
    EXPECT_NE(static_cast<void*>(b.data()), static_cast<void*>(b.device_data()));
    EXPECT_EQ(b.data()[999], 2.0f);
    EXPECT_EQ(arena.in_use(), 4096);
    b.assign(10);  // smaller: the block is kept
    EXPECT_EQ(arena.in_use(), 4096);
    EXPECT_EQ(b.size(), 10u);
    b.assign(2000);  // larger: a new block, the old one freed
    EXPECT_EQ(arena.in_use(), 8192);
    es::DeviceBuffer<float> c = std::move(b);
    EXPECT_EQ(arena.in_use(), 8192);
    EXPECT_EQ(c.size(), 2000u);
    EXPECT_THROW(arena.compact(), std::logic_error);
  }
  EXPECT_EQ(arena.in_use(), 0);
}

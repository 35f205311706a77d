// The host-memory check before a run (exec/host_memory_check.h): the cpu backend counts every
// rank's device memory (it is host memory), the cuda backend what it keeps on the host (host
// copies of the dense part and the step's buffers; none of the weights or optimizer state), both
// against 90% of the machine. Exact texts, hand-computed bytes.
#include <gtest/gtest.h>

#include "embedscope/engine/exec/host_memory_check.h"

namespace es = embedscope::engine;
namespace esd = embedscope::engine::detail;

namespace {
constexpr int64_t kHmGiB = int64_t{1} << 30, kHmMiB = int64_t{1} << 20;
// two ranks of 1 GiB weights, 1 GiB optimizer state, 512 MiB dense, 512 MiB buffers
std::vector<es::DeviceMemoryEstimate> hm_two_ranks() {
  std::vector<es::DeviceMemoryEstimate> est(2);
  for (int r = 0; r < 2; ++r) {
    auto& e = est[static_cast<size_t>(r)];
    e.rank = r;
    e.weights = kHmGiB;
    e.optimizer_state = kHmGiB;
    e.dense = 512 * kHmMiB;
    e.buffers = 512 * kHmMiB;
  }
  return est;
}
es::WorkloadSpec hm_on(es::Backend b) {
  es::WorkloadSpec s;
  s.devices.count = 2;
  s.devices.backend = b;
  return s;
}
}  // namespace

TEST(HostMemoryCheck, BytesEachBackendKeepsOnTheHost) {
  es::DeviceMemoryEstimate e = hm_two_ranks()[0];
  e.host = 100;
  EXPECT_EQ(esd::host_bytes_of_rank(es::Backend::cpu, e), 3 * kHmGiB + 100);  // 1 + 1 + 0.5 + 0.5 GiB, host tables
  EXPECT_EQ(esd::host_bytes_of_rank(es::Backend::cuda, e), kHmGiB + 100);      // dense + buffers: no weights / state
  EXPECT_EQ(esd::host_bytes_of_rank(es::Backend::simulated, e), 0);
}

TEST(HostMemoryCheck, CpuBackendRefusedAboveNinetyPercentOfTheMachine) {
  // 2 x 3 GiB = 6 GiB > 0.9 x 6 GiB available (of 8 GiB)
  EXPECT_EQ(esd::host_memory_refusal(hm_on(es::Backend::cpu), hm_two_ranks(), -1, {8 * kHmGiB, 6 * kHmGiB}),
            "/devices: the cpu backend runs all 2 ranks in this process and they need 6.0 GiB in all, but this "
            "machine has 6.0 GiB available now (of 8.0 GiB; a run is refused above 90% of what is available); use "
            "fewer devices, a smaller batch or a scaled preset");
  EXPECT_EQ(esd::host_memory_refusal(hm_on(es::Backend::cpu), hm_two_ranks(), -1, {7 * kHmGiB, 7 * kHmGiB}), "");  // 6 <= 6.3
  EXPECT_EQ(esd::host_memory_refusal(hm_on(es::Backend::cpu), hm_two_ranks(), 1, {3 * kHmGiB, 3 * kHmGiB}),
            "/devices: the cpu backend runs rank 1 in this process and it needs 3.0 GiB in all, but this machine "
            "has 3.0 GiB available now (of 3.0 GiB; a run is refused above 90% of what is available); use fewer "
            "devices, a smaller batch or a scaled preset");
}

// tester45 F10: the guard reads what is available now, not the machine's total: 6 GiB of ranks on a
// 24 GiB machine of which other processes hold all but 5 GiB is refused (it was let through).
TEST(HostMemoryCheck, ComparesWithTheMemoryAvailableNowNotTheTotal) {
  EXPECT_EQ(esd::host_memory_refusal(hm_on(es::Backend::cpu), hm_two_ranks(), -1, {24 * kHmGiB, 5 * kHmGiB}),
            "/devices: the cpu backend runs all 2 ranks in this process and they need 6.0 GiB in all, but this "
            "machine has 5.0 GiB available now (of 24.0 GiB; a run is refused above 90% of what is available); use "
            "fewer devices, a smaller batch or a scaled preset");
  EXPECT_EQ(esd::host_memory_refusal(hm_on(es::Backend::cpu), hm_two_ranks(), -1, {24 * kHmGiB, 7 * kHmGiB}), "");
  EXPECT_EQ(esd::host_memory_refusal(hm_on(es::Backend::cpu), hm_two_ranks(), -1, {24 * kHmGiB, 0}), "");  // unknown
  // /proc/meminfo as this machine wrote it (kB): MemAvailable, not MemFree or MemTotal
  const es::HostMemory m = es::parse_meminfo(
      "MemTotal:       24683784 kB\nMemFree:          1630996 kB\nMemAvailable:   21538740 kB\nBuffers: 1 kB\n");
  EXPECT_EQ(m.total_bytes, int64_t{24683784} * 1024);
  EXPECT_EQ(m.available_bytes, int64_t{21538740} * 1024);
  EXPECT_EQ(es::parse_meminfo("MemTotal: 100 kB\nMemFree: 50 kB\n").available_bytes, 0);  // a kernel before 3.14
  EXPECT_EQ(es::parse_meminfo("garbage\n").total_bytes, 0);
  EXPECT_TRUE(es::fits_host_memory(9, {100, 10}));  // 9 <= 0.9 x 10
  EXPECT_FALSE(es::fits_host_memory(10, {100, 10}));
  const es::HostMemory here = es::this_host_memory();
  EXPECT_GT(here.total_bytes, 0);
  EXPECT_LE(here.available_bytes, here.total_bytes);
}

TEST(HostMemoryCheck, CudaBackendCountsItsHostCopiesAndIsRefusedWhenTheyDoNotFit) {
  // the same plan fits 6 GiB available on cuda (2 x 1 GiB of host copies) ...
  EXPECT_EQ(esd::host_memory_refusal(hm_on(es::Backend::cuda), hm_two_ranks(), -1, {6 * kHmGiB, 6 * kHmGiB}), "");
  // ... but not 2 GiB (2 GiB > 1.8 GiB): refused, no longer skipped for cuda
  EXPECT_EQ(esd::host_memory_refusal(hm_on(es::Backend::cuda), hm_two_ranks(), -1, {8 * kHmGiB, 2 * kHmGiB}),
            "/devices: the cuda backend keeps host copies of the dense part and the step's buffers of all 2 ranks "
            "in this process, they need 2.0 GiB in all, but this machine has 2.0 GiB available now (of 8.0 GiB; a run "
            "is refused above 90% of what is available); use fewer devices, a smaller batch or a scaled preset");
  EXPECT_EQ(esd::host_memory_refusal(hm_on(es::Backend::simulated), hm_two_ranks(), -1, {1, 1}), "");  // allocates nothing
  EXPECT_EQ(esd::host_memory_refusal(hm_on(es::Backend::cuda), hm_two_ranks(), -1, {0, 0}), "");       // machine size unknown
}

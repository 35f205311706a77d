// A segment source that refuses memory the allocator's capacity has room for (tester56 F9): the
// OOM says the source refused, not "fragmentation ... the 26.0 MiB of capacity not reserved
// cannot hold a new 2.0 MiB run of pages" (26 MiB holds 2 MiB). The host source's refusals (an
// address-space limit, `ulimit -v`, on the expandable allocator's 1 1/8-capacity ranges) are
// HostMemoryError naming mmap and the limit, not a device OOM. Sizes hand-computed below.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <string>

#include "embedscope/engine/memory/allocator.h"
#include "embedscope/sessions/model/units.h"

using namespace embedscope::engine;

namespace {

constexpr int64_t kS56MiB = int64_t{1} << 20;
constexpr int64_t kS56KiB = int64_t{1} << 10;

// Host memory, but at most `budget` bytes of segments and committed pages at once: a GPU with
// less free memory than the allocator's capacity (cudaMalloc / cuMemCreate out of memory).
class BudgetSource final : public SegmentSource {
 public:
  explicit BudgetSource(int64_t budget) : budget_(budget) {}
  const char* name() const override { return "budget"; }
  void* map(int64_t bytes) override {
    if (used_ + bytes > budget_) return nullptr;
    used_ += bytes;
    return host_->map(bytes);
  }
  void unmap(void* p, int64_t bytes) override {
    used_ -= bytes;
    host_->unmap(p, bytes);
  }
  void* reserve_range(int64_t bytes) override { return host_->reserve_range(bytes); }
  bool commit(void* base, int64_t from, int64_t to) override {
    if (used_ + (to - from) > budget_) return false;
    used_ += to - from;
    return host_->commit(base, from, to);
  }
  void decommit(void* base, int64_t from, int64_t to) override {
    used_ -= to - from;
    host_->decommit(base, from, to);
  }
  void release_range(void* base, int64_t bytes) override { host_->release_range(base, bytes); }

 private:
  int64_t budget_, used_ = 0;
  std::shared_ptr<SegmentSource> host_ = host_segment_source();
};

DeviceOutOfMemory s56_oom(DeviceAllocator& a, int64_t bytes, const std::string& tag) {
  try {
    a.allocate(bytes, tag);
  } catch (const DeviceOutOfMemory& e) {
    return e;
  }
  ADD_FAILURE() << "no out of memory for " << bytes << " B";
  return DeviceOutOfMemory("none", true, 0, 0, 0);
}

}  // namespace

// Expandable, capacity 64 MiB, the source gives 40 MiB. 30 MiB of weights map two 20 MiB pages
// of the large pool (reserved 40 MiB, a 10 MiB free tail). A 32 KiB kjt needs a 2 MiB page of
// the small pool: 40 + 2 <= 64, so the capacity has room (24 MiB not reserved), but the source
// refuses the page (42 > 40). Free bytes: 64 - 30 = 34 MiB. The old message called it
// fragmentation: "the 24.0 MiB of capacity not reserved cannot hold a new 2.0 MiB run of pages".
TEST(Scen56SourceRefusal, ExpandablePagesTheSourceRefusesAreNotFragmentation) {
  auto a = DeviceAllocator::create({AllocatorKind::expandable, 64 * kS56MiB, 0, true},
                                   std::make_shared<BudgetSource>(40 * kS56MiB));
  a->allocate(30 * kS56MiB, "weights");
  EXPECT_EQ(a->stats().reserved, 40 * kS56MiB);
  const DeviceOutOfMemory e = s56_oom(*a, 32 * kS56KiB, "kjt");
  EXPECT_FALSE(e.fragmentation);
  EXPECT_EQ(e.requested, 32 * kS56KiB);
  EXPECT_EQ(e.free_bytes, 34 * kS56MiB);
  EXPECT_EQ(e.largest_free_block, 10 * kS56MiB);
  EXPECT_EQ(std::string(e.what()),
            "out of memory allocating 32.0 KiB for kjt (expandable allocator): the device's memory: the 24.0 MiB of "
            "capacity not reserved would hold a new 2.0 MiB run of pages for it, but budget refused to map 2.0 MiB of "
            "pages: the memory this capacity counts on is not free (another process or context holds it). Allocated "
            "30.0 MiB, reserved 40.0 MiB of 64.0 MiB; largest free block 10.0 MiB; most memory held by weights "
            "30.0 MiB. Advice: give the device a capacity (devices.memory_bytes) of at most the memory it has free, "
            "or free what else holds its memory");
  // nothing changed: the small pool's empty range went back, reserved is the large pool's 40 MiB
  EXPECT_EQ(a->stats().reserved, 40 * kS56MiB);
  EXPECT_EQ(a->snapshot().size(), 1u);
}

// Caching, capacity 64 MiB, the source gives 40 MiB. 30 MiB (>= 10 MiB: its own segment, 30 MiB
// rounded to 2 MiB) fits; 12 MiB needs a new 12 MiB segment: 30 + 12 <= 64 but > 40. The old
// message: "fragmentation: 34.0 MiB are free, but the largest free block is 0 B, and the 34.0 MiB
// of capacity not reserved cannot hold a new 12.0 MiB segment for it".
TEST(Scen56SourceRefusal, CachingSegmentsTheSourceRefusesAreNotFragmentation) {
  auto a = DeviceAllocator::create({AllocatorKind::caching, 64 * kS56MiB, 0, true},
                                   std::make_shared<BudgetSource>(40 * kS56MiB));
  a->allocate(30 * kS56MiB, "weights");
  const DeviceOutOfMemory e = s56_oom(*a, 12 * kS56MiB, "activations");
  EXPECT_FALSE(e.fragmentation);
  EXPECT_EQ(e.free_bytes, 34 * kS56MiB);
  EXPECT_EQ(e.largest_free_block, 0);
  const std::string msg = e.what();
  EXPECT_NE(msg.find("(caching allocator): the device's memory: the 34.0 MiB of capacity not reserved would hold a new "
                     "12.0 MiB segment for it, but budget refused a new 12.0 MiB segment: "),
            std::string::npos)
      << msg;
  EXPECT_EQ(msg.find("fragmentation"), std::string::npos) << msg;
}

// The capacity itself refuses first (40 + 2 > 41 MiB), before the source is asked: the
// fragmentation message as before (free bytes 41 - 30 = 11 MiB, 41 - 40 = 1 MiB not reserved).
TEST(Scen56SourceRefusal, ACapacityRefusalIsStillFragmentation) {
  auto a = DeviceAllocator::create({AllocatorKind::expandable, 41 * kS56MiB, 0, true},
                                   std::make_shared<BudgetSource>(40 * kS56MiB));
  a->allocate(30 * kS56MiB, "weights");
  const DeviceOutOfMemory e = s56_oom(*a, 32 * kS56KiB, "kjt");
  EXPECT_TRUE(e.fragmentation);
  EXPECT_EQ(e.free_bytes, 11 * kS56MiB);
  const std::string msg = e.what();
  EXPECT_NE(msg.find("fragmentation: 11.0 MiB are free, but requests up to 1 MiB come from the small pool, whose "
                     "largest free block is 0 B (the largest free block of the other pool, 10.0 MiB, cannot serve "
                     "them), and the 1.0 MiB of capacity not reserved cannot hold a new 2.0 MiB run of pages for it"),
            std::string::npos)
      << msg;
}

// The host source under an address-space limit (a child process: RLIMIT_AS is per process). The
// expandable allocator of a 1 GiB device reserves 1 GiB + 1/8 = 1152 MiB for the small pool's
// range (a multiple of its 2 MiB pages); with 256 MiB of address space left mmap fails. Before:
// a DeviceOutOfMemory "fragmentation ... capacity not reserved cannot hold a new 2.0 MiB run of
// pages" for a 4 KiB request on an empty device.
TEST(Scen56SourceRefusal, TheHostSourcesAddressSpaceLimitIsAHostErrorNamingIt) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    std::string out;
    auto a = DeviceAllocator::create({AllocatorKind::expandable, 1024 * kS56MiB, 0, true});
    // the limit: what is in use now and 256 MiB, rounded to a MiB
    const int64_t limit = (address_space_in_use() + 256 * kS56MiB) / kS56MiB * kS56MiB;
    rlimit r{static_cast<rlim_t>(limit), static_cast<rlim_t>(limit)};
    setrlimit(RLIMIT_AS, &r);
    try {
      a->allocate(4 * kS56KiB, "kjt");
      out = "none|";
    } catch (const HostMemoryError& e) {
      out = std::to_string(limit) + "|HostMemoryError|" + e.what();
    } catch (const DeviceOutOfMemory& e) {
      out = std::to_string(limit) + "|DeviceOutOfMemory|" + e.what();
    } catch (const std::exception& e) {
      out = std::to_string(limit) + "|other|" + e.what();
    }
    (void)!write(fds[1], out.data(), out.size());
    _exit(0);
  }
  close(fds[1]);
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << got;
  const auto bar = got.find('|');
  ASSERT_NE(bar, std::string::npos) << got;
  const int64_t limit = std::stoll(got.substr(0, bar));
  const std::string rest = got.substr(bar + 1);
  ASSERT_EQ(rest.rfind("HostMemoryError|", 0), 0u) << rest;
  const std::string msg = rest.substr(16);
  EXPECT_EQ(msg.rfind("expandable allocator, the small pool's address range of 1.1 GiB for stream 0 (1 1/8 of the "
                      "device's 1.0 GiB, as PyTorch's expandable segments reserve): host memory: mmap of 1.1 GiB (an "
                      "address range, PROT_NONE) failed: Cannot allocate memory; this process's address space is "
                      "limited to " +
                          embedscope::sessions::format_bytes(limit) + " (ulimit -v) and ",
                      0),
            0u)
      << msg;
  EXPECT_NE(msg.find(" of it is in use"), std::string::npos) << msg;
}

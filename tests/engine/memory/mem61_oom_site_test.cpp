// A run's OOM advice names the action a replayed setting ran out at as a user can find it in the
// run: its step, its op (the innermost profiler span open when it was logged) and the bytes asked,
// with its index in the rank's log ("OOM at step 3, embedding_backward, asking 6.0 MiB (action 7
// of rank 0's log)"), not the index alone.
#include <gtest/gtest.h>

#include <string>

#include "embedscope/engine/memory/memory.h"
#include "embedscope/profiler/cpu/tracer.h"

using namespace embedscope::engine;
namespace prof = embedscope::profiler;
namespace ss = embedscope::sessions;

namespace {
constexpr int64_t kSiteMiB = int64_t{1} << 20;
}

// 26 MiB caching device (tester59's figures): four 4 MiB blocks in one 20 MiB segment and a 1000 B
// block in a 2 MiB small segment (step 0, lookup), the first and third 4 MiB blocks freed outside
// any op; then 6 MiB in step 3's embedding_backward: 22 MiB reserved + a new 20 MiB segment > 26,
// with 26 - 8 MiB - 1 KiB free: a fragmentation OOM. The replays: expandable needs another 20 MiB
// page and caching with max_split_size 20 MiB another segment (both fail at the request, action 7:
// actions 0-4 the allocations, 5-6 the frees); direct holds 8 MiB + 1 KiB + 6 MiB and completes.
TEST(Mem61OomSite, AdviceSaysStepOpAndBytesOfTheFailedAction) {
  AllocatorConfig c;
  c.kind = AllocatorKind::caching;
  c.capacity_bytes = 26 * kSiteMiB;
  c.back_with_memory = false;
  DeviceArena arena(0, c);
  prof::Tracer tracer(1, false);
  std::vector<Allocation> a;
  {
    prof::ScopedSpan span(tracer, 0, ss::Lane::compute, ss::OpCategory::lookup, "lookup", 0);
    for (int i = 0; i < 4; ++i) a.push_back(arena.allocate("weights", 4 * kSiteMiB));
    a.push_back(arena.allocate("kjt", 1000));
  }
  arena.release(a[0]);
  arena.release(a[2]);
  EXPECT_EQ(arena.describe_action(0), "step 0, lookup, asking 4.0 MiB (action 0 of rank 0's log)");
  EXPECT_EQ(arena.describe_action(5), "freeing a block outside any op (action 5 of rank 0's log)");
  std::string msg;
  {
    prof::ScopedSpan step(tracer, 0, ss::Lane::compute, ss::OpCategory::other, "train_step", 3);
    prof::ScopedSpan op(tracer, 0, ss::Lane::compute, ss::OpCategory::lookup, "embedding_backward", 3);
    EXPECT_EQ(arena.describe_action(7, 6 * kSiteMiB),
              "step 3, embedding_backward, asking 6.0 MiB (action 7 of rank 0's log)");
    try {
      arena.allocate("gradients", 6 * kSiteMiB);
      ADD_FAILURE() << "6 MiB fit";
    } catch (const OomError& e) {
      msg = e.what();
    }
  }
  EXPECT_EQ(prof::ScopedSpan::innermost(), nullptr);
  EXPECT_NE(msg.find("only direct (peak reserved 16.0 MiB; one segment per allocation"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expandable_segments and caching with max_split_size 20.0 MiB do not (OOM at step 3, "
                     "embedding_backward, asking 6.0 MiB (action 7 of rank 0's log))"),
            std::string::npos)
      << msg;
  EXPECT_EQ(msg.find("(OOM at action"), std::string::npos) << msg;
}

// The warm-up's steps are recorded as -N .. -1; the advice names them as the run's output does
// ("step -1" meant nothing to a user): with 2 warm-up steps, step -2 is the first of 2, -1 the
// second; an arena that was not told the count still says it was the warm-up.
TEST(Mem61OomSite, WarmUpStepsAreNamedAsTheWarmUp) {
  AllocatorConfig c;
  c.kind = AllocatorKind::caching;
  c.capacity_bytes = 26 * kSiteMiB;
  c.back_with_memory = false;
  DeviceArena arena(1, c);
  arena.set_warmup_steps(2);
  prof::Tracer tracer(1, false);
  std::vector<Allocation> a;
  for (int64_t step : {-2, -1}) {
    prof::ScopedSpan span(tracer, 0, ss::Lane::compute, ss::OpCategory::lookup, "lookup", step);
    a.push_back(arena.allocate("kjt", 2 * kSiteMiB));
  }
  EXPECT_EQ(arena.describe_action(0), "warm-up step 1 of 2, lookup, asking 2.0 MiB (action 0 of rank 1's log)");
  EXPECT_EQ(arena.describe_action(1), "warm-up step 2 of 2, lookup, asking 2.0 MiB (action 1 of rank 1's log)");
  arena.set_warmup_steps(0);
  EXPECT_EQ(arena.describe_action(0), "warm-up step (step -2), lookup, asking 2.0 MiB (action 0 of rank 1's log)");
}

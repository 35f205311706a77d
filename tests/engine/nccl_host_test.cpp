// Host-side parts of the NCCL path that need no device (built with EMBEDSCOPE_WITH_CUDA).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <thread>

#include <unistd.h>

#include "embedscope/engine/comm/nccl_comm.h"

using namespace embedscope::engine;

namespace {
std::filesystem::path fresh_dir(const char* name) {
  auto d = std::filesystem::temp_directory_path() / (std::string(name) + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  return d;
}
}  // namespace

TEST(NcclUniqueId, RankZeroPublishesAndTheOthersReadTheSameId) {
  const auto dir = fresh_dir("embedscope_nccl_id");
  ncclUniqueId got1{}, got2{};
  std::thread t1([&] { got1 = exchange_nccl_unique_id(dir.string(), "world", 1, std::chrono::milliseconds(20000)); });
  std::thread t2([&] { got2 = exchange_nccl_unique_id(dir.string(), "world", 2, std::chrono::milliseconds(20000)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the readers wait for rank 0
  const ncclUniqueId id0 = exchange_nccl_unique_id(dir.string(), "world", 0, std::chrono::milliseconds(20000));
  t1.join();
  t2.join();
  EXPECT_EQ(std::memcmp(id0.internal, got1.internal, sizeof(id0.internal)), 0);
  EXPECT_EQ(std::memcmp(id0.internal, got2.internal, sizeof(id0.internal)), 0);
  ncclUniqueId zero{};
  EXPECT_NE(std::memcmp(id0.internal, zero.internal, sizeof(id0.internal)), 0);
  std::filesystem::remove_all(dir);
}

TEST(NcclUniqueId, MissingRankZeroTimesOutNamingKeyAndStore) {
  const auto dir = fresh_dir("embedscope_nccl_missing");
  try {
    exchange_nccl_unique_id(dir.string(), "node1", 3, std::chrono::milliseconds(200));
    FAIL() << "no CollectiveError";
  } catch (const CollectiveError& e) {
    EXPECT_TRUE(e.timed_out);
    EXPECT_EQ(e.missing_ranks, std::vector<int>{0});
    EXPECT_NE(std::string(e.what()).find("NCCL unique id 'node1' did not appear in store " + dir.string() +
                                         " within 200 ms"),
              std::string::npos)
        << e.what();
  }
  std::filesystem::remove_all(dir);
}

TEST(NcclVersion, IsTheLinkedLibrarys) {
  // NCCL_VERSION_CODE of the header we compiled against: X*10000 + Y*100 + Z.
  const std::string expected = std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) + "." +
                               std::to_string(NCCL_PATCH);
  EXPECT_EQ(nccl_version(), expected);
}

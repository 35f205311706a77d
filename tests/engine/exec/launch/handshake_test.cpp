// The start of a run of one rank per process (exec/launch/handshake.h) over a real gloo
// FileStore in a scratch directory, each rank a thread here: the claim, the digest check, the
// arrival timeout and the clock offset.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <future>
#include <thread>

#include "embedscope/engine/workload/spec_error.h"
#include "exec/launch/handshake.h"
#include "exec/launch/store.h"
#include "support/redis_server.h"

using embedscope::engine::SpecError;
namespace launch = embedscope::engine::launch;
using nlohmann::json;

namespace {
std::string fresh_dir(const std::string& name) {
  const auto d = std::filesystem::temp_directory_path() / ("es_hs_" + std::to_string(getpid()) + "_" + name);
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return "file://" + d.string();
}
const json kDoc{{"workload", {{"batch_size", 8}, {"tables", {{{"name", "t0"}, {"num_embeddings", 10}}}}}},
                {"plan", {{"world_size", 2}}}};
std::string handshake_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const SpecError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Handshake, Fnv1a64MatchesTheReferenceValues) {
  // FNV-1a 64 test vectors (Fowler/Noll/Vo): "" -> cbf29ce484222325, "a" -> af63dc4c8601ec8c
  EXPECT_EQ(launch::fnv1a64_hex(""), "cbf29ce484222325");
  EXPECT_EQ(launch::fnv1a64_hex("a"), "af63dc4c8601ec8c");
  EXPECT_EQ(launch::fnv1a64_hex("foobar"), "85944171f73967e8");
}

TEST(Handshake, FirstDifferenceNamesThePointer) {
  json b = kDoc;
  b["workload"]["tables"][0]["num_embeddings"] = 20;
  EXPECT_EQ(launch::first_difference(kDoc, b), "/workload/tables/0/num_embeddings: 10 vs 20");
  json c = kDoc;
  c["workload"].erase("batch_size");
  EXPECT_EQ(launch::first_difference(kDoc, c), "/workload/batch_size: 8 vs missing");
  EXPECT_EQ(launch::first_difference(kDoc, kDoc), "");
}

TEST(Handshake, TwoRanksAgreeAndMeasureTheirClocks) {
  const std::string url = fresh_dir("ok");
  launch::RunStore s0(url, "run1"), s1(url, "run1");
  auto r1 = std::async(std::launch::async, [&] { return launch::handshake(s1, 1, 2, kDoc, std::chrono::seconds(10)); });
  const auto h0 = launch::handshake(s0, 0, 2, kDoc, std::chrono::seconds(10));
  const auto h1 = r1.get();
  EXPECT_EQ(h0.digest, launch::fnv1a64_hex(kDoc.dump()));
  EXPECT_EQ(h0.digest, h1.digest);
  EXPECT_EQ(h0.clock_offset_ns, 0);
  // one clock: the offset is within the measurement's uncertainty (plus a ms of slack for rounding)
  EXPECT_LE(std::llabs(h1.clock_offset_ns), h1.clock_uncertainty_ns + 1'000'000);
  EXPECT_GT(h1.clock_uncertainty_ns, 0);
  // the keys sit under the run id: a second run in the same directory with another id starts afresh
  launch::RunStore t0(url, "run2"), t1(url, "run2");
  auto r2 = std::async(std::launch::async, [&] { return launch::handshake(t1, 1, 2, kDoc, std::chrono::seconds(10)); });
  EXPECT_NO_THROW(launch::handshake(t0, 0, 2, kDoc, std::chrono::seconds(10)));
  EXPECT_NO_THROW(r2.get());
}

TEST(Handshake, AStaleClaimOfTheSameRunIdIsRefused) {
  const std::string url = fresh_dir("stale");
  launch::RunStore s(url, "same");
  s.set("claim/0", "oldhost:42:00");
  launch::RunStore again(url, "same");
  EXPECT_EQ(handshake_error_of([&] { launch::handshake(again, 0, 2, kDoc, std::chrono::milliseconds(200)); }),
            "rendezvous " + url + " (run id same): rank 0 is claimed already by oldhost:42:00: two processes were "
            "given rank 0, or an earlier run with this run id left its keys there; give every process its own rank, "
            "and a fresh --run-id or an empty directory");
}

TEST(Handshake, AMissingRankTimesOutNamingIt) {
  const std::string url = fresh_dir("missing");
  launch::RunStore s(url, "r");
  const auto t0 = std::chrono::steady_clock::now();
  const std::string e = handshake_error_of([&] { launch::handshake(s, 1, 3, kDoc, std::chrono::milliseconds(300)); });
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(e, "rendezvous " + url + " (run id r): rank(s) 0, 2 of 3 did not arrive within 300 ms (this is rank 1); "
               "start every rank with the same --rendezvous and --run-id");
}

TEST(Handshake, ADifferentWorkloadIsRefusedOnBothRanksNamingTheField) {
  const std::string url = fresh_dir("digest");
  json other = kDoc;
  other["workload"]["batch_size"] = 16;
  launch::RunStore s0(url, "d"), s1(url, "d");
  auto e1 = std::async(std::launch::async,
                       [&] { return handshake_error_of([&] { launch::handshake(s1, 1, 2, other, std::chrono::seconds(10)); }); });
  const std::string e0 = handshake_error_of([&] { launch::handshake(s0, 0, 2, kDoc, std::chrono::seconds(10)); });
  const std::string d0 = launch::fnv1a64_hex(kDoc.dump()), d1 = launch::fnv1a64_hex(other.dump());
  EXPECT_EQ(e0, "rendezvous " + url + " (run id d): rank 1's workload and plan differ from rank 0's (digest " + d0 +
                    " vs " + d1 + "): first at /workload/batch_size: 8 vs 16 (rank 0 vs rank 1); every rank must run "
                    "the same workload, flags and plan");
  EXPECT_EQ(e1.get(), "rendezvous " + url + " (run id d): rank 0's workload and plan differ from rank 1's (digest " +
                          d1 + " vs " + d0 + "): first at /workload/batch_size: 16 vs 8 (rank 1 vs rank 0); every rank "
                          "must run the same workload, flags and plan");
}

TEST(Handshake, RedisUrlsParse) {
  const auto a = launch::parse_rendezvous_url("redis://10.0.0.5:7000/jobs/42/");
  EXPECT_EQ(a.scheme, "redis");
  EXPECT_EQ(a.host, "10.0.0.5");
  EXPECT_EQ(a.port, 7000);
  EXPECT_EQ(a.path, "jobs/42");
  const auto b = launch::parse_rendezvous_url("redis://head");
  EXPECT_EQ(b.host, "head");
  EXPECT_EQ(b.port, 6379);
  EXPECT_EQ(b.path, "");
  EXPECT_EQ(handshake_error_of([] { launch::parse_rendezvous_url("redis://h:0"); }), "--rendezvous redis://h:0: port '0' is not 1..65535");
  EXPECT_EQ(handshake_error_of([] { launch::parse_rendezvous_url("redis://:6379"); }), "--rendezvous redis://:6379: no host after redis://");
}

// The same handshake over a RedisStore (a redis-server of the test's own on loopback).
TEST(Handshake, TwoRanksAgreeOverRedisAndAStaleClaimIsRefused) {
  if (!embedscope::test_support::RedisServer::installed()) GTEST_SKIP() << "redis-server is not installed (.ci/setup installs it)";
  embedscope::test_support::RedisServer redis;
  ASSERT_TRUE(redis.running()) << "redis-server did not start on port " << redis.port();
  const std::string url = redis.url("hs");
  launch::RunStore s0(url, "r"), s1(url, "r");
  auto r1 = std::async(std::launch::async, [&] { return launch::handshake(s1, 1, 2, kDoc, std::chrono::seconds(10)); });
  const auto h0 = launch::handshake(s0, 0, 2, kDoc, std::chrono::seconds(10));
  EXPECT_EQ(r1.get().digest, h0.digest);
  launch::RunStore again(url, "r");
  EXPECT_NE(handshake_error_of([&] { launch::handshake(again, 1, 2, kDoc, std::chrono::milliseconds(200)); })
                .find("rank 1 is claimed already by"),
            std::string::npos);
}

TEST(Handshake, BadUrlsAndDirectoriesAreNamed) {
  EXPECT_EQ(handshake_error_of([] { launch::parse_rendezvous_url("tcp://127.0.0.1:6379"); }),
            "--rendezvous tcp://127.0.0.1:6379: the scheme 'tcp' is not supported; use file:///shared/dir (a "
            "directory every rank sees) or redis://host:port[/prefix]");
  EXPECT_EQ(handshake_error_of([] { launch::parse_rendezvous_url("/tmp/x"); }),
            "--rendezvous /tmp/x: not a URL; give file:///shared/dir or redis://host:port");
  const int port = embedscope::test_support::RedisServer::free_port();  // nothing listens there
  const std::string url = "redis://127.0.0.1:" + std::to_string(port);
  EXPECT_EQ(handshake_error_of([&] { launch::RunStore(url, "r"); }).rfind("--rendezvous " + url + ": cannot reach the Redis server at "
                                                               "127.0.0.1:" + std::to_string(port) + ": ", 0),
            0u);
  EXPECT_EQ(handshake_error_of([] { launch::RunStore("file:///nonexistent/es_dir", "r"); }),
            "--rendezvous file:///nonexistent/es_dir: /nonexistent/es_dir does not exist (create the directory, on a "
            "file system every rank sees)");
  EXPECT_EQ(handshake_error_of([] { launch::RunStore(fresh_dir("id"), "a/b"); }), "--run-id 'a/b': must be non-empty and hold no '/'");
}

// The Kineto export's record_param_comms element counts of an lm_embedding run's collectives
// (sessions/exporters/kineto_export.h): every all-reduce's "In msg nelems" / "Out msg nelems" is
// its buffer's element count on every rank, also where one rank's ring bytes fit count - 1 too
// (a count not divisible by the ranks); the sequence-parallel reduce-scatter and all-gather are
// their input and output tensors' elements, as PyTorch's _reduce_scatter_base / _allgather_base.
// The Chrome export (export_chrome_trace) writes the same counts on its record_param_comms spans.

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

#include "embedscope/engine/exec/lm_run.h"
#include "embedscope/sessions/exporters/export.h"
#include "embedscope/sessions/exporters/kineto_export.h"
#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"

namespace {

namespace es = embedscope::engine;
namespace ss = embedscope::sessions;
namespace ts = embedscope::test_support;
using nlohmann::json;

es::LmWorkloadSpec kineto_lm(bool sequence_parallel) {
  es::LmWorkloadSpec s;
  s.name = "kineto_lm";
  s.vocab_size = 1001;
  s.hidden_size = 16;
  s.sequence_length = sequence_parallel ? 33 : 32;
  s.micro_batch_size = 2;
  s.body_layers = 1;
  s.data_type = es::LmDataType::bf16;
  s.world_size = 3;
  s.sharding = es::LmSharding::vocab_parallel;
  s.sequence_parallel = sequence_parallel;
  s.steps = 1;
  return s;
}

// (Collective name, In msg nelems, Out msg nelems, dtype) of every record_param_comms of each rank
std::map<int, std::multiset<std::tuple<std::string, int64_t, int64_t, std::string>>> exported(const std::string& db) {
  const ss::SessionReader r(db);
  std::map<int, std::multiset<std::tuple<std::string, int64_t, int64_t, std::string>>> out;
  for (int rank = 0; rank < 3; ++rank) {
    std::ostringstream text;
    ss::export_kineto_rank(r, rank, text);
    const json j = json::parse(text.str());
    for (const json& e : j.at("traceEvents"))
      if (e.value("name", "") == "record_param_comms" && e.contains("args") && e["args"].contains("In msg nelems"))
        out[rank].insert(std::make_tuple(e["args"]["Collective name"].get<std::string>(),
                                         e["args"]["In msg nelems"].get<int64_t>(),
                                         e["args"]["Out msg nelems"].get<int64_t>(), e["args"]["dtype"].get<std::string>()));
  }
  return out;
}

// the same from the Chrome export (export_chrome_trace): its record_param_comms spans, each rank
// its pid, those of the measured steps (args "step" >= 0, as the Kineto export keeps)
std::map<int, std::multiset<std::tuple<std::string, int64_t, int64_t, std::string>>> chrome_exported(const std::string& db) {
  const ss::SessionReader r(db);
  std::ostringstream text;
  ss::export_chrome_trace(r, text);
  const json j = json::parse(text.str());
  std::map<int, std::multiset<std::tuple<std::string, int64_t, int64_t, std::string>>> out;
  for (const json& e : j.at("traceEvents"))
    if (e.value("name", "") == "record_param_comms" && e.contains("args") && e["args"].contains("In msg nelems") &&
        e["args"]["step"].get<int64_t>() >= 0)
      out[e["pid"].get<int>()].insert(std::make_tuple(e["args"]["Collective name"].get<std::string>(),
                                                      e["args"]["In msg nelems"].get<int64_t>(),
                                                      e["args"]["Out msg nelems"].get<int64_t>(),
                                                      e["args"]["dtype"].get<std::string>()));
  return out;
}

TEST(LmKinetoNelems, AllReducesOfACountNotDivisibleByTheRanks) {
  // T = 64 tokens, H 16, 3 ranks: embedding/all_reduce and output_projection/grad_all_reduce of
  // 64 x 16 = 1,024 bf16 (chunks 342 / 341 / 341: rank 0 sends 2 x 682 x 2 = 2,728 B, which
  // 1,023 elements also give it), the cross-entropy's three all-reduces of 64 fp32 (chunks 22 /
  // 21 / 21: rank 0's 336 B also fit 63)
  const auto dir = ts::fresh_scratch("lm_kineto_nelems");
  es::LmRunOptions o;
  o.session_path = (dir / "vp3.db").string();
  es::run_lm(kineto_lm(false), o);
  const auto got = exported(o.session_path);
  for (int rank = 0; rank < 3; ++rank) {
    SCOPED_TRACE(rank);
    const std::multiset<std::tuple<std::string, int64_t, int64_t, std::string>> want = {
        {"allreduce", 1024, 1024, "BFloat16"}, {"allreduce", 64, 64, "Float"}, {"allreduce", 64, 64, "Float"},
        {"allreduce", 64, 64, "Float"},       {"allreduce", 1024, 1024, "BFloat16"}};
    ASSERT_EQ(got.count(rank), 1u);
    EXPECT_EQ(got.at(rank), want);
  }
  // the Chrome export writes the same counts on every rank (it took each rank's own bytes:
  // 1,023 and 63 on rank 0)
  const auto chrome = chrome_exported(o.session_path);
  EXPECT_EQ(chrome.size(), 3u);
  for (int rank = 0; rank < 3; ++rank) {
    SCOPED_TRACE(rank);
    ASSERT_EQ(chrome.count(rank), 1u);
    EXPECT_EQ(chrome.at(rank), got.at(rank));
  }
}

TEST(LmKinetoNelems, SequenceParallelReduceScatterAndAllGather) {
  // S 33 x B 2 = 66 tokens, 22 a rank: embedding/reduce_scatter and output_projection/
  // grad_reduce_scatter in 66 x 16 = 1,056 bf16, out 352; sequence_parallel/all_gather and
  // embedding/grad_all_gather in 352, out 1,056; the cross-entropy's all-reduces of 66 fp32; the
  // body's gradient all-reduce of 16 x 16 + 16 = 272 fp32 (chunks 91 / 91 / 90: rank 1's
  // 2 x 181 x 4 = 1,448 B also fit 271)
  const auto dir = ts::fresh_scratch("lm_kineto_nelems_sp");
  es::LmRunOptions o;
  o.session_path = (dir / "sp3.db").string();
  es::run_lm(kineto_lm(true), o);
  const auto got = exported(o.session_path);
  for (int rank = 0; rank < 3; ++rank) {
    SCOPED_TRACE(rank);
    std::multiset<std::tuple<std::string, int64_t, int64_t, std::string>> want = {
        {"_reduce_scatter_base", 1056, 352, "BFloat16"}, {"_allgather_base", 352, 1056, "BFloat16"},
        {"allreduce", 66, 66, "Float"},                  {"allreduce", 66, 66, "Float"},
        {"allreduce", 66, 66, "Float"},                  {"_reduce_scatter_base", 1056, 352, "BFloat16"},
        {"_allgather_base", 352, 1056, "BFloat16"},      {"allreduce", 272, 272, "Float"}};
    ASSERT_EQ(got.count(rank), 1u);
    // Embedscope's split checks (an all-gather of 2 n int64 counts before each reduce-scatter)
    std::multiset<std::tuple<std::string, int64_t, int64_t, std::string>> mine;
    for (const auto& t : got.at(rank))
      if (std::get<3>(t) != "Long") mine.insert(t);
    EXPECT_EQ(mine, want);
    // the Chrome export's counts are the Kineto export's (the body's 272 one short on rank 1 before)
    const auto chrome = chrome_exported(o.session_path);
    ASSERT_EQ(chrome.count(rank), 1u);
    EXPECT_EQ(chrome.at(rank), got.at(rank));
  }
}

// the rule on its own: one rank's bytes can fit two counts, every member's together one
TEST(LmKinetoNelems, TheGroupsBytesTellTheCount) {
  std::vector<ss::CollectiveRecord> recs;
  for (int r = 0; r < 3; ++r) {
    ss::CollectiveRecord c;
    c.rank = r;
    c.op = "all_reduce";
    c.name = "embedding/all_reduce";
    c.group = "world";
    c.sequence = 7;
    c.dtype = "float32";
    c.peers = {0, 1, 2};
    c.bytes_sent = c.bytes_received = r == 0 ? 5456 : 5464;  // 1,024 floats: 2 x 682 x 4, 2 x 683 x 4
    recs.push_back(c);
  }
  EXPECT_EQ(ss::kineto_comm_args(recs[0]).in_nelems, 1023);  // 5,456 B fit 1,023 and 1,024 on rank 0
  const auto counts = ss::all_reduce_counts(recs);           // 16,384 B / (2 x 2 x 4) = 1,024
  ASSERT_EQ(counts.size(), 1u);
  EXPECT_EQ(counts.at({"world", 7}), 1024);
  for (const auto& c : recs) EXPECT_EQ(ss::kineto_comm_args(c, counts.at({"world", 7})).in_nelems, 1024);
  recs.pop_back();  // a member missing: not known from the group
  EXPECT_TRUE(ss::all_reduce_counts(recs).empty());
}

}  // namespace

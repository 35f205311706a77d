// tester50 F4: `export --format kineto` of a simulated session wrote each all-to-all's kernel with
// its split check's args (_allgather_base, 16 Long), so HTA and `import` saw every all-to-all as an
// 896 B all-gather (criteo: 5.7 MiB -> 7.0 KiB a step); a cpu session's collectives came back named
// by PyTorch's op (all_to_allv, ...). Now each collective of an engine session is its own kernel
// with its own args, and `import` names a record by the export's "embedscope collective": the round
// trip run -> export -> import keeps every collective's op, name, dtype and bytes a step (a
// simulated GPU run's split checks, of no duration, have no kernel and so no imported record).
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/store/session.h"
#include "import_test_support.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;
namespace s50k = embedscope::sessions;

// 2 tables 1000 x 64 fp32, batch 256 a rank, 2 ranks, table-wise: each rank's output dist sends
// its table's 256 x 64 pooled floats for the other rank's samples: 16,384 x 4 B = 65,536 B.
constexpr const char* kSim50Net = R"({
  "name": "net",
  "tables": [
    {"name": "ta", "num_embeddings": 1000, "embedding_dim": 64, "pooling": "sum", "feature_names": ["fa"]},
    {"name": "tb", "num_embeddings": 1000, "embedding_dim": 64, "pooling": "sum", "feature_names": ["fb"]}
  ],
  "features": [
    {"name": "fa", "pooling_factor": 1, "ids": "uniform"},
    {"name": "fb", "pooling_factor": 1, "ids": "uniform"}
  ],
  "batch_size": 256, "steps": 3, "warmup_steps": 1, "seed": 1,
  "devices": {"count": 2, "backend": "cpu", "memory_bytes": 67108864},
  "optimizer": {"type": "sgd", "learning_rate": 0.1},
  "dense": {"num_dense_features": 4, "bottom_mlp": [64], "interaction": "cat", "top_mlp": [16, 1]},
  "sharding": {"default": "table_wise"}
})";

struct Sim50Sum {
  int64_t count = 0, sent = 0, received = 0;
  std::string dtype;
  bool operator==(const Sim50Sum&) const = default;
};
using Sim50Key = std::tuple<int32_t, std::string, std::string>;  // rank, op, name

// The measured steps' collectives by (rank, op, name); the zero-duration records left out when asked.
std::map<Sim50Key, Sim50Sum> sim50_collectives(const std::string& db, bool drop_instant) {
  std::map<Sim50Key, Sim50Sum> out;
  const s50k::SessionReader r(db);
  for (const auto& c : r.collectives()) {
    if (c.step < 0 || (drop_instant && c.end_ns == c.start_ns)) continue;
    Sim50Sum& s = out[{c.rank, c.op, c.name}];
    ++s.count;
    s.sent += c.bytes_sent;
    s.received += c.bytes_received;
    s.dtype = c.dtype;
  }
  return out;
}

// run -> export --format kineto -> import, in `name`'s scratch folder; returns the two sessions.
std::pair<std::string, std::string> sim50_round_trip(const std::string& name, const std::string& run_flags) {
  const fs::path dir = s50k::testing::import_scratch() / ("sim50_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "net.json") << kSim50Net;
  const std::string run = (dir / "run.db").string(), back = (dir / "back.db").string();
  const auto cli = [&](const std::string& args) {
    const auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, dir);
    EXPECT_EQ(r.code, 0) << args << "\n" << r.out << r.err;
  };
  cli("run " + (dir / "net.json").string() + " " + run_flags + " -o " + run);
  cli("export " + run + " --format kineto -o " + (dir / "kin").string());
  cli("import " + (dir / "kin").string() + " -o " + back);
  return {run, back};
}

// The kernel (or, on cpu ranks, the record_param_comms span) of engine collective `name` in step 0.
nlohmann::json sim50_event_args(const fs::path& file, const std::string& cat, const std::string& name) {
  std::ifstream in(file);
  const nlohmann::json j = nlohmann::json::parse(in);
  for (const auto& e : j.at("traceEvents")) {
    if (e.value("cat", "") != cat || !e.contains("args")) continue;
    const auto& a = e.at("args");
    if (!a.contains("Collective name")) continue;  // a host comm op: its record_param_comms span has the args
    const std::string n = a.contains("embedscope name") ? a.at("embedscope name").get<std::string>()
                          : a.contains("embedscope collective") ? a.at("embedscope collective").get<std::string>()
                                                                : e.value("name", "");
    if (n == name && a.value("embedscope step", -1) == 0) return a;
  }
  return {};
}
}  // namespace

TEST(Sim50KinetoRoundTrip, SimulatedGpuRunKeepsEveryAllToAllsOwnArgsAndBytes) {
  const auto [run, back] = sim50_round_trip("gpu", "--simulate h100_sxm");
  const auto want = sim50_collectives(run, true), got = sim50_collectives(back, false);
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(got, want);
  // by hand: rank 0's output dist, 256 x 64 float32 to rank 1, 3 measured steps
  const Sim50Sum& out = want.at({0, "all_to_all", "output_dist/all_to_all"});
  EXPECT_EQ(out.count, 3);
  EXPECT_EQ(out.sent, 3 * 256 * 64 * 4);
  EXPECT_EQ(out.received, 3 * 256 * 64 * 4);
  EXPECT_EQ(out.dtype, "float32");
  // the split checks (no duration on a GPU profile) have no kernel, hence no imported record
  for (const auto& [key, s] : got) EXPECT_EQ(std::get<2>(key).find("/split_check"), std::string::npos);
  // the kernel HTA reads carries the all-to-all's own args, as PyTorch writes all_to_allv's
  const fs::path file = fs::path(run).parent_path() / "kin" / "rank_0.json";
  const nlohmann::json a = sim50_event_args(file, "kernel", "output_dist/all_to_all");
  ASSERT_FALSE(a.is_null());
  EXPECT_EQ(a.at("Collective name"), "all_to_allv");
  EXPECT_EQ(a.at("dtype"), "Float");
  EXPECT_EQ(a.at("In msg nelems"), 2 * 256 * 64);  // own slice included
  EXPECT_EQ(a.at("Out msg nelems"), 2 * 256 * 64);
  EXPECT_EQ(a.at("Group size"), 2);
  EXPECT_EQ(a.at("In split size"), nlohmann::json::array({256 * 64, 256 * 64}));
}

TEST(Sim50KinetoRoundTrip, CpuRunKeepsCollectiveNamesChecksIncluded) {
  const auto [run, back] = sim50_round_trip("cpu", "");
  const auto want = sim50_collectives(run, false), got = sim50_collectives(back, false);
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(got, want);
  // every split check comes back under its own name: 5 a step per rank, 32 B each way on 2 ranks
  const Sim50Sum& check = got.at({0, "all_gather", "output_dist/all_to_all/split_check"});
  EXPECT_EQ(check.count, 3);
  EXPECT_EQ(check.sent, 3 * 2 * 2 * 8);
  EXPECT_EQ(got.at({1, "all_to_all", "output_dist/all_to_all"}).sent, 3 * 256 * 64 * 4);
  const fs::path file = fs::path(run).parent_path() / "kin" / "rank_0.json";
  const nlohmann::json a = sim50_event_args(file, "cpu_op", "output_dist/all_to_all");
  ASSERT_FALSE(a.is_null());
  EXPECT_EQ(a.at("Collective name"), "all_to_allv");
}

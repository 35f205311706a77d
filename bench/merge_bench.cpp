// Google Benchmark of `embedscope merge` (sessions::merge_sessions, issue 18): events per second
// merging N rank sessions of one rank each, against a plain SQLite copy of the same rows
// measured in the same run (the peer: one connection, every input ATTACHed in turn and its
// ranks, lanes, ops and strings copied with INSERT INTO ... SELECT, one transaction per input,
// into tables made by CREATE TABLE AS: no keys, no indexes, no id remapping, so a floor that a
// merge cannot reach): merge_over_copy = merge time / copy time (1 would be the copy's speed).
//   merge/N   N = 2, 4, 8 rank sessions of kOpsPerRank ops each (4 lanes per rank, 1 us apart)
// The inputs are written once per N to $TMPDIR and removed at exit.
// Run: build/bench/bench_merge

#include <benchmark/benchmark.h>
#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "embedscope/sessions/merge/merge.h"
#include "embedscope/sessions/store/session.h"

namespace {
using namespace embedscope;
namespace fs = std::filesystem;

constexpr int64_t kOpsPerRank = 250'000;

fs::path tmp(const std::string& name) {
  return fs::temp_directory_path() / ("es_bench_merge_" + std::to_string(getpid()) + "_" + name);
}

// One rank's session: kOpsPerRank ops on 4 lanes, as a run of one rank per process writes it.
void write_rank(const std::string& path, int rank) {
  static const char* names[] = {"lookup", "input_dist/ids", "dense_forward_backward", "backward_fused_optimizer"};
  sessions::SessionWriter w(path, /*overwrite=*/true);
  w.set_metadata("world_size", "1");
  w.add_rank({rank, "localhost", "cpu (process)", 1 << 30});
  for (int l = 0; l < 4; ++l) w.add_lane({rank, l, l % 2 ? "comm" : "compute", "thread"});
  std::vector<sessions::OpEvent> ops;
  ops.reserve(50'000);
  for (int64_t i = 0; i < kOpsPerRank; ++i) {
    const int lane = static_cast<int>(i % 4);
    const int64_t t = (i / 4) * 1000;
    ops.push_back({rank, static_cast<sessions::Lane>(lane % 2), lane % 2 ? sessions::OpCategory::comm : sessions::OpCategory::lookup,
                   names[i % 4], t / 1'000'000, t, t + 700, lane % 2 ? 4096 : 0, 0});
    if (ops.size() == 50'000) w.add_ops(ops), ops.clear();
  }
  if (!ops.empty()) w.add_ops(ops);
  w.close("complete");
}

const std::vector<std::string>& inputs(int n) {
  static std::map<int, std::vector<std::string>> made;
  auto& v = made[n];
  if (v.empty())
    for (int r = 0; r < n; ++r) {
      v.push_back(tmp("in" + std::to_string(n) + "_rank" + std::to_string(r) + ".db").string());
      write_rank(v.back(), r);
    }
  return v;
}

void exec(sqlite3* db, const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    const std::string e = err ? err : "?";
    sqlite3_free(err);
    throw std::runtime_error(sql + ": " + e);
  }
}

// The peer: the same tables' rows copied by SQLite alone into a fresh file.
void sqlite_copy(const std::vector<std::string>& in, const std::string& out) {
  fs::remove(out);
  sqlite3* db = nullptr;
  sqlite3_open(out.c_str(), &db);
  exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL");
  exec(db, "ATTACH '" + in.front() + "' AS src");
  for (const char* t : {"ranks", "lanes", "ops", "strings"})  // the schema of the first input, empty
    exec(db, std::string("CREATE TABLE main.") + t + " AS SELECT * FROM src." + t + " WHERE 0");
  exec(db, "DETACH src");
  exec(db, "BEGIN");
  for (const auto& f : in) {
    exec(db, "ATTACH '" + f + "' AS src");
    for (const char* t : {"ranks", "lanes", "ops", "strings"})
      exec(db, std::string("INSERT INTO main.") + t + " SELECT * FROM src." + t);
    exec(db, "COMMIT; DETACH src; BEGIN");
  }
  exec(db, "COMMIT");
  sqlite3_close(db);
}

void BM_merge(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const auto& in = inputs(n);
  const std::string out = tmp("merged.db").string(), copy = tmp("copy.db").string();
  double merge_s = 0, copy_s = 0;
  for (auto _ : state) {
    sessions::MergeOptions mo;
    mo.overwrite = true;
    auto t0 = std::chrono::steady_clock::now();
    sessions::merge_sessions(in, out, mo);
    merge_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    t0 = std::chrono::steady_clock::now();
    sqlite_copy(in, copy);
    copy_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  const double events = static_cast<double>(n) * static_cast<double>(kOpsPerRank) * static_cast<double>(state.iterations());
  state.counters["events_per_s"] = events / merge_s;
  state.counters["copy_events_per_s"] = events / copy_s;
  state.counters["merge_over_copy"] = merge_s / copy_s;
  fs::remove(out), fs::remove(copy);
}
BENCHMARK(BM_merge)->Arg(2)->Arg(4)->Arg(8)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  for (auto& e : fs::directory_iterator(fs::temp_directory_path()))
    if (e.path().filename().string().rfind("es_bench_merge_" + std::to_string(getpid()) + "_", 0) == 0) fs::remove(e.path());
  return 0;
}

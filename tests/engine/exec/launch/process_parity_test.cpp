// Parity: the same workload, plan and seed trained by 4 threads of one process and by 4
// processes of one rank each (fork, TrainerOptions::process, a gloo FileStore) give the same
// losses, dense parameters and tables, bit for bit (the same arithmetic in the same order:
// only the transport differs). Each child writes what it trained to a file; the tables of the
// children add up to the full tables (each holds its own shards, zeros elsewhere).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/sessions/store/session.h"

using namespace embedscope::engine;

namespace {
struct Trained {
  int ended = -1;
  std::vector<double> loss;
  std::vector<std::vector<float>> tables;
  std::vector<float> dense;
};

template <class T>
void put(std::ofstream& f, const std::vector<T>& v) {
  const uint64_t n = v.size();
  f.write(reinterpret_cast<const char*>(&n), sizeof n);
  f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(n * sizeof(T)));
}
template <class T>
std::vector<T> take(std::ifstream& f) {
  uint64_t n = 0;
  f.read(reinterpret_cast<char*>(&n), sizeof n);
  std::vector<T> v(n);
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * sizeof(T)));
  return v;
}

void save(const std::string& path, const RunResult& r) {
  std::ofstream f(path, std::ios::binary);
  const int ended = static_cast<int>(r.ended);
  f.write(reinterpret_cast<const char*>(&ended), sizeof ended);
  put(f, r.loss);
  const uint64_t n = r.tables.size();
  f.write(reinterpret_cast<const char*>(&n), sizeof n);
  for (const auto& t : r.tables) put(f, t);
  put(f, r.dense_params);
}

Trained load(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  Trained t;
  f.read(reinterpret_cast<char*>(&t.ended), sizeof t.ended);
  t.loss = take<double>(f);
  uint64_t n = 0;
  f.read(reinterpret_cast<char*>(&n), sizeof n);
  for (uint64_t i = 0; i < n; ++i) t.tables.push_back(take<float>(f));
  t.dense = take<float>(f);
  return t;
}

WorkloadSpec tiny4(ShardingType type, int local_world_size) {
  WorkloadSpec s = load_preset("tiny");
  s.devices.count = 4;
  s.sharding.default_type = type;
  s.sharding.per_table.clear();
  s.sharding.local_world_size = local_world_size;
  s.steps = 3;
  s.collective_timeout_ms = 20000;
  return s;
}

void expect_processes_equal_threads(ShardingType type, int local_world_size) {
  const WorkloadSpec spec = tiny4(type, local_world_size);
  const ShardingPlan plan = plan_sharding(spec);
  const auto dir = std::filesystem::temp_directory_path() /
                   ("es_pp_" + std::to_string(getpid()) + "_" + to_string(type));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "store");
  // the processes first, while this one has no thread to copy into them
  std::vector<pid_t> kids;
  for (int r = 0; r < 4; ++r) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int code = 3;
      try {
        TrainerOptions opt;
        opt.keep_tables = true;
        opt.process = {r, "file://" + (dir / "store").string(), "parity", "127.0.0.1", -1, -1};
        opt.session_path = (dir / ("rank" + std::to_string(r) + ".db")).string();
        const RunResult res = run_training(spec, plan, opt);
        save((dir / ("rank" + std::to_string(r) + ".bin")).string(), res);
        code = res.ended == RunEnd::complete ? 0 : 1;
      } catch (...) {
      }
      _exit(code);
    }
    kids.push_back(pid);
  }
  TrainerOptions opt;
  opt.keep_tables = true;
  const RunResult threads = run_training(spec, plan, opt);
  ASSERT_EQ(threads.ended, RunEnd::complete) << threads.error;
  for (int r = 0; r < 4; ++r) {
    int status = 0;
    ASSERT_EQ(waitpid(kids[static_cast<size_t>(r)], &status, 0), kids[static_cast<size_t>(r)]);
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_EQ(WEXITSTATUS(status), 0) << "rank " << r;
  }
  std::vector<std::vector<float>> sum(threads.tables.size());
  for (size_t t = 0; t < threads.tables.size(); ++t) sum[t].assign(threads.tables[t].size(), 0.0f);
  for (int r = 0; r < 4; ++r) {
    const Trained p = load((dir / ("rank" + std::to_string(r) + ".bin")).string());
    EXPECT_EQ(p.loss, threads.loss) << "rank " << r;
    EXPECT_EQ(p.dense, threads.dense_params) << "rank " << r;
    ASSERT_EQ(p.tables.size(), threads.tables.size());
    for (size_t t = 0; t < p.tables.size(); ++t)
      for (size_t i = 0; i < p.tables[t].size(); ++i) sum[t][i] += p.tables[t][i];
    // the session is the rank's own, rank r of 4
    embedscope::sessions::SessionReader s((dir / ("rank" + std::to_string(r) + ".db")).string());
    EXPECT_EQ(s.status(), "complete");
    EXPECT_EQ(s.meta("process_rank"), std::to_string(r));
    EXPECT_EQ(s.meta("world_size"), "4");
    ASSERT_EQ(s.ranks().size(), 1u);
    EXPECT_EQ(s.ranks()[0].rank, r);
    EXPECT_EQ(static_cast<int64_t>(s.steps().size()), spec.steps);
  }
  EXPECT_EQ(sum, threads.tables);
  std::filesystem::remove_all(dir);
}
}  // namespace

TEST(ProcessParity, TableWiseFourProcessesEqualFourThreads) { expect_processes_equal_threads(ShardingType::table_wise, 4); }
TEST(ProcessParity, RowWiseFourProcessesEqualFourThreads) { expect_processes_equal_threads(ShardingType::row_wise, 4); }
TEST(ProcessParity, DataParallelFourProcessesEqualFourThreads) {
  expect_processes_equal_threads(ShardingType::data_parallel, 4);
}
// table_row_wise: node and cross groups (2 nodes of 2) between processes
TEST(ProcessParity, TableRowWiseTwoNodesFourProcessesEqualFourThreads) {
  expect_processes_equal_threads(ShardingType::table_row_wise, 2);
}

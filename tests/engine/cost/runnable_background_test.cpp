// The other load in runnable threads (exec/runnable_sampler.h): /proc/stat's procs_running and a
// task's state parsed against hand-written texts, the sampler on this process, and calibrate
// taking a run's load as task groups (cpu_other_cores / cpu_self_cores), not the sampled
// runnable threads (cpu_other_runnable), as the scheduler shares the cores per group.
#include <gtest/gtest.h>

#include <sqlite3.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedscope/engine/cost/calibration.h"
#include "embedscope/engine/exec/backend.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/exec/runnable_sampler.h"
#include "embedscope/engine/workload/presets.h"
#include "engine/cost/cost_sessions.h"

namespace es = embedscope::engine;
namespace fs = std::filesystem;

namespace {

fs::path runnable_dir() { return embedscope::test_support::cost_scratch_dir("runnable"); }

// A criteo_kaggle run of `ranks` simulated on round_numbers with 2 cores and `background`
// other task groups beside this process, relabelled measured with the given load metadata.
std::string runnable_session(const std::string& name, int ranks, double groups, const std::string& metadata_sql) {
  std::ifstream f(std::string(EMBEDSCOPE_TEST_DATA) + "/hardware/round_numbers.json");
  nlohmann::json j = nlohmann::json::parse(f);
  j["name"] = "runnable_round_numbers";
  j["cluster"] = {{"gpus_per_node", 8}, {"max_nodes", 1}};
  j["cpu"] = {{"cores", 2}, {"threads_per_rank", 1.0}, {"background_threads", 0.0}, {"other_groups", groups}};
  const std::string profile = (runnable_dir() / (name + ".json")).string();
  std::ofstream(profile) << j.dump();
  return embedscope::test_support::criteo_as_measured(
      profile, (runnable_dir() / (name + ".db")).string(), ranks, std::nullopt, 3,
      "INSERT OR REPLACE INTO metadata (key, value) VALUES ('cpu_cores', '2');" + metadata_sql);
}

}  // namespace

TEST(RunnableBackground, ProcStatAndTaskStateParse) {
  EXPECT_EQ(es::procs_running_in("cpu  10 0 5 100 0 0 0 0 0 0\nctxt 99\nprocs_running 7\nprocs_blocked 1\n"), 7);
  EXPECT_EQ(es::procs_running_in("procs_running 0\n"), 0);
  EXPECT_EQ(es::procs_running_in("cpu 1 2 3\nprocs_blocked 1\n"), -1);   // absent
  EXPECT_EQ(es::procs_running_in("procs_running x\n"), -1);              // malformed
  EXPECT_EQ(es::procs_running_in("procs_running \n"), -1);
  EXPECT_EQ(es::task_state_in("4242 (embedscope) R 1 4242 4242 0 -1"), 'R');
  EXPECT_EQ(es::task_state_in("4243 (rank 3) S 1 4242"), 'S');
  EXPECT_EQ(es::task_state_in("4244 (odd) name) D 1 4242"), 'D');  // the last ") " ends the name
  EXPECT_EQ(es::task_state_in("4245 (no state)"), '?');
  EXPECT_EQ(es::task_state_in(""), '?');
}

TEST(RunnableBackground, SamplerCountsThisProcesssBusyThreadsAsOwn) {
  // two spinning threads of this process: in its own runnable count (at most the machine's
  // cores run at once, but a spinning thread is R whether running or waiting for a core), not
  // in the other processes'
  std::atomic<bool> stop{false};
  std::vector<std::thread> spin;
  for (int i = 0; i < 2; ++i)
    spin.emplace_back([&] {
      volatile double x = 0;
      while (!stop.load()) x = x + 1;
    });
  es::RunnableSampler sampler(std::chrono::milliseconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  sampler.stop();
  stop = true;
  for (auto& t : spin) t.join();
  if (!fs::exists("/proc/stat")) GTEST_SKIP() << "no /proc/stat";
  ASSERT_GT(sampler.samples(), 10);
  EXPECT_GE(sampler.own_runnable(), 2.5);  // the 2 spinners and the sampler itself, nearly always
  EXPECT_GE(sampler.other_runnable(), 0.0);
  const int samples = sampler.samples();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(sampler.samples(), samples);  // stopped
}

TEST(RunnableBackground, CalibrateTakesTaskGroupsNotTheRunnableCount) {
  // truth: 0.5 other task groups on 2 cores (the process gets 2 / 1.5 cores): 2 ranks
  // 2 x 1.5 / 2 = 1.5, 4 ranks 3 (one below two threads a core, one above: the penalty, 0 here,
  // is told from the rates). The runs record self 1, other 0.5 (G = 0.5) and 3 other runnable
  // threads, which calibrate does not take (the scheduler shares per group)
  const std::string meta = "INSERT OR REPLACE INTO metadata (key, value) VALUES ('cpu_self_cores', '1.000'), "
                           "('cpu_other_cores', '0.500'), ('cpu_other_runnable', '3.000')";
  std::vector<std::string> sessions = {runnable_session("r_tw2", 2, 0.5, meta), runnable_session("r_tw4", 4, 0.5, meta)};
  const es::Calibration cal = es::calibrate(sessions);
  EXPECT_TRUE(cal.background_measured);
  EXPECT_NEAR(cal.other_groups, 0.5, 1e-9);
  EXPECT_NEAR(cal.oversubscription_penalty, 0.0, 0.008);
  EXPECT_EQ(cal.profile.cpu.background_threads, 0.0);
  EXPECT_NEAR(cal.step_scale, 1.0, 0.02);
  std::map<std::string, double> rate;
  for (const auto& f : cal.fits) rate[f.what] = f.rate;
  EXPECT_NEAR(rate["dense"] / 5e12, 1.0, 0.02);  // round_numbers' dense rate, recovered
  // a held-out 8-rank run at 3 other groups (self 0.5, other 1.5): 8 x 4 / 2 = 16 measured
  const std::string busy = runnable_session(
      "r_tw8", 8, 3.0, "INSERT OR REPLACE INTO metadata (key, value) VALUES ('cpu_self_cores', '0.500'), "
                       "('cpu_other_cores', '1.500'), ('cpu_other_runnable', '0.100')");
  const std::string fitted = (runnable_dir() / "fitted.json").string();
  std::ofstream(fitted) << es::to_json(cal.profile).dump();
  const es::CalibrationCheck c = es::check_calibration(busy, fitted);
  EXPECT_NEAR(c.other_groups, 3.0, 1e-9);
  EXPECT_NEAR(c.error(), 6.0 / 16.0 - 1.0, 0.02);  // the profile's G = 0.5: 8 x 1.5 / 2 = 6
  EXPECT_LT(std::abs(c.error_at_run_load()), 0.02);
}

#pragma once
// The cost tests' scratch folders and "measured" sessions (handoff, contention, runnable
// background, sync lag, shared cores): criteo_kaggle simulated on a test hardware profile and
// relabelled as a measured run, so that a test knows the truth `calibrate` (which reads measured
// sessions only) should recover from it.

#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "embedscope/engine/exec/backend.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/presets.h"

namespace embedscope::test_support {

/// $TMPDIR/es_<name>_<pid>: emptied and created at the first call with `name` in this process,
/// the same folder after that. Throws std::filesystem::filesystem_error when it cannot be made.
inline std::filesystem::path cost_scratch_dir(const std::string& name) {
  static std::map<std::string, std::filesystem::path> dirs;
  auto it = dirs.find(name);
  if (it == dirs.end()) {
    const auto p = std::filesystem::temp_directory_path() / ("es_" + name + "_" + std::to_string(getpid()));
    std::filesystem::remove_all(p);
    std::filesystem::create_directories(p);
    it = dirs.emplace(name, p).first;
  }
  return it->second;
}

/// The hardware profile file `profile` as a measured machine times a session: one without a cpu
/// section (a GPU profile, whose simulation costs the split-size checks 0: cost_model.h
/// split_check_timed, sim50) gets one of contention 1 (1000 cores, 1 thread a rank, no
/// background, no other cpu term), written to `path` + ".profile.json", so that the checks are
/// timed as every other call, as Embedscope's Gloo group runs them and as the cpu profile that
/// calibrate fits times them; all other costs are the same (tests/engine/cost/
/// sim50_split_check_test.cpp). Without it a fit's step scale took the checks' time from the
/// rates (2.2% high) and the launch (978 ns instead of 1000). Returns the file to simulate with.
inline std::string measured_machine_profile(const std::string& profile, const std::string& path) {
  std::ifstream in(profile);
  nlohmann::json j = nlohmann::json::parse(in);
  if (j.contains("cpu")) return profile;
  j["cpu"] = {{"cores", 1000}, {"threads_per_rank", 1}, {"background_threads", 0}};
  const std::string out = path + ".profile.json";
  std::ofstream(out) << j.dump(2);
  return out;
}

/// criteo_kaggle on `ranks` ranks (batch 4096, `steps` steps of which 1 warm-up, 8 GiB per rank,
/// sharding `type` or the preset's default) simulated on the hardware profile file `profile`
/// (with a cpu section of contention 1 where it has none: measured_machine_profile), written to
/// `path`, then relabelled measured (metadata simulated = 0) with `metadata_sql` run on it after
/// that (the load keys the test wants: cpu_cores, cpu_self_cores, cpu_other_cores, ...).
/// Returns `path`; a run that does not complete or SQL that fails is a test failure (EXPECT);
/// a profile file that cannot be parsed throws nlohmann::json::parse_error.
inline std::string criteo_as_measured(const std::string& profile, const std::string& path, int ranks,
                                      std::optional<engine::ShardingType> type, int steps,
                                      const std::string& metadata_sql) {
  engine::WorkloadSpec s = engine::load_preset("criteo_kaggle");
  s.devices.backend = engine::Backend::simulated;
  s.devices.hardware = measured_machine_profile(profile, path);
  s.devices.count = ranks;
  s.devices.memory_bytes = int64_t{8} << 30;
  if (type) s.sharding.default_type = *type;
  s.batch_size = 4096;
  s.steps = steps;
  s.warmup_steps = 1;
  s = engine::with_resolved_backend(s, "test");
  engine::TrainerOptions o;
  o.session_path = path;
  o.session_overwrite = true;
  EXPECT_EQ(engine::run_training(s, engine::plan_sharding(s), o).ended, engine::RunEnd::complete);
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  const std::string sql = "UPDATE metadata SET value = '0' WHERE key = 'simulated';" + metadata_sql;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  sqlite3_close(db);
  return path;
}

}  // namespace embedscope::test_support

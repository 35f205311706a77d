#pragma once
// Small session files written for tests of the analyses (sessions_test) and of the views
// that draw them (ui_test). Header-only; each function writes a file under the temp folder,
// named after the test process, and returns its path.

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "embedscope/sessions/store/session.h"

namespace embedscope::test_support {

/// A session of 2 ranks and 2 steps starting at `t0` ns; step s lasts `step_ns[s]`. Each step:
/// rank 0 looks up [0, 100) us, then its output all-to-all (sequence s + 1) runs [150, 400) us;
/// rank 1 looks up [0, 300) us and joins the all-to-all at 320 us until 400 us. Memory: one
/// snapshot per step with a segment of `segment` bytes.
inline std::string step_session(const std::string& name, int64_t t0, std::vector<int64_t> step_ns, int64_t segment = 4096) {
  const auto path = std::filesystem::temp_directory_path() / (name + "_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  sessions::SessionWriter w(path.string());
  w.set_metadata("world_size", "2");
  w.set_metadata("samples_per_step", "8");
  w.set_metadata("workload_name", name);
  for (int r = 0; r < 2; ++r) {
    w.add_lane({r, 0, "compute", "thread"});
    w.add_lane({r, 1, "comm", "thread"});
  }
  int64_t start = t0;
  for (int64_t s = 0; s < static_cast<int64_t>(step_ns.size()); ++s) {
    const auto seq = static_cast<uint64_t>(s + 1);
    for (int r = 0; r < 2; ++r) w.add_step({s, r, start, start + step_ns[static_cast<size_t>(s)], 0.5, 0, 0});
    w.add_ops({{0, sessions::Lane::compute, sessions::OpCategory::lookup, "lookup", s, start, start + 100'000, 0, 0},
               {0, sessions::Lane::comm, sessions::OpCategory::comm, "output_dist/all_to_all", s, start + 150'000,
                start + 400'000, 64, seq},
               {1, sessions::Lane::compute, sessions::OpCategory::lookup, "lookup", s, start, start + 300'000, 0, 0},
               {1, sessions::Lane::comm, sessions::OpCategory::comm, "output_dist/all_to_all", s, start + 320'000,
                start + 400'000, 64, seq}});
    for (int r = 0; r < 2; ++r) w.add_memory({s, r, 1000 * (s + 1), segment, 1000 * (s + 1), segment, 0, 0, 1, 0, 0});
    w.add_snapshot({0, 0, s, start, "step", {{1 << 20, segment, 1 << 20, 1000 * (s + 1), 1000 * (s + 1), true, "kjt"}}});
    start += step_ns[static_cast<size_t>(s)];
  }
  w.close("complete");
  return path.string();
}

/// Out of memory in step 0: no step row; rank 0's ops span [3.0, 3.5) ms, rank 1's [3.2, 3.4) ms.
inline std::string oom_in_step_session() {
  const auto path = std::filesystem::temp_directory_path() / ("es_cmp_oom_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  sessions::SessionWriter w(path.string());
  w.add_lane({0, 0, "compute", "thread"});
  w.add_lane({1, 0, "compute", "thread"});
  w.add_ops({{0, sessions::Lane::compute, sessions::OpCategory::input, "input", 0, 3'000'000, 3'100'000, 0, 0},
             {0, sessions::Lane::compute, sessions::OpCategory::lookup, "lookup", 0, 3'200'000, 3'500'000, 0, 0},
             {1, sessions::Lane::compute, sessions::OpCategory::input, "input", 0, 3'200'000, 3'400'000, 0, 0}});
  w.close("oom", "rank 0: out of memory");
  return path.string();
}

/// Two ranks, two tables ("t_a", "t_b"). Load: step 0: rank 0 looks up 30 ids in t_a #0, rank 1
/// 10 ids in t_b #1; step 1: 20 and 20; a warmup step (-1) with 999 ids that analyses ignore.
inline std::string load_session() {
  const auto path = std::filesystem::temp_directory_path() / ("es_ui_load_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  sessions::SessionWriter w(path.string());
  w.set_metadata("world_size", "2");
  w.set_metadata("workload_json", R"({"tables": [{"name": "t_a"}, {"name": "t_b"}]})");
  w.add_load({0, 0, 0, 0, 30, 3, 0, 0, 100});
  w.add_load({0, 1, 1, 1, 10, 1, 0, 0, 50});
  w.add_load({1, 0, 0, 0, 20, 2, 0, 0, 100});
  w.add_load({1, 1, 1, 1, 20, 2, 0, 0, 50});
  w.add_load({-1, 0, 0, 0, 999, 9, 0, 0, 9});
  w.close("complete");
  return path.string();
}

}  // namespace embedscope::test_support

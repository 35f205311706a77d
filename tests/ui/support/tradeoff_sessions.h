#pragma once
// Four small sessions of a storage study with known bytes, losses, step times and memory, for
// the trade-offs figures (core/tradeoff_figures.h) and their page (views/tradeoffs_view.h).
// Every session has 2 ranks and two tables t0 (rank 0) and t1 (rank 1); a warm-up step (-1,
// loss 0.9, 100 ms) that the figures must ignore.
//
//   run      tables                               weights   state    steps: slowest rank (ms), loss      peak (rank)
//   fp16     fp16 rows, 4 MB each, errors          8 MB     32 MB    10, 10, 10      0.71 0.61 0.51      44 MB (0)
//            max abs 0.001 / 0.002, rel 0.01 / 0.03
//   fp32     fp32, 8 MB each                      16 MB     32 MB    12, 14, 16      0.70 0.60 0.50      50 MB (1)
//   hash     t0 hashed to 1,000 rows, 30 collisions 9 MB    32 MB    12, 12          0.69 0.58           20 MB (0)
//   shared   t1 shared_with t0: one stored table   8 MB     16 MB    none (crashed)                       5 MB (0)
// N = 2 (hash measured two steps; shared none): losses after 2 steps 0.61, 0.60, 0.58.
// Held-out evaluation (held_out_json): fp16 AUC 0.7200 (loss 0.52, 64 samples), fp32 AUC 0.7250
// (loss 0.51), hash AUC null (one class only), shared none.

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "embedscope/sessions/store/session.h"

namespace embedscope::ui::tradeoff_fixtures {

struct TradeoffStep {
  int64_t ns_rank0, ns_rank1;
  double loss;
};

inline std::string tradeoff_session(const std::string& name, const std::string& storage_json, const std::string& workload_json,
                                    const std::vector<TradeoffStep>& steps, std::vector<int64_t> peaks, const std::string& ended,
                                    const std::string& held_out_json = "") {
  const auto path = std::filesystem::temp_directory_path() / ("es_tradeoffs_" + name + "_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  sessions::SessionWriter w(path.string());
  w.set_metadata("world_size", "2");
  w.set_metadata("samples_per_step", "8");
  w.set_metadata("workload_name", name);
  w.set_metadata("table_storage_json", storage_json);
  if (!workload_json.empty()) w.set_metadata("workload_json", workload_json);
  if (!held_out_json.empty()) w.set_metadata("held_out_json", held_out_json);
  for (int r = 0; r < 2; ++r) w.add_lane({r, 0, "compute", "thread"});
  for (int r = 0; r < 2; ++r) w.add_step({-1, r, 0, 100'000'000, 0.9, 0, 0});
  int64_t t = 100'000'000;
  for (size_t s = 0; s < steps.size(); ++s) {
    const auto step = static_cast<int64_t>(s);
    w.add_step({step, 0, t, t + steps[s].ns_rank0, steps[s].loss, 0, 0});
    w.add_step({step, 1, t, t + steps[s].ns_rank1, steps[s].loss, 0, 0});
    t += std::max(steps[s].ns_rank0, steps[s].ns_rank1);
  }
  for (int r = 0; r < 2; ++r)  // a peak per rank, at the warm-up step and a smaller one later
    w.add_memory({-1, r, 1000, 2000, peaks[static_cast<size_t>(r)], peaks[static_cast<size_t>(r)] + 1000, 0, 0, 1, 0, 0});
  for (int r = 0; r < 2; ++r) w.add_memory({0, r, 1000, 2000, peaks[static_cast<size_t>(r)] / 2, 0, 0, 0, 1, 0, 0});
  w.close(ended, ended == "complete" ? "" : "rank 1 failed");
  return path.string();
}

inline std::string tradeoff_table(const std::string& name, const std::string& data_type, int64_t weight0, int64_t weight1,
                                  int64_t state0, int64_t state1, double max_abs, double rel, int64_t hash_size,
                                  int64_t collisions) {
  return "{\"table\": \"" + name + "\", \"data_type\": \"" + data_type + "\", \"optimizer_state_type\": \"fp32\", " +
         "\"weight_bytes\": [" + std::to_string(weight0) + ", " + std::to_string(weight1) + "], " +
         "\"optimizer_state_bytes\": [" + std::to_string(state0) + ", " + std::to_string(state1) + "], " +
         "\"master_copy_bytes\": 0, \"max_abs_error\": " + std::to_string(max_abs) + ", \"relative_error\": " +
         std::to_string(rel) + ", \"hash_size\": " + std::to_string(hash_size) + ", \"low_rank_dim\": 0, " +
         "\"hash_collisions\": " + std::to_string(collisions) + "}";
}

/// The four sessions of the table above, in the order fp16, fp32, hash, shared.
inline std::vector<std::string> tradeoff_study() {
  std::vector<std::string> paths;
  paths.push_back(tradeoff_session(
      "fp16",
      "[" + tradeoff_table("t0", "fp16", 4'000'000, 0, 16'000'000, 0, 0.001, 0.01, 0, 0) + ", " +
          tradeoff_table("t1", "fp16", 0, 4'000'000, 0, 16'000'000, 0.002, 0.03, 0, 0) + "]",
      "", {{10'000'000, 10'000'000, 0.71}, {10'000'000, 9'000'000, 0.61}, {9'000'000, 10'000'000, 0.51}},
      {44'000'000, 40'000'000}, "complete",
      R"({"batches": 4, "samples": 64, "positives": 16, "first_iteration": 1099511627776, "loss": 0.52, "auc": 0.72})"));
  paths.push_back(tradeoff_session(
      "fp32",
      "[" + tradeoff_table("t0", "fp32", 8'000'000, 0, 16'000'000, 0, 0, 0, 0, 0) + ", " +
          tradeoff_table("t1", "fp32", 0, 8'000'000, 0, 16'000'000, 0, 0, 0, 0) + "]",
      "", {{10'000'000, 12'000'000, 0.70}, {14'000'000, 10'000'000, 0.60}, {10'000'000, 16'000'000, 0.50}},
      {30'000'000, 50'000'000}, "complete",
      R"({"batches": 4, "samples": 64, "positives": 16, "first_iteration": 1099511627776, "loss": 0.51, "auc": 0.725})"));
  paths.push_back(tradeoff_session(
      "hash",
      "[" + tradeoff_table("t0", "fp32", 1'000'000, 0, 16'000'000, 0, 0, 0, 1000, 30) + ", " +
          tradeoff_table("t1", "fp32", 0, 8'000'000, 0, 16'000'000, 0, 0, 0, 0) + "]",
      "", {{12'000'000, 11'000'000, 0.69}, {11'000'000, 12'000'000, 0.58}}, {20'000'000, 19'000'000}, "complete",
      R"({"batches": 4, "samples": 64, "positives": 0, "first_iteration": 1099511627776, "loss": 0.2, "auc": null})"));
  paths.push_back(tradeoff_session(
      "shared", "[" + tradeoff_table("t0", "fp32", 8'000'000, 0, 16'000'000, 0, 0, 0, 0, 0) + "]",
      R"({"tables": [{"name": "t0"}, {"name": "t1", "shared_with": "t0"}]})", {}, {5'000'000, 1'000'000}, "crashed"));
  return paths;
}

}  // namespace embedscope::ui::tradeoff_fixtures

#pragma once
// Helpers of the importer tests: a scratch directory per process, importing fixtures into a
// session there and reading it back.

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "embedscope/sessions/importers/kineto_json/kineto_json.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::sessions::testing {

inline std::filesystem::path import_scratch() {
  static const auto dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("es_import_" + std::to_string(getpid()));
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

inline std::string trace_fixture(const std::string& name) { return std::string(EMBEDSCOPE_TEST_DATA) + "/traces/" + name; }

/// Imports `paths` (files or directories) into scratch/<db_name> and returns the summary.
inline importers::ImportSummary import_into(const std::vector<std::string>& paths, const std::string& db_name) {
  const std::string db = (import_scratch() / db_name).string();
  SessionWriter w(db, true);
  auto sum = importers::import_kineto_json(importers::expand_inputs(paths), w, {});
  w.close("complete");
  return sum;
}

inline std::string scratch_db(const std::string& db_name) { return (import_scratch() / db_name).string(); }

/// The count of problem `name` in `stats` (0 absent).
inline int64_t problem_count(const std::vector<ImportStat>& stats, const std::string& name) {
  for (const auto& s : stats)
    if (s.name == name) return s.count;
  return 0;
}
inline const ImportStat* problem(const std::vector<ImportStat>& stats, const std::string& name) {
  for (const auto& s : stats)
    if (s.name == name) return &s;
  return nullptr;
}

}  // namespace embedscope::sessions::testing

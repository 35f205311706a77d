#pragma once
// The memory snapshot fixtures (tests/data/memory_snapshots, written by make_fixtures.py) and
// the numbers the generator counted (expected.json beside them).

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace embedscope::test {

inline std::string snapshot_fixture(const std::string& name) {
  return std::string(EMBEDSCOPE_TEST_DATA) + "/memory_snapshots/" + name;
}

inline const nlohmann::json& snapshot_expected() {
  static const nlohmann::json j = nlohmann::json::parse(std::ifstream(snapshot_fixture("expected.json")));
  return j;
}

}  // namespace embedscope::test

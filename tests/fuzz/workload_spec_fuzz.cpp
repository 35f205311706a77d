// libFuzzer target: the workload spec parser (engine/workload) on arbitrary file contents.
// Input: the bytes of a workload JSON file. load_workload_file either returns a validated spec
// or throws SpecError naming the file; a spec it returns must round-trip: to_json(spec) parses
// back to a spec that serializes identically (spec.h), else the target aborts.
// Seeds: resources/workloads/*.json, tests/data/specs/*.json.
#include <cstdlib>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "embedscope/engine/workload/spec.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace es = embedscope::engine;
  if (size > (size_t{1} << 20)) return -1;  // the 64 MiB file limit is tested by engine_test
  embedscope::fuzz::TempFile file("workload_spec", ".json", data, size);
  es::WorkloadSpec spec;
  try {
    spec = es::load_workload_file(file.path());
  } catch (const es::SpecError&) {
    return 0;
  }
  const nlohmann::json once = es::to_json(spec);
  es::WorkloadSpec again;
  try {
    again = es::parse_workload(once, "round trip");
  } catch (const es::SpecError& e) {
    std::fprintf(stderr, "a parsed spec does not round-trip through to_json: %s\n", e.what());
    std::abort();
  }
  if (es::to_json(again) != once) {
    std::fprintf(stderr, "to_json(parse_workload(to_json(spec))) differs from to_json(spec)\n");
    std::abort();
  }
  return 0;
}

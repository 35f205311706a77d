// tester48 F4: the scenario table's "bytes on the wire" per sample divides the bytes of the
// counted steps by their samples: a semi_sync session whose steady steps move what a base
// session's do reads the same per sample, not 3.7 % less.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/exec/scenario_run.h"
#include "embedscope/engine/workload/scenario.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"

namespace {
namespace fix48es = embedscope::engine;
namespace fix48s = embedscope::sessions;

// One rank, 6 measured steps of 1000 samples; every steady step sends 17,000 B; semi_sync's
// warm-up also sends the next batches' 5,000 B and its drain steps 4-5 miss them (14,000 and
// 12,000 B).
std::string fix48_bytes_session(const std::string& pipeline) {
  const auto p = std::filesystem::temp_directory_path() / ("es_fix48_bytes_" + pipeline + "_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(p);
  fix48s::SessionWriter w(p.string());
  w.set_metadata(fix48s::meta::kPipeline, pipeline);
  w.set_metadata(fix48s::meta::kWorldSize, "1");
  w.set_metadata(fix48s::meta::kSamplesPerStep, "1000");
  const bool pipelined = pipeline != "base";
  for (int64_t s = -1; s < 6; ++s) {
    const int64_t t = 1000 + 100 * s;
    w.add_ops({{0, fix48s::Lane::compute, fix48s::OpCategory::dense, "dense", s, t, t + 100}});
    if (s >= 0) w.add_step({s, 0, t, t + 100, 0.5, 0, 0});
    fix48s::CollectiveRecord r;
    r.op = "all_to_all";
    r.name = "output_dist/all_to_all";
    r.group = "world";
    r.sequence = static_cast<uint64_t>(s + 2);
    r.dtype = "float32";
    r.step = s;
    r.start_ns = t;
    r.end_ns = t + 10;
    r.bytes_sent = !pipelined ? 17'000 : s == -1 ? 22'000 : s == 4 ? 14'000 : s == 5 ? 12'000 : 17'000;
    r.peers = {0};
    w.add_collective(r);
  }
  w.close("complete");
  return p.string();
}
}  // namespace

TEST(Fix48ScenarioBytes, BytesPerSampleOverTheCountedSteps) {
  const nlohmann::json j = {{"id", "fix48"}, {"title", "t"}, {"explanation", "e"},
                            {"runs", {{{"label", "a"}, {"preset", "tiny"}}, {{"label", "b"}, {"preset", "tiny"}}}}};
  const fix48es::Scenario sc = fix48es::parse_scenario(j, "fix48.json");
  for (const std::string pipeline : {"base", "semi_sync"}) {
    const std::string path = fix48_bytes_session(pipeline);
    const fix48es::ScenarioFigures f = fix48es::scenario_figures(sc.runs[0], fix48s::SessionReader(path));
    // 17,000 B a counted step / 1000 samples (semi_sync before the fix: 94,000 / 6000 = 15.67)
    EXPECT_DOUBLE_EQ(f.bytes_per_sample, 17.0) << pipeline;
    EXPECT_EQ(f.bytes_sent, pipeline == "base" ? 6 * 17'000 : 4 * 17'000) << pipeline;
    std::filesystem::remove(path);
  }
}

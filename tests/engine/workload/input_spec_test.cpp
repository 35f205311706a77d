// The workload's "input" section: synthetic by default (absent from to_json), criteo_tsv with
// its policies, the errors that name the pointer, relative paths against the workload file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "embedscope/engine/workload/presets.h"
#include "embedscope/engine/workload/spec.h"

using namespace embedscope::engine;
using nlohmann::json;

namespace {
json criteo_json() {
  json j = json::parse(preset_json("criteo_kaggle"));
  j["input"] = {{"kind", "criteo_tsv"}, {"paths", {"/data/day_0.gz", "/data/day_1.gz"}}};
  return j;
}
std::string input_spec_error_of(const json& j) {
  try {
    parse_workload(j, "w.json");
  } catch (const SpecError& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST(InputSpec, SyntheticIsTheDefaultAndStaysOutOfToJson) {
  const WorkloadSpec s = load_preset("tiny");
  EXPECT_EQ(s.input.kind, InputKind::synthetic);
  EXPECT_TRUE(s.input.paths.empty());
  EXPECT_FALSE(to_json(s).contains("input"));
  json j = json::parse(preset_json("tiny"));
  j["input"] = {{"kind", "synthetic"}};
  EXPECT_EQ(parse_workload(j, "w").input.kind, InputKind::synthetic);
}

TEST(InputSpec, CriteoTsvWithItsPoliciesRoundTrips) {
  json j = criteo_json();
  j["input"]["malformed_lines"] = "skip";
  j["input"]["on_short"] = "wrap";
  j["input"]["categorical"] = "raw";
  const WorkloadSpec s = parse_workload(j, "w.json");
  EXPECT_EQ(s.input.kind, InputKind::criteo_tsv);
  EXPECT_EQ(s.input.paths, (std::vector<std::string>{"/data/day_0.gz", "/data/day_1.gz"}));
  EXPECT_EQ(s.input.malformed_lines, MalformedLinePolicy::skip);
  EXPECT_EQ(s.input.on_short, ShortInputPolicy::wrap);
  EXPECT_EQ(s.input.categorical, CategoricalMapping::raw);
  const json back = to_json(s);
  EXPECT_EQ(back["input"], (json{{"kind", "criteo_tsv"},
                                 {"paths", {"/data/day_0.gz", "/data/day_1.gz"}},
                                 {"malformed_lines", "skip"},
                                 {"on_short", "wrap"},
                                 {"categorical", "raw"}}));
  const WorkloadSpec again = parse_workload(back, "back");
  EXPECT_EQ(again.input.paths, s.input.paths);
  EXPECT_EQ(again.input.categorical, CategoricalMapping::raw);
  // defaults
  const WorkloadSpec d = parse_workload(criteo_json(), "w.json");
  EXPECT_EQ(d.input.malformed_lines, MalformedLinePolicy::error);
  EXPECT_EQ(d.input.on_short, ShortInputPolicy::error);
  EXPECT_EQ(d.input.categorical, CategoricalMapping::modulo);
}

TEST(InputSpec, ErrorsNameThePointer) {
  json j = criteo_json();
  j["features"].erase(j["features"].begin());
  j["tables"].erase(j["tables"].begin());
  EXPECT_EQ(input_spec_error_of(j), "w.json: /input: criteo_tsv has 26 categorical columns, mapped in order to the workload's "
                         "features; the workload has 25 feature(s)");
  j = criteo_json();
  j["dense"]["num_dense_features"] = 12;
  EXPECT_EQ(input_spec_error_of(j), "w.json: /dense/num_dense_features: criteo_tsv has 13 integer (dense) columns, got "
                         "num_dense_features 12");
  j = criteo_json();
  j["input"]["paths"] = json::array();
  EXPECT_EQ(input_spec_error_of(j), "w.json: /input/paths: must not be empty");
  j = criteo_json();
  j["input"].erase("paths");
  EXPECT_EQ(input_spec_error_of(j), "w.json: /input/paths: required");
  j = criteo_json();
  j["input"]["paths"] = {""};
  EXPECT_EQ(input_spec_error_of(j), "w.json: /input/paths/0: must not be empty");
  j = criteo_json();
  j["input"]["on_short"] = "loop";
  EXPECT_NE(input_spec_error_of(j).find("/input/on_short"), std::string::npos) << input_spec_error_of(j);
  EXPECT_NE(input_spec_error_of(j).find("wrap"), std::string::npos) << input_spec_error_of(j);
  j = criteo_json();
  j["input"]["path"] = "x";
  EXPECT_EQ(input_spec_error_of(j), "w.json: /input/path: criteo_tsv takes \"paths\", an array");
  j = criteo_json();
  j["input"]["colour"] = "x";
  EXPECT_EQ(input_spec_error_of(j), "w.json: /input/colour: unknown key");
  j = criteo_json();
  j["input"] = {{"kind", "synthetic"}, {"paths", {"a.tsv"}}};
  EXPECT_EQ(input_spec_error_of(j), "w.json: /input/paths: only allowed for a file source (kind criteo_tsv or kjt)");
  j = criteo_json();
  j["input"] = {{"kind", "parquet"}};
  EXPECT_NE(input_spec_error_of(j).find("/input/kind"), std::string::npos) << input_spec_error_of(j);
}

TEST(InputSpec, KjtTakesOnePathAndOnShort) {
  json j = json::parse(preset_json("tiny"));
  j["input"] = {{"kind", "kjt"}, {"path", "/data/rec.kjt"}, {"on_short", "wrap"}};
  const WorkloadSpec s = parse_workload(j, "w.json");
  EXPECT_EQ(s.input.kind, InputKind::kjt);
  EXPECT_EQ(s.input.paths, (std::vector<std::string>{"/data/rec.kjt"}));
  EXPECT_EQ(to_json(s)["input"], (json{{"kind", "kjt"}, {"path", "/data/rec.kjt"}, {"on_short", "wrap"}}));
  EXPECT_EQ(parse_workload(to_json(s), "back").input.paths, s.input.paths);
  j["input"] = {{"kind", "kjt"}, {"paths", {"a"}}};
  EXPECT_EQ(input_spec_error_of(j), "w.json: /input/paths: not allowed for kind kjt (one \"path\"; ids are rows as recorded)");
  j["input"] = {{"kind", "kjt"}};
  EXPECT_EQ(input_spec_error_of(j), "w.json: /input/path: required");
}

TEST(InputSpec, RelativePathsAreRelativeToTheWorkloadFile) {
  const auto dir = std::filesystem::temp_directory_path() / ("es_input_spec_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir / "sub");
  json j = criteo_json();
  j["input"]["paths"] = {"data/day_0.tsv", "/abs/day_1.tsv"};
  std::ofstream(dir / "sub" / "w.json") << j.dump();
  const WorkloadSpec s = load_workload_file((dir / "sub" / "w.json").string());
  EXPECT_EQ(s.input.paths, (std::vector<std::string>{(dir / "sub" / "data" / "day_0.tsv").string(), "/abs/day_1.tsv"}));
  std::filesystem::remove_all(dir);
}

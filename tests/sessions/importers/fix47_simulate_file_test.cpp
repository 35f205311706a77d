// tester46 F12: `--simulate NAME` read a file only when NAME ended in .json or had a slash (a profile
// copied to "myprof" was an "unknown hardware profile"), and a scaling study or a workload given
// as a profile got "/batch_size_per_gpu: unknown key". Now an existing file of that name comes
// before the built-in list, and one of embedscope's other JSON files is named for what it is (the
// recognition `stats` uses, engine/workload/json_kind.h).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "support/build_paths.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;

fs::path fix47_sim_scratch() {
  static const fs::path d = [] {
    auto p = fs::temp_directory_path() / ("es_fix47_sim_" + std::to_string(getpid()));
    fs::remove_all(p);
    fs::create_directories(p);
    return p;
  }();
  return d;
}

// The CLI run in the scratch folder (names without a slash are looked up there).
embedscope::test_support::CliResult fix47_sim_cli(const std::string& args) {
  return embedscope::test_support::run_cli("cd " + fix47_sim_scratch().string() + " && " + EMBEDSCOPE_CLI, args,
                                           fix47_sim_scratch());
}

void fix47_write(const fs::path& p, const std::string& text) {
  std::ofstream f(p);
  f << text;
}
}  // namespace

TEST(SimulateFileF12, AFileOfThatNameComesBeforeTheBuiltInList) {
  // h100_sxm.json renamed "myprof", its name changed so that the output shows which was read
  std::ifstream in(std::string(EMBEDSCOPE_SOURCE_DIR) + "/resources/hardware/h100_sxm.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto at = text.find("\"name\": \"h100_sxm\"");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 18, "\"name\": \"myprof_copy\"");
  fix47_write(fix47_sim_scratch() / "myprof", text);
  const auto r = fix47_sim_cli("plan --preset tiny --simulate myprof");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("(hardware profile myprof_copy)"), std::string::npos) << r.out;
}

// retest47 R6: a file named like a built-in (here a run's own output, "-o h100_sxm") does not hide
// the built-in; "./h100_sxm" still reads the file.
TEST(SimulateFileF12, ABuiltInNameIsTheBuiltInWhateverFileSitsHere) {
  fix47_write(fix47_sim_scratch() / "h100_sxm", "some log, not a profile\n");
  const auto r = fix47_sim_cli("plan --preset tiny --simulate h100_sxm");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("(hardware profile h100_sxm)"), std::string::npos) << r.out;
  const auto f = fix47_sim_cli("plan --preset tiny --simulate ./h100_sxm");
  EXPECT_EQ(f.code, 2) << f.err;
  EXPECT_NE(f.err.find("./h100_sxm"), std::string::npos) << f.err;
  fs::remove(fix47_sim_scratch() / "h100_sxm");
}

TEST(SimulateFileF12, AScalingStudyOrAWorkloadIsNamedForWhatItIs) {
  fix47_write(fix47_sim_scratch() / "sc.json", "{\"batch_size_per_gpu\": 8, \"gpus_per_node\": 8, \"points\": []}\n");
  auto r = fix47_sim_cli("run --preset tiny --simulate sc.json --steps 1 -o x.db");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("error: sc.json is a scaling study (embedscope scaling --json), not a hardware profile (give a "
                       "built-in profile: a100_sxm_80gb, h100_sxm, h200_sxm; or a profile JSON file: resources/hardware, "
                       "embedscope calibrate -o)"),
            std::string::npos)
      << r.err;
  fs::copy_file(std::string(EMBEDSCOPE_SOURCE_DIR) + "/resources/workloads/tiny.json", fix47_sim_scratch() / "wl",
                fs::copy_options::overwrite_existing);
  r = fix47_sim_cli("plan --preset tiny --simulate wl");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("error: wl is a workload, not a hardware profile"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(fix47_sim_scratch() / "x.db"));
}

// tester46 F6: a profile with "name": "" was accepted and shown as "(hardware profile )"; calibrate
// --name "" wrote such a profile. Both are refused, naming the field.
TEST(SimulateFileF6, AnEmptyProfileNameIsRefusedAsIsCalibrateNameEmpty) {
  std::ifstream in(std::string(EMBEDSCOPE_SOURCE_DIR) + "/resources/hardware/h100_sxm.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto at = text.find("\"name\": \"h100_sxm\"");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 18, "\"name\": \" \"");
  fix47_write(fix47_sim_scratch() / "name_empty.json", text);
  auto r = fix47_sim_cli("plan --preset tiny --simulate name_empty.json");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find("error: name_empty.json: /name: must not be empty (runs on the profile say \"hardware profile "
                       "NAME\")"),
            std::string::npos)
      << r.err;
  r = fix47_sim_cli("calibrate name_empty.json --name '' -o never.json");  // refused before any session is read
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("error: --name '': must not be empty"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(fix47_sim_scratch() / "never.json"));
}

// tester45 F2 (still open in tester46): under --simulate, --local-world-size beside --nodes /
// --gpus-per-node was dropped without a word (--nodes 2 --local-world-size 4: 16 ranks in nodes
// of the profile's 8). It is the same field as --gpus-per-node: applied as it, refused beside a
// different --gpus-per-node.
TEST(SimulateFileF2, LocalWorldSizeBesideNodesIsAppliedOrRefused) {
  auto r = fix47_sim_cli("plan --preset criteo_kaggle --simulate h100_sxm --nodes 2 --local-world-size 4 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("world_size"), 8) << r.out;  // 2 nodes of 4, not of the profile's 8
  EXPECT_EQ(j.at("local_world_size"), 4) << r.out;
  r = fix47_sim_cli("plan --preset criteo_kaggle --simulate h100_sxm --nodes 2 --gpus-per-node 4 --local-world-size 2");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find("error: --local-world-size 2 disagrees with --gpus-per-node 4: a simulated node's GPUs are its "
                       "ranks (both set sharding.local_world_size); give one of them"),
            std::string::npos)
      << r.err;
  r = fix47_sim_cli("plan --preset criteo_kaggle --simulate h100_sxm --nodes 2 --gpus-per-node 4 --local-world-size 4 --json");
  EXPECT_EQ(r.code, 0) << r.err;
}

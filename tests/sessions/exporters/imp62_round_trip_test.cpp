// The real traces survive `import -> export -> import`: for nccl_data (Kineto, HTA's tests) and
// fuser_h200.sqlite (Nsight), after a Kineto and a Chrome export, the re-import has the same lanes
// (names and kinds: GPU annotations on their GPU lanes, user annotations and runtime calls as
// such, the Nsight sync record a sync, not a kernel), the same CUDA stream numbers, kernels (name,
// duration), world size, device name (once "(cuda:0)") and, for the Kineto traces, the same
// HTA figures and kernel breakdown of `stats --json`. Before: GPU annotations became host
// cpu_ops on two extra threads, streams were renumbered (nccl_data's 7 / 40 -> 6 / 7), the Chrome
// export lost the world size (2 -> 1) and the device read "(cuda:0) (cuda:0)".
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "import_test_support.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;
namespace r62 = embedscope::sessions;

const std::string kR62Data = EMBEDSCOPE_SHARED_DATA;

fs::path r62_dir(const std::string& name) {
  const fs::path d = r62::testing::import_scratch() / ("imp62rt_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void r62_cli(const fs::path& dir, const std::string& args) {
  const auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, dir);
  EXPECT_EQ(r.code, 0) << args << "\n" << r.out << r.err;
}

nlohmann::json r62_stats(const fs::path& dir, const std::string& db) {
  const auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "stats " + db + " --json", dir);
  EXPECT_EQ(r.code, 0) << r.err;
  return nlohmann::json::parse(r.out, nullptr, false);
}

// src -> a.db -> export FORMAT -> back.db; returns {a.db, back.db}.
std::pair<std::string, std::string> r62_round_trip(const std::string& name, const std::string& src, const std::string& format) {
  const fs::path dir = r62_dir(name);
  const std::string a = (dir / "a.db").string(), back = (dir / "back.db").string();
  const std::string out = (dir / (format == "kineto" ? "kin" : "trace.json")).string();
  r62_cli(dir, "import " + src + " -o " + a);
  r62_cli(dir, "export " + a + " --format " + format + " -o " + out);
  r62_cli(dir, "import " + out + " -o " + back);
  return {a, back};
}

using R62Lanes = std::multiset<std::pair<std::string, std::string>>;  // (name, kind)
R62Lanes r62_lanes(const r62::SessionReader& r) {
  R62Lanes out;
  for (const auto& l : r.lanes()) out.insert({l.name, l.kind});
  return out;
}

// (lane name, op name, duration ns) of every op on a GPU lane (stream, gpu_annotation)
std::multiset<std::tuple<std::string, std::string, int64_t>> r62_gpu_ops(const r62::SessionReader& r) {
  std::map<int32_t, std::string> gpu;
  for (const auto& l : r.lanes())
    if (l.kind == "stream" || l.kind == "gpu_annotation") gpu[l.lane] = l.name;
  std::multiset<std::tuple<std::string, std::string, int64_t>> out;
  for (const auto& o : r.all_ops())
    if (auto it = gpu.find(o.lane); it != gpu.end()) out.insert({it->second, r.name(o.name_id), o.end_ns - o.start_ns});
  return out;
}

void r62_expect_same(const std::string& a_db, const std::string& b_db, bool hta) {
  const r62::SessionReader a(a_db), b(b_db);
  EXPECT_EQ(r62_lanes(a), r62_lanes(b));
  EXPECT_EQ(r62_gpu_ops(a), r62_gpu_ops(b));
  EXPECT_EQ(a.all_ops().size(), b.all_ops().size());
  EXPECT_EQ(a.meta(r62::meta::kWorldSize), b.meta(r62::meta::kWorldSize));
  ASSERT_EQ(a.ranks().size(), b.ranks().size());
  EXPECT_EQ(a.ranks()[0].device, b.ranks()[0].device);
  EXPECT_EQ(a.ranks()[0].device.find(") ("), std::string::npos) << a.ranks()[0].device;
  if (!hta) return;
  const fs::path dir = fs::path(a_db).parent_path();
  const nlohmann::json sa = r62_stats(dir, a_db), sb = r62_stats(dir, b_db);
  nlohmann::json ka = sa["gpu_kernels"]["ranks"], kb = sb["gpu_kernels"]["ranks"];
  for (auto* k : {&ka, &kb})
    for (auto& r : *k) r.erase("hta_on_export");
  EXPECT_EQ(ka, kb);
  EXPECT_EQ(sa["gpu_kernel_breakdown"], sb["gpu_kernel_breakdown"]);
  EXPECT_EQ(sa["world_size"], sb["world_size"]);
  EXPECT_EQ(sa["overlap_pct"], sb["overlap_pct"]);
}
}  // namespace

TEST(Imp62RoundTrip, NcclDataThroughKineto) {
  const std::string src = kR62Data + "/traces/nccl_data.json.gz";
  if (!fs::exists(src)) GTEST_SKIP() << src << " is absent (../shared/data)";
  const auto [a, b] = r62_round_trip("nccl_kineto", src, "kineto");
  r62_expect_same(a, b, true);
  // the original stream numbers: 7 (compute) and 40 (NCCL)
  std::set<std::string> streams;
  for (const auto& l : r62::SessionReader(b).lanes())
    if (l.kind == "stream") streams.insert(l.name.substr(0, l.name.find(' ', 7)));
  EXPECT_EQ(streams, (std::set<std::string>{"stream 7", "stream 40"}));
  // the NCCL version and the trace's own clock came through
  const r62::SessionReader rb(b);
  EXPECT_NE(rb.meta(r62::meta::kImportProducer).find("NCCL 2.17.1"), std::string::npos);
  EXPECT_EQ(r62::SessionReader(a).meta(r62::meta::kImportOriginNs), rb.meta(r62::meta::kImportOriginNs));
}

TEST(Imp62RoundTrip, NcclDataThroughChrome) {
  const std::string src = kR62Data + "/traces/nccl_data.json.gz";
  if (!fs::exists(src)) GTEST_SKIP() << src << " is absent (../shared/data)";
  const auto [a, b] = r62_round_trip("nccl_chrome", src, "chrome");
  const r62::SessionReader rb(b);
  EXPECT_EQ(rb.meta(r62::meta::kWorldSize), "2");
  EXPECT_NE(rb.meta(r62::meta::kImportProducer).find("NCCL 2.17.1"), std::string::npos);
  // runtime calls and GPU annotations kept as such (import's counts)
  int64_t annotations = 0;
  for (const auto& l : rb.lanes()) annotations += l.kind == "gpu_annotation" ? 1 : 0;
  EXPECT_EQ(annotations, 2);
  const fs::path dir = fs::path(a).parent_path();
  const nlohmann::json sa = r62_stats(dir, a), sb = r62_stats(dir, b);
  EXPECT_EQ(sa["gpu_kernels"]["ranks"][0]["overlap_pct"], sb["gpu_kernels"]["ranks"][0]["overlap_pct"]);
  EXPECT_EQ(sa["world_size"], sb["world_size"]);
}

TEST(Imp62RoundTrip, TraceDiffThroughKineto) {
  const std::string src = kR62Data + "/traces/trace_diff_test.json.gz";
  if (!fs::exists(src)) GTEST_SKIP() << src << " is absent (../shared/data)";
  const auto [a, b] = r62_round_trip("diff_kineto", src, "kineto");
  r62_expect_same(a, b, true);
}

// Nsight: the sync record stays a sync (category other on its stream, not a kernel), the NVTX
// ranges annotations (off the critical path); the HTA block of the re-import is HTA's reading of
// the Kineto file, rounded to whole us (the exact-ns Nsight figures cannot survive that), so it
// is not compared.
TEST(Imp62RoundTrip, NsightThroughKineto) {
  const std::string src = kR62Data + "/nsys/fuser_h200.sqlite";
  if (!fs::exists(src)) GTEST_SKIP() << src << " is absent (../shared/data)";
  const auto [a, b] = r62_round_trip("nsys_kineto", src, "kineto");
  const r62::SessionReader ra(a), rb(b);
  EXPECT_EQ(r62_gpu_ops(ra), r62_gpu_ops(rb));
  int64_t sync_other = 0;
  for (const auto& o : rb.all_ops())
    if (rb.name(o.name_id) == "Stream Wait Event") sync_other += o.category == r62::OpCategory::other ? 1 : 0;
  EXPECT_EQ(sync_other, 1);
  const std::string names = rb.meta(r62::meta::kImportAnnotationNames);
  EXPECT_FALSE(names.empty());
  EXPECT_EQ(ra.ranks()[0].device, rb.ranks()[0].device);
}

// `embedscope merge`: per-rank sessions as one (sessions/merge/merge.h), against the directory
// import of the same traces, rank clashes, overwriting, and --align collectives.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/analysis/gpu_kernels.h"
#include "embedscope/sessions/merge/merge.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "import_test_support.h"
#include "support/cli_run.h"

using namespace embedscope::sessions;
using namespace embedscope::sessions::testing;
namespace si = embedscope::sessions::importers;

namespace {
std::string import_one(const std::string& file, const std::string& db_name) {
  import_into({file}, db_name);
  return scratch_db(db_name);
}
embedscope::test_support::CliResult cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, import_scratch());
}
/// stats --json without what names the files.
nlohmann::json stats_json(const std::string& db) {
  auto r = cli("stats " + db + " --json");
  EXPECT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  j.erase("session");
  j["imported"].erase("sources");
  return j;
}
}  // namespace

TEST(Merge, TwoSingleRankImportsEqualTheDirectoryImport) {
  const std::string a = import_one(trace_fixture("hta_small/rank0.json"), "m_rank0.db");
  const std::string b = import_one(trace_fixture("hta_small/rank1.json"), "m_rank1.db");
  import_into({trace_fixture("hta_small")}, "m_dir.db");
  const std::string all = scratch_db("m_all.db");
  const MergeSummary sum = merge_sessions({a, b}, all, {"none", true});
  EXPECT_EQ(sum.ranks, (std::vector<int32_t>{0, 1}));
  const SessionReader m(all), d(scratch_db("m_dir.db"));
  EXPECT_EQ(m.op_count(), d.op_count());
  EXPECT_EQ(m.meta(meta::kImportOriginNs), d.meta(meta::kImportOriginNs));
  EXPECT_EQ(m.meta(meta::kWorldSize), "2");
  const auto merged_from = nlohmann::json::parse(m.meta(meta::kMergedFromJson));
  ASSERT_EQ(merged_from.size(), 2u);
  EXPECT_EQ(merged_from[1]["ranks"], nlohmann::json::array({1}));
  const auto fm = gpu_kernel_figures(m), fd = gpu_kernel_figures(d);
  ASSERT_EQ(fm.size(), 2u);
  EXPECT_DOUBLE_EQ(fm[0].overlap_pct, 37.5);  // hta_small's rank 0 (import_cli_test)
  EXPECT_EQ(fm[0].idle_ns, fd[0].idle_ns);
  EXPECT_EQ(fm[1].compute_ns, fd[1].compute_ns);
  // stats: the same figures, every one of them
  EXPECT_EQ(stats_json(all), stats_json(scratch_db("m_dir.db")));
}

TEST(Merge, ClashesAndOverwritingAreRefusedNamingTheFiles) {
  const std::string a = import_one(trace_fixture("hta_small/rank0.json"), "c_rank0.db");
  const std::string a2 = import_one(trace_fixture("hta_small/rank0.json"), "c_rank0_again.db");
  try {
    merge_sessions({a, a2}, scratch_db("c_all.db"), {"none", true});
    FAIL() << "a clash was merged";
  } catch (const SessionError& e) {
    EXPECT_EQ(std::string(e.what()), a2 + ": rank 0 is also in " + a + "; each rank may come from one session only");
  }
  auto r = cli("merge " + a + " " + a2 + " -o " + scratch_db("c_all.db"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(a2 + ": rank 0 is also in " + a), std::string::npos) << r.err;
  const std::string b = import_one(trace_fixture("hta_small/rank1.json"), "c_rank1.db");
  const std::string out = scratch_db("c_out.db");
  std::remove(out.c_str());
  r = cli("merge " + a + " " + b + " -o " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("ranks        0, 1 (2 ranks)"), std::string::npos) << r.out;
  r = cli("merge " + a + " " + b + " -o " + out);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("already exists"), std::string::npos) << r.err;
  r = cli("merge " + a + " " + b + " -o " + out + " --force-overwrite");
  EXPECT_EQ(r.code, 0) << r.err;
  r = cli("merge " + a + " " + b + " -o " + a + " --force-overwrite");  // never over an input
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("the output is one of the inputs"), std::string::npos) << r.err;
}

TEST(Merge, AlignCollectivesRecoversTheOffsetOfPerRankImports) {
  const std::string a = import_one(trace_fixture("align/rank0.json"), "al_rank0.db");
  const std::string b = import_one(trace_fixture("align/rank1.json"), "al_rank1.db");
  const std::string out = scratch_db("al_all.db");
  std::remove(out.c_str());
  auto r = cli("merge " + a + " " + b + " -o " + out + " --align collectives --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["alignment"]["offsets_ns"]["1"], 400000);
  EXPECT_EQ(j["alignment"]["max_skew_ns"], 3000);
  const SessionReader m(out);
  EXPECT_EQ(m.meta(meta::kImportAlign), "collectives");
  std::map<std::pair<int32_t, uint64_t>, int64_t> end;
  for (const auto& c : m.collectives()) end[std::make_pair(c.rank, c.sequence)] = c.end_ns;
  EXPECT_EQ(end[std::make_pair(1, uint64_t{0})], end[std::make_pair(0, uint64_t{0})]);
}

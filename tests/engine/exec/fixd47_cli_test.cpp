// tester47 findings fixed by fixd47, each end to end where the user met it.
// F16: lm_embedding sessions recorded no lookup time (every load counter's lookup_ns 0) and
// `stats` / `compare` showed that 0/0 as "lookup time max/mean 1.00" (balanced): the LM runs
// (threaded and simulated) now time their forward "lookup" op, and a session without any
// lookup time reads "not recorded" (null in --json, "-" in compare).
// F12: a KJT file cut short or whose header miscounts its batches was found only when the run
// reached the bad batch; a file whose writer was killed (N = 0, batches intact) was refused.
// F13: `import` of one memory snapshot twice made twice the ranks. F4: a directory given as a
// plan, a text to tokenize or a token file gave a raw stream error, exit 1. F9: `compare` did
// not say that a pipeline's drain steps are left out of its figures.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/exec/lm_run.h"
#include "embedscope/engine/input/kjt_file.h"
#include "embedscope/engine/program/lm_program.h"
#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;
namespace es = embedscope::engine;
namespace ss = embedscope::sessions;

fs::path fixd47_dir() {
  static const fs::path d = [] {
    const auto p = fs::temp_directory_path() / ("es_fixd47_" + std::to_string(getpid()));
    fs::create_directories(p);
    return p;
  }();
  return d;
}

embedscope::test_support::CliResult fixd47_cli(const std::string& args) {
  return embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, fixd47_dir());
}

/// vocab_parallel, V 64, H 8, sequence 8, 2 sequences, 2 ranks, 2 steps.
es::LmWorkloadSpec fixd47_lm_spec() {
  es::LmWorkloadSpec s;
  s.vocab_size = 64;
  s.hidden_size = 8;
  s.sequence_length = 8;
  s.micro_batch_size = 2;
  s.world_size = 2;
  s.steps = 2;
  return s;
}

/// Per (rank, step): the load counter's lookup_ns and the duration of the rank's "lookup" span.
struct Fixd47Lookup {
  int64_t counter_ns = 0, span_ns = 0;
};
std::map<std::pair<int, int64_t>, Fixd47Lookup> fixd47_lookups(const std::string& path) {
  std::map<std::pair<int, int64_t>, Fixd47Lookup> out;
  const ss::SessionReader session(path);
  for (const auto& c : session.load()) out[{c.rank, c.step}].counter_ns += c.lookup_ns;
  for (const auto& op : session.all_ops())
    if (op.category == ss::OpCategory::lookup && session.name(op.name_id) == "lookup")
      out[{op.rank, op.step}].span_ns += op.end_ns - op.start_ns;
  return out;
}
}  // namespace

TEST(Fixd47LmLookupTime, MeasuredRunRecordsTheLookupSpanAsLookupNs) {
  const std::string path = (fixd47_dir() / "lm_measured.db").string();
  es::LmRunOptions opt;
  opt.session_path = path;
  opt.overwrite = true;
  es::run_lm(fixd47_lm_spec(), opt);
  const auto got = fixd47_lookups(path);
  ASSERT_EQ(got.size(), 4u);  // 2 ranks x 2 steps
  for (const auto& [key, v] : got) {
    SCOPED_TRACE(testing::Message() << "rank " << key.first << " step " << key.second);
    EXPECT_GT(v.span_ns, 0);
    // the counter times the op around its span: at least the span, never 0
    EXPECT_GE(v.counter_ns, v.span_ns);
  }
  const auto st = ss::analyze(ss::SessionReader(path));
  ASSERT_TRUE(st.lookup_time_max_over_mean.has_value());
  EXPECT_GE(*st.lookup_time_max_over_mean, 1.0);
}

TEST(Fixd47LmLookupTime, SimulatedRunRecordsTheLookupOpsModelledTime) {
  const std::string path = (fixd47_dir() / "lm_simulated.db").string();
  es::LmSimulateOptions opt;
  opt.session_path = path;
  opt.overwrite = true;
  opt.hardware = "h100_sxm";
  es::simulate_lm(fixd47_lm_spec(), opt);
  const auto got = fixd47_lookups(path);
  ASSERT_EQ(got.size(), 4u);
  for (const auto& [key, v] : got) {
    SCOPED_TRACE(testing::Message() << "rank " << key.first << " step " << key.second);
    EXPECT_GT(v.span_ns, 0);
    EXPECT_EQ(v.counter_ns, v.span_ns);  // the modelled op's time, exactly
  }
}

TEST(Fixd47LmLookupTime, NoRecordedLookupTimeIsNotRecordedNeverBalanced) {
  // 2 ranks, 1 step: ids 30 and 10 (max/mean 1.5), lookup_ns 0 on both (what LM sessions held)
  const std::string path = (fixd47_dir() / "no_lookup_ns.db").string();
  fs::remove(path);
  {
    ss::SessionWriter w(path);
    w.set_metadata("world_size", "2");
    w.set_metadata("samples_per_step", "8");
    w.set_metadata("workload_name", "fixd47");
    for (int r = 0; r < 2; ++r) {
      w.add_lane({r, 0, "compute", "thread"});
      w.add_step({0, r, 1'000'000, 2'000'000, 0.5, 0, 0});
      ss::LoadCounter c;
      c.step = 0;
      c.rank = r;
      c.shard = r;
      c.ids = r == 0 ? 30 : 10;
      w.add_load(c);
    }
    w.add_ops({{0, ss::Lane::compute, ss::OpCategory::lookup, "lookup", 0, 1'000'000, 1'300'000, 0, 0},
               {1, ss::Lane::compute, ss::OpCategory::lookup, "lookup", 0, 1'000'000, 1'100'000, 0, 0}});
    w.close("complete");
  }
  const auto st = ss::analyze(ss::SessionReader(path));
  EXPECT_DOUBLE_EQ(st.lookups_max_over_mean, 1.5);
  EXPECT_FALSE(st.lookup_time_max_over_mean.has_value());
  auto r = fixd47_cli("stats " + path);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("ids looked up max/mean 1.50; lookup time not recorded"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("lookup time max/mean"), std::string::npos) << r.out;
  r = fixd47_cli("stats " + path + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j.at("imbalance").at("lookup_time_max_over_mean").is_null()) << j.at("imbalance");
  EXPECT_DOUBLE_EQ(j.at("imbalance").at("lookups_max_over_mean").get<double>(), 1.5);
  r = fixd47_cli("compare " + path + " " + path);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto at = r.out.find("imbalance: lookup time (max/mean)");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
  EXPECT_EQ(line.find("1.00"), std::string::npos) << line;
  EXPECT_NE(line.find(" -"), std::string::npos) << line;
}

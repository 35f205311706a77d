// tester52 F4 / F5: two teaching scenarios said wrong things about their collectives.
// row_wise_vs_table_wise said the ids of every feature go to every rank and the reduce-scatter
// follows the output all-to-all; vocab_parallel_vs_sequence_parallel said the extra bytes of
// sequence parallelism are the backward's all-gather. These tests hold the texts to what the
// scenarios' own runs move: each collective the text names is in the run's session, and each
// relation it states (same bytes, 4x the bytes, the extra bytes = the body's all-reduce) holds.
// The DLRM runs keep the scenario's batch and ranks (the bytes on the wire depend on them only)
// with every table cut to 1/1000 of its rows; the LM runs are lm_scenario_test.cpp's tiny size.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <string>

#include "embedscope/engine/exec/lm_run.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/scenario.h"
#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/store/session.h"

namespace {

namespace t52e = embedscope::engine;
namespace t52s = embedscope::sessions;

const t52e::Scenario& teach52_builtin(const std::string& id) {
  static std::map<std::string, t52e::Scenario> all = [] {
    std::map<std::string, t52e::Scenario> m;
    for (t52e::Scenario& s : t52e::builtin_scenarios()) m[s.id] = s;
    return m;
  }();
  const auto it = all.find(id);
  if (it == all.end()) throw std::runtime_error("scenario " + id + " not built in");
  return it->second;
}

std::string teach52_text(const t52e::Scenario& s) {
  std::string t;
  for (const auto& p : s.paragraphs) t += p + "\n";
  return t;
}

// The collective names (a/b or a/b/c of lower-case words) that a text quotes.
std::set<std::string> teach52_quoted_collectives(const std::string& text) {
  static const std::regex name(R"(\b(embedding|sequence_parallel|output_projection|body|input_dist|output_dist|grad_dist)/[a-z_]+\b)");
  std::set<std::string> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), name); it != std::sregex_iterator(); ++it)
    out.insert(it->str());
  return out;
}

// Bytes sent per collective name over every rank and measured step (analyze: split checks apart).
std::map<std::string, int64_t> teach52_bytes_by_name(const std::string& path) {
  const t52s::SessionReader session(path);
  const t52s::RunStats st = t52s::analyze(session);
  EXPECT_EQ(st.ended, "complete") << path;
  std::map<std::string, int64_t> m;
  for (const auto& c : st.collectives) m[session.name(c.name_id)] += c.bytes_sent;
  return m;
}

std::string teach52_session(const std::string& name) {
  const auto p = std::filesystem::temp_directory_path() / ("es_teach52_" + name + "_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(p);
  return p.string();
}

// A DLRM run of the scenario with its tables cut to 1/1000 of their rows (at least 64), 1 step.
std::map<std::string, int64_t> teach52_dlrm_bytes(const t52e::ScenarioRun& run, const std::string& name) {
  nlohmann::json j = run.workload;
  for (auto& t : j.at("tables")) t["num_embeddings"] = std::max<int64_t>(64, t.at("num_embeddings").get<int64_t>() / 1000);
  j["steps"] = 1;
  const t52e::WorkloadSpec spec = t52e::parse_workload(j, name);
  t52e::TrainerOptions opt;
  opt.session_path = teach52_session(name);
  opt.keep_events = false;
  const t52e::RunResult r = t52e::run_training(spec, t52e::plan_sharding(spec), opt);
  EXPECT_EQ(r.ended, t52e::RunEnd::complete) << r.error;
  auto m = teach52_bytes_by_name(opt.session_path);
  std::filesystem::remove(opt.session_path);
  return m;
}

std::string teach52_names(const std::map<std::string, int64_t>& m) {
  std::string s;
  for (const auto& [k, v] : m) s += k + " " + std::to_string(v) + "\n";
  return s;
}

TEST(Teach52ScenarioText, RowWiseTextStatesWhatItsRunsMove) {
  const t52e::Scenario& sc = teach52_builtin("row_wise_vs_table_wise");
  ASSERT_EQ(sc.runs.size(), 2u);
  ASSERT_EQ(sc.runs[0].spec.devices.count, 4);
  const auto tw = teach52_dlrm_bytes(sc.runs[0], "tw");
  const auto rw = teach52_dlrm_bytes(sc.runs[1], "rw");
  const std::string text = teach52_text(sc);
  // every collective the text names is one of row_wise's
  const auto quoted = teach52_quoted_collectives(text);
  for (const char* n : {"input_dist/ids", "input_dist/lengths", "output_dist/reduce_scatter", "grad_dist/all_gather"})
    EXPECT_TRUE(quoted.count(n)) << n << " not in the text";
  for (const auto& n : quoted) EXPECT_TRUE(rw.count(n)) << n << " quoted but not in row_wise's session:\n" << teach52_names(rw);
  // "Each id is sent to the one rank that owns its row, so the ids all-to-all carries the same
  // bytes": within 1 % (both send an id to one rank; which ids stay local is the ids' chance)
  ASSERT_GT(tw.at("input_dist/ids"), 0);
  EXPECT_NEAR(static_cast<double>(rw.at("input_dist/ids")) / static_cast<double>(tw.at("input_dist/ids")), 1.0, 0.01);
  // "the lengths all-to-all ... 4x the bytes": every feature's lengths to 3 peers instead of to its
  // table's owner
  EXPECT_EQ(rw.at("input_dist/lengths"), 4 * tw.at("input_dist/lengths")) << teach52_names(tw) << teach52_names(rw);
  // the reduce-scatter replaces the output all-to-all and moves 4x its bytes; the gradient dist
  // is an all-gather of 4x the bytes
  EXPECT_FALSE(rw.count("output_dist/all_to_all")) << teach52_names(rw);
  EXPECT_FALSE(rw.count("grad_dist/all_to_all")) << teach52_names(rw);
  EXPECT_EQ(rw.at("output_dist/reduce_scatter"), 4 * tw.at("output_dist/all_to_all"));
  EXPECT_EQ(rw.at("grad_dist/all_gather"), 4 * tw.at("grad_dist/all_to_all"));
  EXPECT_NE(text.find("PooledEmbeddingsReduceScatter"), std::string::npos);
  EXPECT_EQ(text.find("sent to every rank"), std::string::npos) << text;
}

TEST(Teach52ScenarioText, SequenceParallelTextNamesTheSourceOfItsExtraBytes) {
  const t52e::Scenario& sc = teach52_builtin("vocab_parallel_vs_sequence_parallel");
  std::map<std::string, int64_t> b[2];
  for (int i = 0; i < 2; ++i) {
    nlohmann::json j = sc.runs[static_cast<size_t>(i)].workload;
    j.merge_patch({{"vocab_size", 64}, {"hidden_size", 8}, {"sequence_length", 8}, {"micro_batch_size", 2}, {"steps", 1}});
    t52e::LmRunOptions opt;
    opt.session_path = teach52_session(i == 0 ? "vp" : "sp");
    t52e::run_lm(t52e::parse_lm_workload(j, sc.runs[static_cast<size_t>(i)].label), opt);
    b[i] = teach52_bytes_by_name(opt.session_path);
    std::filesystem::remove(opt.session_path);
  }
  const auto& vp = b[0];
  const auto& sp = b[1];
  const std::string text = teach52_text(sc);
  const auto quoted = teach52_quoted_collectives(text);
  for (const char* n : {"embedding/reduce_scatter", "sequence_parallel/all_gather", "output_projection/grad_reduce_scatter",
                        "embedding/grad_all_gather", "body/grad_all_reduce"})
    EXPECT_TRUE(quoted.count(n)) << n << " not in the text";
  for (const char* n : {"embedding/all_reduce", "output_projection/grad_all_reduce"}) {
    EXPECT_TRUE(quoted.count(n)) << n << " not in the text";
    EXPECT_TRUE(vp.count(n)) << n << "\n" << teach52_names(vp);
  }
  // "A reduce-scatter plus an all-gather move the bytes of the one all-reduce they replace"
  EXPECT_EQ(sp.at("embedding/reduce_scatter") + sp.at("sequence_parallel/all_gather"), vp.at("embedding/all_reduce"))
      << teach52_names(vp) << teach52_names(sp);
  EXPECT_EQ(sp.at("output_projection/grad_reduce_scatter") + sp.at("embedding/grad_all_gather"),
            vp.at("output_projection/grad_all_reduce"));
  // "The extra bytes on the wire are the body's gradient all-reduce" (and the reduce-scatters'
  // split checks, Embedscope's own, not TorchRec's or Megatron's: 192 B a rank each here)
  int64_t total[2] = {0, 0}, checks[2] = {0, 0};
  for (int i = 0; i < 2; ++i)
    for (const auto& [n, v] : b[i]) {
      total[i] += v;
      if (n.size() > 12 && n.substr(n.size() - 12) == "/split_check") checks[i] += v;
    }
  EXPECT_FALSE(vp.count("body/grad_all_reduce")) << teach52_names(vp);
  ASSERT_TRUE(sp.count("body/grad_all_reduce")) << teach52_names(sp);
  EXPECT_GT(sp.at("body/grad_all_reduce"), 0);
  EXPECT_EQ(total[1] - total[0], sp.at("body/grad_all_reduce") + checks[1] - checks[0]) << teach52_names(vp) << teach52_names(sp);
  EXPECT_EQ(text.find("backward's extra all-gather"), std::string::npos) << text;
}

}  // namespace

// A simulated lm_embedding session's comm spans carried correlation 0 and its collectives were
// numbered from 0 by step x collectives-a-step, so its collective instances never formed as the
// measured run's do (tester51, left open by simb51 for the DLRM executor only): `stats` split
// each span's bytes half and half instead of by its record and found no waits for peers.
// simulate_lm now numbers each group's collectives 1, 2, ... on every member, as the Gloo group
// of the measured run (run_lm) does, and gives each comm span its collective's sequence.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "embedscope/engine/exec/lm_run.h"
#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/store/session.h"

namespace {
namespace fs = std::filesystem;
namespace el = embedscope::engine;
namespace sl = embedscope::sessions;

fs::path lm52_dir() {
  static const fs::path d = [] {
    const auto p = fs::temp_directory_path() / ("es_lm52_" + std::to_string(getpid()));
    fs::create_directories(p);
    return p;
  }();
  return d;
}

/// vocab_parallel, V 64, H 8, sequence 8, 2 sequences, 2 ranks, 3 steps.
el::LmWorkloadSpec lm52_spec() {
  el::LmWorkloadSpec s;
  s.vocab_size = 64;
  s.hidden_size = 8;
  s.sequence_length = 8;
  s.micro_batch_size = 2;
  s.world_size = 2;
  s.steps = 3;
  return s;
}

/// (rank, group, sequence) -> (collective name, step), every record of the session.
using Lm52Calls = std::map<std::tuple<int32_t, std::string, uint64_t>, std::pair<std::string, int64_t>>;
Lm52Calls lm52_calls(const sl::SessionReader& session) {
  Lm52Calls out;
  for (const auto& c : session.collectives()) out[{c.rank, c.group, c.sequence}] = {c.name, c.step};
  return out;
}
}  // namespace

// The same workload measured (cpu ranks over Gloo) and simulated: the same collectives under the
// same (rank, group, sequence) keys, and every comm span of the simulated session carries the
// sequence of the record of its rank and name that lies inside it.
TEST(Lm52SimSequences, SimulatedCollectivesAreNumberedAsTheMeasuredRunsGlooGroup) {
  const std::string measured = (lm52_dir() / "measured.db").string();
  const std::string simulated = (lm52_dir() / "simulated.db").string();
  el::LmRunOptions mo;
  mo.session_path = measured;
  mo.overwrite = true;
  el::run_lm(lm52_spec(), mo);
  el::LmSimulateOptions so;
  so.session_path = simulated;
  so.overwrite = true;
  so.hardware = "h100_sxm";
  el::simulate_lm(lm52_spec(), so);

  const sl::SessionReader ms(measured), ss(simulated);
  const Lm52Calls m = lm52_calls(ms), s = lm52_calls(ss);
  ASSERT_FALSE(s.empty());
  EXPECT_EQ(s, m);
  EXPECT_EQ(std::get<2>(s.begin()->first), 1u);  // numbered from 1, as Gloo's ++seq_

  std::map<std::pair<int32_t, uint64_t>, const sl::CollectiveRecord*> by_rank_seq;
  const auto records = ss.collectives();
  for (const auto& c : records) by_rank_seq[{c.rank, c.sequence}] = &c;
  int comm_spans = 0;
  for (const auto& o : ss.all_ops()) {
    if (o.category != sl::OpCategory::comm) continue;
    ++comm_spans;
    const auto it = by_rank_seq.find({o.rank, o.correlation});
    ASSERT_NE(it, by_rank_seq.end()) << ss.name(o.name_id) << " correlation " << o.correlation;
    EXPECT_EQ(it->second->name, ss.name(o.name_id));
    EXPECT_EQ(it->second->start_ns, o.start_ns);
    EXPECT_EQ(it->second->end_ns, o.end_ns);
  }
  EXPECT_EQ(comm_spans, static_cast<int>(records.size()));

  // the instances form: each collective's bytes split by its records, so sent = received over
  // the closed group of 2, and equal to the records' sums
  const sl::RunStats st = sl::analyze(ss);
  ASSERT_FALSE(st.collectives.empty());
  std::map<std::string, int64_t> sent;
  for (const auto& c : records)
    if (c.step >= 0) sent[c.name] += c.bytes_sent;
  for (const auto& c : st.collectives) {
    const std::string name = ss.name(c.name_id);
    EXPECT_EQ(c.bytes_sent, c.bytes_received) << name;
    EXPECT_EQ(c.bytes_sent + c.check_bytes_sent, sent.at(name)) << name;
  }
}

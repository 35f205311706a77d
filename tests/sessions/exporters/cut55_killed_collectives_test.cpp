// A run killed between a step's collective records and the ops they ran in (the writer commits
// them apart) holds the cut step's collectives without their ops, or its ops without their
// collectives. Both exports write a collective inside its comm op where there is one, bare
// otherwise; an import of either export gives back every collective and every rank's bytes.
// (Carry54KilledRun once saw 58,116 B come back of 63,464 under load; neither cut order
// reproduces it here, so its cause is still open.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/exporters/export.h"
#include "embedscope/sessions/exporters/kineto_export.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "import_test_support.h"

namespace {
namespace fs = std::filesystem;
namespace c55 = embedscope::sessions;

// 2 ranks; steps 0 and 1 each with a compute op and a comm op holding one all-to-all of 1,000 B
// each way; step 2 cut, no step row: with `collectives_only` its all-to-all (2,000 B sent by rank
// 0, 500 B by rank 1) and no op, else its comm op (2,500 B) and no collective. Ended crashed.
std::string c55_cut_session(const fs::path& dir, bool collectives_only) {
  const std::string db = (dir / "cut.db").string();
  c55::SessionWriter w(db, true);
  w.set_metadata(c55::meta::kWorldSize, "2");
  w.set_metadata(c55::meta::kSamplesPerStep, "16");
  w.set_metadata(c55::meta::kBackend, "cpu");
  w.set_metadata(c55::meta::kSimulated, "0");
  w.set_metadata(c55::meta::kWorkloadName, "cut");
  w.set_metadata(c55::meta::kWorkloadJson, R"({"name":"cut","steps":5})");
  constexpr int64_t ms = 1000000;
  for (int32_t r : {0, 1}) {
    w.add_lane({r, 0, "compute", "thread"});
    w.add_lane({r, 1, "comm", "thread"});
  }
  auto coll = [&](int32_t r, int64_t s, int64_t b, int64_t sent, int64_t recv) {
    c55::CollectiveRecord c;
    c.rank = r;
    c.op = "all_to_all";
    c.name = "output_dist/all_to_all";
    c.group = "world";
    c.sequence = static_cast<uint64_t>(s + 1);
    c.dtype = "float32";
    c.step = s;
    c.start_ns = b + 2 * ms;
    c.end_ns = b + 3 * ms;
    c.bytes_sent = sent;
    c.bytes_received = recv;
    c.peers = {0, 1};
    c.send_elements = r == 0 ? std::vector<int64_t>{sent / 4, sent / 4} : std::vector<int64_t>{sent / 4, sent / 4};
    c.recv_elements = r == 0 ? std::vector<int64_t>{recv / 4, recv / 4} : std::vector<int64_t>{recv / 4, recv / 4};
    w.add_collective(c);
  };
  for (int64_t s = 0; s < 3; ++s) {
    const int64_t b = 10 * ms * s;
    for (int32_t r : {0, 1}) {
      if (s == 2 && collectives_only) {
        coll(r, s, b, r == 0 ? 2000 : 500, r == 0 ? 500 : 2000);
        continue;
      }
      if (s == 2) {
        w.add_ops({c55::OpEvent{r, c55::Lane::comm, c55::OpCategory::comm, "output_dist/all_to_all", s, b + 2 * ms, b + 3 * ms,
                                2500, static_cast<uint64_t>(s + 1)}});
        continue;
      }
      w.add_ops({c55::OpEvent{r, c55::Lane::compute, c55::OpCategory::dense, "dense_forward_backward", s, b, b + 2 * ms, 0, 0},
                 c55::OpEvent{r, c55::Lane::comm, c55::OpCategory::comm, "output_dist/all_to_all", s, b + 2 * ms, b + 3 * ms,
                              2000, static_cast<uint64_t>(s + 1)}});
      coll(r, s, b, 1000, 1000);
      w.add_step({s, r, b, b + 4 * ms, 0.5, 0, 0});
    }
  }
  w.close("crashed");
  return db;
}

int64_t c55_sent(const c55::RunStats& st, int32_t rank) {
  for (const auto& r : st.ranks)
    if (r.rank == rank) return r.bytes_sent;
  return -1;
}
}  // namespace

static void c55_round_trip(bool collectives_only, size_t collectives, int64_t rank0_sent) {
  const fs::path dir = c55::testing::import_scratch() / (collectives_only ? "cut55_c" : "cut55_o");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string db = c55_cut_session(dir, collectives_only);
  const c55::SessionReader orig(db);
  ASSERT_EQ(orig.collectives().size(), collectives);
  {
    std::ofstream out(dir / "cut.json");
    c55::export_chrome_trace(orig, out);
  }
  c55::export_kineto_traces(orig, (dir / "kin").string());
  const c55::RunStats ref = c55::analyze(orig);
  EXPECT_EQ(c55_sent(ref, 0), rank0_sent);
  for (const std::string& src : {(dir / "cut.json").string(), (dir / "kin").string()}) {
    SCOPED_TRACE(src);
    const std::string name = std::string(collectives_only ? "c_" : "o_") + fs::path(src).filename().string() + "_back.db";
    c55::testing::import_into({src}, name);
    const c55::SessionReader back(c55::testing::scratch_db(name));
    EXPECT_EQ(back.collectives().size(), collectives);
    const c55::RunStats st = c55::analyze(back);
    for (int32_t r : {0, 1}) EXPECT_EQ(c55_sent(st, r), c55_sent(ref, r)) << "rank " << r;
  }
}

// The cut step's collectives, no ops: every one of the 6 comes back; rank 0's bytes sent are its
// 1,000 + 1,000 B of the two measured steps (the cut step has no step row: not measured), as in
// the run's own stats.
TEST(Cut55KilledRun, CollectivesOfACutStepWithoutTheirOpsComeBackFromBothExports) { c55_round_trip(true, 6, 2000); }

// The cut step's ops, no collectives: the 4 recorded come back, and rank 0's 2,000 B sent.
TEST(Cut55KilledRun, OpsOfACutStepWithoutTheirCollectivesComeBackFromBothExports) { c55_round_trip(false, 4, 2000); }

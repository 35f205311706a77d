// The analyses, `stats` and `export` read ops lane by lane from the packed copy (op_blocks,
// schema 12) where a closed session has one (for_each_lane_ops, SessionReader::all_ops), else
// from the ops rows: the same session read both ways gives the same figures, files and records.
// Each session is read three ways: as written (packed), without the marker row (a killed or live
// run: rows) and as schema 11 (no table: rows). Hand-computed figures on a small fixture; a
// multi-block engine-shaped session; the Kineto fixtures; the real traces of ../shared (HTA's
// numbers from the rows too); a packed copy whose count or bytes are wrong is an error.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/analysis/gpu_kernels.h"
#include "embedscope/sessions/exporters/export.h"
#include "embedscope/sessions/store/op_stream.h"
#include "import_test_support.h"

using namespace embedscope::sessions;
using namespace embedscope::sessions::testing;

namespace {

namespace fs = std::filesystem;

void packed_ops_exec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sql;
  sqlite3_close(db);
}

std::string packed_ops_path(const std::string& name) {
  const fs::path p = import_scratch() / ("packed_" + name);
  fs::remove(p);
  return p.string();
}

/// The three ways to read `closed` (a closed schema-12 session): copies beside it.
struct ThreeWays {
  std::string packed, no_marker, v11;
};

ThreeWays three_ways(const std::string& closed) {
  ThreeWays t{closed + ".packed.db", closed + ".nomarker.db", closed + ".v11.db"};
  for (const auto* p : {&t.packed, &t.no_marker, &t.v11}) fs::copy_file(closed, *p, fs::copy_options::overwrite_existing);
  packed_ops_exec(t.no_marker, "DELETE FROM op_blocks WHERE lane_key = -1");
  packed_ops_exec(t.v11, "DROP TABLE op_blocks; PRAGMA user_version = 11");
  return t;
}

std::string chrome_of(const SessionReader& r) {
  std::ostringstream s;
  export_chrome_trace(r, s);
  return s.str();
}

/// Every CSV file export_csv writes for `r`, name -> content.
std::map<std::string, std::string> csv_of(const SessionReader& r, const std::string& dir) {
  fs::remove_all(dir);
  std::map<std::string, std::string> out;
  for (const auto& p : export_csv(r, analyze(r), dir)) {
    std::ifstream f(p);
    std::stringstream s;
    s << f.rdbuf();
    out[fs::path(p).filename().string()] = s.str();
  }
  return out;
}

void expect_same_records(const std::vector<OpRecord>& a, const std::vector<OpRecord>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(a[i].rank, b[i].rank);
    EXPECT_EQ(a[i].lane, b[i].lane);
    EXPECT_EQ(a[i].category, b[i].category);
    EXPECT_EQ(a[i].name_id, b[i].name_id);
    EXPECT_EQ(a[i].step, b[i].step);
    EXPECT_EQ(a[i].start_ns, b[i].start_ns);
    EXPECT_EQ(a[i].end_ns, b[i].end_ns);
    EXPECT_EQ(a[i].bytes, b[i].bytes);
    EXPECT_EQ(a[i].correlation, b[i].correlation);
    if (::testing::Test::HasFailure()) return;  // one op's difference, not thousands
  }
}

void expect_same_stats(const RunStats& a, const RunStats& b) {
  EXPECT_EQ(a.steps, b.steps);
  EXPECT_EQ(a.world_size, b.world_size);
  EXPECT_EQ(a.overlap_pct, b.overlap_pct);
  EXPECT_EQ(a.exposed_comm_ns, b.exposed_comm_ns);
  EXPECT_EQ(a.untraced_ranks, b.untraced_ranks);
  ASSERT_EQ(a.per_step.size(), b.per_step.size());
  for (size_t i = 0; i < a.per_step.size(); ++i) {
    const auto &x = a.per_step[i], &y = b.per_step[i];
    EXPECT_EQ(std::tie(x.step, x.rank, x.window_ns, x.compute_ns, x.comm_ns, x.overlap_ns, x.exposed_comm_ns, x.idle_ns),
              std::tie(y.step, y.rank, y.window_ns, y.compute_ns, y.comm_ns, y.overlap_ns, y.exposed_comm_ns, y.idle_ns))
        << "per_step " << i;
    EXPECT_EQ(x.by_category_ns, y.by_category_ns) << "per_step " << i;
  }
  ASSERT_EQ(a.ranks.size(), b.ranks.size());
  for (size_t i = 0; i < a.ranks.size(); ++i) {
    const auto &x = a.ranks[i], &y = b.ranks[i];
    EXPECT_EQ(std::tie(x.rank, x.compute_ns, x.comm_ns, x.overlap_ns, x.exposed_comm_ns, x.idle_ns, x.overlap_pct),
              std::tie(y.rank, y.compute_ns, y.comm_ns, y.overlap_ns, y.exposed_comm_ns, y.idle_ns, y.overlap_pct));
    EXPECT_EQ(x.by_category_ns, y.by_category_ns);
  }
  EXPECT_EQ(a.critical_path_ns, b.critical_path_ns);
  ASSERT_EQ(a.critical_path.size(), b.critical_path.size());
  for (size_t i = 0; i < a.critical_path.size(); ++i) {
    const auto &x = a.critical_path[i], &y = b.critical_path[i];
    EXPECT_EQ(std::tie(x.name_id, x.category, x.ns, x.share, x.top_rank, x.steps_bounded),
              std::tie(y.name_id, y.category, y.ns, y.share, y.top_rank, y.steps_bounded));
  }
  ASSERT_EQ(a.critical_paths.size(), b.critical_paths.size());
  for (size_t i = 0; i < a.critical_paths.size(); ++i) EXPECT_EQ(a.critical_paths[i].segments, b.critical_paths[i].segments);
  ASSERT_EQ(a.collectives.size(), b.collectives.size());
  for (size_t i = 0; i < a.collectives.size(); ++i) {
    const auto &x = a.collectives[i], &y = b.collectives[i];
    EXPECT_EQ(std::tie(x.name_id, x.count, x.bytes, x.time_ns, x.exposed_ns, x.wait_ns),
              std::tie(y.name_id, y.count, y.bytes, y.time_ns, y.exposed_ns, y.wait_ns));
  }
}

void expect_same_kernels(const std::vector<RankKernelFigures>& a, const std::vector<RankKernelFigures>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const auto &x = a[i], &y = b[i];
    EXPECT_EQ(std::tie(x.rank, x.gpu_events, x.dropped_events, x.has_comm, x.comm_ns, x.overlap_ns, x.overlap_pct,
                       x.kernel_time_ns, x.idle_ns, x.compute_ns, x.non_compute_ns, x.microsecond_rounding),
              std::tie(y.rank, y.gpu_events, y.dropped_events, y.has_comm, y.comm_ns, y.overlap_ns, y.overlap_pct,
                       y.kernel_time_ns, y.idle_ns, y.compute_ns, y.non_compute_ns, y.microsecond_rounding));
  }
}

/// (rank, lane, ops) of each for_each_lane_ops call.
std::vector<std::tuple<int32_t, int32_t, size_t>> lane_calls(const SessionReader& r) {
  std::vector<std::tuple<int32_t, int32_t, size_t>> calls;
  for_each_lane_ops(r, [&](std::vector<OpRecord>& lane) {
    for (const auto& o : lane) EXPECT_TRUE(o.rank == lane.front().rank && o.lane == lane.front().lane);
    calls.emplace_back(lane.front().rank, lane.front().lane, lane.size());
  });
  return calls;
}

/// Reads `closed` three ways (and a fourth: its blocks without its ops rows, which proves the
/// packed reading reads the blocks) and expects the same of everything that reads ops: all_ops,
/// the lanes for_each_lane_ops gives, analyze, gpu_kernel_figures, the Chrome trace, the CSV files.
void expect_same_three_ways(const std::string& closed, const std::string& tag) {
  const ThreeWays t = three_ways(closed);
  // and a copy without its ops rows: what it reads, every reader read from the blocks
  const std::string blocks_only = closed + ".blocks_only.db";
  fs::copy_file(closed, blocks_only, fs::copy_options::overwrite_existing);
  packed_ops_exec(blocks_only, "DELETE FROM ops");
  const SessionReader packed(t.packed), no_marker(t.no_marker), v11(t.v11), only(blocks_only);
  ASSERT_TRUE(packed.has_op_blocks());  // else this test would compare the rows with themselves
  ASSERT_FALSE(no_marker.has_op_blocks());
  ASSERT_FALSE(v11.has_op_blocks());
  const auto ops = packed.all_ops();
  ASSERT_FALSE(ops.empty());
  const auto stats = analyze(packed);
  const auto kernels = gpu_kernel_figures(packed);
  const auto calls = lane_calls(packed);
  std::vector<OpRecord> streamed;
  for_each_lane_ops(packed, [&](std::vector<OpRecord>& lane) { streamed.insert(streamed.end(), lane.begin(), lane.end()); });
  expect_same_records(streamed, ops);
  const std::string chrome = chrome_of(packed);
  const auto csv = csv_of(packed, closed + ".csv_packed");
  ASSERT_EQ(only.op_count(), 0);
  for (const SessionReader* rows : {&no_marker, &v11, &only}) {
    SCOPED_TRACE(tag + (rows == &v11 ? ": schema 11" : rows == &only ? ": blocks only" : ": no marker"));
    expect_same_records(rows->all_ops(), ops);
    EXPECT_EQ(lane_calls(*rows), calls);
    expect_same_stats(analyze(*rows), stats);
    expect_same_kernels(gpu_kernel_figures(*rows), kernels);
    EXPECT_EQ(chrome_of(*rows), chrome);
    EXPECT_EQ(csv_of(*rows, closed + ".csv_rows"), csv);
  }
}

// One rank, step 0 in [0, 1000) ns. Thread lanes: compute lookup [100, 400) and dense
// [350, 600) (written dense first: the lane is repacked from its rows at close), plus a warmup op
// (step -1); comm a2a [300, 700) and a2a_tail [300, 350) (same start: kept in write order).
// Stream lanes: gemm_kernel [100, 300) (dense), ncclDevKernel_AllReduce [200, 500) (comm).
std::string small_packed_session() {
  const std::string path = packed_ops_path("small.db");
  SessionWriter w(path);
  w.set_metadata("world_size", "1");
  w.add_lane({0, 0, "compute", "thread"});
  w.add_lane({0, 1, "comm", "thread"});
  w.add_lane({0, 2, "gpu_compute", "stream"});
  w.add_lane({0, 3, "gpu_comm", "stream"});
  w.add_step({0, 0, 0, 1000, 0.5, 0, 0});
  w.add_ops({{0, Lane::compute, OpCategory::dense, "dense", 0, 350, 600, 0, 0},
             {0, Lane::compute, OpCategory::lookup, "lookup", 0, 100, 400, 0, 0},
             {0, Lane::compute, OpCategory::lookup, "lookup", -1, -500, -100, 0, 0},
             {0, Lane::comm, OpCategory::comm, "a2a", 0, 300, 700, 64, 1},
             {0, Lane::comm, OpCategory::comm, "a2a_tail", 0, 300, 350, 8, 2},
             {0, Lane::gpu_compute, OpCategory::dense, "gemm_kernel", 0, 100, 300, 0, 0},
             {0, Lane::gpu_comm, OpCategory::comm, "ncclDevKernel_AllReduce", 0, 200, 500, 0, 0}});
  w.close("complete");
  return path;
}

// Two ranks x 24 steps; per step and rank 720 compute ops on lane 0 (more than one 16,384-op
// block per lane), 12 collectives on lane 1 (with their records), 40 kernels on stream lanes 2
// and 3. Rank 1 writes each step's compute ops newest first (repacked at close).
std::string multi_block_session() {
  const std::string path = packed_ops_path("multi_block.db");
  SessionWriter w(path);
  w.set_metadata("world_size", "2");
  w.set_metadata("samples_per_step", "64");
  static const char* names[] = {"lookup", "dense", "input", "optimizer"};
  static const OpCategory cats[] = {OpCategory::lookup, OpCategory::dense, OpCategory::input, OpCategory::optimizer};
  for (int r = 0; r < 2; ++r) {
    w.add_lane({r, 0, "compute", "thread"});
    w.add_lane({r, 1, "comm", "thread"});
    w.add_lane({r, 2, "gpu_compute", "stream"});
    w.add_lane({r, 3, "gpu_comm", "stream"});
  }
  const int64_t step_ns = 1'000'000;
  for (int64_t s = 0; s < 24; ++s) {
    const int64_t t0 = s * step_ns;
    std::vector<OpEvent> ops;
    for (int r = 0; r < 2; ++r) {
      w.add_step({s, r, t0, t0 + step_ns - 1000 * r, 1.0 / static_cast<double>(s + 1), 0, 0});
      std::vector<OpEvent> compute;
      for (int64_t i = 0; i < 720; ++i) {
        const int64_t a = t0 + i * 1300 + (i % 5) * 7 + r * 11;
        compute.push_back({r, Lane::compute, cats[i % 4], names[i % 4], s,
                           a, a + 900 + (i % 9) * 100, 0, 0});
      }
      if (r == 1) std::reverse(compute.begin(), compute.end());
      ops.insert(ops.end(), compute.begin(), compute.end());
      for (int64_t c = 0; c < 12; ++c) {
        const uint64_t seq = static_cast<uint64_t>(s * 12 + c + 1);
        const int64_t a = t0 + 40'000 + c * 75'000 + r * 9'000, e = t0 + 40'000 + c * 75'000 + 30'000;
        ops.push_back({r, Lane::comm, OpCategory::comm, c % 2 ? "all_reduce" : "all_to_all", s, a, e, 4096 * (c + 1), seq});
        CollectiveRecord rec;
        rec.rank = r;
        rec.op = c % 2 ? "all_reduce" : "all_to_all";
        rec.name = rec.op;
        rec.group = "world";
        rec.sequence = seq;
        rec.dtype = "float32";
        rec.step = s;
        rec.start_ns = a;
        rec.end_ns = e;
        rec.bytes_sent = rec.bytes_received = 2048 * (c + 1);
        rec.peers = {0, 1};
        w.add_collective(rec);
      }
      for (int64_t k = 0; k < 40; ++k) {
        const int64_t a = t0 + 5'000 + k * 22'000 + r * 300;
        ops.push_back({r, k % 3 ? Lane::gpu_compute : Lane::gpu_comm, k % 3 ? OpCategory::dense : OpCategory::comm,
                       k % 3 ? "gemm_kernel" : "ncclDevKernel_SendRecv", s, a, a + 15'000 + (k % 4) * 2'500, 0, 0});
      }
    }
    w.add_ops(ops);
  }
  w.close("complete");
  return path;
}

}  // namespace

// The small fixture: hand-computed figures, the same from the blocks and from the rows.
TEST(PackedOps, SmallSessionGivesHandComputedFiguresEitherWay) {
  const std::string closed = small_packed_session();
  expect_same_three_ways(closed, "small");
  const ThreeWays t = three_ways(closed);
  for (const std::string& path : {t.packed, t.no_marker}) {
    SCOPED_TRACE(path);
    const SessionReader r(path);
    EXPECT_EQ(lane_calls(r), (std::vector<std::tuple<int32_t, int32_t, size_t>>{{0, 0, 3}, {0, 1, 2}, {0, 2, 1}, {0, 3, 1}}));
    const auto ops = r.all_ops();
    ASSERT_EQ(ops.size(), 7u);
    EXPECT_EQ(r.name(ops[0].name_id), "lookup");  // the warmup op: lane 0 by start
    EXPECT_EQ(ops[0].step, -1);
    EXPECT_EQ(r.name(ops[2].name_id), "dense");
    EXPECT_EQ(r.name(ops[3].name_id), "a2a");  // same start as a2a_tail, written first
    EXPECT_EQ(r.name(ops[4].name_id), "a2a_tail");
    EXPECT_EQ(ops[4].bytes, 8);
    EXPECT_EQ(ops[4].correlation, 2u);
    const RunStats st = analyze(r);
    ASSERT_EQ(st.per_step.size(), 1u);
    const RankStepTimes& s = st.per_step[0];
    EXPECT_EQ(s.window_ns, 1000);
    // the rank has GPU streams: its figures are its streams' ops (analyze: stream level), the
    // gemm kernel [100, 300) and the all-reduce kernel [200, 500); its host spans are left out
    EXPECT_TRUE(st.stream_ranks);
    EXPECT_EQ(s.compute_ns, 200);  // [100, 300)
    EXPECT_EQ(s.comm_ns, 300);     // [200, 500)
    EXPECT_EQ(s.overlap_ns, 100);  // [200, 300)
    EXPECT_EQ(s.exposed_comm_ns, 200);
    EXPECT_EQ(s.idle_ns, 600);  // 1000 - [100, 500)
    EXPECT_EQ(s.by_category_ns[static_cast<size_t>(OpCategory::lookup)], 0);  // host spans only
    EXPECT_EQ(s.by_category_ns[static_cast<size_t>(OpCategory::dense)], 200);
    EXPECT_EQ(s.by_category_ns[static_cast<size_t>(OpCategory::comm)], 300);
    EXPECT_DOUBLE_EQ(st.overlap_pct, 100.0 / 3.0);
    const auto k = gpu_kernel_figures(r);
    ASSERT_EQ(k.size(), 1u);
    EXPECT_EQ(k[0].gpu_events, 2);
    EXPECT_EQ(k[0].kernel_time_ns, 400);  // 100 .. 500
    EXPECT_EQ(k[0].idle_ns, 0);
    EXPECT_EQ(k[0].compute_ns, 200);
    EXPECT_EQ(k[0].non_compute_ns, 200);
    EXPECT_EQ(k[0].comm_ns, 300);
    EXPECT_EQ(k[0].overlap_ns, 100);  // [200, 300)
    EXPECT_NEAR(k[0].overlap_pct, 100.0 / 3.0, 1e-9);
    const std::string chrome = chrome_of(r);
    EXPECT_NE(chrome.find(R"({"ph":"X","pid":0,"tid":1,"name":"a2a_tail","cat":"comm","ts":0.300,"dur":0.050,)"
                          R"("args":{"step":0,"bytes":8,"sequence":2}})"),
              std::string::npos);
    const auto csv = csv_of(r, path + ".csv");
    EXPECT_NE(csv.at("events.csv").find("\n0,compute,dense,dense,0,350,600,250,0,0\n"), std::string::npos);
    EXPECT_NE(csv.at("steps.csv").find("\n0,0,0.5,1000,200,300,100,200,600,"), std::string::npos) << csv.at("steps.csv");
  }
}

// Several blocks per lane, lanes repacked at close, collectives and their critical path: the
// same everything from the blocks and the rows.
TEST(PackedOps, MultiBlockSessionReadsTheSameEitherWay) {
  const std::string closed = multi_block_session();
  {
    const SessionReader r(closed);
    int64_t lane0_blocks = -1;
    sqlite3* db = nullptr;
    sqlite3_open(closed.c_str(), &db);
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db, "SELECT count(*) FROM op_blocks WHERE lane_key = 256", -1, &st, nullptr);
    if (sqlite3_step(st) == SQLITE_ROW) lane0_blocks = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    EXPECT_EQ(lane0_blocks, 2);  // rank 1 lane 0: 24 x 720 = 17,280 ops
    EXPECT_EQ(r.op_count(), 2 * 24 * (720 + 12 + 40));
    const RunStats st2 = analyze(r);
    EXPECT_EQ(st2.per_step.size(), 48u);
    EXPECT_FALSE(st2.collectives.empty());
    EXPECT_FALSE(st2.critical_path.empty());
  }
  expect_same_three_ways(closed, "multi_block");
}

// The Kineto fixtures as `embedscope import` writes them: HTA's figures, steps, export.
TEST(PackedOps, ImportedKinetoFixturesReadTheSameEitherWay) {
  for (const std::string name : {"hta_small", "tolerance.json", "align"}) {
    SCOPED_TRACE(name);
    import_into({trace_fixture(name)}, "packed_" + name + ".db");
    expect_same_three_ways(scratch_db("packed_" + name + ".db"), name);
  }
}

// The real traces of ../shared/data/traces: HTA's numbers (issue 12's table) from the blocks and
// from the rows alike.
TEST(PackedOps, SharedTracesGiveHtasNumbersFromRowsAndBlocks) {
  const std::string dir = std::string(EMBEDSCOPE_SHARED_DATA) + "/traces";
  if (!fs::exists(dir + "/nccl_data.json.gz")) GTEST_SKIP() << dir << " is absent (shared test data)";
  struct Case {
    const char* file;
    double overlap_pct;
    int64_t idle_us, compute_us, non_compute_us;
  };
  for (const Case& k : {Case{"nccl_data.json.gz", 14.31, 338781, 75169, 21636},
                        Case{"trace_diff_test.json.gz", 68.80, 46910, 429216, 152245}}) {
    SCOPED_TRACE(k.file);
    const std::string db = std::string("packed_") + k.file + ".db";
    import_into({dir + "/" + k.file}, db);
    expect_same_three_ways(scratch_db(db), k.file);
    const ThreeWays t = three_ways(scratch_db(db));
    for (const std::string& path : {t.packed, t.v11}) {
      const auto f = gpu_kernel_figures(SessionReader(path));
      ASSERT_EQ(f.size(), 1u);
      EXPECT_NEAR(f[0].overlap_pct, k.overlap_pct, 0.005);
      EXPECT_NEAR(f[0].idle_ns / 1000.0, k.idle_us, 1.0);
      EXPECT_NEAR(f[0].compute_ns / 1000.0, k.compute_us, 1.0);
      EXPECT_NEAR(f[0].non_compute_ns / 1000.0, k.non_compute_us, 1.0);
    }
  }
}

// A packed copy that does not add up to its marker, or a block cut short, is an error naming the
// file from every reader of all ops (never figures from part of the session).
TEST(PackedOps, APackedCopyThatDoesNotAddUpIsAnErrorNamingTheFile) {
  const std::string closed = small_packed_session();
  auto error_of = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const SessionError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  const std::string count = closed + ".count.db";
  fs::copy_file(closed, count, fs::copy_options::overwrite_existing);
  packed_ops_exec(count, "UPDATE op_blocks SET op_count = 8 WHERE lane_key = -1");
  const SessionReader r(count);
  const std::string want = count + ": the session file is corrupt (op_blocks hold 7 ops, their marker row says 8";
  EXPECT_NE(error_of([&] { (void)r.all_ops(); }).find(want), std::string::npos) << error_of([&] { (void)r.all_ops(); });
  EXPECT_NE(error_of([&] { (void)analyze(r); }).find(want), std::string::npos);
  EXPECT_NE(error_of([&] { (void)gpu_kernel_figures(r); }).find(want), std::string::npos);
  std::ostringstream sink;
  EXPECT_NE(error_of([&] { export_chrome_trace(r, sink); }).find(want), std::string::npos);

  const std::string cut = closed + ".cut.db";
  fs::copy_file(closed, cut, fs::copy_options::overwrite_existing);
  packed_ops_exec(cut, "UPDATE op_blocks SET data = substr(data, 1, 5) WHERE lane_key = 1");  // rank 0 lane 1
  const SessionReader c(cut);
  EXPECT_NE(error_of([&] { (void)analyze(c); }).find(cut + ": the session file is corrupt (op_blocks of rank 0 lane 1: a "
                                                           "block of 2 ops ends after 0 ops)"),
            std::string::npos)
      << error_of([&] { (void)analyze(c); });
  EXPECT_NE(error_of([&] { (void)c.all_ops(); }).find("op_blocks of rank 0 lane 1"), std::string::npos);
}

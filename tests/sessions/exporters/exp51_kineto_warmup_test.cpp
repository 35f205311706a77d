// tester51 F11: `export --format kineto` kept the warm-up steps' GPU events (only their
// ProfilerStep spans were left out); their launches came before ProfilerStep#0, so HTA counted
// them (91 GPU events, 4.40%) where `stats` leaves them out (39, 5.56%). The export now holds the
// measured steps only, as a torch.profiler schedule(wait, warmup, active) trace does. Checked two
// ways on a simulated run with 3 warm-up steps:
// - the export's GPU events read back here, independently of the analyses (HTA's rules: stream > 0,
//   a launch of the same correlation before the last ProfilerStep, comm kernels by "nccl" name,
//   memory events in neither class), at exact ns: the same events, overlap and kernel time as `stats`;
// - `import` of the export (HTA's whole-us rounding): the overlap `stats` says HTA reads on the export.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "import_test_support.h"
#include "support/cli_run.h"

namespace {
namespace fs = std::filesystem;

struct Exp51Span {
  int64_t start, end;
};

// Union of intervals (sorted by start, joined where they touch or overlap): HTA's merge.
std::vector<Exp51Span> exp51_merge(std::vector<Exp51Span> v) {
  std::sort(v.begin(), v.end(), [](const Exp51Span& a, const Exp51Span& b) { return a.start < b.start; });
  std::vector<Exp51Span> out;
  for (const auto& s : v) {
    if (!out.empty() && s.start <= out.back().end) out.back().end = std::max(out.back().end, s.end);
    else out.push_back(s);
  }
  return out;
}
int64_t exp51_length(const std::vector<Exp51Span>& v) {
  int64_t n = 0;
  for (const auto& s : v) n += s.end - s.start;
  return n;
}
// |a ∩ b| of two merged lists (two pointers).
int64_t exp51_intersection(const std::vector<Exp51Span>& a, const std::vector<Exp51Span>& b) {
  int64_t n = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    n += std::max<int64_t>(0, std::min(a[i].end, b[j].end) - std::max(a[i].start, b[j].start));
    (a[i].end < b[j].end) ? ++i : ++j;
  }
  return n;
}
// the file's "ts" / "dur" (us with 3 decimals) as integer ns
int64_t exp51_ns(const nlohmann::json& us) { return std::llround(us.get<double>() * 1000.0); }

struct Exp51Figures {
  int64_t gpu_events = 0, warmup_ops = 0, profiler_steps = 0, comm_ns = 0, overlap_ns = 0, kernel_time_ns = 0;
};

// HTA's comm/comp overlap and kernel time of one exported rank file, computed from the events alone.
Exp51Figures exp51_from_export(const fs::path& file) {
  std::ifstream in(file);
  const nlohmann::json j = nlohmann::json::parse(in);
  Exp51Figures f;
  std::map<int64_t, int64_t> launch_at;  // correlation -> launch ts (ns)
  int64_t last_step = INT64_MIN;
  struct Gpu {
    int64_t start, end, correlation;
    char cls;  // c communication, p computation, m memory / sync
  };
  std::vector<Gpu> gpu;
  for (const auto& e : j.at("traceEvents")) {
    if (e.value("ph", "") != "X") continue;
    const std::string cat = e.value("cat", ""), name = e.value("name", "");
    const auto& a = e.contains("args") ? e.at("args") : nlohmann::json::object();
    if (a.value("embedscope step", 0) < 0) ++f.warmup_ops;
    if (cat == "user_annotation" && name.rfind("ProfilerStep#", 0) == 0) {
      ++f.profiler_steps;
      last_step = std::max(last_step, exp51_ns(e.at("ts")));
    } else if (cat == "cuda_runtime") {
      launch_at[a.at("correlation").get<int64_t>()] = exp51_ns(e.at("ts"));
    } else if ((cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset" || cat == "cuda_sync") &&
               a.value("stream", 0) > 0) {
      const int64_t s = exp51_ns(e.at("ts"));
      const char cls = cat != "kernel" ? 'm' : name.rfind("nccl", 0) == 0 ? 'c' : 'p';
      gpu.push_back({s, s + exp51_ns(e.at("dur")), a.at("correlation").get<int64_t>(), cls});
    }
  }
  std::vector<Exp51Span> all, comm, comp;
  for (const auto& g : gpu) {
    const auto l = launch_at.find(g.correlation);
    if (l == launch_at.end() || l->second >= last_step) continue;  // no launch / the last step: dropped
    ++f.gpu_events;
    all.push_back({g.start, g.end});
    if (g.cls == 'c') comm.push_back({g.start, g.end});
    if (g.cls == 'p') comp.push_back({g.start, g.end});
  }
  const auto m_all = exp51_merge(all), m_comm = exp51_merge(comm), m_comp = exp51_merge(comp);
  f.kernel_time_ns = m_all.empty() ? 0 : m_all.back().end - m_all.front().start;
  f.comm_ns = exp51_length(m_comm);
  f.overlap_ns = exp51_intersection(m_comm, m_comp);
  return f;
}

nlohmann::json exp51_json(const std::string& args, const fs::path& dir) {
  const auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, dir);
  EXPECT_EQ(r.code, 0) << args << "\n" << r.out << r.err;
  return nlohmann::json::parse(r.out, nullptr, false);
}
}  // namespace

TEST(Exp51KinetoWarmup, ExportHoldsTheGpuEventsStatsCountsAndHtaOnItIsStatsHtaLine) {
  const fs::path dir = embedscope::sessions::testing::import_scratch() / "exp51_warmup";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string db = (dir / "tw3.db").string(), kin = (dir / "kin").string(), back = (dir / "back.db").string();
  const auto cli = [&](const std::string& args) {
    const auto r = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, args, dir);
    ASSERT_EQ(r.code, 0) << args << "\n" << r.out << r.err;
  };
  // tester51's session: 4 measured steps after 3 warm-up steps, GPU streams of a simulated H100
  cli("run --preset tiny --simulate h100_sxm --pipeline sparse_dist --steps 4 --warmup-steps 3 -o " + db);
  cli("export " + db + " --format kineto -o " + kin);
  const nlohmann::json stats = exp51_json("stats " + db + " --json", dir);
  const auto& ranks = stats.at("gpu_kernels").at("ranks");
  ASSERT_EQ(ranks.size(), 2u);
  for (const auto& r : ranks) {
    const int rank = r.at("rank").get<int>();
    SCOPED_TRACE("rank " + std::to_string(rank));
    ASSERT_GT(r.at("warmup_events").get<int64_t>(), 0);  // the run had set-up and warm-up GPU events
    const Exp51Figures f = exp51_from_export(fs::path(kin) / ("rank_" + std::to_string(rank) + ".json"));
    EXPECT_EQ(f.warmup_ops, 0);       // nothing of step < 0 is written
    EXPECT_EQ(f.profiler_steps, 4);   // ProfilerStep#0..3
    // the same events and figures as `stats`, at exact ns (before: 44 more GPU events kept, 4.40%)
    EXPECT_EQ(f.gpu_events, r.at("gpu_events").get<int64_t>());
    EXPECT_EQ(f.comm_ns, r.at("comm_ns").get<int64_t>());
    EXPECT_EQ(f.overlap_ns, r.at("overlap_ns").get<int64_t>());
    EXPECT_EQ(f.kernel_time_ns, r.at("kernel_time_ns").get<int64_t>());
    ASSERT_GT(f.comm_ns, 0);
    EXPECT_DOUBLE_EQ(100.0 * static_cast<double>(f.overlap_ns) / static_cast<double>(f.comm_ns),
                     r.at("overlap_pct").get<double>());
  }
  // HTA reads the export rounded to whole us: `import` of it (HTA's rounding) gives the overlap
  // and GPU events that `stats` says HTA reads on the export
  cli("import " + kin + " -o " + back);
  const nlohmann::json again = exp51_json("stats " + back + " --json", dir);
  const auto& back_ranks = again.at("gpu_kernels").at("ranks");
  ASSERT_EQ(back_ranks.size(), ranks.size());
  for (size_t i = 0; i < ranks.size(); ++i) {
    const auto& on_export = ranks[i].at("hta_on_export");
    ASSERT_TRUE(on_export.is_object()) << ranks[i].dump();
    EXPECT_TRUE(back_ranks[i].at("microsecond_rounding").get<bool>());
    EXPECT_EQ(back_ranks[i].at("gpu_events"), on_export.at("gpu_events"));
    EXPECT_EQ(back_ranks[i].at("kernel_time_ns"), on_export.at("kernel_time_ns"));
    EXPECT_DOUBLE_EQ(back_ranks[i].at("overlap_pct").get<double>(), on_export.at("overlap_pct").get<double>());
    EXPECT_TRUE(back_ranks[i].at("hta_on_export").is_null());  // an import is rounded already
  }
  // the text says it beside the exact figure
  const auto text = embedscope::test_support::run_cli(EMBEDSCOPE_CLI, "stats " + db, dir);
  EXPECT_NE(text.out.find("HTA reads this session's `export --format kineto`"), std::string::npos) << text.out;
}

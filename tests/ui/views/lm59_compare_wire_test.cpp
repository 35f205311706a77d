// The workbench's Compare model: the bytes-on-the-wire rows (sessions/analysis/compare.h
// WireBytesPerStep, WireBytesPerToken) of sessions written here, hand-counted, and "unknown" for a
// trace whose collectives carry no byte.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QAbstractItemModelTester>

#include <filesystem>
#include <string>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/analysis/compare.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "models/compare_model.h"

namespace {
namespace ss = embedscope::sessions;
using embedscope::ui::CompareModel;

// 2 ranks, 2 measured steps, every step each rank sends `bytes` in one all-reduce
std::string lm59_ui_session(const std::string& name, int64_t bytes, bool imported) {
  const auto p = std::filesystem::temp_directory_path() / ("es_lm59ui_" + name + "_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(p);
  ss::SessionWriter w(p.string());
  w.set_metadata(ss::meta::kWorldSize, "2");
  if (imported) w.set_metadata(ss::meta::kImported, "1");
  for (int64_t s = 0; s < 2; ++s)
    for (int32_t r = 0; r < 2; ++r) {
      w.add_step({s, r, s * 1'000'000, s * 1'000'000 + 800'000, 0.5, 0, 0});
      ss::CollectiveRecord c;
      c.rank = r;
      c.op = "all_reduce";
      c.name = "embedding/all_reduce";
      c.group = "world";
      c.step = s;
      c.start_ns = s * 1'000'000 + 100'000;
      c.end_ns = c.start_ns + 10'000;
      c.bytes_sent = c.bytes_received = bytes;
      w.add_collective(c);
    }
  w.close("complete");
  return p.string();
}

TEST(Lm59CompareWire, ModelRowsGiveBytesPerStepAndTokenOrUnknown) {
  const std::string a = lm59_ui_session("a", 6144, false), b = lm59_ui_session("b", 12288, false),
                    t = lm59_ui_session("t", 0, true);
  const ss::SessionReader ra(a), rb(b), rt(t);
  std::vector<ss::RunStats> stats = {ss::analyze(ra), ss::analyze(rb), ss::analyze(rt)};
  const std::vector<ss::WireFacts> facts = {ss::wire_facts(ra, stats[0]), ss::wire_facts(rb, stats[1]),
                                            ss::wire_facts(rt, stats[2])};
  // A and B: lm_embedding runs of 64 tokens a step; the trace has no unit
  CompareModel m({"A", "B", "T"}, stats, {{1000.0, "tokens", 64}, {1000.0, "tokens", 64}, {0.0, "", 0}});
  m.set_wire_facts(facts);
  QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::Fatal);
  EXPECT_TRUE(m.has_tokens());
  auto text = [&](CompareModel::Figure f, int col) { return m.data(m.index(f, col)).toString().toStdString(); };
  auto raw = [&](CompareModel::Figure f, int col) { return m.data(m.index(f, col), Qt::UserRole); };
  EXPECT_EQ(text(CompareModel::WireBytesPerStep, 0), "bytes sent per step (all ranks)");
  // A: 2 ranks x 6,144 B a step = 12,288 B; per token 12,288 / 64 = 192
  EXPECT_DOUBLE_EQ(raw(CompareModel::WireBytesPerStep, 1).toDouble(), 12288.0);
  EXPECT_EQ(text(CompareModel::WireBytesPerStep, 1), "12.0 KiB");
  EXPECT_DOUBLE_EQ(raw(CompareModel::WireBytesPerToken, 1).toDouble(), 192.0);
  EXPECT_EQ(text(CompareModel::WireBytesPerToken, 2), "384.0 B");
  // the trace: "unknown", no raw value, no difference
  EXPECT_EQ(text(CompareModel::WireBytesPerStep, 3), "unknown");
  EXPECT_FALSE(raw(CompareModel::WireBytesPerStep, 3).isValid());
  // differences: B - A, T - A
  EXPECT_EQ(text(CompareModel::WireBytesPerToken, 4), "+192.0 B (+100.0 %)");
  EXPECT_DOUBLE_EQ(raw(CompareModel::WireBytesPerStep, 4).toDouble(), 12288.0);
  EXPECT_EQ(text(CompareModel::WireBytesPerStep, 5), "-");
  EXPECT_THROW(m.set_wire_facts({}), std::invalid_argument);
  for (const auto& p : {a, b, t}) std::filesystem::remove(p);
}

}  // namespace

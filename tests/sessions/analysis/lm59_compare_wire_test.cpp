// Compare's bytes on the wire (compare.h WireBytesPerStep, WireBytesPerToken): the session's
// collective rows of the counted steps, hand-counted from a session written here; a trace whose
// collectives carry no byte reads "unknown", not 0 B.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/analysis/compare.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"

namespace {
namespace ss = embedscope::sessions;
using ss::CompareFigure;

std::string lm59_path(const std::string& name) {
  const auto p = std::filesystem::temp_directory_path() / ("es_lm59_" + name + "_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(p);
  return p.string();
}

void lm59_collective(ss::SessionWriter& w, int32_t rank, int64_t step, const std::string& name, int64_t bytes) {
  ss::CollectiveRecord c;
  c.rank = rank;
  c.op = name.ends_with("/split_check") ? "all_gather" : "all_reduce";
  c.name = name;
  c.group = "world";
  c.dtype = "float32";
  c.step = step;
  c.start_ns = (step + 1) * 1'000'000 + 100'000;
  c.end_ns = c.start_ns + 50'000;
  c.bytes_sent = bytes;
  c.bytes_received = bytes;
  w.add_collective(c);
}

// 2 ranks, a warm-up step -1 and measured steps 0 and 1 (1 ms apart); `bytes` scales every
// collective's bytes (0: a trace whose collectives carry none)
std::string lm59_session(const std::string& name, int64_t bytes, bool imported) {
  const std::string path = lm59_path(name);
  ss::SessionWriter w(path);
  w.set_metadata(ss::meta::kWorkloadName, "vp");
  w.set_metadata(ss::meta::kWorldSize, "2");
  if (imported) w.set_metadata(ss::meta::kImported, "1");
  for (int64_t s = -1; s < 2; ++s)
    for (int32_t r = 0; r < 2; ++r) w.add_step({s, r, (s + 1) * 1'000'000, (s + 1) * 1'000'000 + 800'000, 0.5, 0, 0});
  lm59_collective(w, 0, -1, "embedding/all_reduce", 9999 * bytes);  // warm-up: not counted
  for (int64_t s = 0; s < 2; ++s)
    for (int32_t r = 0; r < 2; ++r) {
      lm59_collective(w, r, s, "embedding/all_reduce", 6144 * bytes);
      lm59_collective(w, r, s, "input_dist/split_check", 32 * bytes);
    }
  lm59_collective(w, 1, 1, "loss/all_reduce", 6 * bytes);
  w.close("complete");
  return path;
}

ss::ComparedSession lm59_compared(const ss::SessionReader& r, const std::string& unit, int64_t per_step) {
  ss::RunStats st = ss::analyze(r);
  const ss::WireFacts wire = ss::wire_facts(r, st);
  return {std::move(st), {1000.0, unit, per_step}, r.meta(ss::meta::kImported) == "1", std::nullopt, wire};
}

TEST(Lm59CompareWire, BytesPerStepAndTokenAreTheCountedStepsCollectiveRows) {
  const std::string run = lm59_session("run", 1, false);
  const ss::SessionReader r(run);
  const ss::ComparedSession lm = lm59_compared(r, "tokens", 64);
  // counted steps 0 and 1: 4 x 6,144 + 4 x 32 + 6 = 24,710 B, the warm-up's 9,999 left out
  EXPECT_EQ(lm.wire.split_check_bytes, 4 * 32);
  EXPECT_FALSE(lm.wire.bytes_unknown);
  EXPECT_DOUBLE_EQ(*ss::compare_value(lm, CompareFigure::WireBytesPerStep), 24710.0 / 2);
  EXPECT_EQ(ss::compare_cell_text(lm, CompareFigure::WireBytesPerStep), "12.1 KiB");  // 12,355 B
  // per token: the split checks left out, over 2 steps of 64 tokens: (24,710 - 128) / 128
  EXPECT_DOUBLE_EQ(*ss::compare_value(lm, CompareFigure::WireBytesPerToken), 24582.0 / 128);
  EXPECT_EQ(ss::compare_cell_text(lm, CompareFigure::WireBytesPerToken), "192.0 B");
  // a DLRM run (samples) has no bytes per token, its bytes per step all the same
  const ss::ComparedSession dlrm = lm59_compared(r, "samples", 8);
  EXPECT_EQ(ss::compare_cell_text(dlrm, CompareFigure::WireBytesPerToken), "-");
  EXPECT_DOUBLE_EQ(*ss::compare_value(dlrm, CompareFigure::WireBytesPerStep), 12355.0);
  // twice the bytes: +100 %
  const std::string twice = lm59_session("twice", 2, false);
  const ss::SessionReader t(twice);
  const ss::ComparedSession lm2 = lm59_compared(t, "tokens", 64);
  const ss::CompareDelta d = ss::compare_delta(lm, lm2, CompareFigure::WireBytesPerToken);
  EXPECT_DOUBLE_EQ(*d.diff, 24582.0 / 128);
  EXPECT_EQ(d.text, "+192.0 B (+100.0 %)");
  EXPECT_EQ(ss::compare_delta(lm, lm2, CompareFigure::WireBytesPerStep).text, "+12.1 KiB (+100.0 %)");
  EXPECT_STREQ(ss::compare_figure_name(CompareFigure::WireBytesPerStep), "bytes sent per step (all ranks)");
  EXPECT_STREQ(ss::compare_figure_key(CompareFigure::WireBytesPerToken), "wire_bytes_per_token");
  for (const auto& p : {run, twice}) std::filesystem::remove(p);
}

TEST(Lm59CompareWire, ATraceWithoutCollectiveBytesReadsUnknown) {
  const std::string trace = lm59_session("trace", 0, true);
  const std::string run = lm59_session("run2", 1, false);
  const ss::SessionReader tr(trace), rr(run);
  const ss::ComparedSession t = lm59_compared(tr, "", 0), r = lm59_compared(rr, "tokens", 64);
  EXPECT_TRUE(t.wire.bytes_unknown);
  EXPECT_FALSE(ss::compare_value(t, CompareFigure::WireBytesPerStep).has_value());
  EXPECT_EQ(ss::compare_cell_text(t, CompareFigure::WireBytesPerStep), "unknown");
  EXPECT_EQ(ss::compare_cell_text(t, CompareFigure::WireBytesPerToken), "unknown");
  EXPECT_EQ(ss::compare_delta(r, t, CompareFigure::WireBytesPerStep).text, "-");
  for (const auto& p : {trace, run}) std::filesystem::remove(p);
}

}  // namespace

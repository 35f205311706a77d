// tester45 F8, F9: what `embedscope compare` and the workbench's Compare read from a session.
// F8: the `differs:` line's "measured steps" is what the session holds (as `stats` counts it),
//     not the workload's planned steps: a run of 60 cancelled after 33 read "measured steps 60".
// F9: an imported trace records no loss (its importer writes steps.loss 0.0): its cell is "-" and
//     no difference is computed against it, where it read "0.00000" and "-0.59698 (-100.0 %)".
// Hand-made sessions with SessionWriter, analysed as compare does (analyze + ComparedSession).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/analysis/compare.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"

namespace {
namespace ss = embedscope::sessions;

std::string fix45_path(const std::string& name) {
  const auto p = std::filesystem::temp_directory_path() / ("es_fix45_" + name + "_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(p);
  return p.string();
}

// A criteo_kaggle-like session planning `planned` steps after `warmup` warm-up steps, holding
// warm-up rows -warmup..-1 and measured rows 0..measured-1 on one rank (loss `loss` each),
// closed with `status`.
std::string fix45_session(const std::string& name, int planned, int warmup, int measured, const std::string& status,
                          double loss = 0.5, bool imported = false) {
  const std::string path = fix45_path(name);
  ss::SessionWriter w(path);
  w.set_metadata(ss::meta::kWorkloadName, "criteo_kaggle");
  w.set_metadata(ss::meta::kWorkloadJson, R"({"name":"criteo_kaggle","steps":)" + std::to_string(planned) +
                                              R"(,"warmup_steps":)" + std::to_string(warmup) + "}");
  w.set_metadata(ss::meta::kSteps, std::to_string(planned));
  w.set_metadata(ss::meta::kWorldSize, "1");
  if (imported) w.set_metadata(ss::meta::kImported, "1");
  for (int64_t s = -warmup; s < measured; ++s)
    w.add_step({s, 0, (s + warmup) * 1'000'000, (s + warmup) * 1'000'000 + 800'000, loss, 0, 0});
  w.close(status);
  return path;
}

ss::ComparedSession fix45_compared(const ss::SessionReader& r, bool imported) {
  ss::RunStats st = ss::analyze(r);
  const double rate = st.samples_per_s;
  return {std::move(st), {rate, imported ? "" : "samples"}, imported};
}
}  // namespace

TEST(Fix45Compare, DiffersNamesTheMeasuredStepsTheSessionHolds) {
  const std::string cancelled = fix45_session("cancelled", 60, 2, 33, "cancelled");
  const std::string full = fix45_session("full", 20, 2, 20, "complete");
  const std::string none = fix45_session("none", 5, 50, 0, "cancelled");  // cancelled in warm-up
  const ss::SessionReader a(cancelled), b(full), c(none);
  EXPECT_EQ(ss::analyze(a).steps, 33);  // what stats says
  EXPECT_EQ(ss::differing_settings({&a, &b}),
            (std::vector<std::string>{"steps 60, measured steps 33", "steps 20, measured steps 20"}));
  EXPECT_EQ(ss::differing_settings({&c, &b}),
            (std::vector<std::string>{"steps 5, warmup_steps 50, measured steps 0", "steps 20, warmup_steps 2, measured steps 20"}));
  EXPECT_EQ(ss::differing_settings({&a, &b}, 6, true),
            (std::vector<std::string>{"steps 60, measured steps 33", "steps 20, measured steps 20"}));
  // the same measured steps: not a difference, though the planned steps differ
  const std::string short_run = fix45_session("short", 33, 2, 33, "complete");
  const ss::SessionReader d(short_run);
  EXPECT_EQ(ss::differing_settings({&a, &d}), (std::vector<std::string>{"steps 60", "steps 33"}));
  for (const auto& p : {cancelled, full, none, short_run}) std::filesystem::remove(p);
}

TEST(Fix45Compare, AnImportedTraceHasNoLossAndNoLossDifference) {
  const std::string run = fix45_session("run", 3, 0, 3, "complete", 0.59698);
  // an imported trace as the importer writes it (and as older imports hold it): steps.loss 0.0
  const std::string trace = fix45_session("trace", 3, 0, 3, "complete", 0.0, true);
  const ss::SessionReader rr(run), tr(trace);
  const auto a = fix45_compared(rr, false), b = fix45_compared(tr, true);
  EXPECT_TRUE(b.stats.loss.empty());
  EXPECT_EQ(b.stats.steps, 3);  // its steps are still measured steps
  EXPECT_FALSE(ss::compare_value(b, ss::CompareFigure::Loss).has_value());
  EXPECT_EQ(ss::compare_cell_text(b, ss::CompareFigure::Loss), "-");
  EXPECT_EQ(ss::compare_cell_text(a, ss::CompareFigure::Loss), "0.59698");
  for (const auto& d : {ss::compare_delta(a, b, ss::CompareFigure::Loss), ss::compare_delta(b, a, ss::CompareFigure::Loss),
                        ss::compare_delta(b, b, ss::CompareFigure::Loss)}) {
    EXPECT_EQ(d.text, "-");
    EXPECT_FALSE(d.diff.has_value());
    EXPECT_FALSE(d.percent.has_value());
  }
  // an engine run whose loss is really 0.0 keeps it
  const std::string zero = fix45_session("zero", 3, 0, 3, "complete", 0.0);
  const ss::SessionReader zr(zero);
  EXPECT_EQ(ss::compare_cell_text(fix45_compared(zr, false), ss::CompareFigure::Loss), "0.00000");
  for (const auto& p : {run, trace, zero}) std::filesystem::remove(p);
}

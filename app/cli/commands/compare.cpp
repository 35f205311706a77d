// `embedscope compare A.db B.db [C.db...] [--json]`: the figures of sessions side by side with
// each one's difference from the first (the baseline), exactly as the workbench's Compare view
// sets them (sessions/analysis/compare.h computes and formats both; ux41 #2).

#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "embedscope/engine/workload/session_rate.h"  // throughput_of
#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/analysis/compare.h"
#include "embedscope/sessions/analysis/gpu_run.h"
#include "embedscope/sessions/analysis/gpu_sharing.h"
#include "embedscope/sessions/analysis/memory_analysis.h"  // recorded_oom_text
#include "embedscope/sessions/analysis/model_quality.h"   // held-out loss, table and state bytes
#include "embedscope/sessions/analysis/stats.h"  // drain_steps_text
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/model/units.h"  // format_bytes
#include "output/output.h"

namespace embedscope::cli {

namespace ss = embedscope::sessions;
using nlohmann::json;

namespace {

struct CompareState {
  std::vector<std::string> files;
  bool json = false;
  bool verbose = false;  // the raw list of differing settings (JSON pointers) instead of the summary
};

// "A", "B", ... "Z", then "S27", "S28", ... as the workbench labels sessions it compares.
std::string compare_label(size_t i) { return i < 26 ? std::string(1, static_cast<char>('A' + i)) : "S" + std::to_string(i + 1); }

// "    trains 512 tokens a step, A 128 (4.0x): ..." for a session (index > 0) whose steps train
// other units than the baseline's, whose throughput then differs by the work a step (tester52 F2:
// row_wise trains 4x vocab_parallel's tokens a step, a batch of 64 8x one of 8); "" otherwise.
std::string unlike_work_text(const ss::SessionRate& rate, const ss::SessionRate& base, const std::string& base_label,
                             size_t index) {
  if (index == 0 || rate.per_step <= 0 || base.per_step <= 0 || rate.per_step == base.per_step || rate.unit != base.unit)
    return {};
  return fmt::format("    trains {} {} a step, {} {} ({:.2f}x): its throughput differs by the work a step, not by noise\n",
                     rate.per_step, rate.unit, base_label, base.per_step,
                     static_cast<double>(rate.per_step) / static_cast<double>(base.per_step));
}

// "4 ranks sharing 1 GPU (NVIDIA H200 (cuda:0)), cuda" / "2 ranks, cpu (SIMULATED)", as the
// Compare view's head says it
std::string ran_on_text(const ss::SessionReader& s, const ss::RunStats& st) {
  const std::string backend = s.meta(ss::meta::kBackend);
  return fmt::format("{} rank{}{}{}{}", st.ranks.size(), st.ranks.size() == 1 ? "" : "s", ss::gpus_text(s.ranks()),
                     backend.empty() ? std::string() : ", " + backend,
                     st.simulated && backend != "simulated" ? " (SIMULATED)" : "");
}

json value_or_null(const std::optional<double>& v) { return v ? json(*v) : json(); }

// the dense part's time differing beyond noise where no setting changes its work (machine_difference):
// null where it does not
json machine_json(const ss::SessionReader& ra, const ss::ComparedSession& a, const ss::SessionReader& rb,
                  const ss::ComparedSession& b, const std::string& la, const std::string& lb) {
  const auto m = ss::machine_difference(ra, a, rb, b);
  if (!m) return json();
  return {{"baseline_dense_ns", m->base_dense_ns}, {"session_dense_ns", m->other_dense_ns}, {"ratio", m->ratio},
          {"method", ss::step_test_method_key(m->test.method)}, {"t", m->test.test.t}, {"df", m->test.test.df},
          {"text", ss::machine_difference_text(*m, ra, rb, la, lb)}};
}

// The text table: a column per session and per difference, each as wide as its widest cell.
std::string figures_table(const std::vector<ss::ComparedSession>& cs, const std::vector<std::string>& labels) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> head{"figure"};
  for (const auto& l : labels) head.push_back(l);
  for (size_t i = 1; i < cs.size(); ++i) head.push_back(labels[i] + " - " + labels[0]);
  rows.push_back(head);
  for (int k = 0; k < ss::kCompareFigureCount; ++k) {
    const auto f = static_cast<ss::CompareFigure>(k);
    // HTA's comm/comp overlap: a row only where an imported trace has it (tester48 F13)
    if (f == ss::CompareFigure::HtaOverlap &&
        std::none_of(cs.begin(), cs.end(), [](const auto& s) { return s.hta_overlap_pct.has_value(); }))
      continue;
    std::vector<std::string> row{ss::compare_figure_name(f)};
    for (const auto& s : cs) row.push_back(ss::compare_cell_text(s, f));
    for (size_t i = 1; i < cs.size(); ++i) row.push_back(ss::compare_delta(cs[0], cs[i], f).text);
    rows.push_back(std::move(row));
  }
  std::vector<size_t> width(head.size(), 0);
  for (const auto& r : rows)
    for (size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  std::string out;
  for (const auto& r : rows) {
    std::string line = fmt::format("{:<{}}", r[0], width[0]);
    for (size_t c = 1; c < r.size(); ++c) line += fmt::format("  {:>{}}", r[c], width[c]);
    out += line + "\n";
  }
  return out;
}

int cmd_compare(const CompareState& st) {
  if (st.files.size() < 2)
    throw ss::SessionError("compare needs two sessions or more (the first is the baseline); got only " +
                           (st.files.empty() ? std::string("none") : st.files[0]));
  std::vector<std::unique_ptr<ss::SessionReader>> readers;
  std::vector<ss::ComparedSession> cs;
  std::vector<std::string> recorded_oom;  // per session: memory_analysis.h recorded_oom_text, "" for most
  for (const auto& f : st.files) {
    readers.push_back(open_for_stats(f, "compare"));
    const ss::SessionReader& r = *readers.back();
    ss::RunStats stats = ss::analyze(r);
    const ss::SessionRate rate = engine::throughput_of(r, stats);
    const ss::WireFacts wire = ss::wire_facts(r, stats);  // the bytes-on-the-wire rows
    cs.push_back({std::move(stats), rate, r.meta(ss::meta::kImported) == "1", ss::hta_overlap_pct(r), wire});
    // an imported memory snapshot whose program ran out of memory: how stats says it ended (tester52 F9)
    recorded_oom.push_back(ss::recorded_oom_text(r));
  }
  const std::vector<std::string> names = ss::distinct_file_names(st.files);
  std::vector<const ss::SessionReader*> reader_ptrs;
  for (const auto& r : readers) reader_ptrs.push_back(r.get());
  // repeats of one configuration measure the run-to-run noise the other pairs are held against
  const ss::RunToRunNoise run_noise = ss::apply_run_to_run_noise(cs, reader_ptrs);
  // tester41 #2; per table what moved, or with --verbose every differing leaf (tester42 F13)
  const std::vector<std::string> settings = ss::differing_settings(reader_ptrs, 6, st.verbose);
  const std::vector<std::string> raw_settings = ss::differing_settings(reader_ptrs, 6, true);
  std::vector<std::string> labels;
  for (size_t i = 0; i < cs.size(); ++i) labels.push_back(compare_label(i));
  // the same file twice, another workload or world size (tester41 #5)
  const std::vector<std::string> warnings = ss::comparison_warnings(reader_ptrs, labels);
  if (st.json) {
    json groups = json::array();
    for (const auto& g : run_noise.groups) {
      json members = json::array(), means = json::array();
      for (const size_t k : g.sessions) members.push_back(labels[k]), means.push_back(cs[k].stats.step_time_ns.mean);
      groups.push_back({{"sessions", members}, {"step_time_mean_ns", means}, {"spread_ns", g.spread_ns},
                        {"spread_pct", g.spread_pct}});
    }
    json j{{"baseline", labels[0]},
           {"warnings", warnings},
           // null spread: no two sessions ran the same configuration, the verdicts are within-run only
           {"run_to_run_noise", {{"measured", run_noise.measured()},
                                 {"spread_ns", run_noise.measured() ? json(run_noise.spread_ns) : json()},
                                 {"spread_pct", run_noise.measured() ? json(run_noise.spread_pct) : json()},
                                 {"groups", groups},
                                 {"text", ss::run_to_run_text(run_noise, labels)}}},
           {"figures", json::array()},
           {"sessions", json::array()},
           {"differences", json::array()}};
    for (int k = 0; k < ss::kCompareFigureCount; ++k) {
      const auto f = static_cast<ss::CompareFigure>(k);
      j["figures"].push_back({{"key", ss::compare_figure_key(f)}, {"name", ss::compare_figure_name(f)}});
    }
    for (size_t i = 0; i < cs.size(); ++i) {
      const auto& s = cs[i];
      const ss::SessionReader& r = *readers[i];
      json figures = json::object();
      for (int k = 0; k < ss::kCompareFigureCount; ++k) {
        const auto f = static_cast<ss::CompareFigure>(k);
        figures[ss::compare_figure_key(f)] = value_or_null(ss::compare_value(s, f));
      }
      json ranks = json::array();
      for (const auto& rk : s.stats.ranks) {
        const bool host = !s.stats.stream_ranks || !s.imported;  // a trace's host spans: not analysed so
        ranks.push_back({{"rank", rk.rank},
                         {"exposed_comm_ns", rk.exposed_comm_ns},
                         {"host_exposed_comm_ns", host ? json(s.stats.stream_ranks ? rk.host_exposed_comm_ns : rk.exposed_comm_ns) : json()},
                         {"gpu_busy_pct", s.stats.stream_ranks ? json(rk.gpu_busy_pct) : json()},
                         {"peak_allocated_bytes", s.stats.has_memory ? json(rk.peak_allocated_bytes) : json()},
                         {"peak_reserved_bytes", s.stats.has_memory ? json(rk.peak_reserved_bytes) : json()}});
      }
      j["sessions"].push_back({{"label", labels[i]},
                               {"file", st.files[i]},
                               {"name", names[i]},
                               {"ran", ss::what_it_ran(r)},
                               {"differing_settings", settings[i]},
                               {"differing_settings_raw", raw_settings[i]},
                               {"ended", s.stats.ended},
                               // an import of an Embedscope export: how the exported run ended (tester53 F3)
                               {"exported_run_ended", s.stats.exported_run_ended.empty() ? json() : json(s.stats.exported_run_ended)},
                               // the recorded program's OOM where the import completed (stats' header)
                               {"recorded_oom", recorded_oom[i].empty() ? json() : json(recorded_oom[i])},
                               {"simulated", s.stats.simulated},
                               {"backend", r.meta(ss::meta::kBackend)},
                               {"stream_ranks", s.stats.stream_ranks},
                               {"steps", s.stats.steps},
                               // a pipeline's drain steps, left out of the figures (stats --json's
                               // drain_steps; the text's drain line, fixd47 F9)
                               {"drain_steps", s.stats.drain_steps},
                               {"counted_steps", s.stats.steps - s.stats.drain_steps},
                               {"all_drain", s.stats.all_drain},
                               {"throughput_unit", s.rate.unit.empty() ? json() : json(s.rate.unit + "/s")},
                               // the units (samples, tokens) a step trains: throughputs of unlike work
                               // are not marked within noise (tester52 F2)
                               {"units_per_step", s.rate.per_step > 0 ? json(s.rate.per_step) : json()},
                               // the wire figures' null: collectives recorded without bytes (an import)
                               {"collective_bytes_unknown", s.wire.bytes_unknown},
                               {"split_check_bytes", s.wire.split_check_bytes},
                               {"figures", figures},
                               {"ranks", ranks}});
    }
    for (size_t i = 1; i < cs.size(); ++i) {
      json figures = json::object();
      for (int k = 0; k < ss::kCompareFigureCount; ++k) {
        const auto f = static_cast<ss::CompareFigure>(k);
        const ss::CompareDelta d = ss::compare_delta(cs[0], cs[i], f);
        figures[ss::compare_figure_key(f)] =
            d.diff ? json{{"difference", *d.diff}, {"percent", value_or_null(d.percent)}, {"within_noise", d.within_noise}}
                   : json();
      }
      // the figures of different levels (GPU streams vs host threads): no difference, and why (tester54 F5)
      json not_comparable = json::object();
      for (int k = 0; k < ss::kCompareFigureCount; ++k) {
        const auto f = static_cast<ss::CompareFigure>(k);
        if (const ss::CompareDelta d = ss::compare_delta(cs[0], cs[i], f); !d.not_comparable.empty())
          not_comparable[ss::compare_figure_key(f)] = d.not_comparable;
      }
      // the within-run test behind "within_noise" (null: fewer counted steps than it needs in either session)
      const std::optional<ss::StepTimeTest> t = ss::step_time_test(cs[0], cs[i]);
      const auto batches = [](const ss::BatchMeans& m) {
        return json{{"steps", m.n}, {"batch_size", m.batch_size}, {"batches", m.batches}, {"mean_ns", m.mean},
                    {"se_ns", m.se}};
      };
      const json test = t ? json{{"method", ss::step_test_method_key(t->method)},
                                 // the lag-1 autocorrelations that chose the method, and their white-noise bounds
                                 {"lag1_autocorrelation", {{"baseline", t->base_lag1}, {"session", t->other_lag1}}},
                                 {"lag1_bound", {{"baseline", t->base_bound}, {"session", t->other_bound}}},
                                 {"powerless", t->powerless},
                                 {"difference_ns", t->diff_ns},
                                 {"se_ns", t->se_ns},
                                 {"t", std::isfinite(t->test.t) ? json(t->test.t) : json(t->test.t > 0 ? "inf" : "-inf")},
                                 {"df", t->test.df},
                                 {"critical", t->test.critical},
                                 {"differs", t->test.differs},
                                 {"baseline", batches(t->base)},
                                 {"session", batches(t->other)}}
                          : json();
      const ss::StepVerdict verdict = ss::step_verdict(cs[0], cs[i]);
      j["differences"].push_back({{"label", labels[i]},
                                  {"baseline", labels[0]},
                                  {"figures", figures},
                                  {"not_comparable", not_comparable},
                                  {"step_time_test", test},
                                  {"same_configuration", verdict == ss::StepVerdict::SameConfiguration},
                                  // "within_run": no repeats measured the run-to-run noise this verdict would need
                                  {"verdict_scope", cs[i].run_to_run_pct ? "run_to_run" : "within_run"},
                                  {"step_time_verdict", ss::step_verdict_key(verdict)},
                                  {"step_time_text", ss::step_time_test_text(cs[0], cs[i], labels[0], labels[i])},
                                  {"machine_difference", machine_json(*readers[0], cs[0], *readers[i], cs[i], labels[0], labels[i])}});
    }
    j["model_quality"] = ss::model_quality_block(reader_ptrs, labels).json;
    std::cout << dump(j) << "\n";
    return 0;
  }
  for (size_t i = 0; i < cs.size(); ++i)
    std::cout << fmt::format("{}{}  {}: {}, {}{}{}\n", labels[i], i == 0 ? " (baseline)" : "", names[i],
                             ss::what_it_ran(*readers[i]),
                             !recorded_oom[i].empty() ? recorded_oom[i]
                             : cs[i].stats.exported_run_ended.empty()
                                 ? cs[i].stats.ended
                                 : fmt::format("{} (an export of a run that ended {})", cs[i].stats.ended,
                                               cs[i].stats.exported_run_ended),
                             recorded_oom[i].empty() ? " on " : "; ", ran_on_text(*readers[i], cs[i].stats))
              << (settings[i].empty() ? "" : fmt::format("    differs: {}\n", settings[i]))
              << unlike_work_text(cs[i].rate, cs[0].rate, labels[0], i);
  // figures that measure different things where GPU streams meet host threads (tester38 #1); a
  // simulated session's are the cost model's ops per rank, neither (tester45 F12.2); which row, if
  // any, compares them like for like (tester54 F5)
  if (const std::string note = ss::measure_note(cs, labels); !note.empty()) std::cout << note << "\n";
  for (size_t i = 0; i < cs.size(); ++i) {  // GPU busy, host, GPU trace: the lines of `stats`
    const std::string lines = ss::gpu_run_text(*readers[i], cs[i].stats);
    size_t at = 0;
    while (at < lines.size()) {
      const size_t nl = lines.find('\n', at);
      std::cout << labels[i] << ": " << lines.substr(at, nl - at) << "\n";
      at = nl == std::string::npos ? lines.size() : nl + 1;
    }
    if (const std::string msg = readers[i]->meta(ss::meta::kEndMessage); !msg.empty() && cs[i].stats.ended != "complete")
      std::cout << fmt::format("{}: {}\n", labels[i], msg);
    // a pipeline's drain steps are left out of the figures below, as `stats` says (tester47 F9)
    const auto& run_stats = cs[i].stats;
    if (std::string drain = ss::drain_steps_text(run_stats.pipeline, run_stats.steps, run_stats.drain_steps, run_stats.all_drain); !drain.empty()) {
      while (!drain.empty() && (drain.back() == '\n' || drain.back() == ' ')) drain.pop_back();
      std::cout << fmt::format("{}: {}\n", labels[i], drain.substr(drain.find_first_not_of(' ')));
    }
  }
  for (const auto& w : warnings) std::cout << "warning: " << w << "\n";
  const std::string table = figures_table(cs, labels);
  std::cout << "\n" << table;
  // the noise behind ", within noise" (step time mean, p50 and throughput): the run-to-run noise of
  // repeated configurations, then the verdict per session after the baseline
  std::cout << ss::run_to_run_text(run_noise, labels) << "\n";
  for (size_t i = 1; i < cs.size(); ++i) {
    std::cout << ss::step_time_test_text(cs[0], cs[i], labels[0], labels[i]) << "\n";
    if (const auto m = ss::machine_difference(*readers[0], cs[0], *readers[i], cs[i]))
      std::cout << "warning: " << ss::machine_difference_text(*m, *readers[0], *readers[i], labels[0], labels[i]) << "\n";
  }
  if (table.find(", within noise") != std::string::npos)  // the legend of that mark, only where a cell has it
    std::cout << "(within noise: the same configuration as the baseline, or a difference of the mean step time that the "
                 "steps' test (95 %: Welch's t on the steps, batch means where they drift) or the measured run-to-run "
                 "noise cannot tell from chance)\n";
  if (table.find(", too few steps to tell") != std::string::npos)
    std::cout << "(too few steps to tell: the steps drift, and batch means over so few steps cannot tell a difference "
                 "from chance; run more steps)\n";
  // the model's figures a smaller table trades (held-out loss first: a remedy is judged by it)
  if (const std::string mq = ss::model_quality_block(reader_ptrs, labels).text; !mq.empty()) std::cout << mq;
  // per rank: what the exposed-communication chart of the Compare view draws, and each rank's peaks
  std::cout << fmt::format("\n{:<8} {:<5} {:>13} {:>18} {:>9} {:>16} {:>16}\n", "session", "rank", "exposed comm",
                           "host exposed comm", "GPU busy", "peak allocated", "peak reserved");
  for (size_t i = 0; i < cs.size(); ++i) {
    const auto& s = cs[i];
    for (const auto& rk : s.stats.ranks) {
      const bool host = !s.stats.stream_ranks || !s.imported;
      std::cout << fmt::format(
          "{:<8} {:<5} {:>13} {:>18} {:>9} {:>16} {:>16}\n", labels[i], rk.rank,
          s.stats.steps > 0 ? ms(rk.exposed_comm_ns) : "-",
          s.stats.steps > 0 && host ? ms(s.stats.stream_ranks ? rk.host_exposed_comm_ns : rk.exposed_comm_ns) : "-",
          s.stats.stream_ranks && s.stats.steps > 0 ? fmt::format("{:.1f}%", rk.gpu_busy_pct) : "-",
          s.stats.has_memory ? ss::format_bytes(rk.peak_allocated_bytes) : "-",
          s.stats.has_memory ? ss::format_bytes(rk.peak_reserved_bytes) : "-");
    }
  }
  // a pipelined session's drain steps are not in its sums (tester52 F11: "all measured steps")
  const bool drained = std::any_of(cs.begin(), cs.end(), [](const auto& s) { return s.stats.drain_steps > 0; });
  std::cout << (drained ? "(exposed communication: each session's counted steps summed - a pipeline's drain steps are "
                          "left out, as in stats; a GPU run's is its streams')\n"
                        : "(exposed communication: all measured steps summed; a GPU run's is its streams')\n");
  return 0;
}

}  // namespace

Command add_compare_command(CLI::App& app) {
  auto s = std::make_shared<CompareState>();
  auto* c = app.add_subcommand("compare",
                               "Figures of two or more sessions side by side with their differences from the first "
                               "(the workbench's Compare view)");
  c->add_option("sessions", s->files, "Session files (.db); the first is the baseline")->required();
  c->add_flag("--json", s->json, "Print the comparison as one JSON object on stdout");
  c->add_flag("--verbose", s->verbose,
              "List every differing workload setting by its JSON pointer (default: per table what moved between "
              "the plans, the other settings by name)");
  return {c, [s] { return cmd_compare(*s); }, [s] { return s->json; }};
}

}  // namespace embedscope::cli

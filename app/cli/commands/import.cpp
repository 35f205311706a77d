// `embedscope import PATH... [-o SESSION.db] [--align none] [--json] [--force-overwrite]`: other
// tools' traces as one session (PyTorch profiler / Kineto JSON, Nsight Systems SQLite exports;
// the importer is chosen by each file's content, sessions/importers/importer.h).

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "output_guard.h"
#include "embedscope/sessions/analysis/gpu_kernels.h"
#include "embedscope/sessions/analysis/recorded_run.h"
#include "embedscope/sessions/importers/common/clock_align.h"
#include "embedscope/sessions/importers/importer.h"
#include "embedscope/sessions/importers/nsys_sqlite/nsys_sqlite.h"
#include "embedscope/sessions/store/session.h"
#include "output/gpu_kernels_text.h"
#include "output/output.h"
#include "staged_output.h"
#include "cancel_writes.h"

namespace embedscope::cli {

namespace ss = embedscope::sessions;
namespace si = embedscope::sessions::importers;
using nlohmann::json;

namespace {

struct ImportState {
  std::vector<std::string> inputs;
  std::string output;
  std::string align = "none";
  bool json = false;
  bool overwrite = false;
  bool allow_disjoint = false;
  bool strict = false;  ///< --strict: exit kStrictDataLossExit after writing when data was lost
};

// Ranks whose time ranges do not overlap (problem disjoint_time_ranges: traces of different jobs,
// 19,183 days apart in tester42 F12) would be analysed as one job: the import is refused (exit 2;
// the problem's text names both files and both ranges), as `merge` refuses the rank sessions of
// different runs, unless --allow-disjoint (ranks of one job whose clocks are off by more than
// the trace; --align collectives aligns them instead, and the check then applies to the aligned
// ranges: ranks that share no collective keep their clocks, tester45 F13).
void refuse_disjoint_ranks(const std::vector<ss::ImportStat>& problems) {
  if (const std::string why = si::disjoint_refusal(problems, "--allow-disjoint to import them as one session anyway");
      !why.empty())
    throw si::ImportError(why);
}

/// nccl_data.json.gz -> nccl_data.db (in the current directory).
std::string default_output(const std::string& input) {
  std::string base = input;
  while (!base.empty() && base.back() == '/') base.pop_back();
  if (auto slash = base.rfind('/'); slash != std::string::npos) base = base.substr(slash + 1);
  for (const char* ext : {".gz", ".json", ".pt.trace", ".trace", ".sqlite", ".nsys-rep"})
    if (base.size() > std::string(ext).size() && base.compare(base.size() - std::string(ext).size(), std::string::npos, ext) == 0)
      base.resize(base.size() - std::string(ext).size());
  return (base.empty() ? std::string("imported") : base) + ".db";
}

/// A temporary directory, removed with what is in it when this goes out of scope.
struct TempDir {
  std::string path;
  TempDir() {
    const char* t = std::getenv("TMPDIR");
    std::string tmpl = std::string(t && *t ? t : "/tmp") + "/embedscope-nsys-XXXXXX";
    if (!mkdtemp(tmpl.data())) throw ss::SessionError(fmt::format("{}: cannot create a temporary directory", tmpl));
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

bool is_nsys_report(const std::string& f) {
  const std::string ext = ".nsys-rep";
  return f.size() > ext.size() && f.compare(f.size() - ext.size(), ext.size(), ext) == 0;
}

/// Whether `f`'s content is a format the importers read (a trace, an Nsight SQLite export, a
/// memory snapshot), whatever its name.
bool read_by_content(const std::string& f) {
  if (is_memory_snapshot_file(f)) return true;
  try {
    si::detect(f);
    return true;
  } catch (const si::ImportError&) {
    return false;
  }
}

/// `import --strict`: the session is written (nothing recorded is lost), then the import exits with
/// this code when any data_loss import problem was recorded (strict_exit_code).
constexpr int kStrictDataLossExit = 3;

/// kStrictDataLossExit when `strict` and `problems` hold a data_loss problem (its name and count
/// said on stderr), else 0. Example: a cut .json.gz (gzip_cut_short, truncated) with --strict -> 3.
int strict_exit_code(bool strict, const std::vector<ss::ImportStat>& problems) {
  if (!strict) return 0;
  std::string lost;
  for (const auto& p : problems)
    if (p.severity == "data_loss") lost += fmt::format("{}{} ({})", lost.empty() ? "" : ", ", p.name, p.count);
  if (lost.empty()) return 0;
  fmt::print(stderr, "import: --strict: data was lost ({}); the session was written with what was read; exit {}\n",
             lost, kStrictDataLossExit);
  return kStrictDataLossExit;
}

int cmd_import(const ImportState& s) {
  const si::InputFiles selected = si::select_inputs(s.inputs);  // a directory's config.json is left out
  std::vector<std::string> files = selected.files;
  const std::string out = s.output.empty() ? default_output(s.inputs.front()) : s.output;
  // Before anything else: the output must not be what is read (staged_output.h).
  refuse_output_among_inputs(out, s.inputs, files);
  // .nsys-rep: exported to SQLite by nsys (from PATH) into a temporary directory, then imported.
  std::unique_ptr<TempDir> tmp;
  si::ImportOptions opt;
  opt.named_files = selected.named;
  for (auto& f : files) {
    // chosen by content first: a file named .nsys-rep that is an Nsight SQLite export (or a
    // trace) is read as what it is (tester45 F5: it was sent to nsys by its name)
    if (!is_nsys_report(f) || read_by_content(f)) continue;
    if (!tmp) tmp = std::make_unique<TempDir>();
    if (const std::string nsys = si::find_nsys_on_path(); !nsys.empty())
      fmt::print(stderr, "import: exporting {} to SQLite with nsys ({})\n", f, nsys);
    const std::string exported = si::export_nsys_report(f, tmp->path);
    opt.source_names[exported] = f + " (exported by nsys to SQLite)";
    f = exported;
  }
  if (std::any_of(files.begin(), files.end(), is_memory_snapshot_file)) {  // commands/import_memory_snapshot.cpp
    if (auto other = std::find_if_not(files.begin(), files.end(), is_memory_snapshot_file); other != files.end())
      throw si::ImportError(si::mixed_snapshot_inputs_message(
          *other, files.size(), *std::find_if(files.begin(), files.end(), is_memory_snapshot_file)));
    const std::vector<ss::ImportStat> problems =
        import_memory_snapshot(files, s.output, s.overwrite, s.json, selected.directory_of);
    return strict_exit_code(s.strict, problems);
  }
  const si::Importer& importer = si::detect(files.front());
  for (const auto& f : files)
    if (&si::detect(f) != &importer)
      throw si::ImportError(fmt::format("{}: a {} file among {} files; import one format at a time", f, si::detect(f).format,
                                        importer.format));
  struct stat sb {};
  if (lstat(out.c_str(), &sb) == 0 && !s.overwrite)
    throw ss::SessionError(fmt::format("{}: already exists; choose another name (-o) or allow overwriting it "
                                       "(embedscope import --force-overwrite)", out));
  // Written under a temporary name beside `out` and renamed over it once complete: a cancelled,
  // failed or killed import leaves the session it was to replace as it was.
  StagedSession staged(out, s.overwrite);
  opt.align = s.align;
  opt.progress = [](const std::string& line) { fmt::print(stderr, "import: {}\n", line); };
  // Ctrl-C or SIGTERM (what a batch system's time limit sends; tester46 F24) cancels at once, in
  // any phase (retest47 R7: while the session was written and closed, the import went on to exit
  // 0): the temporary session is removed, nothing half-written is left and `out` is as it was
  // (cancel_writes.h; the nsys export's temporary folder goes too).
  CancelWrites cancel("import", out, "kept", s.json, "\ncancelling the import\n");
  cancel.remove_on_cancel(staged.temp());
  if (tmp) cancel.remove_on_cancel(tmp->path);
  si::ImportSummary sum;
  {
    std::optional<ss::SessionWriter> writer;
    cancel.hold([&] { with_out_name(staged, [&] { writer.emplace(staged.temp(), true); }); });  // never created after a cancel removed it
    try {
      sum = importer.run(files, *writer, opt);
      if (!s.allow_disjoint) refuse_disjoint_ranks(sum.problems);
      if (!selected.skipped.empty()) {
        writer->add_import_stats(selected.skipped);
        sum.problems.insert(sum.problems.end(), selected.skipped.begin(), selected.skipped.end());
      }
      si::refuse_empty_trace(sum);
      writer->close("complete");
    } catch (const si::ImportError& e) {
      writer->close("failed", e.what());  // the temporary session; ~StagedSession removes it
      throw;
    }
  }
  cancel.commit([&] { staged.commit(); });
  const ss::SessionReader session(out);
  const auto figures = ss::gpu_kernel_figures(session);
  // an Embedscope export's run, which `stats` of this import counts its steps by (tester53 F3)
  const ss::RecordedRun run = ss::recorded_run(session);
  if (s.json) {
    json j{{"session", out},          {"format", sum.format},  {"files", sum.files},    {"ranks", sum.ranks},
           {"events", sum.events},    {"start_ns", sum.start_ns}, {"end_ns", sum.end_ns}, {"origin_ns", sum.origin_ns},
           {"problems", import_problems_json(sum.problems)},
           {"alignment", sum.alignment_json.empty() ? json(nullptr) : json::parse(sum.alignment_json)},
           {"gpu_kernels", gpu_kernels_json(figures, false)},
           {"exported_run", run.exported ? json{{"pipeline", run.pipeline},
                                                {"planned_steps", run.planned_steps > 0 ? json(run.planned_steps) : json()},
                                                {"ended", run.ended},
                                                {"end_message", run.end_message}}
                                         : json()}};
    std::cout << dump(j) << "\n";
    return strict_exit_code(s.strict, sum.problems);
  }
  std::cout << fmt::format("imported     {} file(s) as {} ({})\n", sum.files.size(), sum.format,
                           session.meta("import_producer"));
  for (const auto& f : sum.files) std::cout << fmt::format("             {}\n", f);
  if (files.size() > sum.files.size())  // read and dropped (duplicate_rank): said among the problems
    std::cout << fmt::format("not imported {} file(s) (see the import problems)\n", files.size() - sum.files.size());
  std::cout << fmt::format("session      {}\n", out);
  std::string ranks;
  for (auto r : sum.ranks) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  std::cout << fmt::format("ranks        {} ({} rank{})\n", ranks, sum.ranks.size(), sum.ranks.size() == 1 ? "" : "s");
  std::string ev;
  for (const auto& [k, n] : sum.events) ev += fmt::format("{}{} {}", ev.empty() ? "" : ", ", k, n);
  std::cout << fmt::format("events       {}\n", ev.empty() ? std::string("none") : ev);
  std::cout << fmt::format("time range   {} .. {} ({}; trace ts {} us is 0)\n", ms(sum.start_ns), ms(sum.end_ns),
                           ms(sum.end_ns - sum.start_ns), sum.origin_ns / 1000);
  if (!sum.alignment_text.empty()) std::cout << sum.alignment_text;
  if (run.exported)
    std::cout << fmt::format("source run   an Embedscope export of a {} run ({}) that ended {}{}: `stats` counts its steps "
                             "as that run's\n",
                             run.pipeline,
                             run.planned_steps > 0 ? fmt::format("{} planned steps", run.planned_steps)
                                                   : std::string("planned steps unknown"),
                             run.ended, run.end_message.empty() ? "" : " (" + run.end_message + ")");
  std::cout << "import problems\n" << import_problems_text(sum.problems);
  const std::string k = gpu_kernels_text(figures, false);
  if (!k.empty()) std::cout << "\n" << k;
  std::cout.flush();
  return strict_exit_code(s.strict, sum.problems);
}

}  // namespace

Command add_import_command(CLI::App& app) {
  auto s = std::make_shared<ImportState>();
  auto* c = app.add_subcommand("import", "Import PyTorch profiler (Kineto) JSON traces (.json, .json.gz, a directory "
                                         "of per-rank traces), Nsight Systems SQLite exports (.sqlite; .nsys-rep through "
                                         "nsys export when nsys is on PATH) or a PyTorch "
                                         "CUDA memory snapshot (.pickle, gzip too) into one session");
  c->add_option("paths", s->inputs, "Trace files or directories (one file per rank)")->required();
  c->add_option("-o,--output", s->output, "Session file to write (default: the first input's name with .db, here)")
      ->check(CLI::Validator(
          [](const std::string& v) { return empty_output_name_refusal(v, "leave -o out for the default (the first input's name with .db)"); }, "NAME"));
  c->add_option("--align", s->align, "How ranks' clocks are aligned: none (as recorded, one global minimum) or "
                                     "collectives (one offset per rank from matching collectives' ends)")
      ->check(CLI::IsMember({"none", "collectives"}));
  c->add_flag("--force-overwrite", s->overwrite, "Replace the session file if it exists");
  c->add_flag("--allow-disjoint", s->allow_disjoint,
              "Import ranks whose time ranges do not overlap (refused otherwise: traces of different jobs?) as one session");
  c->add_flag("--json", s->json, "Print what was imported as one JSON object on stdout");
  c->add_flag("--strict", s->strict,
              "Exit 3 (after writing the session) when a data_loss import problem was recorded: events, rows or "
              "files that were read but not imported");
  return {c, [s] {
            try {
              return cmd_import(*s);
            } catch (const si::ImportError& e) {
              throw ss::SessionError(e.what());  // bad input: exit 2
            }
          },
          [s] { return s->json; }};
}

}  // namespace embedscope::cli

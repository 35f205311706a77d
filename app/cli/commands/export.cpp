// `embedscope export`: a session as Chrome trace JSON (Perfetto), a folder of CSV files, or a folder
// of per-rank Kineto traces for Holistic Trace Analysis.

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cancel_writes.h"
#include "commands.h"
#include "embedscope/engine/workload/spec_error.h"
#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/exporters/export.h"
#include "embedscope/sessions/exporters/kineto_export.h"
#include "embedscope/sessions/store/session.h"
#include "output_guard.h"

namespace embedscope::cli {

namespace es = embedscope::engine;
namespace ss = embedscope::sessions;

namespace {

int cmd_export(const std::string& file, const std::string& format, const std::string& out, bool overwrite) {
  // the reasons stats and compare give for a file that is no session (open_for_stats)
  const std::unique_ptr<ss::SessionReader> opened = open_for_stats(file, "export");
  const ss::SessionReader& session = *opened;
  std::error_code ec;
  if (std::filesystem::exists(out, ec) && std::filesystem::equivalent(file, out, ec))
    throw es::SpecError(fmt::format("{}: is the session being exported; choose another output", out));
  // An existing output is replaced only when asked (as run, import and merge do): a chrome
  // file, or in a csv folder any of the files the export writes. A session that a live run
  // writes never is (tester54 F1: the run's session was lost; checked again at the rename).
  if (format == "chrome") ss::refuse_replacing_live_session(out);
  if (!overwrite) {
    const char* how = "choose another output (-o) or allow overwriting it (embedscope export --force-overwrite)";
    struct stat sb {};
    if (format == "chrome" && lstat(out.c_str(), &sb) == 0)
      throw es::SpecError(fmt::format("{}: already exists; {}", out, how));
    // kineto: HTA reads every .json / .gz file of the folder as a rank's trace, so any such
    // file already there (another session's ranks) is refused, not only the names written
    if (format == "kineto" && std::filesystem::is_directory(out, ec))
      for (const auto& e : std::filesystem::directory_iterator(out, ec)) {
        const std::string n = e.path().filename().string();
        if (n.ends_with(".json") || n.ends_with(".gz"))
          throw es::SpecError(fmt::format("{}: already exists (Holistic Trace Analysis would read it as a rank's trace "
                                          "beside the exported ones); {}", e.path().string(), how));
      }
    if (format == "csv" && std::filesystem::is_directory(out, ec))
      for (const auto& name : ss::csv_export_files())
        if (const auto p = std::filesystem::path(out) / name; lstat(p.c_str(), &sb) == 0)
          throw es::SpecError(fmt::format("{}: already exists (the csv export writes {} there); {}", p.string(), name, how));
  }
  struct stat sb0 {};
  if (format == "kineto") {
    ss::check_kineto_exportable(session);  // before anything is written (tester45 F15)
    if (lstat(out.c_str(), &sb0) == 0 && !S_ISDIR(sb0.st_mode))
      throw es::SpecError(fmt::format("{}: exists and is not a directory; the kineto export writes a folder of per-rank "
                                      "traces (choose another output with -o)", out));
  }
  // Written under a temporary name beside `out` (".<name>.exporting-<pid>": the chrome file, or a
  // folder holding the csv / kineto files) and put in place once complete. Ctrl-C or SIGTERM
  // cancel at once: the temporary output is removed and `out` is as it was (cancel_writes.h); a
  // failed export removes it too.
  std::filesystem::path out_path(out);
  while (!out_path.empty() && out_path.filename().empty()) out_path = out_path.parent_path();  // "dir/" -> "dir"
  make_output_folder(out_path.string(), "-o");  // -o exports/t.json in an empty folder makes exports/
  std::string stem = out_path.filename().string();
  if (stem.size() > 200) stem.resize(200);
  const std::string tmp = (out_path.parent_path() / fmt::format(".{}.exporting-{}", stem, getpid())).string();
  CancelWrites cancel("export", out, "written", false, "\ncancelling the export\n");
  cancel.remove_on_cancel(tmp);
  struct RemoveUnlessDone {  // a failed export leaves nothing behind
    const std::string& path;
    bool done = false;
    ~RemoveUnlessDone() {
      std::error_code e;
      if (!done) std::filesystem::remove_all(path, e);
    }
  } staged{tmp};
  if (format == "chrome") {
    std::ofstream f;
    cancel.hold([&] { f.open(tmp); });
    if (!f) throw es::SpecError(fmt::format("{}: cannot write: {}", out, std::strerror(errno)));
    fmt::print(stderr, "export: writing {} (chrome)\n", out);
    ss::export_chrome_trace(session, f);
    f.close();
    if (!f) throw es::SpecError(fmt::format("{}: write failed: {}", out, std::strerror(errno)));
    ss::refuse_replacing_live_session(out);  // again: a run may have started there meanwhile
    cancel.commit([&] {
      std::filesystem::rename(tmp, out, ec);
      if (ec) throw es::SpecError(fmt::format("{}: cannot write: {}", out, ec.message()));
      staged.done = true;
    });
    fmt::print(stderr, "wrote {} (open it in https://ui.perfetto.dev or chrome://tracing)\n", out);
    return 0;
  }
  cancel.hold([&] {
    if (!std::filesystem::create_directory(tmp, ec))
      throw es::SpecError(fmt::format("{}: cannot create directory: {}", out,  // the staged one beside it
                                      ec ? ec.message() : std::string("a temporary folder of that name exists")));
  });
  fmt::print(stderr, "export: writing {} ({})\n", out, format);
  std::optional<ss::RunStats> stats;  // csv: the figures its tables hold
  if (format != "kineto") stats = ss::analyze(session);
  const std::vector<std::string> written =
      format == "kineto" ? ss::export_kineto_traces(session, tmp) : ss::export_csv(session, *stats, tmp);
  std::vector<std::string> placed;
  cancel.commit([&] {
    std::filesystem::create_directories(out, ec);
    if (overwrite && format == "kineto")  // the stale ranks of an earlier export
      for (const auto& e : std::filesystem::directory_iterator(out, ec))
        if (const std::string n = e.path().filename().string();
            n.starts_with("rank_") && (n.ends_with(".json") || n.ends_with(".gz")))
          std::filesystem::remove(e.path(), ec);
    for (const auto& p : written) {
      const std::filesystem::path to = std::filesystem::path(out) / std::filesystem::path(p).filename();
      std::filesystem::rename(p, to, ec);
      if (ec) throw es::SpecError(fmt::format("{}: cannot write: {}", to.string(), ec.message()));
      placed.push_back(to.string());
    }
  });
  for (const auto& p : placed) fmt::print(stderr, "wrote {}\n", p);
  if (stats && !stats->collectives.empty() && session.collectives().empty())
    // a trace whose collectives carry no arguments (a Gloo trace's gloo:* / c10d::* calls): no
    // record to list, but `stats` lists them from their ops
    fmt::print(stderr,
               "note: collectives.csv holds no row: the session has no collective records (the trace records no "
               "collective's arguments: group, sequence, sizes); the {} collective{} `stats` lists are in "
               "collective_times.csv\n",
               stats->collectives.size(), stats->collectives.size() == 1 ? "" : "s");
  if (format == "kineto") {
    if (session.meta("simulated", "0") == "1")
      fmt::print(stderr, "note: a SIMULATED session (cost model times); the traces say so in their metadata\n");
    fmt::print(stderr, "open the folder with Holistic Trace Analysis: TraceAnalysis(trace_dir=\"{}\")\n", out);
  }
  return 0;
}

struct ExportState {
  std::string file, format, out;
  bool overwrite = false;
};

}  // namespace

Command add_export_command(CLI::App& app) {
  auto s = std::make_shared<ExportState>();
  auto* exp = app.add_subcommand("export", "Export a session as Chrome trace JSON (Perfetto), CSV, or per-rank Kineto traces (HTA)");
  exp->add_option("session", s->file, "Session file (.db)")->required();
  exp->add_option("--format", s->format, "chrome: Trace Event JSON; csv: a folder of CSV files; kineto: a folder of per-rank PyTorch "
                "profiler traces (rank_N.json) for Holistic Trace Analysis")
      ->required()
      ->check(CLI::IsMember({"chrome", "csv", "kineto"}));
  exp->add_option("-o,--output", s->out, "Output file (chrome) or folder (csv, kineto)")
      ->check(CLI::Validator(
          [](const std::string& v) { return empty_output_name_refusal(v, "give the file (chrome) or folder (csv, kineto) to write"); }, "NAME"))
      ->required();
  exp->add_flag("--force-overwrite", s->overwrite,
                "Replace an existing output file (chrome), the csv files in an existing folder, or (kineto) its rank_*.json files");
  return {exp, [s] { return cmd_export(s->file, s->format, s->out, s->overwrite); }, nullptr};
}

}  // namespace embedscope::cli

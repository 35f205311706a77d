#pragma once
// Where the workbench puts the session of a trace it imports (File > Open, drag and drop):
// beside the source when that folder is writable, else in the cache folder the caller gives
// (the workbench passes QStandardPaths::CacheLocation + "/imports"). Qt-free.

#include <string>
#include <vector>

namespace embedscope::ui {

struct ImportTarget {
  std::string path;    ///< the session file
  bool reuse = false;  ///< `path` already holds a complete import of the same sources: open it
  bool in_cache = false;  ///< the source's folder was not writable: the cache folder is used
};

/// "trace_diff_test.json.gz" -> "trace_diff_test.db", "rank0.pt.trace.json.gz" -> "rank0.db",
/// "snap.pickle.gz" -> "snap.db", a directory "run/" -> "run.db".
std::string import_stem(const std::string& source);

/// The session for importing `sources` (files or directories; the first names the session):
/// <folder>/<stem>.db, where <folder> is the first source's folder (the directory's parent for
/// a directory) when writable (access() and a write bit in its mode: root is not taken to write
/// into a mode-555 data folder), else `cache_dir` (created when missing). When that file exists
/// and is a complete imported session of the same sources (each source file recorded in its
/// import_sources_json by its absolute path - the same file however `sources` spell it - with
/// the same size, and not modified after the session was written), it is reused; when it exists
/// otherwise (a relative recorded path says nothing about its folder),
/// <stem>-2.db, <stem>-3.db, ... is taken instead. Throws std::runtime_error naming the
/// folder when `cache_dir` cannot be created.
ImportTarget import_target(const std::vector<std::string>& sources, const std::string& cache_dir);

/// Where `embedscope-ui INPUT` with no display (and no -o) writes INPUT's report, and why there.
struct ReportFolder {
  std::string path;  ///< the report's folder ("run-report" for "run.db" in the current folder)
  std::string why;   ///< "" beside the input; else where it went and why, for the user
};

/// The report folder of `input` (a session, or a trace / snapshot / folder of traces imported into
/// `imported_session`, "" for a session opened as it is):
///  - an import: beside its session, named after it (<session stem>-report: "t.json.gz" imported into
///    cache/imports/t.db -> cache/imports/t-report), so a read-only data folder gets nothing;
///  - a session whose folder is writable (access() and a write bit in its mode, as import_target):
///    beside it, <stem>-report (the path spelled as `input` is: "run.db" -> "run-report");
///  - else in `cwd` when that is writable (the path relative: "<stem>-report"), else in
///    `cache_dir`/<stem>-report.
/// Throws nothing; `why` names the folder that was not writable.
ReportFolder headless_report_folder(const std::string& input, const std::string& imported_session, const std::string& cwd,
                                    const std::string& cache_dir);

/// Whether `path` is an SQLite file to import rather than open as a session: an Nsight Systems
/// export (the nsys_sqlite importer's probe: read-only, never throws; false for an Embedscope
/// session or anything unreadable). Opening or comparing one imports it, as a Kineto trace.
bool is_nsys_export(const std::string& path);

}  // namespace embedscope::ui

#pragma once
// Importers of other tools' traces into an Embedscope session, chosen by content: each importer
// has a probe that looks at the first bytes of a file (gunzipped when gzip) and says whether the
// file is its format. `embedscope import` expands directories, probes each file and hands all
// the files of one format to that importer, which writes one session through a SessionWriter.
//
// Today: kineto_json (PyTorch profiler / Kineto Chrome-trace JSON, `.json` / `.json.gz`) and
// nsys_sqlite (Nsight Systems SQLite exports). PyTorch memory snapshot pickles are recognised
// by their magic bytes (the CLI imports them itself); other SQLite files are named as such.

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "embedscope/sessions/importers/torch_memory_snapshot/snapshot.h"
#include "embedscope/sessions/model/events.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::sessions::importers {

/// Bad input that stops an import before anything is written (no file of a known format, a
/// path that does not exist). what() names the file.
class ImportError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The import was cancelled (ImportOptions::cancelled answered true). The caller closes its
/// writer as "cancelled" and removes the file: nothing half-written is claimed complete.
class ImportCancelled : public ImportError {
 public:
  ImportCancelled() : ImportError("import cancelled") {}
};

struct ImportOptions {
  /// How the ranks' clocks are put on one axis: "none" (each rank as recorded, shifted by one
  /// global minimum, as Holistic Trace Analysis does) or "collectives" (Kineto traces: one offset
  /// per rank from the ends of matching collectives, importers/common/clock_align.h).
  std::string align = "none";
  /// Called with a line of progress (file, bytes, events) now and then; may be empty.
  std::function<void(const std::string&)> progress;
  /// The name to record and report for an input file where it is not the file read: an
  /// .nsys-rep exported to a temporary SQLite file is recorded as "report1.nsys-rep (exported
  /// by nsys to SQLite)". Files not listed are recorded as given.
  std::map<std::string, std::string> source_names;
  /// Called with the fraction of the work done, 0..1, now and then (after each file read,
  /// weighted by its size on disk, reading being 0..0.8; then writing, 0.8..1); may be empty.
  std::function<void(double)> fraction;
  /// Asked before each file and before writing; true stops the import by throwing
  /// ImportCancelled (nothing is written after it). May be empty (never cancelled).
  std::function<bool()> cancelled;
  /// The input files the user named one by one (not found in a named directory), as
  /// select_inputs() returns them in InputFiles::named. Two of them that claim one rank are
  /// refused (ImportError "A and B both claim rank N ...", tester45 F12.11); a second file of a
  /// rank found in a directory is left out as `duplicate_rank` (data_loss). Empty: every file is
  /// treated as found in a directory.
  std::set<std::string> named_files;
};

/// Throws ImportCancelled when `options.cancelled` says so.
void check_cancelled(const ImportOptions& options);

/// What an import wrote, for `embedscope import` to print.
struct ImportSummary {
  std::string format;                       ///< e.g. "kineto_json"
  std::vector<std::string> files;           ///< the files read
  std::vector<int32_t> ranks;               ///< ranks written, ascending
  std::map<std::string, int64_t> events;    ///< count per kind: cpu_ops, runtime_calls, kernels, memcpy, ...
  int64_t start_ns = 0, end_ns = 0;         ///< time range of the valid events, session ns
  int64_t origin_ns = 0;                    ///< trace ts (ns) of session time 0 (metadata import_origin_ns)
  std::vector<ImportStat> problems;         ///< also stored in import_stats
  /// --align collectives: the offsets and residual skew (clock_align.h), as metadata
  /// import_align_json and as lines to print; "" otherwise.
  std::string alignment_json, alignment_text;
};

/// One importer: a format name, a probe over a file (its path, and the first bytes of its
/// text, gunzipped when gzip), and the import.
struct Importer {
  const char* format;
  const char* description;
  bool (*probe)(const std::string& path, std::string_view head);
  ImportSummary (*run)(const std::vector<std::string>& files, SessionWriter& writer, const ImportOptions& options);
};

/// Every importer, in probing order.
const std::vector<Importer>& all_importers();

/// The files named by `paths`: files as given, directories replaced by their regular files
/// ending in .json, .json.gz, .sqlite, .pickle or .pickle.gz, sorted by name. Throws ImportError naming a path that does not
/// exist ("P: no such file or directory"), one that cannot be opened with the reason ("P: cannot open: Permission
/// denied", "...: Too many levels of symbolic links"), or a directory without such files; one that holds sessions instead (`scaling -o DIR`) is said so: "DIR holds 9
/// sessions (.db), not traces to import: open them by name (embedscope-ui DIR/a.db ...)" (tester46 F19).
std::vector<std::string> expand_inputs(const std::vector<std::string>& paths);

/// The files of one import (select_inputs).
struct InputFiles {
  /// What to import: files named as given, and the files of directories that an importer or
  /// the memory-snapshot reader takes, sorted by name within each directory.
  std::vector<std::string> files;
  /// The files of directories that nothing takes (a config.json beside per-rank traces): one
  /// row `skipped_not_a_trace` (severity info) counting them, the first named with detect()'s
  /// reason, and one row `skipped_damaged_file` (data_loss) for those that could not be read far
  /// enough to tell (gzip cut short, a corrupt SQLite file); empty when none. The caller stores it with the importer's problems.
  std::vector<ImportStat> skipped;
  /// The files of `files` that were named on their own rather than found in a directory (the
  /// importer's ImportOptions::named_files).
  std::set<std::string> named;
  /// The directory each file of `files` that was found in one came from (file -> directory as
  /// given); files named on their own are not in it.
  std::map<std::string, std::string> directory_of;
};

/// "; every .pickle / .pickle.gz file of a directory (DIR) is imported as one rank: remove it from
/// there, or import the snapshots by name": what a refusal of a snapshot found in directory `dir`
/// adds, so the user sees why a file they did not name was read.
std::string directory_rank_hint(const std::string& dir);

/// torch_snapshot::load_snapshot of `file`; when `file` came from a directory (`directory_of`),
/// a SnapshotError is thrown again with directory_rank_hint appended (tester59 F9: a pickle that
/// is no snapshot lacked it).
torch_snapshot::MemorySnapshotFile load_rank_snapshot(const std::string& file,
                                                      const std::map<std::string, std::string>& directory_of);

/// expand_inputs(paths), leaving out the files of a directory that no importer takes (a
/// profiler's output folder often holds other JSON) rather than failing on them. A file named
/// on its own is kept whatever it is (detect() then says what it is). A directory's .pickle /
/// .pickle.gz files are its ranks: one that is not a pickle of protocol 2-5 (gunzipped) is
/// refused, ImportError "FILE: not a PyTorch memory snapshot (... this file starts 0x3f 0xa1);
/// every .pickle / .pickle.gz file of a directory (DIR) is imported as one rank: ..." (an old
/// protocol: old_pickle_message), never left out (tester43 F22). Throws ImportError as
/// expand_inputs does, and detect()'s error for a directory's first file when nothing in that
/// directory can be imported.
InputFiles select_inputs(const std::vector<std::string>& paths);

/// The refusal of inputs that mix memory snapshots with traces: `other` (not a snapshot) among
/// `count` files of which `snapshot` is one; says how to import each kind (tester45 F12.7: it did
/// not say how to import the traces).
std::string mixed_snapshot_inputs_message(const std::string& other, size_t count, const std::string& snapshot);

/// Up to `max_bytes` of a file's text from its start (gunzipped when it is gzip); "" when it
/// cannot be read.
std::string read_head(const std::string& path, size_t max_bytes = 1 << 16);

/// Throws ImportError when a trace import (Kineto, Nsight) yielded no event at all (truncated
/// before its first event, an empty traceEvents): a session with nothing in it is not kept. The
/// message names the files and the first data-loss problem that explains it. A memory snapshot
/// with no segments is a real state (nothing allocated) and passes.
void refuse_empty_trace(const ImportSummary& summary);

/// Imports `paths` (files or directories, as `embedscope import` takes them) into `writer`,
/// choosing the importer by content: a PyTorch memory snapshot pickle (one file on its own) or
/// the files of one trace format. The caller closes the writer. Throws ImportError (mixed
/// formats, nothing importable, a snapshot among other files, a trace with no event:
/// refuse_empty_trace), ImportCancelled, or the
/// importers' errors (SessionError, PickleError). Used by the workbench's File > Open.
ImportSummary import_paths(const std::vector<std::string>& paths, SessionWriter& writer, const ImportOptions& options);

/// The importer for `path` by content. Throws ImportError naming the file and what it looks
/// like when no importer takes it (an Nsight SQLite export, a pickle, an empty or blank file, something else).
const Importer& detect(const std::string& path);

}  // namespace embedscope::sessions::importers

#pragma once
// Nsight Systems SQLite exports (`nsys export --type sqlite`) -> session (the rules: the
// section "Imported sessions: Nsight Systems SQLite" of sessions/schema/FORMAT.md).
//
// The file is opened read-only (SQLITE_OPEN_READONLY) and read by table and column name, keyed
// on META_DATA_EXPORT.EXPORT_SCHEMA_VERSION (written against 3.16.1, Nsight Systems 2024.6):
// CUPTI_ACTIVITY_KIND_KERNEL, _MEMCPY, _MEMSET, _SYNCHRONIZATION (GPU ops on (device, stream)
// lanes), _RUNTIME (host calls; kernels join their launch by correlationId), NVTX_EVENTS
// (push/pop ranges on their thread, start/end ranges on a lane of their own; `text` or
// `textId` through StringIds), TARGET_INFO_GPU (device names and memory), PROCESSES and
// ThreadNames, TARGET_INFO_SESSION_START_TIME (absolute time). One rank per process with CUDA
// or NVTX events. Every table is optional: an absent one is an `info` import problem ("no NVTX
// in capture"), a missing column an `error` or `data_loss` one, an unknown schema version an
// `info` one naming the version and what is missing; none of them fails the import.

#include <string>
#include <string_view>
#include <vector>

#include "embedscope/sessions/importers/importer.h"

namespace embedscope::sessions::importers {

/// Whether `path` is an Nsight Systems SQLite export: `head` (its first bytes) starts with the
/// SQLite magic "SQLite format 3\0" and the database has a META_DATA_EXPORT table with an
/// EXPORT_SCHEMA_VERSION row. Opens the file read-only; never throws (false when unreadable).
bool probe_nsys_sqlite(const std::string& path, std::string_view head);

/// "" when the SQLite file at `path` reads whole, else what SQLite says is wrong with it (a file cut
/// short or overwritten: "database disk image is malformed", or how many problems
/// PRAGMA quick_check found), so that a damaged export is not called "not an Nsight Systems
/// export" (tester37). Reads every page (PRAGMA quick_check): call it only on a file no importer
/// recognised. Never throws.
std::string sqlite_file_damage(const std::string& path);

/// Imports the exports `files` into `writer` (not closed) and records the import problems in
/// it. The processes of the files become ranks 0, 1, ... in file order, then by process id.
/// options.align: "none" (absolute time of each file, one global minimum as session time 0).
/// Throws ImportError naming the file when one cannot be opened as SQLite, is not an Nsight
/// export, or SQLite fails while reading it (a corrupt database); tables and columns that are
/// absent are counted problems, never errors.
ImportSummary import_nsys_sqlite(const std::vector<std::string>& files, SessionWriter& writer,
                                 const ImportOptions& options);

/// As import_nsys_sqlite for one export held in memory (`bytes`, a whole database file, read in
/// place through sqlite3_deserialize, read-only; not copied, must outlive the call); `name`
/// stands for the file in messages and metadata. For fuzzers and tests.
ImportSummary import_nsys_sqlite_buffer(std::string_view bytes, const std::string& name, SessionWriter& writer,
                                        const ImportOptions& options);

}  // namespace embedscope::sessions::importers

namespace embedscope::sessions::importers {

/// The `nsys` executable on PATH ("" when there is none): the first PATH entry holding an
/// executable regular file named nsys.
std::string find_nsys_on_path();

/// The command a user runs to export the report `rep` by hand:
/// "nsys export --type sqlite -o report1.sqlite report1.nsys-rep".
std::string nsys_export_command(const std::string& rep);

/// Exports the Nsight Systems report `rep` (.nsys-rep) to SQLite by running `nsys export --type
/// sqlite -o OUT rep` (nsys from PATH, its output in OUT.log), OUT = `out_dir`/<rep's name>.sqlite;
/// returns OUT. Throws ImportError when nsys is not on PATH (saying the exact command to run and
/// to import its output), or when nsys fails or writes no file (its exit status and the last
/// lines it printed).
std::string export_nsys_report(const std::string& rep, const std::string& out_dir);

}  // namespace embedscope::sessions::importers

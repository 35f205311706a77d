#pragma once
// The commands of `embedscope`, one file each (commands/<command>.cpp). main.cpp adds them in
// the order --help lists them, parses, and runs the one given.
//
// Adding a command NAME: write commands/NAME.cpp defining `Command add_NAME_command(CLI::App&)`
// (add a subcommand, bind its options to state the returned closures own, return what runs it),
// declare it below, and add one line to the list in main.cpp. The sources of this folder are
// globbed (app/cli/CMakeLists.txt).

#include <functional>
#include <memory>
#include <map>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "embedscope/sessions/store/session.h"

namespace embedscope::cli {

/// One subcommand: the CLI11 subcommand and what runs it after parsing.
struct Command {
  CLI::App* app = nullptr;  ///< the subcommand (owned by the parent CLI::App)
  /// Runs the command; returns the exit code (0 ok, 1 the job failed, 2 bad input). Bad input
  /// is thrown (engine::SpecError, sessions::SessionError): main prints it and returns 2.
  std::function<int()> run;
  /// True when the command was asked for JSON (--json): main then also prints an error as
  /// {"ended": "bad_input", "error": ...} on stdout. Null: the command has no JSON output.
  std::function<bool()> wants_json;
};

/// `run`: runs a workload and writes a session (commands/run.cpp).
Command add_run_command(CLI::App& app);
/// `calibrate`: this machine's hardware profile fitted from sessions (commands/calibrate.cpp).
Command add_calibrate_command(CLI::App& app);
/// `plan`: the sharding plan and each device's memory, without running (commands/plan.cpp).
Command add_plan_command(CLI::App& app);
/// `program`: the step program of one rank (commands/program.cpp).
Command add_program_command(CLI::App& app);
/// `rebalance`: table-wise moves that balance a session's observed load (commands/rebalance.cpp).
Command add_rebalance_command(CLI::App& app);
/// `scaling`: one workload on simulated clusters of growing size (commands/scaling.cpp).
Command add_scaling_command(CLI::App& app);
/// `scenario`: every run of a teaching scenario headless, and their comparison (commands/scenario.cpp).
Command add_scenario_command(CLI::App& app);
/// `stats`: the figures of a session (commands/stats.cpp).
Command add_stats_command(CLI::App& app);
/// `compare`: the figures of two or more sessions side by side, as the workbench's Compare view
/// sets them (commands/compare.cpp).
Command add_compare_command(CLI::App& app);
/// `replay-memory`: alloc/free actions through allocator settings (commands/replay_memory.cpp).
Command add_replay_memory_command(CLI::App& app);
/// `import`: other tools' traces as a session (commands/import.cpp).
Command add_import_command(CLI::App& app);
/// `merge`: per-rank sessions as one session (commands/merge.cpp).
Command add_merge_command(CLI::App& app);
/// `launch`: one rank per process on this machine, merged (commands/launch.cpp).
Command add_launch_command(CLI::App& app);
/// embedscope-YYYYmmdd-HHMMSS.db (local time), or -2, -3, ... when a file of that name exists
/// in the current directory (commands/run.cpp).
std::string default_session_name();
/// `tokenize`: a SentencePiece model trained on text files, their token ids as a .bin, and the
/// fitted Zipf exponent of the token frequencies (commands/tokenize.cpp).
Command add_tokenize_command(CLI::App& app);
/// `export`: a session as Chrome trace JSON or CSV (commands/export.cpp).
Command add_export_command(CLI::App& app);
/// `inspect-input`: per-feature figures of a workload's input (commands/inspect_input.cpp).
Command add_inspect_input_command(CLI::App& app);
/// Whether `path` is a PyTorch memory snapshot by content: a pickle (0x80, protocol 2..5), as
/// it is or gzip-compressed. `import` dispatches such a file to import_memory_snapshot.
bool is_memory_snapshot_file(const std::string& path);
/// Opens the session at `file` for reading (stats, compare: `command`, named in the errors). A
/// file that is no SQLite database gets an error that says what it is where that is known: an
/// Embedscope JSON file (a workload, a plan, a profile, a scaling study) and what to do with it,
/// a file `import` reads by its content (a trace, an Nsight export, a memory snapshot; an
/// .nsys-rep by its name) and the import to run; otherwise that it is neither a session nor a file
/// import reads, nothing guessed. Throws sessions::SessionError naming the file.
std::unique_ptr<sessions::SessionReader> open_for_stats(const std::string& file, std::string_view command = "stats");
/// Imports the snapshot files (one: every device a rank; several, one per process: ranks 0..N-1
/// in this order, torch_snapshot::import_torch_memory_snapshots) into the session `out` ("":
/// the first file's name with .db) and prints a summary (or JSON). Returns the import problems
/// recorded (`import --strict` exits 3 on a data_loss one); bad input throws SessionError
/// (PickleError, SnapshotError).
/// `directory_of`: InputFiles::directory_of (a snapshot found in a directory is refused with
/// directory_rank_hint added).
std::vector<sessions::ImportStat> import_memory_snapshot(const std::vector<std::string>& files, const std::string& out, bool overwrite, bool as_json,
                           const std::map<std::string, std::string>& directory_of = {});

}  // namespace embedscope::cli

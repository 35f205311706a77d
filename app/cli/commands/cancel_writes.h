#pragma once
// Ctrl-C and SIGTERM for the commands that write one output under a staged name and put it in
// place at the end (`import`, `merge`, `export`; staged_output.h): the first signal cancels at
// once, whatever the command is doing (reading its inputs, writing, or closing the staged
// session inside a library call that polls nothing: retest47 R7, the import's writing phase went
// on to exit 0). The staged output is removed, "<command> cancelled; nothing was <kept|written>
// (...)" is printed (with --json, {"ended": "cancelled", ...} on stdout), and the process exits
// 130. The output's final name is only ever touched by the rename that puts the complete output
// in place, and a cancel never runs during it: no half-written output is ever left under that
// name and a file already there is either kept as it was or replaced by the complete one.
// The cancel runs on a thread of its own (the signal handler only wakes it): it first parks the
// command's thread in a signal handler for good (so that nothing creates a file after the staged
// ones were removed), then removes them, prints, and calls _exit(130). Once the command's thread
// is parked (maybe holding the allocator's or a library's lock) only async-signal-safe calls
// run: what it prints is formatted before. A second signal while it runs does nothing more: the
// first already stops at once.

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace embedscope::cli {

/// The signal handling of one writing command. One per process (it installs the SIGINT and
/// SIGTERM handlers: interrupt.h cancel_at_once_with); create it before the command writes
/// anything, and keep it alive until the process ends.
class CancelWrites {
 public:
  /// `command`: "import", "merge" or "export" (named in the lines); `out`: the final output
  /// (a file, or a folder for the csv / kineto export), named in the last line; `nothing_was`:
  /// "kept" or "written" ("import cancelled; nothing was kept"); `json`: print
  /// {"ended": "cancelled", "session": null} on stdout when cancelled (the commands with --json).
  /// `said` (a string literal: printed by the signal handler) announces the cancel, e.g.
  /// "\ncancelling the merge\n".
  CancelWrites(std::string command, std::string out, std::string nothing_was, bool json, const char* said);
  CancelWrites(const CancelWrites&) = delete;
  CancelWrites& operator=(const CancelWrites&) = delete;

  /// A staged output to remove when cancelled: a file, or a folder with everything in it, and
  /// the entries beside it named after it (SQLite's "-wal", "-shm" and "-journal", the session
  /// writer's ".claim-PID-N" file). Missing paths are no error.
  void remove_on_cancel(const std::string& path);
  /// Runs `f` with the cancel held off (a signal meanwhile cancels once `f` returned): for the
  /// step that creates a staged file, so that it never appears after the cancel removed what
  /// was staged. A cancel asked before the call happens first (`f` does not run).
  void hold(const std::function<void()>& f);
  /// What a cancel says after its "cancelled" line: `text` (a line of its own on stderr, e.g.
  /// where the command's inputs are kept; "" none) and `json` (members added to the --json
  /// object). Call before the command writes anything.
  void set_note(std::string text, nlohmann::json json = nlohmann::json::object());
  /// Puts the output in place: runs `put` (a rename) held, unless a cancel was asked before
  /// (then the cancel happens and `put` never runs). After it, a signal is too late to cancel:
  /// it says so, the command ends normally, and a further signal ends the process.
  void commit(const std::function<void()>& put);

 private:
  // What the cancel needs; never freed: the cancel's thread may still use it after the command
  // returned (a signal while the process ends).
  struct State {
    std::mutex mu;
    std::string command, out, nothing_was, note;
    nlohmann::json note_json = nlohmann::json::object();
    bool json = false, committed = false;
    std::vector<std::string> staged;
    void cancel_now_locked();  // with mu held: removes the staged output, says so, exits 130
    void on_signal();          // the thread of cancel_at_once_with
  };
  State* state_;
};

}  // namespace embedscope::cli

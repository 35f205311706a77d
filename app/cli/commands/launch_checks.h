#pragma once
// launch's checks before any process starts and its rendezvous folder's removal (launch.cpp).

#include <string>
#include <vector>

namespace embedscope::cli::launch_detail {

/// The lm_embedding workload among run's arguments (--preset NAME, --preset=NAME, or a file that
/// is one), "" when there is none. Refused before any process starts (tester43 F18): each
/// process would train every rank of it as threads, and all of them would write one session.
std::string lm_workload_of(const std::vector<std::string>& args);

/// The workload file among run's arguments, read once before any process starts (tester50 F12):
/// a missing or broken file throws the SpecError a single run gives (bad input, exit 2), not
/// every rank after a rendezvous. Run's own parser finds it (its positional `workload`), so that
/// an option's value is never taken for the file; arguments run's parser refuses, and a
/// --preset, are left to the ranks. Launch's -n (`n`) is the run's world size: a --devices among
/// the arguments that differs, and a world size the workload refuses (/devices/count: a cpu
/// run's 64 ranks at most), throw SpecError naming `launch -n N` (not the --world-size launch
/// adds), once, instead of N processes each refusing it.
void check_workload_file(const std::vector<std::string>& args, int n);

/// Removes the rendezvous directory, first saying so (with its number of files) when it holds
/// kSayRemovingFiles files or more. Errors are ignored (a directory that cannot be removed stays).
void remove_rendezvous_dir(const std::string& dir);

/// The rank sessions that hold something to merge: a session without metadata (its rank was
/// killed before its first commit; `merge` refuses it) is left out, and named on stderr, so
/// that launch merges and suggests merging only what can be (tester62c F4). Other unreadable
/// sessions are kept: the merge names them.
std::vector<std::string> mergeable_sessions(std::vector<std::string> sessions);

}  // namespace embedscope::cli::launch_detail

// launch's checks before any process starts (launch_checks.h).
#include "launch_checks.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "commands.h"
#include "embedscope/engine/workload/lm_spec.h"
#include "embedscope/engine/workload/spec.h"
#include "embedscope/engine/workload/spec_error.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::cli::launch_detail {

namespace es = embedscope::engine;

// The lm_embedding workload among run's arguments (--preset NAME, --preset=NAME, or a file that
// is one), "" when there is none. Refused before any process starts (tester43 F18): each
// process would train every rank of it as threads, and all of them would write one session.
std::string lm_workload_of(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--preset" && i + 1 < args.size() && es::is_lm_preset(args[i + 1])) return "preset " + args[i + 1];
    if (a.rfind("--preset=", 0) == 0 && es::is_lm_preset(a.substr(9))) return "preset " + a.substr(9);
    std::error_code ec;
    if (a.empty() || a[0] == '-' || !std::filesystem::is_regular_file(a, ec)) continue;
    try {
      if (es::is_lm_workload_file(a)) return a;
    } catch (const es::SpecError&) {  // not JSON (a plan, a token file): the ranks name it
    }
  }
  return "";
}

// The workload file among run's arguments, read once before any process starts (tester50 F12):
// a missing or broken file is refused here with the error a single run gives (bad input, exit 2),
// not by every rank after a rendezvous. Run's own parser finds it (its positional `workload`),
// so that an option's value is never taken for the file; arguments run's parser refuses, and a
// --preset, are left to the ranks, as before.
// Launch's own -n is the run's world size: a run's --devices that disagrees is refused here, once,
// naming -n (tester62c F7: every rank blamed --world-size, which launch adds), and so is a world
// the workload refuses (a cpu run's 64 ranks at most), before N processes start to refuse it.
void check_workload_file(const std::vector<std::string>& args, int n) {
  CLI::App probe;
  const Command run = add_run_command(probe);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them last first
  reversed.push_back("run");
  try {
    probe.parse(reversed);
  } catch (const CLI::ParseError&) {
    return;
  }
  if (const CLI::Option* devices = run.app->get_option("--devices"); devices->count() > 0) {
    const auto d = devices->as<int64_t>();
    if (d != n)
      throw es::SpecError(fmt::format("launch -n {}: the run's --devices {} disagrees (launch runs one rank a process, "
                                      "-n ranks in all); leave --devices out or give --devices {}", n, d, n));
  }
  const CLI::Option* workload = run.app->get_option("workload");
  if (workload->count() == 0) return;
  const auto file = workload->as<std::string>();
  if (file.empty()) return;
  es::WorkloadSpec spec = es::load_workload_file(file);  // throws SpecError: "FILE: cannot open: ..."
  spec.devices.count = n;
  try {
    es::validate(spec, file);
  } catch (const es::SpecError& e) {
    // only the world size is launch's to judge: the rest may be what run's flags change
    const std::string msg = e.what(), pointer = "/devices/count: ";
    if (const auto at = msg.find(pointer); at != std::string::npos)
      throw es::SpecError(fmt::format("launch -n {}: the run's world size (/devices/count of {}) {}", n, file,
                                      msg.substr(at + pointer.size())));
  }
}

std::vector<std::string> mergeable_sessions(std::vector<std::string> sessions) {
  std::erase_if(sessions, [](const std::string& path) {
    try {
      const sessions::SessionReader probe(path);
      return false;
    } catch (const std::exception& e) {
      if (std::string(e.what()).find("holds no metadata yet") == std::string::npos) return false;  // merge names it
      fmt::print(stderr, "embedscope launch: {} holds nothing (its rank ended before its first commit): left "
                         "out of the merge\n", path);
      return true;
    }
  });
  return sessions;
}

// Where launch's files at the end are this many or more, it says that it removes them before it
// does (tester50 F7: minutes of silence while ~400,000 files of a run's keys went, which the ranks
// no longer leave behind; a store left by a killed run still holds a few dozen).
constexpr size_t kSayRemovingFiles = 1000;

// Removes the rendezvous directory, first saying so (with its number of files) when it holds
// kSayRemovingFiles files or more. Errors are ignored (a directory that cannot be removed stays).
void remove_rendezvous_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  size_t files = 0;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) ++files;
  if (files >= kSayRemovingFiles)
    fmt::print(stderr, "embedscope launch: removing the rendezvous folder {} ({} files)\n", dir, files);
  fs::remove_all(dir, ec);
}

}  // namespace embedscope::cli::launch_detail

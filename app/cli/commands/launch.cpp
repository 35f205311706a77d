// `embedscope launch -n N [--align none|collectives] [--kill-after S] [--hosts-file F] run RUN-ARGS...`:
// one rank per process on this machine. Makes a private rendezvous directory (a gloo FileStore,
// removed at the end) and a fresh run id, starts N processes of this executable as
// `run RUN-ARGS --rank R --world-size N --rendezvous file://DIR --run-id ID -o PATTERN --json`
// (PATTERN: the run's -o when it holds "{rank}", the merged session then being that name without
// ".rank{rank}" (merged_output, as mpirun's rank 0 does); else STEM.rank{rank}.db for -o STEM.db;
// with --hosts-file, also `--host ADDRESS --local-world-size SLOTS`: loopback hosts
// playing nodes, exec/launch/hosts_file.h; EMBEDSCOPE_LAUNCH_NODE=NODE/LOCAL_RANK in the
// environment: the rank's node, its host's block, for the metadata launch_node), each in a process group of its own, streams their
// stderr prefixed "[rank R] ", forwards Ctrl-C (SIGINT), SIGTERM and SIGUSR1 (the flight
// recorder dump) to every child, and, when a child dies of a signal, writes its
// death into the store (report_dead_rank: the others, whose collectives broke, name it at once)
// and kills (SIGKILL) the ones still running --kill-after seconds later; when a child exits
// non-zero (hang, crashed, ...), the ones still running --kill-after seconds later get SIGTERM, and
// SIGKILL min(--kill-after, 10) s after that (a stopped or stalled rank never ends on its own). Then it merges the rank sessions into the
// run's -o (default embedscope-YYYYmmdd-HHMMSS.db) with sessions::merge_sessions, as `embedscope
// merge` does (under a temporary name, renamed over -o once complete: staged_output.h), and keeps
// the rank sessions beside it; it says so on stderr ("merging 2 rank sessions (26051 steps) into
// run.db", then "summarising run.db (26051 steps)": a long run's merge takes seconds to minutes).
// Once the ranks have ended, a Ctrl-C or SIGTERM stops launch at once (exit 130), naming the rank
// sessions (and the merged one when it is in place): during the merge it cancels it, removing
// what was written (cancel_writes.h). Its table gives each rank's steps, step
// mean and last loss from what the rank printed, or, for a rank that printed none (crashed,
// killed), from its session (figures_from_session; --json ranks[].from_session). Exit: 0 when every rank exited 0; 130
// when the user stopped them at once (a second Ctrl-C or SIGTERM forwarded, every rank ended 0 or by that stop); else
// 2 when a rank said bad input (exit 2), else 1. The rank session names are refused up front when they exist (without
// --force-overwrite), and a file at a rank's name that this run did not write is never read as its session.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "cancel_writes.h"
#include "commands.h"
#include "interrupt.h"
#include "launch_checks.h"
#include "launch_stops.h"
#include "embedscope/engine/exec/launch/hosts_file.h"
#include "embedscope/engine/exec/launch/rank_env.h"
#include "embedscope/engine/workload/lm_spec.h"
#include "embedscope/engine/workload/spec.h"
#include "embedscope/engine/workload/spec_error.h"
#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/analysis/run_end.h"
#include "embedscope/sessions/merge/merge.h"
#include "embedscope/sessions/store/session.h"
#include "output/output.h"
#include "output/rebalance_text.h"
#include "run_process.h"
#include "staged_output.h"
#include "workload_args.h"

namespace embedscope::cli {

namespace es = embedscope::engine;
using nlohmann::json;
using launch_detail::check_workload_file;
using launch_detail::lm_workload_of;
using launch_detail::remove_rendezvous_dir;

namespace {

// Whether a SIGINT / SIGTERM to launch is a request of its own: not when it came less than
// kOneStopRequestMs (interrupt.h) after the last one counted (`last`, CLOCK_MONOTONIC ns), e.g.
// coreutils timeout's second copy, sent to launch's process group (tester50 F2); launch then
// forwards one signal, not two, and the ranks cancel after their current step. Async-signal-safe.
bool launch_new_request(std::atomic<int64_t>& last) {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  const int64_t now = static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
  const int64_t before = last.load();
  if (before != 0 && now - before < int64_t{kOneStopRequestMs} * 1'000'000) return false;
  last = now;
  return true;
}

std::atomic<int> g_interrupts{0};
std::atomic<int64_t> g_last_interrupt_ns{0}, g_last_term_ns{0};
extern "C" void on_launch_sigint(int) {
  if (launch_new_request(g_last_interrupt_ns)) g_interrupts.fetch_add(1);
}
// SIGTERM and SIGUSR1 to launch go on to every rank: each dumps its flight recorder (and
// SIGTERM cancels it after its current step)
std::atomic<int> g_terms{0}, g_usr1s{0};
extern "C" void on_launch_sigterm(int) {
  if (launch_new_request(g_last_term_ns)) g_terms.fetch_add(1);
}
extern "C" void on_launch_sigusr1(int) { g_usr1s.fetch_add(1); }

// After the ranks ended: a Ctrl-C (or SIGTERM) while launch reads the rank sessions or summarises
// the merged one stops launch at once (exit 130), saying where the sessions are; nothing is being
// written then (the merge itself is cancelled by CancelWrites, which removes its staged output).
// The texts are set before the handler is installed (launch_stop_after_run) and never freed:
// the handler only writes them (write(2) and _exit are async-signal-safe).
std::atomic<const std::string*> g_launch_stop_text{nullptr}, g_launch_stop_json{nullptr};
extern "C" void on_launch_stop_after_run(int) {
  for (const auto* text : {g_launch_stop_text.load(), g_launch_stop_json.load()}) {
    if (!text || text->empty()) continue;
    const int fd = text == g_launch_stop_json.load() ? STDOUT_FILENO : STDERR_FILENO;
    [[maybe_unused]] const auto n = write(fd, text->data(), text->size());
  }
  _exit(130);  // as the default action's 128 + SIGINT
}

// Installs on_launch_stop_after_run for SIGINT and SIGTERM with what it says: `text` on stderr
// and, with --json, `json` on stdout (one line each).
void launch_stop_after_run(const std::string& text, const json* j) {
  g_launch_stop_text = new std::string("\nembedscope launch: stopped; " + text + "\n");
  g_launch_stop_json = j ? new std::string(dump(*j) + "\n") : nullptr;
  struct sigaction sa {};
  sa.sa_handler = on_launch_stop_after_run;
  sigfillset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

// "a.rank0.db, a.rank1.db (merge them: embedscope merge a.rank0.db a.rank1.db -o a.db)"
std::string kept_rank_sessions(const std::vector<std::string>& sessions, const std::string& output) {
  return fmt::format("{} (merge them: embedscope merge {} -o {})", fmt::join(sessions, ", "), fmt::join(sessions, " "),
                     output);
}

struct LaunchState {
  int n = 0;
  std::string align = "none";
  int kill_after_s = 120;
  std::string hosts_file;         // --hosts-file: loopback hosts playing nodes ("" none)
  bool json = false;              // --json before `run`: as run's own --json
  std::vector<std::string> rest;  // "run" and its arguments
};

struct Child {
  int rank = 0;
  pid_t pid = -1;
  int out_fd = -1, err_fd = -1;
  std::string out, err_line;
  bool exited = false;
  bool killed_at_stop = false;  // killed by launch after the second Ctrl-C (stopped, or did not stop)
  bool continued = false;       // stopped at the first Ctrl-C / SIGTERM, continued by launch (launch_stops.h)
  int status = 0;
  std::string session;
};

std::string signal_name(int sig) {
  const char* d = strsignal(sig);
  return fmt::format("signal {} ({})", sig, d ? d : "?");
}

std::string how_ended(const Child& c) {
  if (WIFSIGNALED(c.status)) return "killed by " + signal_name(WTERMSIG(c.status));
  return fmt::format("exit {}", WEXITSTATUS(c.status));
}

// "rank 0's hang" for a rank that exited non-zero: how its run ended, from the --json object it
// printed ("hang", "crashed", "oom", ...), else "rank 0's exit 1".
std::string failed_end(const Child& c) {
  const json j = json::parse(c.out, nullptr, false);
  if (j.is_object() && j.contains("ended") && j["ended"].is_string())
    return fmt::format("rank {}'s {}", c.rank, j["ended"].get<std::string>());
  return fmt::format("rank {}'s {}", c.rank, how_ended(c));
}

// Run arguments for the children, the merged session's path and whether to overwrite; throws
// SpecError for flags launch sets itself.
struct ChildArgs {
  std::vector<std::string> args;  // after "run", without -o / --json
  std::string output;             // the merged session
  std::string pattern;            // the rank sessions' -o, with {rank}
  bool overwrite = false, json = false;
};

ChildArgs split_run_args(const std::vector<std::string>& rest) {
  if (rest.empty() || rest[0] != "run")
    throw es::SpecError("launch: give the command to launch, `run` and its arguments, e.g. embedscope launch -n 4 "
                        "run --preset tiny");
  ChildArgs c;
  for (size_t i = 1; i < rest.size(); ++i) {
    const std::string& a = rest[i];
    for (const char* own : {"--rank", "--world-size", "--rendezvous", "--run-id"})
      if (a == own || a.rfind(std::string(own) + "=", 0) == 0)
        throw es::SpecError(fmt::format("launch: {} is set by launch for every rank; leave it out", own));
    if (a == "-o" || a == "--output") {
      if (i + 1 >= rest.size()) throw es::SpecError(fmt::format("launch run {}: needs a file name", a));
      c.output = rest[++i];
    } else if (a.rfind("--output=", 0) == 0) {
      c.output = a.substr(9);
    } else if (a == "--json") {
      c.json = true;
    } else {
      if (a == "--force-overwrite") c.overwrite = true;
      c.args.push_back(a);
    }
  }
  if (c.output.empty()) c.output = default_session_name();
  if (c.output.find("{rank}") != std::string::npos) {  // a rank pattern, as mpirun and by-hand ranks take it
    c.pattern = c.output;
    c.output = merged_output(c.pattern);
  } else {
    std::string stem = c.output;
    if (stem.size() > 3 && stem.compare(stem.size() - 3, 3, ".db") == 0) stem.resize(stem.size() - 3);
    c.pattern = stem + ".rank{rank}.db";
  }
  return c;
}

void set_cloexec(int fd) { fcntl(fd, F_SETFD, FD_CLOEXEC); }

void spawn(Child& c, const std::string& exe, const std::vector<std::string>& args, const std::string& launch_node) {
  int out[2], err[2];
  if (pipe(out) != 0 || pipe(err) != 0) throw std::runtime_error(fmt::format("launch: pipe: {}", strerror(errno)));
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(exe.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const std::string launcher_pid = std::to_string(getpid());
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(fmt::format("launch: fork: {}", strerror(errno)));
  if (pid == 0) {
    setpgid(0, 0);  // Ctrl-C at the terminal reaches launch only; launch forwards it once
    signal(SIGINT, SIG_DFL);
    setenv("EMBEDSCOPE_LAUNCH_NODE", launch_node.c_str(), 1);  // the rank's node/local rank (launch_node)
    // the rank watches this process's pipes: when they lose their reader (launch killed), it
    // cancels and says so in its session (interrupt.h watch_launcher; tester46 F5)
    setenv("EMBEDSCOPE_LAUNCHER_PID", launcher_pid.c_str(), 1);
    dup2(out[1], STDOUT_FILENO);
    dup2(err[1], STDERR_FILENO);
    close(out[0]), close(out[1]), close(err[0]), close(err[1]);
    execv(exe.c_str(), argv.data());
    const std::string msg = fmt::format("launch: cannot run {}: {}\n", exe, strerror(errno));
    [[maybe_unused]] auto n = write(STDERR_FILENO, msg.data(), msg.size());
    _exit(127);
  }
  close(out[1]), close(err[1]);
  set_cloexec(out[0]), set_cloexec(err[0]);
  c.pid = pid;
  c.out_fd = out[0];
  c.err_fd = err[0];
}

// Reads what is there; prints whole stderr lines prefixed by the rank. False at end of file.
bool drain(Child& c, int fd) {
  char buf[65536];
  const ssize_t n = read(fd, buf, sizeof buf);
  if (n <= 0) {
    if (fd == c.err_fd && !c.err_line.empty()) fmt::print(stderr, "[rank {}] {}\n", c.rank, c.err_line), c.err_line.clear();
    return false;
  }
  if (fd == c.out_fd) {
    c.out.append(buf, static_cast<size_t>(n));
    return true;
  }
  for (ssize_t i = 0; i < n; ++i) {
    const char ch = buf[i];
    if (ch == '\n' || ch == '\r') {
      if (!c.err_line.empty()) fmt::print(stderr, "[rank {}] {}\n", c.rank, c.err_line);
      c.err_line.clear();
    } else {
      c.err_line += ch;
    }
  }
  return true;
}

std::string random_id() {
  std::random_device rd;
  return fmt::format("launch-{:08x}{:08x}", rd(), rd());
}

// A rank's figures for the table when its process printed none (it crashed, was killed, hung):
// read from its session, as `stats` reads them (tester42 F14: "-" steps for ranks whose sessions
// said "crashed in step 18, after 18 measured steps"). {} when the session is unreadable.
json figures_from_session(const std::string& path) {
  try {
    const sessions::SessionReader reader(path);
    const sessions::RunStats st = sessions::analyze(reader);
    json f{{"ended", sessions::ended_text(st)}, {"steps", st.steps}};
    if (st.steps > 0) f["step_time_ns"] = {{"mean", st.step_time_ns.mean}};
    f["loss_last"] = st.loss.empty() ? json() : json(st.loss.back());
    return f;
  } catch (const std::exception& e) {
    return json{{"unreadable", e.what()}};
  }
}

int cmd_launch(const LaunchState& s) {
  if (s.n < 1) throw es::SpecError("launch -n: give the number of processes, 1 or more");
  ChildArgs ca = split_run_args(s.rest);
  ca.json = ca.json || s.json;  // `launch --json -n 4 run ...` as `launch -n 4 run ... --json` (docs55 D17)
  if (const std::string lm = lm_workload_of(ca.args); !lm.empty())
    throw es::SpecError(fmt::format("launch: {} is an lm_embedding workload: {}; run it without launch (`embedscope "
                                    "run`, --devices N for N ranks)", lm, kLmRanksAreThreads));
  // a simulation times every rank in one process: refused before any process starts, as each
  // rank would refuse it after announcing a simulated world (tester45 F12.3)
  for (const auto& a : ca.args)
    if (a == "--simulate" || a.rfind("--simulate=", 0) == 0)
      throw es::SpecError("launch: --simulate times every rank in one process (one rank per process runs on the cpu "
                          "or cuda backend); run it without launch (`embedscope run ... --simulate PROFILE`, "
                          "--devices N for N ranks)");
  std::optional<es::launch::HostPlacement> hosts;
  if (!s.hosts_file.empty()) {
    for (const auto& a : ca.args)
      for (const char* own : {"--host", "--local-world-size"})
        if (a == own || a.rfind(std::string(own) + "=", 0) == 0)
          throw es::SpecError(fmt::format("launch --hosts-file {}: {} is set by the hosts file for every rank; leave "
                                          "it out", s.hosts_file, own));
    hosts = es::launch::place_ranks(es::launch::read_hosts_file(s.hosts_file), s.n, s.hosts_file);
  }
  check_workload_file(ca.args, s.n);
  namespace fs = std::filesystem;
  if (fs::exists(ca.output) && !ca.overwrite)
    throw es::SpecError(fmt::format("{}: already exists; choose another name (-o) or allow overwriting it "
                                    "(--force-overwrite)", ca.output));
  if (ca.overwrite) sessions::refuse_replacing_live_session(ca.output);  // before any rank runs (retest54 R1)
  // the rank sessions too, before any process starts (tester53 F1: a leftover X.rank1.db made
  // rank 1 alone refuse, after its peers had started)
  if (!ca.overwrite)
    for (int r = 0; r < s.n; ++r)
      if (const std::string rs = rank_session(ca.pattern, r); file_version(rs))
        throw es::SpecError(fmt::format("{}: already exists (rank {}'s session of {}); choose another name (-o) or "
                                        "allow overwriting it (--force-overwrite)", rs, r, ca.output));
  // what is at each rank's session name now: a file there afterwards that is the same one is an
  // earlier run's (its rank refused before writing; --force-overwrite), never read as this run's
  std::vector<std::optional<FileVersion>> before;
  for (int r = 0; r < s.n; ++r) before.push_back(file_version(rank_session(ca.pattern, r)));
  char tmpl[] = "/tmp/embedscope-launch-XXXXXX";
  const char* tmpdir_env = std::getenv("TMPDIR");
  std::string pattern = (tmpdir_env && *tmpdir_env ? std::string(tmpdir_env) : std::string("/tmp")) +
                        "/embedscope-launch-XXXXXX";
  std::vector<char> pat(pattern.begin(), pattern.end());
  pat.push_back('\0');
  const char* dir_c = mkdtemp(pat.data());
  if (!dir_c) dir_c = mkdtemp(tmpl);
  if (!dir_c) throw std::runtime_error(fmt::format("launch: cannot make a rendezvous directory: {}", strerror(errno)));
  const std::string dir = fs::absolute(dir_c).string();  // a relative TMPDIR: file:// needs an absolute path
  const std::string run_id = random_id();
  const std::string exe = fs::read_symlink("/proc/self/exe").string();
  fmt::print(stderr, "embedscope launch: {} processes, rendezvous file://{} (run id {})\n", s.n, dir, run_id);
  if (hosts)
    for (int h = 0; h < hosts->hosts_used; ++h)
      fmt::print(stderr, "embedscope launch: node {} on {}: ranks {}-{}\n", h,
                 hosts->host_of_rank[static_cast<size_t>(h * hosts->local_world_size)], h * hosts->local_world_size,
                 (h + 1) * hosts->local_world_size - 1);

  std::vector<Child> kids(static_cast<size_t>(s.n));
  struct sigaction sa {}, old_sa {};
  sa.sa_handler = on_launch_sigint;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_sa);
  struct sigaction sa_term {}, sa_usr1 {}, old_term {}, old_usr1 {};
  sa_term.sa_handler = on_launch_sigterm;
  sa_usr1.sa_handler = on_launch_sigusr1;
  sigemptyset(&sa_term.sa_mask);
  sigemptyset(&sa_usr1.sa_mask);
  sigaction(SIGTERM, &sa_term, &old_term);
  sigaction(SIGUSR1, &sa_usr1, &old_usr1);
  signal(SIGPIPE, SIG_IGN);
  for (int r = 0; r < s.n; ++r) {
    Child& c = kids[static_cast<size_t>(r)];
    c.rank = r;
    c.session = rank_session(ca.pattern, r);
    std::vector<std::string> args{"run"};
    args.insert(args.end(), ca.args.begin(), ca.args.end());
    for (const std::string& a : {std::string("--rank"), std::to_string(r), std::string("--world-size"), std::to_string(s.n),
                                 std::string("--rendezvous"), "file://" + dir, std::string("--run-id"), run_id,
                                 std::string("-o"), ca.pattern, std::string("--json")})
      args.push_back(a);
    if (hosts) {  // this rank's "host" and the hosts as nodes
      args.insert(args.end(), {"--host", hosts->host_of_rank[static_cast<size_t>(r)]});
      if (hosts->hosts_used > 1) args.insert(args.end(), {"--local-world-size", std::to_string(hosts->local_world_size)});
    }
    // node = the host's block (one node without a hosts file or on one host), local rank within it
    const int per_node = hosts && hosts->hosts_used > 1 ? hosts->local_world_size : s.n;
    spawn(c, exe, args, fmt::format("{}/{}", r / per_node, r % per_node));
  }
  int forwarded = 0, forwarded_terms = 0, forwarded_usr1s = 0;
  std::chrono::steady_clock::time_point kill_at{}, sigkill_at{};
  bool kill_armed = false, killed = false, termed = false;
  std::string first_death;
  // the first rank that ended unsuccessfully without a signal (hang, crashed, ...): the others get
  // --kill-after seconds, then SIGTERM, then SIGKILL (tester47 F15: a stopped rank never ends on its own)
  const Child* first_failed = nullptr;
  const int term_grace_s = std::min(s.kill_after_s, 10);
  // after the second Ctrl-C, the seconds a rank gets to stop before it is killed
  const int stop_grace_s = std::min(s.kill_after_s, 5);
  std::chrono::steady_clock::time_point stop_kill_at{};
  // the first Ctrl-C or SIGTERM continues a stopped rank so that it takes the signal with the others
  // (launch_stops.h); one still stopped 2 s later (a debugger's stop) is killed, and its death set
  // in the store ends the others at once (tester62c F3: they waited their 31 s collective timeout)
  std::chrono::steady_clock::time_point recheck_stopped_at{};
  auto continue_stopped = [&](const char* what) {
    for (auto& c : kids)
      if (!c.exited && continue_if_stopped(c.rank, c.pid, what))
        c.continued = true, recheck_stopped_at = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  };
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<std::pair<Child*, int>> who;
    for (auto& c : kids)
      for (int* fd : {&c.out_fd, &c.err_fd})
        if (*fd >= 0) fds.push_back({*fd, POLLIN, 0}), who.emplace_back(&c, *fd);
    bool all_exited = true;
    for (auto& c : kids) {
      if (c.exited) continue;
      int st = 0;
      if (waitpid(c.pid, &st, WNOHANG) == c.pid) {
        c.exited = true;
        c.status = st;
        if (WIFSIGNALED(st) && first_death.empty() && !killed) {  // not one launch killed itself
          first_death = fmt::format("rank {} was {}", c.rank, how_ended(c));
          try {  // the others name it at once (they would otherwise wait out their collective timeout)
            es::launch::report_dead_rank("file://" + dir, run_id, c.rank, "was " + how_ended(c) + " (seen by launch)");
          } catch (const std::exception&) {
          }
          fmt::print(stderr, "embedscope launch: {}; the other ranks end on their own (those still running are "
                             "killed after {} s)\n", first_death, s.kill_after_s);
          kill_armed = true;
          kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(s.kill_after_s);
        } else if (!WIFSIGNALED(st) && WEXITSTATUS(st) != 0 && !first_failed && first_death.empty()) {
          first_failed = &c;
          kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(s.kill_after_s);
        }
      } else {
        all_exited = false;
      }
    }
    if (all_exited && fds.empty()) break;
    const int interrupts = g_interrupts.load();
    for (; forwarded < interrupts; ++forwarded) {
      fmt::print(stderr, "embedscope launch: forwarding Ctrl-C to every rank\n");
      for (auto& c : kids)
        if (!c.exited) kill(c.pid, SIGINT);
      if (forwarded == 0) continue_stopped("Ctrl-C");
      // the second Ctrl-C stops every rank at once: a stopped rank (SIGSTOP, a debugger) cannot
      // take it, so it is killed now, and one still running stop_grace_s later is killed then
      // (tester62c F3: launch waited the collective timeout and the whole --kill-after, silent)
      if (forwarded == 1) {
        stop_kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(stop_grace_s);
        for (auto& c : kids)
          if (!c.exited && process_stopped(c.pid)) {
            fmt::print(stderr, "embedscope launch: rank {} (pid {}) is stopped and cannot take the Ctrl-C: killed\n",
                       c.rank, c.pid);
            killed = c.killed_at_stop = true;
            kill(c.pid, SIGKILL);
          }
      }
    }
    if (forwarded >= 2 && std::chrono::steady_clock::now() >= stop_kill_at)
      for (auto& c : kids)
        if (!c.exited && !c.killed_at_stop) {
          fmt::print(stderr, "embedscope launch: rank {} (pid {}) did not stop within {} s of the second Ctrl-C: "
                             "killed\n", c.rank, c.pid, stop_grace_s);
          killed = c.killed_at_stop = true;
          kill(c.pid, SIGKILL);
        }
    for (auto [pending, done, sig, what] : {std::tuple{&g_terms, &forwarded_terms, SIGTERM, "SIGTERM"},
                                            std::tuple{&g_usr1s, &forwarded_usr1s, SIGUSR1, "SIGUSR1"}})
      for (const int n = pending->load(); *done < n; ++*done) {
        fmt::print(stderr, "embedscope launch: forwarding {} to every rank\n", what);
        for (auto& c : kids)
          if (!c.exited) kill(c.pid, sig);
        if (sig == SIGTERM && *done == 0) continue_stopped("SIGTERM");
      }
    if (recheck_stopped_at != std::chrono::steady_clock::time_point{} && std::chrono::steady_clock::now() >= recheck_stopped_at) {
      recheck_stopped_at = {};
      for (auto& c : kids)
        if (c.continued && !c.exited && !c.killed_at_stop && kill_if_still_stopped(c.rank, c.pid, "file://" + dir, run_id))
          killed = c.killed_at_stop = true;
    }
    if (first_failed && !kill_armed && !termed && std::chrono::steady_clock::now() >= kill_at) {
      termed = true;
      sigkill_at = std::chrono::steady_clock::now() + std::chrono::seconds(term_grace_s);
      for (auto& c : kids)
        if (!c.exited) {
          fmt::print(stderr, "embedscope launch: rank {} (pid {}) did not end within {} s after {}: SIGTERM (SIGKILL "
                             "in {} s)\n", c.rank, c.pid, s.kill_after_s, failed_end(*first_failed), term_grace_s);
          kill(c.pid, SIGTERM);
        }
    }
    if (termed && !killed && std::chrono::steady_clock::now() >= sigkill_at) {
      killed = true;
      for (auto& c : kids)
        if (!c.exited) {
          fmt::print(stderr, "embedscope launch: rank {} (pid {}) did not end within {} s after {}: killed\n", c.rank,
                     c.pid, s.kill_after_s + term_grace_s, failed_end(*first_failed));
          kill(c.pid, SIGKILL);
        }
    }
    if (kill_armed && !killed && std::chrono::steady_clock::now() >= kill_at) {
      killed = true;
      for (auto& c : kids)
        if (!c.exited) {
          fmt::print(stderr, "embedscope launch: rank {} still runs {} s after {}: killing it\n", c.rank,
                     s.kill_after_s, first_death);
          kill(c.pid, SIGKILL);
        }
    }
    if (fds.empty()) {
      usleep(10000);
      continue;
    }
    const int ready = poll(fds.data(), fds.size(), 100);
    if (ready <= 0) continue;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Child& c = *who[i].first;
      if (!drain(c, fds[i].fd)) {
        close(fds[i].fd);
        (fds[i].fd == c.out_fd ? c.out_fd : c.err_fd) = -1;
      }
    }
  }
  sigaction(SIGUSR1, &old_usr1, nullptr);
  // every rank has ended: from here a Ctrl-C stops launch at once, saying where the sessions are
  std::vector<std::string> sessions;
  for (const auto& c : kids) {
    if (written_since(c.session, before[static_cast<size_t>(c.rank)])) {
      sessions.push_back(c.session);
    } else if (file_version(c.session)) {
      fmt::print(stderr, "embedscope launch: rank {} wrote no session; {} was there before this run (not read)\n", c.rank,
                 c.session);
    }
  }
  // a rank killed before its first commit left nothing to merge (tester62c F4)
  sessions = launch_detail::mergeable_sessions(std::move(sessions));
  const json stop_json{{"ended", "cancelled"}, {"session", nullptr}, {"rank_sessions", sessions}, {"stopped_at_once", true}};
  launch_stop_after_run(sessions.empty() ? std::string("no rank wrote a session")
                                         : "nothing was merged; the rank sessions are kept: " +
                                               kept_rank_sessions(sessions, ca.output),
                        ca.json ? &stop_json : nullptr);
  remove_rendezvous_dir(dir);
  std::error_code ec;

  int code = 0;
  json ranks = json::array();
  int64_t run_steps = 0;  // the most steps a rank printed, or its session holds
  for (auto& c : kids) {
    const int exit = WIFEXITED(c.status) ? WEXITSTATUS(c.status) : -1;
    if (exit != 0) code = std::max(code, exit == 2 ? 2 : 1);
    if (exit == 2) code = 2;
    json child = json::parse(c.out, nullptr, false);
    if (child.is_discarded()) child = nullptr;
    const bool has_session = std::find(sessions.begin(), sessions.end(), c.session) != sessions.end();
    json rank{{"rank", c.rank}, {"ended", how_ended(c)}, {"session", has_session ? json(c.session) : json()},
              {"result", child}};
    // no figures printed (it crashed, was killed): its session's, as stats gives them
    if (has_session && !(child.is_object() && child.contains("step_time_ns"))) {
      fmt::print(stderr, "embedscope launch: reading rank {}'s session {} (it printed no figures)\n", c.rank, c.session);
      rank["from_session"] = figures_from_session(c.session);
    }
    for (const json* f : {&child, rank.contains("from_session") ? &rank["from_session"] : nullptr})
      if (f && f->is_object() && f->contains("steps") && (*f)["steps"].is_number_integer())
        run_steps = std::max(run_steps, (*f)["steps"].get<int64_t>());
    ranks.push_back(std::move(rank));
  }
  // a rank killed (seen by launch): the others' errors are its consequence, and the run failed
  // (exit 1), even when it died before the rendezvous completed (the others then end naming it)
  if (!first_death.empty()) code = 1;
  // the user stopped the run at once (a second Ctrl-C or SIGTERM, forwarded to every rank): each
  // rank exits 130 as `run` does, and launch with them, not 1 (tester53 F8: read as a failure).
  // Not when a rank failed on its own (another exit) or refused its input.
  bool stopped_at_once = false;
  if (forwarded >= 2 || forwarded_terms >= 2) {
    bool stopped = false, other = false;
    for (const auto& c : kids) {
      const bool by_stop = (WIFEXITED(c.status) && WEXITSTATUS(c.status) == 130) ||
                           (WIFSIGNALED(c.status) && (WTERMSIG(c.status) == SIGINT || WTERMSIG(c.status) == SIGTERM)) ||
                           c.killed_at_stop;
      stopped = stopped || by_stop;
      other = other || (!by_stop && !(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0));
    }
    stopped_at_once = stopped && !other;
  }
  if (stopped_at_once) code = 130;
  if (code == 2 && sessions.size() < static_cast<size_t>(s.n)) {  // bad input: nothing ran
    if (ca.json) std::cout << dump(json{{"ended", "bad_input"}, {"ranks", ranks}}) << "\n";
    fmt::print(stderr, "error: launch: a rank refused its input (above)\n");
    return 2;
  }
  // the ranks whose session could not be written at all (a full disk when it was created: they
  // exit 1 with ended write_failed and no session; retest49 R7), named after the table
  std::vector<int> unwritten;
  for (const auto& c : kids) {
    const json j = json::parse(c.out, nullptr, false);
    if (std::find(sessions.begin(), sessions.end(), c.session) == sessions.end() && j.is_object() &&
        j.value("ended", "") == "write_failed")
      unwritten.push_back(c.rank);
  }
  std::string merged_status = "none", merge_error;
  sessions::MergeSummary sum;
  const std::string steps_text = run_steps > 0 ? fmt::format(" ({} step{})", run_steps, run_steps == 1 ? "" : "s") : "";
  if (!sessions.empty()) {
    // written under a temporary name beside -o and renamed over it once complete (as `merge`,
    // staged_output.h); a Ctrl-C or SIGTERM meanwhile cancels it at once: the temporary session is
    // removed, the rank sessions are kept and named, exit 130 (cancel_writes.h)
    CancelWrites cancel("launch", ca.output, "written", ca.json, "\nembedscope launch: cancelling the merge\n");
    cancel.set_note("embedscope launch: the rank sessions are kept: " + kept_rank_sessions(sessions, ca.output),
                    json{{"rank_sessions", sessions}});
    std::optional<StagedSession> staged_at;
    try {
      StagedSession& staged = staged_at.emplace(ca.output, ca.overwrite, "launch");
      cancel.remove_on_cancel(staged.temp());
      if (sessions.size() >= 2) {
        fmt::print(stderr, "embedscope launch: merging {} rank sessions{} into {}\n", sessions.size(), steps_text,
                   ca.output);
        sessions::MergeOptions mo;
        mo.align = s.align;
        mo.overwrite = true;  // the temporary name, claimed by StagedSession
        sum = sessions::merge_sessions(sessions, staged.temp(), mo);
        merged_status = "merged";
      } else {
        fs::copy_file(sessions[0], staged.temp(), fs::copy_options::overwrite_existing);
        merged_status = "copied";
      }
      cancel.commit([&] { staged.commit(); });
    } catch (const std::exception& e) {
      merged_status = "none";
      // the name asked for, not the hidden temporary; and how to merge once the cause is gone
      // (a full disk), as the launcher-killed case says
      merge_error = fmt::format("{}; the rank sessions are kept: {}", staged_at ? staged_at->as_out(e.what()) : e.what(),
                                kept_rank_sessions(sessions, ca.output));
    }
  }
  // the merge is in place (or failed): a Ctrl-C from here stops at once, naming every session
  if (!sessions.empty()) {
    json j = stop_json;
    if (merged_status != "none") j["session"] = ca.output;
    launch_stop_after_run(merged_status == "none"
                              ? "nothing was merged; the rank sessions are kept: " + kept_rank_sessions(sessions, ca.output)
                              : fmt::format("the session {} is complete (embedscope stats {}); the rank sessions are "
                                            "kept: {}", ca.output, ca.output, fmt::join(sessions, ", ")),
                          ca.json ? &j : nullptr);
  }
  // the live rebalances as `run` prints them, from the merged session (every rank recorded the
  // same decisions; the merge keeps them once, with the slowest rank's time)
  std::vector<sessions::RebalanceRecord> rebalances;
  std::vector<sessions::PlanChangeRecord> plan_changes;
  bool by_time = false;
  // the merged session's step time (each step's slowest rank), the figure `stats` and `compare`
  // print: the rank rows' means are each rank's own step windows (tester49 F5: 95 against 107 ms)
  std::optional<sessions::RunStats> merged_stats;
  if (merged_status != "none") {
    fmt::print(stderr, "embedscope launch: summarising {}{}\n", ca.output, steps_text);
    try {
      const sessions::SessionReader merged(ca.output);
      rebalances = merged.rebalances();
      plan_changes = merged.plan_changes();
      by_time = balances_lookup_time(merged);
      merged_stats = sessions::analyze_step_times(merged);  // the step time alone: no op is read
    } catch (const std::exception& e) {
      fmt::print(stderr, "embedscope launch: cannot read the rebalances of {}: {}\n", ca.output, e.what());
    }
  }
  // what is left is printing: a Ctrl-C now ends launch by the default action
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  if (ca.json) {
    json j{{"session", merged_status == "none" ? json() : json(ca.output)}, {"world_size", s.n}, {"ranks", ranks},
           {"align", s.align}};
    j["rebalances"] = json::array();
    for (const auto& rb : rebalances) j["rebalances"].push_back(rebalance_json(rb));
    j["ended"] = code == 0 ? "complete" : stopped_at_once ? "cancelled" : "failed";
    if (stopped_at_once) j["stopped_at_once"] = true;
    if (!merge_error.empty()) j["merge_error"] = merge_error;
    if (!first_death.empty()) j["first_death"] = first_death;
    if (!sum.alignment_json.empty()) j["alignment"] = json::parse(sum.alignment_json);
    if (merged_stats && merged_stats->counted_steps() > 0)
      j["session_step_time_ns"] = {{"mean", merged_stats->step_time_ns.mean}, {"p50", merged_stats->step_time_ns.p50},
                                   {"steps", merged_stats->counted_steps()}};
    std::cout << dump(j) << "\n";
  } else {
    std::cout << fmt::format("{:<5} {:<28} {:>10} {:>14} {:>12}  {}\n", "rank", "ended", "steps", "own step mean", "loss last",
                             "session");
    for (const auto& r : ranks) {
      const json& res = r["result"];
      const bool ok = res.is_object() && res.contains("step_time_ns");
      // the figures: what the rank printed, else what its session holds (from_session)
      const json& fig = ok ? res : r.contains("from_session") ? r["from_session"] : res;
      const bool steps = fig.is_object() && fig.contains("steps");
      const bool mean = fig.is_object() && fig.contains("step_time_ns");
      std::cout << fmt::format("{:<5} {:<28} {:>10} {:>14} {:>12}  {}\n", r["rank"].get<int>(),
                               r["ended"].get<std::string>() +
                                   (res.is_object() && res.contains("ended") ? " (" + res["ended"].get<std::string>() + ")"
                                                                             : ""),
                               steps ? std::to_string(fig["steps"].get<int64_t>()) : "-",
                               mean ? ms(fig["step_time_ns"]["mean"].get<double>()) : "-",
                               steps && fig["loss_last"].is_number() ? fmt::format("{:.4f}", fig["loss_last"].get<double>())
                                                                     : "-",
                               r["session"].is_string() ? r["session"].get<std::string>() : "no session");
      if (res.is_object() && res.contains("error"))
        std::cout << fmt::format("      {}\n", res["error"].get<std::string>());
      if (r.contains("from_session"))
        std::cout << fmt::format("      from its session: {}\n",
                                 r["from_session"].contains("unreadable")
                                     ? "unreadable (" + r["from_session"]["unreadable"].get<std::string>() + ")"
                                     : r["from_session"]["ended"].get<std::string>());
    }
    if (!first_death.empty()) std::cout << fmt::format("first death  {}\n", first_death);
    if (!sum.alignment_text.empty()) std::cout << sum.alignment_text;
    std::cout << rebalances_block(rebalances, plan_changes, by_time);
    if (merged_stats && merged_stats->counted_steps() > 0)
      std::cout << fmt::format("step time    mean {}  p50 {} over the {} measured steps of the merged session: each "
                               "step's slowest rank, the figure `stats` and `compare` print (own step mean: each "
                               "rank's own step windows)\n",
                               ms(merged_stats->step_time_ns.mean), ms(static_cast<double>(merged_stats->step_time_ns.p50)),
                               merged_stats->counted_steps());
    if (merged_status != "none") std::cout << fmt::format("\nsession: {} ({} of {} rank sessions)\n", ca.output,
                                                          sessions.size(), s.n);
  }
  if (stopped_at_once)
    fmt::print(stderr, "embedscope launch: the ranks were stopped at once by a second {} (exit 130, as run's; their "
                       "sessions read cancelled by the user)\n", forwarded >= 2 ? "Ctrl-C" : "SIGTERM");
  else if (sessions.empty() && !first_death.empty())
    fmt::print(stderr, "error: launch: {} before any rank wrote a session; nothing to merge\n", first_death);
  else if (!unwritten.empty())
    fmt::print(stderr, "error: launch: {} could not write {} session (above){}\n",
               unwritten.size() == 1 ? fmt::format("rank {}", unwritten[0])
                                     : fmt::format("ranks {}", fmt::join(unwritten, ", ")),
               unwritten.size() == 1 ? "its" : "their", sessions.empty() ? "; nothing to merge" : "");
  else if (sessions.empty() && code == 0)  // every rank cancelled in the rendezvous (Ctrl-C, SIGTERM)
    fmt::print(stderr, "embedscope launch: cancelled before the run started; no rank wrote a session\n");
  if (!merge_error.empty()) {
    fmt::print(stderr, "error: launch: the rank sessions could not be merged: {}\n", merge_error);
    return code == 0 ? 1 : code;
  }
  return code;
}

}  // namespace

Command add_launch_command(CLI::App& app) {
  auto s = std::make_shared<LaunchState>();
  auto* c = app.add_subcommand("launch", "Run one rank per process on this machine: start N processes of "
                                         "`embedscope run ...` with a private rendezvous, stream their output, merge "
                                         "their sessions into one");
  c->add_option("-n,--processes", s->n, "Number of processes (ranks); sets the run's --devices")
      ->required()
      ->check(kInteger)
      ->check(CLI::Range(1, 1024));
  c->add_option("--align", s->align, "How the merge aligns the ranks' clocks: none (wall clocks, one machine) or "
                                     "collectives (one offset per rank from matching collectives)")
      ->check(CLI::IsMember({"none", "collectives"}));
  c->add_option("--kill-after", s->kill_after_s,
                "Not a time limit: once a rank has died of a signal or exited non-zero (hang, crashed, ...), wait S "
                "seconds for the other ranks to end on their own (they normally do within the collective timeout; a "
                "stopped or stalled one never does), then stop those still running: SIGKILL when a rank died of a "
                "signal, else SIGTERM and, if still running min(S, 10) s later, SIGKILL. While no rank has failed, "
                "nothing is stopped however long the run takes (as coreutils timeout's --kill-after counts from its "
                "first signal)")
      ->capture_default_str()
      ->check(CLI::Range(1, 86400));
  c->add_option("--hosts-file", s->hosts_file,
                "Loopback hosts playing nodes, one per line: ADDRESS [slots=N] (127.0.0.2 slots=2 ...); rank r runs on "
                "the host of its block, its Gloo device bound there (run --host), the hosts as nodes (run "
                "--local-world-size)");  // read_hosts_file names a missing file or a folder (not CLI11's words)
  c->add_flag("--json", s->json, "Print the result as JSON (as run's own --json, which may also come after run)");
  c->prefix_command();  // `run` and everything after it are the children's
  return {c, [s, c] {
            s->rest = c->remaining();
            return cmd_launch(*s);
          },
          [s, c] {
            if (s->json) return true;
            for (const auto& a : c->remaining())
              if (a == "--json") return true;
            return false;
          }};
}

}  // namespace embedscope::cli

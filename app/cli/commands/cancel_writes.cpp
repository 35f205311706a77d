// CancelWrites (cancel_writes.h).

#include "cancel_writes.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "interrupt.h"
#include "output/output.h"

namespace embedscope::cli {

namespace {
// write(2) all of `text` to `fd`: no stdio lock (the main thread may hold stderr's, blocked in a
// write to a full pipe) and no buffer left behind by _exit.
void cancel_writes_put(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// The command's thread, parked for good before the cancel removes the staged output: it would
// otherwise go on and create files (a csv export's folder, the next file in it) after they were
// removed and before the process ended.
std::atomic<bool> g_cancel_writes_parked{false};
long g_cancel_writes_tid = 0;  // the thread that created the CancelWrites

int cancel_writes_park_signal() { return SIGRTMIN + 4; }

extern "C" void cancel_writes_park(int) {
  g_cancel_writes_parked.store(true);  // lock-free: async-signal-safe
  for (;;) pause();
}

long cancel_writes_this_thread() { return static_cast<long>(::syscall(SYS_gettid)); }

// The staged output is removed while the command's thread is parked, maybe holding the
// allocator's lock: only async-signal-safe calls and no allocation (getdents64 into a buffer on
// the stack).
bool cancel_writes_remove_at(int dir_fd, const char* name, int depth);

// Removes each entry of the folder open as `dir_fd` that `pick(name)` accepts
// (cancel_writes_remove_at, `depth` folders down), in passes from its start until one removes
// nothing.
template <class Pick>
void cancel_writes_remove_picked(int dir_fd, int depth, Pick pick) {
  alignas(dirent64) char buf[4096];
  for (bool removed = true; removed;) {
    removed = false;
    lseek(dir_fd, 0, SEEK_SET);
    for (ssize_t n; (n = getdents64(dir_fd, buf, sizeof buf)) > 0;)
      for (ssize_t at = 0; at < n;) {
        const auto* e = reinterpret_cast<const dirent64*>(buf + at);
        at += e->d_reclen;
        if (pick(e->d_name)) removed = cancel_writes_remove_at(dir_fd, e->d_name, depth) || removed;
      }
  }
}

// Removes the entry `name` of the folder open as `dir_fd`, and everything in it when it is a
// folder (`depth`: folders above it; one deeper than 16 is left); true when it is gone.
bool cancel_writes_remove_at(int dir_fd, const char* name, int depth) {
  if (unlinkat(dir_fd, name, 0) == 0) return true;
  if (errno != EISDIR || depth > 16) return errno == ENOENT;  // EISDIR: a folder (Linux)
  if (const int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC); fd >= 0) {
    cancel_writes_remove_picked(fd, depth + 1, [](const char* n) { return std::strcmp(n, ".") != 0 && std::strcmp(n, "..") != 0; });
    close(fd);
  }
  return unlinkat(dir_fd, name, AT_REMOVEDIR) == 0 || errno == ENOENT;
}

// Removes `name` in the folder `dir` (a file, or a folder and everything in it) and the entries
// beside it named after it: SQLite's -wal, -shm and -journal, and the session writer's
// ".claim-PID-N" file (left when the command was parked while it claimed the name).
void cancel_writes_remove_named(const char* dir, const char* name) {
  const int dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return;
  const size_t len = std::strlen(name);
  cancel_writes_remove_picked(dir_fd, 0, [&](const char* n) {
    if (std::strncmp(n, name, len) != 0) return false;
    const char* rest = n + len;
    return *rest == '\0' || std::strcmp(rest, "-wal") == 0 || std::strcmp(rest, "-shm") == 0 ||
           std::strcmp(rest, "-journal") == 0 || std::strncmp(rest, ".claim-", 7) == 0;
  });
  close(dir_fd);
}
}  // namespace

CancelWrites::CancelWrites(std::string command, std::string out, std::string nothing_was, bool json, const char* said)
    : state_(new State) {
  state_->command = std::move(command);
  state_->out = std::move(out);
  state_->nothing_was = std::move(nothing_was);
  state_->json = json;
  g_cancel_writes_tid = cancel_writes_this_thread();
  struct sigaction park {};
  park.sa_handler = cancel_writes_park;
  sigfillset(&park.sa_mask);  // nothing else runs on the parked thread
  sigaction(cancel_writes_park_signal(), &park, nullptr);
  cancel_at_once_with(said, [s = state_] { s->on_signal(); });
}

void CancelWrites::remove_on_cancel(const std::string& path) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->staged.push_back(path);
}

void CancelWrites::set_note(std::string text, nlohmann::json json) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->note = std::move(text);
  state_->note_json = std::move(json);
}

void CancelWrites::hold(const std::function<void()>& f) {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (cancel_requested()) state_->cancel_now_locked();
  f();
}

void CancelWrites::commit(const std::function<void()>& put) {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (cancel_requested()) state_->cancel_now_locked();  // asked while the output was written
  put();
  state_->committed = true;
}

void CancelWrites::State::on_signal() {
  std::lock_guard<std::mutex> lock(mu);  // waits for a commit or a staged file being created
  if (!committed) cancel_now_locked();
  cancel_writes_put(STDERR_FILENO, fmt::format("{}: too late to cancel: {} is already written\n", command, out));
}

void CancelWrites::State::cancel_now_locked() {
  // Everything that allocates is done before the command's thread is parked: it may be parked
  // holding the allocator's lock (or stdio's, SQLite's...), and a malloc after that would wait
  // for good (it did under ASan: directory_iterator's first allocation, 1 cancel in 100 under
  // load). After the park only async-signal-safe calls run, on memory allocated here.
  std::vector<std::pair<std::string, std::string>> where;  // (folder, name) of each staged path
  for (const auto& p : staged) {
    const std::filesystem::path path(p);
    where.emplace_back(path.parent_path().empty() ? "." : path.parent_path().string(), path.filename().string());
  }
  const auto said = [&](bool there) {
    return fmt::format("{} cancelled; nothing was {} ({})\n", command, nothing_was,
                       there ? out + " is as it was" : "no " + out + " written") +
           (note.empty() ? "" : note + "\n");
  };
  const std::string kept = said(true), gone = said(false);
  std::string json_line;
  if (json) {
    nlohmann::json j{{"ended", "cancelled"}, {"session", nullptr}};
    for (const auto& [k, v] : note_json.items()) j[k] = v;
    json_line = dump(j) + "\n";
  }
  if (cancel_writes_this_thread() != g_cancel_writes_tid) {  // the signal's thread: stop the command's first
    ::syscall(SYS_tgkill, static_cast<long>(getpid()), g_cancel_writes_tid, cancel_writes_park_signal());
    while (!g_cancel_writes_parked.load()) usleep(100);  // it takes the signal even in a blocking call
  }
  for (const auto& [dir, name] : where) cancel_writes_remove_named(dir.c_str(), name.c_str());
  struct stat sb {};
  cancel_writes_put(STDERR_FILENO, lstat(out.c_str(), &sb) == 0 ? kept : gone);
  if (json) cancel_writes_put(STDOUT_FILENO, json_line);
  _exit(130);  // as the default action's 128 + SIGINT; the staged output is gone, nothing else needs a destructor
}

}  // namespace embedscope::cli

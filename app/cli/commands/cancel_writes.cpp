// CancelWrites (cancel_writes.h).

#include "cancel_writes.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

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
  if (cancel_writes_this_thread() != g_cancel_writes_tid) {  // the signal's thread: stop the command's first
    ::syscall(SYS_tgkill, static_cast<long>(getpid()), g_cancel_writes_tid, cancel_writes_park_signal());
    while (!g_cancel_writes_parked.load()) usleep(100);  // it takes the signal even in a blocking call
  }
  // each staged path and the entries beside it named after it: SQLite's -wal,
  // -shm and -journal, and the writer's ".claim-PID-N" file when the command was parked while it
  // claimed the name
  for (const auto& p : staged) {
    const std::filesystem::path path(p);
    const std::string name = path.filename().string();
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(path.parent_path().empty() ? "." : path.parent_path(), ec))
      if (const std::string n = e.path().filename().string();
          n == name || (n.starts_with(name) && (n.substr(name.size()) == "-wal" || n.substr(name.size()) == "-shm" ||
                                                 n.substr(name.size()) == "-journal" ||
                                                 n.substr(name.size()).starts_with(".claim-")))) {
        std::error_code e2;
        std::filesystem::remove_all(e.path(), e2);
      }
  }
  struct stat sb {};
  const bool there = lstat(out.c_str(), &sb) == 0;
  cancel_writes_put(STDERR_FILENO, fmt::format("{} cancelled; nothing was {} ({})\n", command, nothing_was,
                                               there ? out + " is as it was" : "no " + out + " written"));
  if (!note.empty()) cancel_writes_put(STDERR_FILENO, note + "\n");
  if (json) {
    nlohmann::json j{{"ended", "cancelled"}, {"session", nullptr}};
    for (const auto& [k, v] : note_json.items()) j[k] = v;
    cancel_writes_put(STDOUT_FILENO, dump(j) + "\n");
  }
  _exit(130);  // as the default action's 128 + SIGINT; the staged output is gone, nothing else needs a destructor
}

}  // namespace embedscope::cli

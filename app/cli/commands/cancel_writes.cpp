// CancelWrites (cancel_writes.h).

#include "cancel_writes.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embedscope/sessions/store/session.h"
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
}  // namespace

CancelWrites::CancelWrites(std::string command, std::string out, std::string nothing_was, bool json, const char* said)
    : command_(std::move(command)), out_(std::move(out)), nothing_was_(std::move(nothing_was)), json_(json) {
  cancel_at_once_with(said, [this] { on_signal(); });
}

void CancelWrites::remove_on_cancel(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  staged_.push_back(path);
}

void CancelWrites::hold(const std::function<void()>& f) {
  std::lock_guard<std::mutex> lock(mu_);
  if (cancel_requested()) cancel_now_locked();
  f();
}

void CancelWrites::commit(const std::function<void()>& put) {
  std::lock_guard<std::mutex> lock(mu_);
  if (cancel_requested()) cancel_now_locked();  // asked while the output was written
  put();
  committed_ = true;
}

void CancelWrites::on_signal() {
  std::lock_guard<std::mutex> lock(mu_);  // waits for a commit or a staged file being created
  if (!committed_) cancel_now_locked();
  cancel_writes_put(STDERR_FILENO, fmt::format("{}: too late to cancel: {} is already written\n", command_, out_));
}

void CancelWrites::cancel_now_locked() {
  for (const auto& p : staged_) {
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec))
      std::filesystem::remove_all(p, ec);
    else
      sessions::SessionWriter::remove_files(p);
  }
  struct stat sb {};
  const bool there = lstat(out_.c_str(), &sb) == 0;
  cancel_writes_put(STDERR_FILENO, fmt::format("{} cancelled; nothing was {} ({})\n", command_, nothing_was_,
                                               there ? out_ + " is as it was" : "no " + out_ + " written"));
  if (json_) cancel_writes_put(STDOUT_FILENO, dump(nlohmann::json{{"ended", "cancelled"}, {"session", nullptr}}) + "\n");
  _exit(130);  // as the default action's 128 + SIGINT; the staged output is gone, nothing else needs a destructor
}

}  // namespace embedscope::cli

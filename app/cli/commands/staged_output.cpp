// StagedSession and refuse_output_among_inputs (staged_output.h).

#include "staged_output.h"

#include "output_guard.h"  // input_that_is

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "embedscope/sessions/store/session.h"

namespace embedscope::cli {

namespace ss = embedscope::sessions;

namespace {

// Whether process `pid` exists on this host (kill(pid, 0): ESRCH when it does not; EPERM means
// it exists under another user).
bool process_alive(long pid) { return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM); }

// Whether some process holds SQLite's lock on the "dead-man switch" byte of the -shm file `shm`
// (os_unix.c: UNIX_SHM_DMS = 120 + 8 = byte 128): every connection with a WAL database open holds
// a shared lock there for as long as it is open, on this host and, where the file system passes
// fcntl locks on, on others. F_GETLK only asks; this process takes no lock (and holds none on a
// killed import's file, so closing the descriptor releases nothing of its own). nullopt when it
// cannot tell (no -shm: a writer between its open and its first WAL write, or no fcntl locks).
std::optional<bool> shm_locked(const std::string& shm) {
  const int fd = ::open(shm.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct flock probe {};
  probe.l_type = F_WRLCK;
  probe.l_whence = SEEK_SET;
  probe.l_start = 128;
  probe.l_len = 1;
  const int rc = ::fcntl(fd, F_GETLK, &probe);
  ::close(fd);
  if (rc != 0) return std::nullopt;
  return probe.l_type != F_UNLCK;
}

// How `command` is told to overwrite its output: launch passes run's flag on to the merge.
std::string staged_overwrite_hint(const std::string& command) {
  return command == "launch" ? "embedscope launch ... run ... --force-overwrite"
                             : fmt::format("embedscope {} --force-overwrite", command);
}

// The staged files ".<stem>.importing-<pid>" in `dir` of import processes that are gone (killed
// with SIGKILL, or a crash): removed with their SQLite companions when the pid is not running on
// this host and no SQLite connection has the file open (nobody holds the lock of its -shm:
// shm_locked), or, where that cannot be told, none of the files changed in the last minute (a
// live import on another host that shares the folder keeps writing its -wal). tester43 F17: an
// import run right after a SIGKILL found the killed one's files written seconds before and kept
// them; the lock says at once that no writer has them open. The caller's own pid is handled by
// the constructor.
void remove_stale_staged(const std::filesystem::path& dir, const std::string& stem, const std::string& command,
                         const std::string& tag) {
  const std::string prefix = fmt::format(".{}.{}-", stem, tag);
  std::error_code ec;
  const auto now = std::filesystem::file_time_type::clock::now();
  for (const auto& entry : std::filesystem::directory_iterator(dir.empty() ? "." : dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) continue;  // a companion
    const long pid = std::stol(digits);
    if (pid == static_cast<long>(getpid()) || process_alive(pid)) continue;
    const std::optional<bool> open_by_a_writer = shm_locked(entry.path().string() + "-shm");
    if (open_by_a_writer == true) continue;  // a live import elsewhere (its pid is another host's)
    bool recent = false;
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
      std::error_code e2;
      const auto t = std::filesystem::last_write_time(entry.path().string() + suffix, e2);
      if (!e2 && now - t < std::chrono::minutes(1)) recent = true;
    }
    if (recent && !open_by_a_writer.has_value()) continue;
    ss::SessionWriter::remove_files(entry.path().string());
    std::fprintf(stderr, "%s: removed %s, left by a%s %s that was killed (pid %ld)\n", command.c_str(), entry.path().c_str(),
                 command == "import" ? "n" : "", command.c_str(), pid);
  }
}

}  // namespace

StagedSession::StagedSession(std::string out, bool overwrite, std::string command)
    : out_(std::move(out)), command_(std::move(command)), overwrite_(overwrite) {
  // tester43 F22: the writer's own hint names `run`; this is an import (a snapshot's too)
  struct stat sb {};
  if (!overwrite_ && lstat(out_.c_str(), &sb) == 0 && S_ISREG(sb.st_mode))
    throw ss::SessionError(fmt::format("{}: already exists; choose another name (-o) or allow overwriting it "
                                       "({})", out_, staged_overwrite_hint(command_)));
  ss::SessionWriter::check_path(out_, overwrite_);
  const std::filesystem::path out_path(out_);
  const std::filesystem::path dir = out_path.parent_path();
  std::error_code ec;
  make_output_folder(out_, "-o");  // a missing folder is made, as run -o and scenario -o make theirs
  // a hidden name beside `out` that fits in a file name (255 bytes) with SQLite's "-journal" after
  // it, however long `out`'s own name is (tester37: a valid 245-byte name failed on its "<out>.importing-PID")
  std::string stem = out_path.filename().string();
  if (stem.size() > 200) stem.resize(200);
  const std::string tag = command_ == "import" ? "importing" : "merging";  // merge, launch: a merge
  temp_ = (dir / fmt::format(".{}.{}-{}", stem, tag, getpid())).string();
  ss::SessionWriter::remove_files(temp_);  // a stale one of a killed process with the same pid
  remove_stale_staged(dir, stem, command_, tag);  // and those of other killed imports of `out`
}

std::string StagedSession::as_out(std::string text) const {
  for (size_t at = text.find(temp_); !temp_.empty() && at != std::string::npos; at = text.find(temp_, at + out_.size()))
    text.replace(at, temp_.size(), out_);
  return text;
}

StagedSession::~StagedSession() {
  if (!committed_) ss::SessionWriter::remove_files(temp_);
}

void StagedSession::commit() {
  try {
    struct stat sb {};
    if (!overwrite_ && lstat(out_.c_str(), &sb) == 0)  // another process wrote it while this import ran
      throw ss::SessionError(fmt::format("{}: already exists (written while this {} ran); choose another name (-o) "
                                         "or allow overwriting it ({})", out_, command_, staged_overwrite_hint(command_)));
    ss::SessionWriter::check_path(out_, overwrite_);
  } catch (...) {
    ss::SessionWriter::remove_files(temp_);
    committed_ = true;
    throw;
  }
  for (const char* suffix : {"-wal", "-shm", "-journal"}) std::remove((out_ + suffix).c_str());
  if (std::rename(temp_.c_str(), out_.c_str()) != 0) {
    const int err = errno;
    ss::SessionWriter::remove_files(temp_);
    committed_ = true;
    throw ss::SessionError(fmt::format("{}: cannot put the {} session in place (rename from {}): {}", out_,
                                       command_ == "merge" ? "merged" : "imported", temp_,
                                       std::strerror(err)));
  }
  committed_ = true;
  // the writer left WAL mode at close; an empty -wal / -shm may remain under the temporary name
  for (const char* suffix : {"-wal", "-shm", "-journal"}) std::remove((temp_ + suffix).c_str());
}

void refuse_output_among_inputs(const std::string& out, const std::vector<std::string>& inputs,
                                const std::vector<std::string>& files) {
  for (const auto* list : {&inputs, &files})
    if (const std::string in = input_that_is(out, *list); !in.empty())
      throw ss::SessionError(fmt::format("{}: is an input of this import ({}); writing the session there would destroy "
                                         "it (--force-overwrite does not allow that): choose another output (-o)",
                                         out, in));
}

}  // namespace embedscope::cli

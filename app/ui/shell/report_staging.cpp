// ReportStaging (report_staging.h).
#include "shell/report_staging.h"

#include <fcntl.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <QBuffer>
#include <QFileInfo>
#include <QImage>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace embedscope::ui {

namespace {
namespace fs = std::filesystem;

constexpr const char* kStagingPrefix = ".embedscope-report-";

// What the cancel needs; static storage: the cancel's thread may use it while the process ends.
struct ReportStagingState {
  std::mutex mu;
  std::string dir, staging;
  bool active = false;     // a report is being staged
  bool created_dir = false;
  bool committed = false;  // the last report was put in place
};
ReportStagingState g_report_staging;
sem_t g_report_staging_sem;

extern "C" void report_staging_on_signal(int) { sem_post(&g_report_staging_sem); }

// write(2) all of `text` to stderr: no stdio lock (the main thread may hold stderr's), no buffer
// left behind by _exit
void report_staging_say(const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(STDERR_FILENO, text.data() + done, text.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// The thread the first SIGINT / SIGTERM wakes: with the lock (no staged file half-created, no
// commit half-done) the staging folder goes, the message, exit 130 (the CLI's cancelled writes').
void report_staging_cancel_thread() {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);  // the signals go to the other threads' handler
  for (;;) {
    while (sem_wait(&g_report_staging_sem) != 0) {
    }
    ReportStagingState& s = g_report_staging;
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.active && s.committed) {
      report_staging_say("\nreport: too late to cancel: " + s.dir + "/index.html is already written\n");
      continue;
    }
    std::string what = "report cancelled before it wrote anything";
    if (s.active) {
      std::error_code ec;
      fs::remove_all(s.staging, ec);
      if (s.created_dir) fs::remove(s.dir, ec);  // only when empty: nothing else was there
      struct stat sb {};
      const bool there = ::lstat(s.dir.c_str(), &sb) == 0;
      what = "report cancelled; nothing was written (" + (there ? s.dir + " is as it was" : "no " + s.dir + " written") + ")";
    }
    report_staging_say("\n" + what + "\n");
    _exit(130);  // as the CLI's cancelled import / merge / export: 128 + SIGINT, for SIGTERM too
  }
}

void report_staging_install() {
  static std::once_flag once;
  std::call_once(once, [] {
    sem_init(&g_report_staging_sem, 0, 0);
    std::thread(report_staging_cancel_thread).detach();
    struct sigaction sa {};
    sa.sa_handler = report_staging_on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
  });
}

std::string report_staging_reason(int err) { return std::strerror(err); }
}  // namespace

ReportStaging::ReportStaging(const QString& dir) : dir_(dir) {
  report_staging_install();
  const std::string d = dir.toStdString();
  std::error_code ec;
  const bool existed = fs::exists(fs::symlink_status(d, ec));
  if (!existed && (!fs::create_directories(d, ec) || ec)) {
    error_ = dir + ": cannot create the report folder: " + QString::fromStdString(ec ? ec.message() : "unknown reason");
    return;
  }
  // the staging folders of earlier reports whose process is gone (SIGKILL: nothing could clean up)
  for (const auto& e : fs::directory_iterator(d, ec)) {
    const std::string n = e.path().filename().string();
    if (!n.starts_with(kStagingPrefix)) continue;
    const long pid = std::strtol(n.c_str() + std::strlen(kStagingPrefix), nullptr, 10);
    std::error_code e2;
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) fs::remove_all(e.path(), e2);
  }
  std::lock_guard<std::mutex> lock(g_report_staging.mu);
  staging_ = dir + "/" + kStagingPrefix + QString::number(::getpid());
  std::error_code e3;
  fs::remove_all(staging_.toStdString(), e3);
  if (!fs::create_directory(staging_.toStdString(), e3) || e3) {
    error_ = dir + ": cannot write in the report folder: " + QString::fromStdString(e3 ? e3.message() : "unknown reason");
    if (!existed) fs::remove(d, e3);
    return;
  }
  created_dir_ = !existed;
  g_report_staging.dir = d;
  g_report_staging.staging = staging_.toStdString();
  g_report_staging.created_dir = created_dir_;
  g_report_staging.committed = false;
  g_report_staging.active = true;
}

ReportStaging::~ReportStaging() {
  if (!error_.isEmpty()) return;  // nothing staged (what was created is gone)
  std::lock_guard<std::mutex> lock(g_report_staging.mu);
  if (!committed_) {
    std::error_code ec;
    fs::remove_all(staging_.toStdString(), ec);
    if (created_dir_) fs::remove(dir_.toStdString(), ec);  // only when empty
  }
  g_report_staging.active = false;
}

QString ReportStaging::write(const QString& name, const QByteArray& bytes) {
  std::lock_guard<std::mutex> lock(g_report_staging.mu);
  const std::string path = (staging_ + "/" + name).toStdString();
  auto failed = [&](int err) {
    ::unlink(path.c_str());
    return dir_ + "/" + name + ": cannot write: " + QString::fromStdString(report_staging_reason(err));
  };
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return failed(errno);
  qsizetype done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.constData() + done, static_cast<size_t>(bytes.size() - done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      return failed(err);
    }
    done += n;
  }
  if (::close(fd) != 0) return failed(errno);  // NFS and the like report a full disk here
  return {};
}

QString write_file_in_place(const QString& path, const QByteArray& bytes) {
  const fs::path target(path.toStdString());
  const fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  std::string tmp = (dir / ("." + target.filename().string() + ".XXXXXX")).string();
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) return QString::fromStdString(report_staging_reason(errno));
  auto failed = [&](int err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return QString::fromStdString(report_staging_reason(err));
  };
  const mode_t mask = ::umask(0);
  ::umask(mask);
  if (::fchmod(fd, 0666 & ~mask) != 0) return failed(errno);
  qsizetype done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.constData() + done, static_cast<size_t>(bytes.size() - done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return failed(n < 0 ? errno : EIO);
    done += n;
  }
  if (::fsync(fd) != 0) return failed(errno);
  if (::close(fd) != 0) {  // NFS and the like report a full disk here
    const int err = errno;
    ::unlink(tmp.c_str());
    return QString::fromStdString(report_staging_reason(err));
  }
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return QString::fromStdString(report_staging_reason(err));
  }
  return {};
}

QString ReportStaging::commit(const std::function<QString()>& before) {
  std::lock_guard<std::mutex> lock(g_report_staging.mu);
  if (const QString err = before(); !err.isEmpty()) return err;
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(staging_.toStdString(), ec)) names.push_back(e.path().filename().string());
  std::stable_partition(names.begin(), names.end(), [](const std::string& n) { return n != "index.html"; });
  for (const std::string& n : names) {
    const std::string from = staging_.toStdString() + "/" + n, to = dir_.toStdString() + "/" + n;
    if (std::rename(from.c_str(), to.c_str()) != 0)
      return dir_ + "/" + QString::fromStdString(n) + ": cannot put in place: " +
             QString::fromStdString(report_staging_reason(errno));
  }
  fs::remove(staging_.toStdString(), ec);
  committed_ = true;
  g_report_staging.committed = true;
  g_report_staging.active = false;
  return {};
}

QByteArray png_bytes(const QImage& image) {
  QByteArray bytes;
  QBuffer buffer(&bytes);
  buffer.open(QIODevice::WriteOnly);
  image.save(&buffer, "PNG");
  return bytes;
}

}  // namespace embedscope::ui

#pragma once
// Helpers shared by the libFuzzer targets of tests/fuzz (built with -DEMBEDSCOPE_FUZZ=ON, clang).
//
// A target feeds one input to one reader of untrusted files. The reader's documented errors
// (SpecError, SessionError and its subclasses, ImportError) are the expected answer to bad
// input and are caught by the target; anything else - a crash, a sanitizer report, another
// exception escaping (std::out_of_range, nlohmann::json::type_error, std::bad_alloc, ...) - is
// a finding: libFuzzer stops and writes the input as crash-<sha1>.

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace embedscope::fuzz {

/// A file in $TMPDIR (else /tmp) named after the target, the process id and `suffix`, that holds
/// `data` while the object lives and is removed after. Throws std::runtime_error when it cannot
/// be written (the fuzzer's machine is broken then, not the input).
class TempFile {
 public:
  TempFile(const char* target, std::string_view suffix, const uint8_t* data, size_t size)
      : path_(make_path(target, suffix)) {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!out) throw std::runtime_error("fuzz: cannot write " + path_);
  }
  ~TempFile() { remove(path_); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

  /// Removes `path` and the -wal / -shm / -journal files SQLite may leave beside it.
  static void remove(const std::string& path) {
    std::error_code ec;
    for (const char* tail : {"", "-wal", "-shm", "-journal"}) std::filesystem::remove(path + tail, ec);
  }
  /// "$TMPDIR/embedscope-fuzz-<target>-<pid><suffix>".
  static std::string make_path(const char* target, std::string_view suffix) {
    const char* tmp = std::getenv("TMPDIR");
    std::string dir = tmp && *tmp ? tmp : "/tmp";
    return dir + "/embedscope-fuzz-" + target + "-" + std::to_string(getpid()) + std::string(suffix);
  }

 private:
  std::string path_;
};

}  // namespace embedscope::fuzz

#pragma once
// The private temporary directory of one test process (tests/support/test_main.cpp and the
// ui_test main use it). The tests write their scratch sessions, traces and folders under
// std::filesystem::temp_directory_path() and the CLI processes they start inherit TMPDIR; before
// this, each ctest process left its own es_*_<pid> folder in /tmp (about 20,000 a full run, tens
// of GB after a few days of runs). Pointing TMPDIR at one directory per process and removing it
// when the process's tests passed keeps /tmp clean without touching the ~125 places that make
// scratch paths.

#include <filesystem>
#include <optional>
#include <string>

namespace embedscope::test_support {

/// Makes "$TMPDIR/embedscope-test-<pid>-XXXXXX" (TMPDIR unset or empty: /tmp; mkdtemp, mode 0700)
/// and sets TMPDIR to it for this process and the processes it starts, so that
/// std::filesystem::temp_directory_path(), QTemporaryDir and mkstemp callers write inside it.
/// A gtest death test's child re-runs the main, so its directory nests inside this one.
/// finish(passed) removes the directory (passed) or keeps it and prints its path on stderr, then
/// restores the previous TMPDIR; the destructor restores TMPDIR without removing anything.
/// Throws std::runtime_error naming the path and errno's text when mkdtemp fails.
class TestTmpDir {
 public:
  TestTmpDir();
  ~TestTmpDir();
  TestTmpDir(const TestTmpDir&) = delete;
  TestTmpDir& operator=(const TestTmpDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  /// Removes the directory when `passed`, else keeps it (stderr: "test files kept in <path>").
  /// Returns whether it removed it. A second call does nothing and returns false.
  bool finish(bool passed);

 private:
  void restore_env();
  std::filesystem::path path_;
  std::optional<std::string> previous_;  // TMPDIR before; nullopt: unset
  bool restored_ = false;
};

}  // namespace embedscope::test_support

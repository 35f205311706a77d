#pragma once
// Waiting on a session that a writer (a run, a test's writer thread) is still committing:
// sessions_test and ui_test. Header-only.

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <thread>

#include "embedscope/sessions/store/session.h"

namespace embedscope::test_support {

/// The steps committed so far in the session at `path` (its `steps` rows as a reader sees them
/// now); 0 while the file is not yet a readable session (SessionError).
inline size_t committed_steps(const std::string& path) {
  try {
    return sessions::SessionReader(path).steps().size();
  } catch (const sessions::SessionError&) {
    return 0;
  }
}

/// Polls `done` every 10 ms, calling `between()` before each sleep (a GUI test passes
/// QApplication::processEvents), until it is true or `seconds` have passed; returns its last value.
inline bool wait_until(const std::function<bool()>& done, int seconds = 30,
                       const std::function<void()>& between = [] {}) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    between();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

}  // namespace embedscope::test_support

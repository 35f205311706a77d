#include "support/test_tmpdir.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <system_error>
#include <vector>

namespace embedscope::test_support {

TestTmpDir::TestTmpDir() {
  const char* env = std::getenv("TMPDIR");
  if (env != nullptr) previous_ = env;
  const std::string base = env != nullptr && *env != '\0' ? env : "/tmp";
  std::string pattern = base + "/embedscope-test-" + std::to_string(::getpid()) + "-XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr)
    throw std::runtime_error("test scratch directory " + pattern + ": " + std::strerror(errno));
  path_ = buf.data();
  ::setenv("TMPDIR", path_.c_str(), 1);
}

TestTmpDir::~TestTmpDir() { restore_env(); }

void TestTmpDir::restore_env() {
  if (restored_) return;
  restored_ = true;
  if (previous_) ::setenv("TMPDIR", previous_->c_str(), 1);
  else ::unsetenv("TMPDIR");
}

bool TestTmpDir::finish(bool passed) {
  if (restored_) return false;
  restore_env();
  if (!passed) {
    std::cerr << "test files kept in " << path_.string() << "\n";
    return false;
  }
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
  if (ec) std::cerr << "could not remove the test files in " << path_.string() << ": " << ec.message() << "\n";
  return !ec;
}

}  // namespace embedscope::test_support

// The absolute paths of build_paths.h, given by tests/CMakeLists.txt as ES_PATH_* definitions
// of this source only.
//
// Each path can be overridden by an environment variable of the macro's name
// (EMBEDSCOPE_TEST_DATA, EMBEDSCOPE_CLI, EMBEDSCOPE_UI, EMBEDSCOPE_SOURCE_DIR,
// EMBEDSCOPE_SHARED_DATA), read once at start: a test executable carried away from its build
// tree (tests/gpu/run_device_checks.sh --pack / --prebuilt) then finds its data and the CLI
// inside the pack. An empty variable counts as unset.
//
// How, without touching the force-included header (every test object would compile again):
// the exported `const char* const` pointers stay constant-initialised (so test sources that
// read them in their own namespace-scope initialisers still see a value), but they point at
// writable buffers holding the build's paths, and a constructor of priority 101 copies the
// environment's values into those buffers before any C++ dynamic initialiser of the
// executable runs (GNU ld sorts .init_array by priority). A value longer than the buffer
// (4,095 bytes) stops the executable with a message naming the variable.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "support/build_paths.h"

namespace {
constexpr std::size_t kBuildPathCapacity = 4096;
char g_test_data[kBuildPathCapacity] = ES_PATH_TEST_DATA;
char g_cli[kBuildPathCapacity] = ES_PATH_CLI;
char g_ui[kBuildPathCapacity] = ES_PATH_UI;
char g_source_dir[kBuildPathCapacity] = ES_PATH_SOURCE_DIR;
char g_shared_data[kBuildPathCapacity] = ES_PATH_SHARED_DATA;

/// Copies $name into buf when it is set and not empty; exits 2 naming the variable when the
/// value does not fit.
void build_path_from_env(const char* name, char* buf) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return;
  const std::size_t n = std::strlen(v);
  if (n >= kBuildPathCapacity) {
    std::fprintf(stderr, "build_paths: $%s is %zu bytes long; at most %zu fit\n", name, n, kBuildPathCapacity - 1);
    std::_Exit(2);
  }
  std::memcpy(buf, v, n + 1);
}

__attribute__((constructor(101))) void build_paths_from_env() {
  build_path_from_env("EMBEDSCOPE_TEST_DATA", g_test_data);
  build_path_from_env("EMBEDSCOPE_CLI", g_cli);
  build_path_from_env("EMBEDSCOPE_UI", g_ui);
  build_path_from_env("EMBEDSCOPE_SOURCE_DIR", g_source_dir);
  build_path_from_env("EMBEDSCOPE_SHARED_DATA", g_shared_data);
}
}  // namespace

namespace embedscope::test_support::build_paths {
const char* const test_data = g_test_data;
const char* const cli = g_cli;
const char* const ui = g_ui;
const char* const source_dir = g_source_dir;
const char* const shared_data = g_shared_data;
}  // namespace embedscope::test_support::build_paths

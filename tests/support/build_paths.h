#pragma once
// Paths of this build that the tests need: the test data folder, the CLI and workbench
// binaries, the source tree and the shared data folder beside the repository. Force-included
// into every test source (tests/CMakeLists.txt: -include support/build_paths.h), so that the
// macros below read as before.
//
// Why not -DEMBEDSCOPE_TEST_DATA="/abs/path" on each test: ccache (base_dir) makes the paths of
// a command line relative, but not the values of -D, so every test source of a fresh clone
// (another directory) missed the cache. The absolute paths now sit in one small source,
// build_paths.cpp (library embedscope_test_paths), the only test object each clone compiles
// again.
namespace embedscope::test_support::build_paths {
extern const char* const test_data;    ///< tests/data of the source tree
extern const char* const cli;          ///< the embedscope binary (app/cli)
extern const char* const ui;           ///< the embedscope-ui binary; "" when the UI is not built
extern const char* const source_dir;   ///< the source tree's root
extern const char* const shared_data;  ///< <source tree>/../shared/data (may not exist)
}  // namespace embedscope::test_support::build_paths

#define EMBEDSCOPE_TEST_DATA (::embedscope::test_support::build_paths::test_data)
#define EMBEDSCOPE_CLI (::embedscope::test_support::build_paths::cli)
#define EMBEDSCOPE_UI (::embedscope::test_support::build_paths::ui)
#define EMBEDSCOPE_SOURCE_DIR (::embedscope::test_support::build_paths::source_dir)
#define EMBEDSCOPE_SHARED_DATA (::embedscope::test_support::build_paths::shared_data)

// The absolute paths of build_paths.h, given by tests/CMakeLists.txt as ES_PATH_* definitions
// of this source only.
#include "support/build_paths.h"

namespace embedscope::test_support::build_paths {
const char* const test_data = ES_PATH_TEST_DATA;
const char* const cli = ES_PATH_CLI;
const char* const ui = ES_PATH_UI;
const char* const source_dir = ES_PATH_SOURCE_DIR;
const char* const shared_data = ES_PATH_SHARED_DATA;
}  // namespace embedscope::test_support::build_paths

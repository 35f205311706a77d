// The test main of every GoogleTest executable made by embedscope_test() (tests/CMakeLists.txt):
// gtest_main's, inside a private temporary directory that is removed when the tests passed
// (support/test_tmpdir.h says why).
#include <gtest/gtest.h>

#include "support/test_tmpdir.h"

int main(int argc, char** argv) {
  embedscope::test_support::TestTmpDir tmp;
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  tmp.finish(rc == 0);
  return rc;
}

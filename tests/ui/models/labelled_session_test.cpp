// distinct_file_names: what Compare calls sessions whose files share a name (tester40 #1: the
// H200's run1/criteo_cuda4.db beside run3/criteo_cuda4.db read "criteo_cuda4.db" twice).
#include <gtest/gtest.h>

#include "models/labelled_session.h"

using embedscope::ui::distinct_file_names;

TEST(DistinctFileNames, FileNamesUnlessTheyCollideThenTheShortestTailThatDiffers) {
  EXPECT_EQ(distinct_file_names({"a/x.db", "b/y.db"}), (QStringList{"x.db", "y.db"}));
  EXPECT_EQ(distinct_file_names({"run1/criteo_cuda4.db", "run3/criteo_cuda4.db"}),
            (QStringList{"run1/criteo_cuda4.db", "run3/criteo_cuda4.db"}));
  // only the colliding ones grow, and only as far as they must
  EXPECT_EQ(distinct_file_names({"/t/a/run/s.db", "/t/b/run/s.db", "/t/a/other.db"}),
            (QStringList{"a/run/s.db", "b/run/s.db", "other.db"}));
  // the same file twice (--compare a.db a.db) keeps its name; cleaned paths compare equal
  EXPECT_EQ(distinct_file_names({"d/s.db", "d/./s.db"}), (QStringList{"s.db", "s.db"}));
  // a relative and an absolute spelling of different files: as much of each as there is
  EXPECT_EQ(distinct_file_names({"s.db", "/x/s.db"}), (QStringList{"s.db", "x/s.db"}));
}

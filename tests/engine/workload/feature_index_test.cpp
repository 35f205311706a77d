// FeatureIndex (issue 20, defect 6: planning O(n log n) in tables): the same answers as
// WorkloadSpec's linear lookups, repeated names included. Its speed is bench_planner's job.
#include <gtest/gtest.h>

#include "embedscope/engine/workload/presets.h"
#include "embedscope/engine/workload/spec.h"

using namespace embedscope::engine;

TEST(FeatureIndex, AnswersAsTheLinearLookups) {
  WorkloadSpec s = load_preset("tiny");  // t_b serves f_b0 and f_b1
  // a name listed by two tables (the first serves it) and a table name without a feature
  s.tables.push_back(s.tables[0]);
  s.tables.back().name = "t_again";
  s.tables.back().feature_names = {"f_a", "f_missing"};
  const FeatureIndex index(s);
  ASSERT_EQ(index.table_of_feature().size(), s.features.size());
  for (size_t f = 0; f < s.features.size(); ++f) {
    EXPECT_EQ(index.table_of_feature()[f], s.table_of_feature(f)) << s.features[f].name;
    EXPECT_EQ(index.feature_index(s.features[f].name), s.feature_index(s.features[f].name));
  }
  EXPECT_EQ(index.feature_index("f_missing"), -1);
  EXPECT_EQ(index.table_of_feature()[static_cast<size_t>(s.feature_index("f_a"))], 1);  // t_a, not t_again
  ASSERT_EQ(index.features_of_table().size(), s.tables.size());
  EXPECT_EQ(index.features_of_table()[2], (std::vector<int>{s.feature_index("f_b0"), s.feature_index("f_b1")}));
  EXPECT_EQ(index.features_of_table()[4], (std::vector<int>{s.feature_index("f_a"), -1}));
}

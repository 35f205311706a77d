// hash_size = num_embeddings is valid but saves nothing and adds collisions: `plan` and `run`
// warn (workload/hash_warnings.h). By hand: n ids onto n rows at random leave (1 - 1/n)^n of the
// rows empty, 1/e = 36.8 % for large n (50,000: 0.367875).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "embedscope/engine/workload/hash_warnings.h"
#include "embedscope/engine/workload/spec.h"
#include "support/build_paths.h"

using namespace embedscope::engine;

TEST(HashSizeWarning, EqualToTheRowsWarnsNamingThePointer) {
  EXPECT_NEAR(std::pow(1.0 - 1.0 / 50000, 50000), 0.3679, 0.0001);
  WorkloadSpec s = load_workload_file(std::string(EMBEDSCOPE_TEST_DATA) + "/specs/small_hot_table_straggler.json");
  ASSERT_GE(s.tables.size(), 2u);
  EXPECT_TRUE(hash_size_warnings(s).empty());  // no hashing
  s.tables[1].hash_size = s.tables[1].num_embeddings - 1;
  EXPECT_TRUE(hash_size_warnings(s).empty());  // saves a row: a choice, not a typo
  s.tables[1].hash_size = s.tables[1].num_embeddings;
  validate(s, "test");  // valid
  const auto w = hash_size_warnings(s);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0], "/tables/1/hash_size: " + std::to_string(s.tables[1].num_embeddings) + " = num_embeddings of table \"" +
                      s.tables[1].name +
                      "\": hashing saves no byte here and makes ids collide (about 37 % of the rows stay empty, as "
                      "many ids share one); leave it out for no hashing, or give fewer rows");
}

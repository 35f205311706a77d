// tester43 F19: `compare --verbose` of lm_embedding sessions (no DLRM sharding plan) said
// "differs: ... plan , placement 1": an empty plan and a placement number that was the session's
// index. Sessions without a plan have no "plan" setting and no placement.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "embedscope/sessions/analysis/compare.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"

namespace {
namespace ss = embedscope::sessions;

std::string ux44_lm_session(const std::string& name, int vocab) {
  const auto path = std::filesystem::temp_directory_path() / ("es_ux44_cmp_" + std::to_string(getpid()) + name + ".db");
  std::filesystem::remove(path);
  ss::SessionWriter w(path.string());
  w.set_metadata(ss::meta::kWorkloadJson, R"({"model":"lm_embedding","vocab_size":)" + std::to_string(vocab) + "}");
  w.set_metadata(ss::meta::kSteps, "5");
  w.close("complete");
  return path.string();
}
}  // namespace

TEST(Ux44Compare, LmSessionsHaveNoEmptyPlanOrPlacement) {
  const ss::SessionReader a(ux44_lm_session("a", 40)), b(ux44_lm_session("b", 50)), c(ux44_lm_session("c", 40));
  EXPECT_EQ(ss::differing_settings({&a, &b, &c}, 6, true),
            (std::vector<std::string>{"vocab_size 40", "vocab_size 50", "vocab_size 40"}));
  EXPECT_EQ(ss::differing_settings({&a, &b, &c}), (std::vector<std::string>{"vocab_size 40", "vocab_size 50", "vocab_size 40"}));
  EXPECT_EQ(ss::differing_settings({&a, &c}, 6, true), (std::vector<std::string>{"", ""}));
}

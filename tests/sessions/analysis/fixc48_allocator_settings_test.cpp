// tester47 F14 nit 6: an lm_embedding session's Memory page said "allocator settings: not
// recorded" for a run Embedscope made. The run now records its engine's allocator, and the
// page's text comes from sessions::allocator_settings. Hand-written sessions, one per source.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "embedscope/sessions/analysis/memory_analysis.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"

namespace {
namespace fixc48_ss = embedscope::sessions;
using fixc48_kv = std::vector<std::pair<std::string, std::string>>;

// A session holding only the metadata `meta` (key, value).
fixc48_ss::AllocatorSettings fixc48_settings_of(const std::string& name, const fixc48_kv& meta) {
  const auto p = std::filesystem::temp_directory_path() / ("fixc48_alloc_" + name + ".db");
  std::filesystem::remove(p);
  {
    fixc48_ss::SessionWriter w(p.string());
    for (const auto& [k, v] : meta) w.set_metadata(k, v);
    w.close("complete");
  }
  const fixc48_ss::SessionReader r(p.string());
  return fixc48_ss::allocator_settings(r);
}
}  // namespace

TEST(Fixc48AllocatorSettings, EachSessionSaysWhereItsAllocatorSettingsComeFrom) {
  namespace meta = fixc48_ss::meta;
  // an lm_embedding run (lm_run.cpp writes this; not imported)
  auto a = fixc48_settings_of("lm", {{meta::kAllocatorSettingsJson,
                                      R"({"allocator":"caching","compaction":false,"max_split_size":0})"},
                                     {meta::kWorkloadJson, R"({"model":"lm_embedding","vocab_size":100})"}});
  EXPECT_EQ(a.source, "the run's engine");
  EXPECT_EQ(a.recorded, "caching");
  EXPECT_EQ(a.entries, (fixc48_kv{{"allocator", "caching"}, {"compaction", "false"}, {"max_split_size", "0"}}));
  // an imported PyTorch snapshot: 128 MiB split limit, expandable segments
  a = fixc48_settings_of("torch", {{meta::kImported, "1"},
                                   {meta::kAllocatorSettingsJson,
                                    R"({"expandable_segments":true,"max_split_size":134217728})"}});
  EXPECT_EQ(a.source, "PyTorch");
  EXPECT_EQ(a.recorded, "expandable_segments, max_split_size 128.0 MiB");
  EXPECT_EQ(a.entries, (fixc48_kv{{"expandable_segments", "true"}, {"max_split_size", "134217728"}}));
  // a DLRM run: its workload's memory block
  a = fixc48_settings_of("dlrm", {{meta::kWorkloadJson,
                                   R"({"memory":{"allocator":"caching","max_split_size":1048576,"compaction":true}})"}});
  EXPECT_EQ(a.source, "the run's workload");
  EXPECT_EQ(a.recorded, "caching");
  EXPECT_EQ(a.entries, (fixc48_kv{{"allocator", "caching"}, {"compaction", "true"}, {"max_split_size", "1048576"}}));
  // nothing recorded (an older lm_embedding session)
  a = fixc48_settings_of("none", {{meta::kWorkloadJson, R"({"model":"lm_embedding"})"}});
  EXPECT_EQ(a.source, "");
  EXPECT_EQ(a.recorded, "unknown");
  EXPECT_TRUE(a.entries.empty());
}

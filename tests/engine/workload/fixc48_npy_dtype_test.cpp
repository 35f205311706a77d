// retest47 R3: a `dtype` beside a .npy token file that contradicts the file's own was ignored
// without a word. Now refused naming the field and both dtypes; the file's own dtype is the
// spec's (the run's header names it) and a stored workload leaves dtype out for a .npy.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/engine/input/token_file.h"
#include "embedscope/engine/workload/lm_spec.h"
#include "support/input_files.h"

namespace {
namespace fixc48_es = embedscope::engine;

std::filesystem::path fixc48_npy_dir() {
  const auto d = std::filesystem::temp_directory_path() / ("fixc48_npy_" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d;
}

}  // namespace

TEST(Fixc48NpyDtype, ADtypeThatContradictsTheNpysOwnIsRefused) {
  const auto dir = fixc48_npy_dir();
  embedscope::test_support::write_id_npy(dir / "x4.npy", 40, 4);
  nlohmann::json j = {{"model", "lm_embedding"}, {"vocab_size", 100}, {"hidden_size", 16}, {"sequence_length", 8},
                      {"token_ids", {{"file", "x4.npy"}, {"dtype", "uint16"}}}};
  try {
    fixc48_es::parse_lm_workload(j, "w.json", dir.string());
    FAIL() << "uint16 beside a <u4 .npy was accepted";
  } catch (const fixc48_es::SpecError& e) {
    EXPECT_EQ(std::string(e.what()),
              "w.json: /token_ids/dtype: uint16 disagrees with x4.npy's own <u4 (uint32); a .npy says its own dtype: "
              "leave dtype out");
  }
  // the same dtype is accepted; no dtype takes the file's
  for (const bool with_dtype : {true, false}) {
    j["token_ids"] = with_dtype ? nlohmann::json{{"file", "x4.npy"}, {"dtype", "uint32"}}
                                : nlohmann::json{{"file", "x4.npy"}};
    const fixc48_es::LmWorkloadSpec s = fixc48_es::parse_lm_workload(j, "w.json", dir.string());
    EXPECT_EQ(s.token_file_dtype, fixc48_es::TokenDtype::uint32);
    ASSERT_TRUE(s.token_file_ids);
    ASSERT_EQ(s.token_file_ids->size(), 40u);
    EXPECT_EQ(s.token_file_ids->at(39), 39);
    // stored without a dtype (a .npy says its own), and read back
    const nlohmann::json back = fixc48_es::to_json(s);
    EXPECT_EQ(back["token_ids"], (nlohmann::json{{"file", s.token_file}}));
    EXPECT_EQ(fixc48_es::parse_lm_workload(back, "stored").token_file_dtype, fixc48_es::TokenDtype::uint32);
  }
  // the reader says what the header declares
  fixc48_es::TokenDtype own = fixc48_es::TokenDtype::uint16;
  std::string descr;
  EXPECT_EQ(fixc48_es::read_token_npy((dir / "x4.npy").string(), &own, &descr).size(), 40u);
  EXPECT_EQ(own, fixc48_es::TokenDtype::uint32);
  EXPECT_EQ(descr, "<u4");
}

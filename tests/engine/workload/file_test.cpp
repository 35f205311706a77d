// load_workload_file: file errors (line and column for syntax), names from the file stem.

#include "spec_test_support.h"

#include "embedscope/engine/cost/hardware_profile.h"

namespace es = embedscope::engine;
using nlohmann::json;
using namespace spec_testing;

namespace {

TEST(SpecFile, MissingFile) {
  TempDir dir;
  const std::string p = dir.path("absent.json");
  EXPECT_EQ(load_error(p), p + ": cannot open: No such file or directory");
}

TEST(SpecFile, DirectoryIsNotAFile) {
  TempDir dir;
  const std::string p = dir.path("");
  const std::string err = load_error(p);
  // as a session's (before: libc's "cannot read: Is a directory" or "cannot open: Is a directory")
  EXPECT_EQ(err, p + ": is a directory, not a workload file");
}

TEST(SpecFile, SyntaxErrorNamesLineAndColumn) {
  TempDir dir;
  const std::string p = dir.write("bad.json", "{\n  \"batch_size\": 8,\n  \"tables\": [ x ]\n}\n");
  EXPECT_EQ(load_error(p),
            p + ": line 3, column 15: syntax error while parsing value - invalid literal; last read: "
                "'\"tables\": [ x'");
}

TEST(SpecFile, TrailingCommaNamesLineAndColumn) {
  TempDir dir;
  const std::string p = dir.write("comma.json", "{\n  \"batch_size\": 8,\n}\n");
  EXPECT_EQ(load_error(p),
            p + ": line 3, column 1: syntax error while parsing object key - unexpected '}'; "
                "expected string literal");
}

TEST(SpecFile, TruncatedFile) {
  TempDir dir;
  const std::string p = dir.write("cut.json", "{\"batch_size\": 8,\n \"tables\": [");
  EXPECT_EQ(load_error(p),
            p + ": line 2, column 13: syntax error while parsing value - unexpected end of input; "
                "expected '[', '{', or a literal");
}

TEST(SpecFile, EmptyFile) {
  TempDir dir;
  const std::string p = dir.write("empty.json", "");
  // as an empty session or trace is said (before: JSON's "line 1, column 1: ... unexpected end of input")
  EXPECT_EQ(load_error(p), p + ": the file is empty (not a workload file)");
  const std::string blank = dir.write("blank.json", " \n\t\n");
  EXPECT_EQ(load_error(blank), blank + ": the file holds only blanks (4 bytes; not a workload file)");
}

TEST(SpecFile, NewlineInStringIsReportedOnItsOwnLine) {
  // nlohmann counts a newline as column 0 of the next line; we report the line it ends.
  TempDir dir;
  const std::string p = dir.write("nl.json", "{\"a\": \"b\nc\"}");
  EXPECT_EQ(load_error(p),
            p + ": line 1, column 9: syntax error while parsing value - invalid string: control "
                "character U+000A (LF) must be escaped to \\u000A or \\n; last read: '\"b<U+000A>'");
}

TEST(SpecFile, SemanticErrorUsesPathAsOrigin) {
  TempDir dir;
  json j = base_spec();
  j["tables"][0]["embedding_dim"] = 0;
  const std::string p = dir.write("dim.json", j.dump(2));
  EXPECT_EQ(load_error(p), p + ": /tables/0/embedding_dim: must be > 0, got 0");
}

TEST(SpecFile, NameDefaultsToFileStem) {
  TempDir dir;
  const std::string p = dir.write("my_workload.json", base_spec().dump());
  EXPECT_EQ(es::load_workload_file(p).name, "my_workload");
  json named = base_spec();
  named["name"] = "explicit";
  const std::string q = dir.write("other.json", named.dump());
  EXPECT_EQ(es::load_workload_file(q).name, "explicit");
}

TEST(SpecFile, SavedPresetLoadsBack) {
  TempDir dir;
  const es::WorkloadSpec tiny = es::load_preset("tiny");
  const std::string p = dir.write("saved.json", es::to_json(tiny).dump(2));
  expect_same(es::load_workload_file(p), tiny);
}

}  // namespace

namespace embedscope::engine::detail {
nlohmann::json parse_json_text(const std::string& text, const std::string& origin);  // engine/workload/reader.cpp
}

TEST(SpecFile, DuplicateKeysAreRefused) {
  try {
    es::detail::parse_json_text(R"({"batch_size": 4, "memory": {"allocator": "caching", "allocator": "direct"}})", "dup.json");
    FAIL() << "duplicate accepted";
  } catch (const es::SpecError& e) {
    EXPECT_STREQ(e.what(), "dup.json: key \"allocator\" appears twice in the same object (in \"memory\")");
  }
  // the same key in different objects is fine
  EXPECT_NO_THROW(es::detail::parse_json_text(R"({"a": {"name": 1}, "b": {"name": 2}})", "ok.json"));
}

// tester44 F16: a hardware profile file named in devices.hardware is relative to the workload
// file's folder, as input.paths are (it was read from the current directory); a built-in name and
// an absolute path are kept as written.
TEST(SpecFile, HardwareProfileFileIsRelativeToTheWorkload) {
  TempDir dir;
  const std::string profile = std::string(EMBEDSCOPE_SOURCE_DIR) + "/resources/hardware/h100_sxm.json";
  std::filesystem::create_directories(dir.path("wl/sub"));
  std::filesystem::copy_file(profile, dir.path("wl/small16.json"));
  const auto load_with = [&](const std::string& hardware) {
    json j = base_spec();
    j["devices"] = {{"count", 8}, {"backend", "simulated"}, {"hardware", hardware}};
    return es::load_workload_file(dir.write("wl/tiny_sim.json", j.dump())).devices.hardware;
  };
  const std::string beside = load_with("small16.json");
  EXPECT_EQ(beside, dir.path("wl/small16.json"));
  EXPECT_EQ(load_with("sub/../small16.json"), dir.path("wl/small16.json"));  // normalised
  EXPECT_EQ(load_with("h100_sxm"), "h100_sxm");                            // a built-in name
  EXPECT_EQ(load_with(profile), profile);                                  // absolute
  // the resolved name opens from any current directory (the test's is not the workload's folder)
  ASSERT_NE(std::filesystem::current_path(), std::filesystem::path(dir.path("wl")));
  EXPECT_EQ(es::load_hardware_profile(beside).gpus_per_node, 8);
}

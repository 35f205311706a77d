// `embedscope tokenize` on a fixture text with hand-checkable counts, and the token .bin / .npy
// files it writes and workloads read (input/token_file.h).

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include <gtest/gtest.h>

#include "embedscope/engine/input/token_file.h"
#include "embedscope/engine/workload/spec_error.h"
#include "support/cli_run.h"
#include "support/input_files.h"

namespace es = embedscope::engine;

namespace {
std::filesystem::path tokenize_scratch() {
  const auto d = std::filesystem::temp_directory_path() / ("es_tokenize_" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d;
}
void write_bytes_for_tokens(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
}
}  // namespace

TEST(Tokenize, FixtureTextGivesOneIdPerWordWithHandCountedFrequencies) {
  // tests/data/tokens/fixture.txt: "the cat sat on the mat" / "the cat ran" / "the dog sat":
  // 12 words, 7 distinct (the x4, cat x2, sat x2, on, mat, ran, dog), + one </s> after the file.
  // At 40 pieces BPE has merged every word into one piece "▁word".
  const auto dir = tokenize_scratch();
  const std::string bin = (dir / "fixture.bin").string();
  const auto r = embedscope::test_support::run_cli(
      EMBEDSCOPE_CLI, "tokenize --vocab-size 40 --input " + std::string(EMBEDSCOPE_TEST_DATA) + "/tokens/fixture.txt -o " + bin,
      dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("ranks 1..8 of 8 distinct ids"), std::string::npos) << r.out;
  const std::vector<int64_t> ids = es::read_token_bin(bin, es::TokenDtype::uint16);
  ASSERT_EQ(ids.size(), 13u);
  EXPECT_EQ(ids[12], 2);  // SentencePiece's eos
  // the at 0, 4, 6, 9; cat at 1, 7; sat at 2, 11; on 3, mat 5, ran 8, dog 10 all different
  EXPECT_EQ(ids[0], ids[4]);
  EXPECT_EQ(ids[0], ids[6]);
  EXPECT_EQ(ids[0], ids[9]);
  EXPECT_EQ(ids[1], ids[7]);
  EXPECT_EQ(ids[2], ids[11]);
  const std::vector<int64_t> distinct = {ids[0], ids[1], ids[2], ids[3], ids[5], ids[8], ids[10], ids[12]};
  for (size_t a = 0; a < distinct.size(); ++a)
    for (size_t b = a + 1; b < distinct.size(); ++b) EXPECT_NE(distinct[a], distinct[b]) << a << " " << b;
  // counts sorted 4, 2, 2, 1, 1, 1, 1, 1: OLS of ln c on ln r over ranks 1..8 by hand
  // (mean ln r = ln(8!)/8 = 1.3254; slope = S_xy / S_xx = -0.70259)
  EXPECT_NE(r.out.find("alpha = 0.703"), std::string::npos) << r.out;
}

TEST(Tokenize, BadInputNamesTheFile) {
  const auto dir = tokenize_scratch();
  const auto r = embedscope::test_support::run_cli(
      EMBEDSCOPE_CLI, "tokenize --vocab-size 40 --input " + (dir / "missing.txt").string() + " -o " + (dir / "x.bin").string(), dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("missing.txt: cannot open the text file"), std::string::npos) << r.err;
}

// A file that is not UTF-8 text is refused before the training, at the first byte that is not:
// the trainer took a binary and then asked for --vocab-size in the thousands (tester59b F7).
TEST(Tokenize, BinaryInputIsNotUtf8Text) {
  const auto dir = tokenize_scratch();
  const auto refuse = [&](const std::string& name, const std::string& bytes) {
    write_bytes_for_tokens(dir / name, bytes);
    const auto r = embedscope::test_support::run_cli(
        EMBEDSCOPE_CLI, "tokenize --vocab-size 100 --input " + (dir / name).string() + " -o " + (dir / (name + ".bin")).string(),
        dir);
    EXPECT_FALSE(std::filesystem::exists(dir / (name + ".bin"))) << name;
    return r;
  };
  // an ELF header: 0x7F 'E' 'L' 'F' 0x02 0x01 0x01 then NULs: the first NUL is byte 7
  auto r = refuse("elf", std::string("\x7f" "ELF\x02\x01\x01\0\0\0", 10) + "the cat sat");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find((dir / "elf").string() + ": not UTF-8 text (byte offset 7)"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("vocab-size"), std::string::npos) << r.err;
  // "caf\xc3\xa9 " is UTF-8 (e acute, 2 bytes); 0xFF never is: offset 6
  r = refuse("latin", "caf\xc3\xa9 \xff ok");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("latin: not UTF-8 text (byte offset 6)"), std::string::npos) << r.err;
  // a 3-byte sequence cut by the end of the file: its first byte, offset 4
  r = refuse("cut", "the \xe2\x82");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("cut: not UTF-8 text (byte offset 4)"), std::string::npos) << r.err;
  // a sequence across the reader's 1 MiB chunks is text: 2^20 - 1 'a's, then the euro sign
  // (3 bytes, cut by the first read), then 0xC0 (never valid) at 2^20 + 2
  r = refuse("long", std::string((1 << 20) - 1, 'a') + "\xe2\x82\xac\xc0");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("long: not UTF-8 text (byte offset 1048578)"), std::string::npos) << r.err;
}

TEST(TokenFile, BinRoundTripsAndRejectsTruncatedFiles) {
  const auto dir = tokenize_scratch();
  const std::string p = (dir / "rt.bin").string();
  es::write_token_bin(p, {0, 1, 65535, 7}, es::TokenDtype::uint16);
  EXPECT_EQ(std::filesystem::file_size(p), 8u);
  EXPECT_EQ(es::read_token_bin(p, es::TokenDtype::uint16), (std::vector<int64_t>{0, 1, 65535, 7}));
  // the same 8 bytes as uint32: little-endian pairs (1 << 16 | 0, 7 << 16 | 65535)
  EXPECT_EQ(es::read_token_bin(p, es::TokenDtype::uint32), (std::vector<int64_t>{65536, (7 << 16) | 65535}));
  EXPECT_THROW(es::write_token_bin(p, {65536}, es::TokenDtype::uint16), es::SpecError);
  write_bytes_for_tokens(dir / "odd.bin", std::string("\x01\x00\x02", 3));
  try {
    es::read_token_bin((dir / "odd.bin").string(), es::TokenDtype::uint16);
    FAIL();
  } catch (const es::SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("odd.bin: 3 bytes of data is not a multiple of the 2-byte uint16"), std::string::npos)
        << e.what();
  }
}

TEST(TokenFile, IdAtOrAboveVocabNamesFileAndOffset) {
  try {
    es::check_token_ids({1, 2, 9, 3}, 5, "t.bin", es::TokenDtype::uint16);
    FAIL();
  } catch (const es::SpecError& e) {
    EXPECT_STREQ(e.what(), "t.bin: token id 9 at offset 2 (byte 4) is outside [0, vocab_size 5)");
  }
  EXPECT_NO_THROW(es::check_token_ids({0, 4}, 5, "t.bin", es::TokenDtype::uint16));
}

TEST(TokenFile, NpyHeaderIsParsedForEachTokenDtype) {
  const auto dir = tokenize_scratch();
  // numpy.save(np.array([3, 1, 4], dtype='<i8')) and others, by hand (test_support::npy_bytes)
  const auto npy = embedscope::test_support::npy_bytes;
  write_bytes_for_tokens(dir / "a.npy", npy("<i8", "(3,)", std::string("\x03\0\0\0\0\0\0\0\x01\0\0\0\0\0\0\0\x04\0\0\0\0\0\0\0", 24)));
  EXPECT_EQ(es::read_token_npy((dir / "a.npy").string()), (std::vector<int64_t>{3, 1, 4}));
  write_bytes_for_tokens(dir / "b.npy", npy("<u2", "(2,)", std::string("\x05\x00\x00\x01", 4)));
  EXPECT_EQ(es::read_token_file((dir / "b.npy").string(), es::TokenDtype::uint32), (std::vector<int64_t>{5, 256}));
  write_bytes_for_tokens(dir / "c.npy", npy("<f4", "(1,)", std::string(4, '\0')));
  EXPECT_THROW(es::read_token_npy((dir / "c.npy").string()), es::SpecError);
  write_bytes_for_tokens(dir / "d.npy", npy("<i4", "(1, 2)", std::string(8, '\0')));
  try {
    es::read_token_npy((dir / "d.npy").string());
    FAIL();
  } catch (const es::SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("d.npy: .npy shape (1, 2) is not 1-D"), std::string::npos) << e.what();
  }
  write_bytes_for_tokens(dir / "e.npy", npy("<i4", "(2,)", std::string("\xff\xff\xff\xff\x00\x00\x00\x00", 8)));
  EXPECT_THROW(es::read_token_npy((dir / "e.npy").string()), es::SpecError);  // id -1
}

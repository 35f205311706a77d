// read_input: a plain file is mapped with zero padding after its text; gzip output is sized from
// the trailer but never trusts it (several members, a wrong trailer).

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "importers/common/input_file.h"

namespace {
using embedscope::sessions::importers::InputText;
using embedscope::sessions::importers::kTextPadding;
using embedscope::sessions::importers::read_input;
namespace fs = std::filesystem;

fs::path temp_file(const std::string& name) {
  return fs::temp_directory_path() / ("es_input_file_test_" + std::to_string(getpid()) + "_" + name);
}

void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
}

/// `text` as one gzip member.
std::string gzip(const std::string& text) {
  z_stream s{};
  EXPECT_EQ(deflateInit2(&s, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&s, text.size()) + 64, '\0');
  s.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  s.avail_in = static_cast<uInt>(text.size());
  s.next_out = reinterpret_cast<Bytef*>(out.data());
  s.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&s, Z_FINISH), Z_STREAM_END);
  out.resize(s.total_out);
  deflateEnd(&s);
  return out;
}

void expect_text(const InputText& in, const std::string& text) {
  ASSERT_EQ(in.size, text.size());
  EXPECT_EQ(std::string(in.data(), in.size), text);
  for (size_t i = 0; i < kTextPadding; ++i) ASSERT_EQ(in.data()[in.size + i], '\0') << i;
}
}  // namespace

TEST(InputFile, APlainFileOfWholePagesIsFollowedByZeroPadding) {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  for (size_t size : {page, 3 * page, 3 * page - 1, size_t{1}}) {
    std::string text(size, 'a');
    text.front() = '{';
    const fs::path p = temp_file("plain.json");
    write_file(p, text);
    const InputText in = read_input(p.string());
    expect_text(in, text);
    EXPECT_EQ(in.file_bytes, static_cast<int64_t>(size));
    EXPECT_FALSE(in.compressed);
    InputText moved = read_input(p.string());
    InputText other = std::move(moved);  // the mapping moves with it
    expect_text(other, text);
    fs::remove(p);
  }
}

TEST(InputFile, GzipMembersAreReadOneAfterTheOtherWhateverTheTrailerSays) {
  std::string a(300000, 'x'), b = "{\"traceEvents\": []}";
  for (size_t i = 0; i < a.size(); i += 97) a[i] = static_cast<char>('a' + i % 26);
  const fs::path p = temp_file("two.json.gz");
  write_file(p, gzip(a) + gzip(b));  // the trailer's size is the last member's: far too small
  const InputText in = read_input(p.string());
  EXPECT_TRUE(in.compressed);
  EXPECT_TRUE(in.gzip_error.empty()) << in.gzip_error;
  expect_text(in, a + b);
  // A trailer claiming 4 GiB: the buffer is bounded by deflate's ratio, and zlib's length check
  // reports the lie after every byte was decoded.
  std::string lying = gzip(a);
  for (size_t i = lying.size() - 4; i < lying.size(); ++i) lying[i] = '\xff';
  write_file(p, lying);
  const InputText l = read_input(p.string());
  expect_text(l, a);
  EXPECT_FALSE(l.gzip_error.empty());
  fs::remove(p);
}

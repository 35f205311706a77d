// tester49 N1 (fixa49): a .kjt.gz with bytes after its gzip stream that are not gzip data was
// accepted without a word (zlib's gzread skips them). The walk of the stream (check_layout, and
// open() when it counts the batches of a header with N = 0) now refuses it, naming the file and
// the byte offset in the file where those bytes start; several gzip members (RFC 1952) are read.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "embedscope/engine/input/kjt_file.h"
#include "support/input_files.h"

namespace {
namespace fixa49_fs = std::filesystem;
namespace fixa49_es = embedscope::engine;

fixa49_fs::path fixa49_kjt_dir() {
  const auto d = fixa49_fs::temp_directory_path() / ("fixa49_kjt_" + std::to_string(::getpid()));
  fixa49_fs::create_directories(d);
  return d;
}

// `parts` each gzip-compressed as one member, one after the other, into DIR/name; returns the path
std::string fixa49_gz_members(const std::string& name, const std::vector<std::string>& parts) {
  const std::string path = (fixa49_kjt_dir() / name).string();
  fixa49_fs::remove(path);
  for (const std::string& p : parts) {
    gzFile g = gzopen(path.c_str(), "ab");
    gzwrite(g, p.data(), static_cast<unsigned>(p.size()));
    gzclose(g);
  }
  return path;
}

std::string fixa49_layout_error(const std::string& path) {
  try {
    fixa49_es::KjtFileReader r(path);
    r.check_layout();
  } catch (const fixa49_es::InputFileError& e) {
    return e.what();
  }
  return "(no InputFileError)";
}
}  // namespace

TEST(Fixa49KjtGzipTrailing, BytesAfterTheGzipStreamAreRefusedWithTheirOffset) {
  const std::string kjt = embedscope::test_support::small_kjt_bytes(3, 3);
  const std::string p = fixa49_gz_members("trailing.kjt.gz", {kjt});
  const auto clean = static_cast<int64_t>(fixa49_fs::file_size(p));
  EXPECT_EQ(fixa49_layout_error(p), "(no InputFileError)");
  std::ofstream(p, std::ios::binary | std::ios::app) << "GARBAGE";  // 7 bytes from offset `clean`
  EXPECT_EQ(fixa49_layout_error(p),
            p + ": 7 bytes after the end of the gzip stream, from byte offset " + std::to_string(clean) +
                " of the file (of " + std::to_string(clean + 7) +
                " bytes), are not gzip data: trailing garbage (a file appended to, or damaged?)");
  // one byte that could start a member (0x1f) is not one either
  const std::string q = fixa49_gz_members("one_byte.kjt.gz", {kjt});
  std::ofstream(q, std::ios::binary | std::ios::app) << '\x1f';
  EXPECT_EQ(fixa49_layout_error(q), q + ": 1 byte after the end of the gzip stream, from byte offset " +
                                        std::to_string(clean) + " of the file (of " + std::to_string(clean + 1) +
                                        " bytes), is not gzip data: trailing garbage (a file appended to, or damaged?)");
}

TEST(Fixa49KjtGzipTrailing, SeveralGzipMembersAreOneStream) {
  // the header and batch 0 (50 + 80 bytes) in one member, batches 1-2 in a second: 3 batches
  const std::string kjt = embedscope::test_support::small_kjt_bytes(3, 3);
  const std::string p = fixa49_gz_members("members.kjt.gz", {kjt.substr(0, 130), kjt.substr(130)});
  EXPECT_EQ(fixa49_layout_error(p), "(no InputFileError)");
  fixa49_es::KjtFileReader r(p);
  fixa49_es::KjtFileBatch b;
  for (int n = 0; n < 3; ++n) {
    ASSERT_TRUE(r.next(b)) << n;
    EXPECT_EQ(b.ids, (std::vector<int64_t>{3 + n, 4 + n, 5 + n, 6 + n}));
  }
  EXPECT_FALSE(r.next(b));
}

TEST(Fixa49KjtGzipTrailing, ARecoveredCountRefusesTrailingBytesToo) {
  // N = 0 in the header (a writer killed before close): open() counts the batches and finds them
  const std::string p = fixa49_gz_members("killed_trailing.kjt.gz", {embedscope::test_support::small_kjt_bytes(2, 0)});
  const auto clean = static_cast<int64_t>(fixa49_fs::file_size(p));
  std::ofstream(p, std::ios::binary | std::ios::app) << std::string(5, '\0');
  try {
    fixa49_es::KjtFileReader r(p);
    ADD_FAILURE() << "accepted: " << r.header().num_batches << " batches";
  } catch (const fixa49_es::InputFileError& e) {
    EXPECT_EQ(std::string(e.what()), p + ": 5 bytes after the end of the gzip stream, from byte offset " +
                                         std::to_string(clean) + " of the file (of " + std::to_string(clean + 5) +
                                         " bytes), are not gzip data: trailing garbage (a file appended to, or damaged?)");
  }
}

// tester47 F12's leftover (fixc48): a gzip KJT file was checked only as it was read (a cut .gz
// was found when the run reached the bad batch). Now its uncompressed stream is walked before any
// batch is read. Hand-made files (FORMAT.md): header 50 bytes, batches of 80 (see fixd47's test),
// gzip-compressed at level 0 (stored) so that a cut in the compressed file lands at a known
// uncompressed byte.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "embedscope/engine/input/kjt_file.h"
#include "embedscope/engine/workload/spec.h"
#include "support/input_files.h"

namespace {
namespace fixc48_fs = std::filesystem;
namespace fixc48_es = embedscope::engine;

fixc48_fs::path fixc48_kjt_dir() {
  const auto d = fixc48_fs::temp_directory_path() / ("fixc48_kjt_" + std::to_string(::getpid()));
  fixc48_fs::create_directories(d);
  return d;
}

// `bytes` gzip-compressed (level 0) as DIR/name; with `keep_data` >= 0 the compressed file is cut
// right after the first `keep_data` uncompressed bytes (found verbatim: stored blocks), dropping
// the rest and the trailer.
std::string fixc48_gz(const std::string& name, const std::string& bytes, long keep_data = -1) {
  const std::string path = (fixc48_kjt_dir() / name).string();
  gzFile g = gzopen(path.c_str(), "wb0");
  gzwrite(g, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(g);
  if (keep_data >= 0) {
    std::ifstream in(path, std::ios::binary);
    const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t at = all.find(std::string("ESKJT\0\0\0", 8));
    fixc48_fs::resize_file(path, at + static_cast<size_t>(keep_data));
  }
  return path;
}

std::string fixc48_layout_error(const std::string& path) {
  try {
    fixc48_es::KjtFileReader r(path);
    r.check_layout();
  } catch (const fixc48_es::InputFileError& e) {
    return e.what();
  }
  return "(no InputFileError)";
}
}  // namespace

TEST(Fixc48KjtGzip, ACutOrMiscountedGzipFileIsRefusedUpFrontWithTheByteOffset) {
  ASSERT_EQ(embedscope::test_support::small_kjt_bytes(3, 3).size(), 50u + 3 * 80);
  EXPECT_EQ(fixc48_layout_error(fixc48_gz("whole.kjt.gz", embedscope::test_support::small_kjt_bytes(3, 3))), "(no InputFileError)");
  // the header says 5, the stream holds 3 whole batches (290 bytes)
  std::string p = fixc48_gz("over.kjt.gz", embedscope::test_support::small_kjt_bytes(3, 5));
  EXPECT_EQ(fixc48_layout_error(p),
            p + ": the header says 5 batches, but the uncompressed stream holds 3 (it ends at byte offset 290, after "
                "batch 2): cut short, or the header's count is wrong (byte offsets in the uncompressed stream)");
  // the header says 1, the stream holds 2: the second's 80 bytes from 130 are extra
  p = fixc48_gz("extra.kjt.gz", embedscope::test_support::small_kjt_bytes(2, 1));
  EXPECT_EQ(fixc48_layout_error(p), p + ": 80 bytes after the last of its 1 batches, from byte offset 130 (the header's "
                                        "count is wrong?) (byte offsets in the uncompressed stream)");
  // the .gz cut after 253 uncompressed bytes: batch 2 at 210 needs 80, 43 remain
  p = fixc48_gz("cut.kjt.gz", embedscope::test_support::small_kjt_bytes(3, 3), 253);
  EXPECT_EQ(fixc48_layout_error(p),
            p + ": the header says 3 batches, but the uncompressed stream ends inside batch 2 (batch 2 at byte offset 210 "
                "needs 80 bytes, 43 remain; the gzip stream ends early after 253 uncompressed bytes: unexpected end of "
                "file; the uncompressed stream is 253 bytes): cut short? (byte offsets in the uncompressed stream)");
  // every batch whole, the trailer cut off
  p = fixc48_gz("notrailer.kjt.gz", embedscope::test_support::small_kjt_bytes(3, 3), 290);
  EXPECT_EQ(fixc48_layout_error(p), p + ": its 3 batches are whole, but the gzip stream ends early after 290 uncompressed "
                                        "bytes: unexpected end of file: cut short?");
  // a run builds its batch source before its first step: refused there
  fixc48_es::WorkloadSpec spec;
  spec.name = "fixc48_kjt";
  spec.tables = {{"t", 50, 4, fixc48_es::Pooling::sum, {"a"}}};
  spec.features = {fixc48_es::FeatureSpec{"a", {}, {}}};
  spec.batch_size = 1;
  spec.steps = 3;
  spec.devices.count = 2;
  spec.input.kind = fixc48_es::InputKind::kjt;
  spec.input.paths = {fixc48_gz("cut_run.kjt.gz", embedscope::test_support::small_kjt_bytes(3, 3), 253)};
  try {
    fixc48_es::KjtBatchSource source(spec);
    ADD_FAILURE() << "a cut .gz was accepted";
  } catch (const fixc48_es::InputFileError& e) {
    EXPECT_NE(std::string(e.what()).find("ends inside batch 2 (batch 2 at byte offset 210"), std::string::npos)
        << e.what();
  }
}

TEST(Fixc48KjtGzip, AGzipWriterKilledBeforeCloseHasItsBatchesCounted) {
  // N = 0 in the header, 3 whole batches in the stream: counted, as a plain file's
  const std::string p = fixc48_gz("killed.kjt.gz", embedscope::test_support::small_kjt_bytes(3, 0));
  fixc48_es::KjtFileReader r(p);
  EXPECT_EQ(r.header().num_batches, 3u);
  EXPECT_TRUE(r.header().count_recovered);
  EXPECT_NO_THROW(r.check_layout());
  fixc48_es::KjtFileBatch b;
  for (int n = 0; n < 3; ++n) {
    ASSERT_TRUE(r.next(b)) << n;
    EXPECT_EQ(b.ids, (std::vector<int64_t>{3 + n, 4 + n, 5 + n, 6 + n}));
  }
  EXPECT_FALSE(r.next(b));
}

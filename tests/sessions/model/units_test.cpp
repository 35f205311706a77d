// Units and the id-histogram bucket arithmetic of the session model.
#include <gtest/gtest.h>

#include "embedscope/sessions/model/id_buckets.h"
#include "embedscope/sessions/model/units.h"

using namespace embedscope::sessions;

TEST(Units, FormatBytesInBinaryUnits) {
  EXPECT_EQ(format_bytes(100), "100 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(12 * 1024 * 1024 + 512 * 1024), "12.5 MiB");
  EXPECT_EQ(format_bytes(int64_t{3} << 30), "3.0 GiB");
  EXPECT_EQ(format_bytes(int64_t{5} << 50), "5120.0 TiB");  // TiB is the largest unit
  EXPECT_EQ(format_bytes(-1536), "-1.5 KiB");
}

TEST(IdBuckets, RowRangesByHand) {
  EXPECT_EQ(id_buckets_of(1000), 256);
  EXPECT_EQ(id_buckets_of(3), 3);
  EXPECT_EQ(id_buckets_of(0), 1);
  EXPECT_EQ(id_bucket_begin(1000, 0), 0);
  EXPECT_EQ(id_bucket_begin(1000, 1), 4);    // ceil(1000 / 256)
  EXPECT_EQ(id_bucket_begin(1000, 3), 12);   // ceil(3000 / 256)
  EXPECT_EQ(id_bucket_begin(1000, 255), 997);
  EXPECT_EQ(id_bucket_begin(1000, 256), 1000);
  EXPECT_EQ(id_bucket_of_row(1000, 3), 0);
  EXPECT_EQ(id_bucket_of_row(1000, 4), 1);
  EXPECT_EQ(id_bucket_of_row(1000, 999), 255);
  // every row falls in the bucket whose range holds it
  for (int64_t rows : {1, 7, 256, 257, 1000, 123457})
    for (int64_t r = 0; r < rows; r += 1 + rows / 997) {
      const int64_t b = id_bucket_of_row(rows, r);
      EXPECT_LE(id_bucket_begin(rows, b), r) << rows << " " << r;
      EXPECT_LT(r, id_bucket_begin(rows, b + 1)) << rows << " " << r;
    }
}

// Byte axes (the Memory page's segment timeline and segment map) tick in binary steps that
// format_bytes names exactly (tester35 D13: a "1000.0 KiB" tick between "500.0 KiB" and a
// "1.5 MiB" that was really 1,536,000 B = 1.46 MiB).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "charts/block_map.h"

using namespace embedscope;
using namespace embedscope::ui;

namespace {
// The bytes a tick label says: "1.25 MiB" -> 1,310,720; "768 B" -> 768.
double bytes_of_tick_label(const std::string& label, double* number = nullptr) {
  char* end = nullptr;
  const double v = std::strtod(label.c_str(), &end);
  const std::string unit(end);
  if (number) *number = v;
  const double k = unit == " B" ? 1 : unit == " KiB" ? 1024.0 : unit == " MiB" ? 1048576.0 : unit == " GiB" ? 1073741824.0 : -1;
  EXPECT_GT(k, 0) << label;
  return v * k;
}
}  // namespace

TEST(ByteTicks, EveryTickOfAByteAxisIsNamedExactlyBelow1024OfItsUnit) {
  // the tester's axis: 1.5 MiB of segments (and widths around every unit boundary)
  for (int64_t w : {int64_t{1000}, int64_t{1023}, int64_t{1500}, int64_t{1} << 20, int64_t{1536} << 10, int64_t{1572864},
                    int64_t{2000} << 10, int64_t{3} << 20, int64_t{40} << 20, int64_t{1000} << 20, int64_t{5} << 30})
    for (int max_ticks : {4, 6}) {
      const int64_t step = byte_tick_step(w, max_ticks);
      EXPECT_EQ(step & (step - 1), 0) << w << ": a binary step, not " << step;
      EXPECT_LE(w / step, max_ticks) << w;
      for (int64_t at = step; at <= w; at += step) {
        const std::string label = byte_tick_label(at);
        double number = 0;
        EXPECT_DOUBLE_EQ(bytes_of_tick_label(label, &number), static_cast<double>(at)) << w << ": tick " << at << " reads " << label;
        EXPECT_LT(number, 1000.0) << w << ": tick " << at << " reads " << label;  // no "1000.0 KiB"
      }
    }
  EXPECT_EQ(byte_tick_step(1536 << 10, 6), 256 << 10);  // 0, 256.0 KiB, ... 1.0 MiB, 1.25 MiB, 1.5 MiB
  EXPECT_EQ(byte_tick_step(1536 << 10, 4), 512 << 10);  // the segment timeline: 0, 512.0 KiB, 1.0 MiB, 1.5 MiB
  EXPECT_EQ(byte_tick_label(512 << 10), "512.0 KiB");
  EXPECT_EQ(byte_tick_label(1 << 20), "1.0 MiB");
  EXPECT_EQ(byte_tick_label(1536 << 10), "1.5 MiB");
  EXPECT_EQ(byte_tick_label(1280 << 10), "1.25 MiB");  // format_bytes would round it to 1.2
  EXPECT_EQ(byte_tick_label(768), "768 B");
}

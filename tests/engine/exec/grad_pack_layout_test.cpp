// The embedding update's gradient pack (exec/threaded/grad_pack.h GradPackLayout): where its
// ids, offsets, scales and gradients lie, by hand.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "exec/threaded/grad_pack.h"

using embedscope::engine::threaded::GradPackLayout;

// 7 ids, 4 bags, 3 columns: ids [0, 56), offsets [56, 96); scaled: scales [96, 112), gradients
// [112, 160), 4 + 12 = 16 floats, 7 + 5 + 8 = 20 words; unscaled: gradients [96, 144), 12
// floats, 7 + 5 + 6 = 18 words.
TEST(GradPackLayout, PartsByHand) {
  const GradPackLayout s{7, 4, 3, true};
  EXPECT_EQ(s.head_bytes(), 96);
  EXPECT_EQ(s.grad_at(), 112);
  EXPECT_EQ(s.grads_end(), 160);
  EXPECT_EQ(s.floats(), 16);
  EXPECT_EQ(s.words(), 20);
  std::vector<int64_t> buf(static_cast<size_t>(s.words()));
  auto* base = reinterpret_cast<char*>(buf.data());
  EXPECT_EQ(reinterpret_cast<char*>(s.ids(buf.data())) - base, 0);
  EXPECT_EQ(reinterpret_cast<char*>(s.offsets(buf.data())) - base, 56);
  EXPECT_EQ(reinterpret_cast<char*>(s.scale(buf.data())) - base, 96);
  EXPECT_EQ(reinterpret_cast<char*>(s.grad(buf.data())) - base, 112);
  const int64_t* cbase = buf.data();  // the const overloads give the same places
  EXPECT_EQ(reinterpret_cast<const char*>(s.grad(cbase)) - base, 112);

  const GradPackLayout u{7, 4, 3, false};
  EXPECT_EQ(u.head_bytes(), 96);
  EXPECT_EQ(u.grad_at(), 96);
  EXPECT_EQ(u.grads_end(), 144);
  EXPECT_EQ(u.floats(), 12);
  EXPECT_EQ(u.words(), 18);
  EXPECT_EQ(u.scale(buf.data()), nullptr);
  EXPECT_EQ(reinterpret_cast<char*>(u.grad(buf.data())) - base, 96);
}

// An odd number of floats is padded to a whole word: 1 id, 1 bag, 1 column, scaled: 2 floats,
// 1 + 2 + 1 = 4 words; unscaled: 1 float, also 4; 3 floats take 2 words.
TEST(GradPackLayout, FloatsPaddedToAWord) {
  EXPECT_EQ((GradPackLayout{1, 1, 1, true}.words()), 4);
  EXPECT_EQ((GradPackLayout{1, 1, 1, false}.words()), 4);
  EXPECT_EQ((GradPackLayout{1, 1, 3, false}.words()), 5);  // 3 floats: 2 words
  EXPECT_EQ((GradPackLayout{0, 0, 3, true}.words()), 1);   // no bags: the one offset
}

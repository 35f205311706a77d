// Exact decimal microseconds -> integer nanoseconds, and the first-pass framing of a trace text.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "importers/common/decimal_time.h"
#include "importers/kineto_json/framing.h"

using namespace embedscope::sessions::importers;

TEST(DecimalTime, KeepsEveryNanosecondOfEpochMicroseconds) {
  int64_t ns = 0;
  EXPECT_EQ(parse_us_to_ns("1700000000000000.001", ns), DecimalResult::ok);
  EXPECT_EQ(ns, 1700000000000000001);  // float64 would give ...000000 or ...000256
  EXPECT_EQ(parse_us_to_ns("4458676522690.655", ns), DecimalResult::ok);
  EXPECT_EQ(ns, 4458676522690655);
  EXPECT_EQ(parse_us_to_ns("1661938466265032", ns), DecimalResult::ok);
  EXPECT_EQ(ns, 1661938466265032000);
  EXPECT_EQ(parse_us_to_ns("1.7000000000000010e15", ns), DecimalResult::ok);
  EXPECT_EQ(ns, 1700000000000001000);
  EXPECT_EQ(parse_us_to_ns("2.5", ns), DecimalResult::ok);
  EXPECT_EQ(ns, 2500);
  EXPECT_EQ(parse_us_to_ns("-1", ns), DecimalResult::ok);
  EXPECT_EQ(ns, -1000);
  EXPECT_EQ(parse_us_to_ns("1e-3", ns), DecimalResult::ok);
  EXPECT_EQ(ns, 1);
}

TEST(DecimalTime, RoundsDigitsBelowANanosecondHalfAwayFromZero) {
  int64_t ns = 0;
  EXPECT_EQ(parse_us_to_ns("1000.0015", ns), DecimalResult::rounded);
  EXPECT_EQ(ns, 1000002);
  EXPECT_EQ(parse_us_to_ns("1000.00149", ns), DecimalResult::rounded);
  EXPECT_EQ(ns, 1000001);
  EXPECT_EQ(parse_us_to_ns("-0.0015", ns), DecimalResult::rounded);
  EXPECT_EQ(ns, -2);
}

TEST(DecimalTime, RefusesWhatIsNotANumber) {
  int64_t ns = 0;
  EXPECT_EQ(parse_us_to_ns("", ns), DecimalResult::bad);
  EXPECT_EQ(parse_us_to_ns("soon", ns), DecimalResult::bad);
  EXPECT_EQ(parse_us_to_ns("1.2.3", ns), DecimalResult::bad);
  EXPECT_EQ(parse_us_to_ns("1e", ns), DecimalResult::bad);
  EXPECT_EQ(parse_us_to_ns("99999999999999999999", ns), DecimalResult::overflow);
}

TEST(DecimalTime, IntegersUpTo64BitsUnsigned) {
  int64_t i = 0;
  uint64_t u = 0;
  bool neg = false;
  ASSERT_TRUE(parse_integer("18446744073709551615", i, u, neg));
  EXPECT_EQ(u, UINT64_MAX);
  ASSERT_TRUE(parse_integer("9007199254740993", i, u, neg));
  EXPECT_EQ(u, 9007199254740993u);
  ASSERT_TRUE(parse_integer("-5", i, u, neg));
  EXPECT_TRUE(neg);
  EXPECT_EQ(i, -5);
  EXPECT_FALSE(parse_integer("18446744073709551616", i, u, neg));
  EXPECT_FALSE(parse_integer("7x", i, u, neg));
}

namespace {
kineto::Framing frame(const std::string& s) { return kineto::frame_document(s.data(), s.size()); }
}  // namespace

TEST(Framing, FindsEveryEventAndTheOtherKeys) {
  const auto f = frame(R"({"a": {"x": "}]"}, "traceEvents": [{"n": "{"}, {"n": "\"}"}], "b": 7})");
  ASSERT_EQ(f.events.size(), 2u);
  EXPECT_FALSE(f.truncated);
  ASSERT_EQ(f.keys.size(), 2u);
  EXPECT_EQ(f.keys[0].first, "a");
  EXPECT_EQ(f.keys[1].first, "b");
}

TEST(Framing, ATextCutShortKeepsTheCompleteEvents) {
  const auto f = frame(R"({"traceEvents": [{"ph": "X"}, {"ph": "X"}, {"ph": "X", "name": "cu)");
  EXPECT_EQ(f.events.size(), 2u);
  EXPECT_TRUE(f.truncated);
  EXPECT_EQ(f.truncated_at, 43u);  // the start of the third event
  const auto g = frame(R"({"traceEvents": [{"ph": "X"}, {"ph": "X"})");  // no ] nor }
  EXPECT_EQ(g.events.size(), 2u);
  EXPECT_TRUE(g.truncated);
}

TEST(Framing, BareArraysAndTrailingText) {
  const auto f = frame(R"([{"ph": "X"}, 3, {"ph": "i"}] {})");
  EXPECT_TRUE(f.bare_array);
  EXPECT_EQ(f.events.size(), 2u);
  EXPECT_EQ(f.non_object_events, 1u);
  EXPECT_TRUE(f.trailing_data);
  const auto g = frame(R"({"traceEvents": [{"ph": "X"} x]})");
  EXPECT_EQ(g.events.size(), 1u);
  EXPECT_FALSE(g.structure_error.empty());
}

// The framing reads 64 bytes at a time: here strings, escapes and brackets land on every offset
// of a block, and each event must end exactly where its text does.
TEST(Framing, EventsEndAtTheirOwnBraceAtAnyOffsetInABlock) {
  const std::string head = R"({"traceEvents": [)";
  for (size_t pad = 0; pad < 140; ++pad) {
    const std::string e1 = R"({"name": ")" + std::string(pad, 'x') + R"(}]{[", "args": {"a": [1, {"b": "]"}]}})";
    const std::string e2 = R"({"name": "q\"}\\", "pad": ")" + std::string(pad, ' ') + R"(", "c": "\\\""})";
    const std::string text = head + e1 + ",\n  " + e2 + "\n]}";
    const auto f = frame(text);
    ASSERT_EQ(f.events.size(), 2u) << pad;
    EXPECT_EQ(f.events[0].begin, head.size()) << pad;
    EXPECT_EQ(f.events[0].end, head.size() + e1.size()) << pad;
    EXPECT_EQ(f.events[1].begin, head.size() + e1.size() + 4) << pad;
    EXPECT_EQ(f.events[1].end, head.size() + e1.size() + 4 + e2.size()) << pad;
    EXPECT_FALSE(f.truncated) << pad;
    EXPECT_TRUE(f.structure_error.empty()) << pad;
  }
}

TEST(Framing, ARawLineBreakInAStringCostsOnlyItsEventAtAnyOffsetInABlock) {
  const std::string head = R"({"traceEvents": [)";
  for (size_t pad = 0; pad < 140; ++pad) {
    const std::string e1 = R"({"name": ")" + std::string(pad, 'x') + "\n  broken\"}";
    const std::string e2 = R"({"ph": "X"})";
    const std::string text = head + e1 + ",\n" + e2 + "]}";
    const auto f = frame(text);
    ASSERT_EQ(f.events.size(), 2u) << pad;
    EXPECT_EQ(f.events[0].end, head.size() + e1.size()) << pad;  // up to the line of the next event
    EXPECT_EQ(f.events[1].begin, head.size() + e1.size() + 2) << pad;
    EXPECT_EQ(f.events[1].end, head.size() + e1.size() + 2 + e2.size()) << pad;
    EXPECT_FALSE(f.truncated) << pad;
  }
}

// tester37 D1: bytes damaged in the middle of a trace ("\0\1garbage{{{" leaves brackets that never
// close) cost the damaged event, not the rest of the file: framing goes on at the next line that
// starts an event, and the text is not said to be cut short. A text cut inside its last event is.
TEST(Framing, GarbageInTheMiddleCostsOnlyItsEventNotTheRestOfTheFile) {
  const std::string head = "{\"traceEvents\": [\n";
  const std::string e1 = "  {\"ph\": \"X\", \"name\": \"a\"},\n";
  const std::string bad = std::string("  {\"ph\": \"X\", \"na") + '\0' + "\x01garbage{{{me\": \"b\"},\n";
  const std::string e3 = "  {\"ph\": \"X\", \"name\": \"c\"},\n  {\"ph\": \"X\", \"name\": \"d\"}\n]}";
  const auto f = frame(head + e1 + bad + e3);
  ASSERT_EQ(f.events.size(), 4u);  // a, the damaged one (its parse reports it), c, d
  EXPECT_FALSE(f.truncated);
  EXPECT_TRUE(f.structure_error.empty());
  EXPECT_EQ(f.events[1].begin, head.size() + e1.size() + 2);
  EXPECT_EQ(f.events[2].begin, head.size() + e1.size() + bad.size() + 2);  // "c" framed whole
  // the damaged event last, nothing after it: cut short
  const auto g = frame(head + e1 + std::string("  {\"ph\": \"X\", \"na\x01garbage{{{"));
  EXPECT_EQ(g.events.size(), 1u);
  EXPECT_TRUE(g.truncated);
}

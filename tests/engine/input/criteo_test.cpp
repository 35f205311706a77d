// The Criteo text input (engine/input/criteo): the line parser on hand-written lines, the
// stream on generated plain / gzip / truncated files, and the batch source's rank slices,
// malformed-line and short-file policies against the generator's records.
#include <gtest/gtest.h>

#include <fstream>

#include <fmt/format.h>

#include "criteo_support.h"
#include "embedscope/engine/input/criteo.h"

using namespace embedscope::engine;
using namespace embedscope::engine::criteo_test;
namespace ts = embedscope::test_support;

namespace {
// label 1; I1 = 5, I2 = -3, I3 empty, I4..I13 = 0; C1 = 68fd1e64, C2 empty, C3..C26 = "a".
std::string hand_line() {
  std::string s = "1\t5\t-3\t";
  for (int k = 4; k <= 13; ++k) s += "\t0";
  s += "\t68fd1e64\t";
  for (int k = 3; k <= 26; ++k) s += "\ta";
  return s;
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InputFileError& e) {
    return e.what();
  }
  return "(no InputFileError)";
}
}  // namespace

TEST(CriteoParse, HandWrittenLine) {
  CriteoSample s;
  ASSERT_FALSE(parse_criteo_line(hand_line(), CategoricalMapping::modulo, s));
  EXPECT_EQ(s.label, 1.0f);
  EXPECT_EQ(s.dense[0], 5);
  EXPECT_EQ(s.dense[1], -3);
  EXPECT_EQ(s.dense[2], 0);  // empty
  EXPECT_TRUE(s.present[0]);
  EXPECT_EQ(s.categorical[0], 1761418852u);  // 0x68fd1e64
  EXPECT_FALSE(s.present[1]);
  EXPECT_EQ(s.categorical[2], 10u);
  // DLRM's transforms: log(1 + 5) = 1.7917595, negative -> 0; 0x68fd1e64 mod 1460 = 392
  EXPECT_NEAR(criteo_dense_value(5), 1.7917595f, 1e-6);
  EXPECT_EQ(criteo_dense_value(-3), 0.0f);
  EXPECT_EQ(criteo_row(s.categorical[0], CategoricalMapping::modulo, 1460), 392);
  EXPECT_EQ(criteo_row(s.categorical[0], CategoricalMapping::raw, 1460), 1761418852);
  // CRLF line ends are accepted
  ASSERT_FALSE(parse_criteo_line(hand_line() + "\r", CategoricalMapping::modulo, s));
  // raw: a signed hexadecimal value
  std::string neg = hand_line();
  neg.replace(neg.find("68fd1e64"), 8, "-1f");
  ASSERT_FALSE(parse_criteo_line(neg, CategoricalMapping::raw, s));
  EXPECT_EQ(criteo_row(s.categorical[0], CategoricalMapping::raw, 1460), -31);
  EXPECT_TRUE(parse_criteo_line(neg, CategoricalMapping::modulo, s));  // modulo takes unsigned values only
}

TEST(CriteoParse, MalformedLinesNameTheField) {
  CriteoSample s;
  const std::string good = hand_line();
  auto err = parse_criteo_line(good.substr(0, good.rfind('\t')), CategoricalMapping::modulo, s);  // 39 fields
  ASSERT_TRUE(err);
  EXPECT_EQ(err->field, 39);
  EXPECT_EQ(err->reason, "39 field(s), expected 40 (tab-separated)");
  err = parse_criteo_line(good + "\tff", CategoricalMapping::modulo, s);  // 41 fields
  ASSERT_TRUE(err);
  EXPECT_EQ(err->reason, "41 fields, expected 40 (tab-separated)");
  err = parse_criteo_line("2" + good.substr(1), CategoricalMapping::modulo, s);
  ASSERT_TRUE(err);
  EXPECT_EQ(err->field, 0);
  EXPECT_EQ(criteo_field_name(err->field), "label");
  std::string dense = good;
  dense.replace(2, 1, "1.5");  // I1
  err = parse_criteo_line(dense, CategoricalMapping::modulo, s);
  ASSERT_TRUE(err);
  EXPECT_EQ(criteo_field_name(err->field), "I1");
  EXPECT_EQ(err->reason, "'1.5' is not a 64-bit decimal integer");
  std::string cat = good;
  cat.replace(cat.find("68fd1e64"), 8, "68fz");
  err = parse_criteo_line(cat, CategoricalMapping::modulo, s);
  ASSERT_TRUE(err);
  EXPECT_EQ(err->field, 14);
  EXPECT_EQ(criteo_field_name(err->field), "C1");
  cat = good;
  cat.replace(cat.find("68fd1e64"), 8, "1ffffffffffffffff");  // 17 hex digits: over 64 bits
  EXPECT_TRUE(parse_criteo_line(cat, CategoricalMapping::modulo, s));
  EXPECT_TRUE(parse_criteo_line("", CategoricalMapping::modulo, s));
}

TEST(CriteoStream, PlainGzipCrlfAndNoFinalNewlineReadTheSameLines) {
  Scratch dir("criteo_stream");
  ts::CriteoFixtureOptions o;
  o.lines = 30;
  const auto records = ts::write_criteo_fixture(dir / "a.tsv", o);
  o.gzip = true;
  ts::write_criteo_fixture(dir / "a.tsv.gz", o);
  o.gzip = false;
  o.crlf = true;
  o.last_newline = false;
  ts::write_criteo_fixture(dir / "a_crlf.tsv", o);
  for (const std::string f : {"a.tsv", "a.tsv.gz", "a_crlf.tsv"}) {
    CriteoStream stream({dir / f});
    std::string_view line;
    size_t n = 0;
    while (stream.next(line)) {
      ASSERT_LT(n, records.size()) << f;
      CriteoSample s;
      ASSERT_FALSE(parse_criteo_line(line, CategoricalMapping::modulo, s)) << f << " line " << n + 1;
      const auto& r = records[n];
      EXPECT_EQ(s.label, static_cast<float>(r.label));
      for (size_t k = 0; k < 13; ++k) EXPECT_EQ(s.dense[k], r.dense[k].value_or(0)) << f << " line " << n + 1;
      for (size_t k = 0; k < 26; ++k) {
        EXPECT_EQ(s.present[k], r.cat[k].has_value());
        if (r.cat[k]) {
          EXPECT_EQ(s.categorical[k], *r.cat[k]);
        }
      }
      ++n;
      EXPECT_EQ(stream.line_number(), static_cast<int64_t>(n));
    }
    EXPECT_EQ(n, records.size()) << f;
  }
  // two files are one stream; rewind starts again
  CriteoStream both({dir / "a.tsv", dir / "a.tsv.gz"});
  std::string_view line;
  int64_t n = 0;
  while (both.next(line)) ++n;
  EXPECT_EQ(n, 60);
  EXPECT_EQ(both.file(), dir / "a.tsv.gz");
  EXPECT_EQ(both.line_number(), 30);
  both.rewind();
  ASSERT_TRUE(both.next(line));
  EXPECT_EQ(both.file(), dir / "a.tsv");
  EXPECT_EQ(both.line_number(), 1);
}

TEST(CriteoStream, TruncatedGzipAndMissingFilesAreClearErrors) {
  Scratch dir("criteo_trunc");
  ts::CriteoFixtureOptions o;
  o.lines = 200;
  o.gzip = true;
  ts::write_criteo_fixture(dir / "t.tsv.gz", o);
  ts::truncate_file(dir / "t.tsv.gz", 0.5);
  const std::string err = error_of([&] {
    CriteoStream s({dir / "t.tsv.gz"});
    std::string_view line;
    while (s.next(line)) {
    }
  });
  EXPECT_NE(err.find(dir / "t.tsv.gz"), std::string::npos) << err;
  EXPECT_NE(err.find("unexpected end of file (a truncated gzip file?)"), std::string::npos) << err;
  const std::string missing = error_of([&] { CriteoStream s({dir / "nope.tsv"}); });
  EXPECT_EQ(missing, (dir / "nope.tsv") + ": cannot open: No such file or directory");
}

TEST(CriteoSource, RankSlicesOfEachGlobalBatchMatchTheGenerator) {
  Scratch dir("criteo_slices");
  ts::CriteoFixtureOptions o;
  o.lines = 18;  // 3 global batches of 2 ranks x 3 samples
  o.empty_share = 0.3;
  o.gzip = true;
  const auto records = ts::write_criteo_fixture(dir / "s.tsv.gz", o);
  const WorkloadSpec spec = criteo_spec({dir / "s.tsv.gz"}, 2, 3, 50);
  CriteoBatchSource src(spec);
  for (int64_t it = 0; it < 3; ++it)
    for (int r : {1, 0}) {  // any order of ranks
      const Batch got = src.make(it, r);
      const Batch want = expected_batch(spec, records, it, r);
      EXPECT_EQ(got.kjt.lengths, want.kjt.lengths) << it << " " << r;
      EXPECT_EQ(got.kjt.values, want.kjt.values) << it << " " << r;
      EXPECT_EQ(got.labels, want.labels);
      ASSERT_EQ(got.dense.size(), want.dense.size());
      for (size_t i = 0; i < want.dense.size(); ++i) EXPECT_NEAR(got.dense[i], want.dense[i], 1e-6);
      EXPECT_EQ(got.skipped_lines, 0);
      EXPECT_EQ(got.origin, fmt::format("{}: batch {} (lines {}-{})", dir / "s.tsv.gz", it, it * 6 + r * 3 + 1, it * 6 + r * 3 + 3));
    }
  // some bags are empty (the empty fields)
  const Batch b0 = expected_batch(spec, records, 0, 0);
  EXPECT_LT(b0.kjt.values.size(), static_cast<size_t>(26 * 3));
}

TEST(CriteoSource, MalformedLinesErrorOrAreSkippedAndCounted) {
  Scratch dir("criteo_bad");
  ts::CriteoFixtureOptions o;
  o.lines = 12;
  o.malformed_at = {4};  // line 5 of the file: rank 1's second sample of batch 0 (B 3, 2 ranks)
  const auto records = ts::write_criteo_fixture(dir / "m.tsv", o);
  WorkloadSpec spec = criteo_spec({dir / "m.tsv"}, 2, 3, 50);
  spec.steps = 2;
  {
    CriteoBatchSource src(spec);
    const std::string err = error_of([&] { src.make(0, 0); });
    EXPECT_EQ(err, (dir / "m.tsv") + ": line 5: field 17 (C3): 'xyz' is not a 64-bit hexadecimal value; set \"input\": "
                                     "{\"malformed_lines\": \"skip\"} to skip such lines");
    EXPECT_EQ(error_of([&] { src.make(0, 1); }), err);  // every rank sees the same error
  }
  spec.input.malformed_lines = MalformedLinePolicy::skip;
  CriteoBatchSource src(spec);
  const Batch r0 = src.make(0, 0), r1 = src.make(0, 1);
  EXPECT_EQ(r0.skipped_lines, 0);
  EXPECT_EQ(r1.skipped_lines, 1);
  EXPECT_EQ(r1.kjt.values, expected_batch(spec, records, 0, 1).kjt.values);
  EXPECT_EQ(r1.origin, (dir / "m.tsv") + ": batch 0 (lines 4-7)");
  EXPECT_EQ(src.make(1, 0).kjt.values, expected_batch(spec, records, 1, 0).kjt.values);
}

TEST(CriteoSource, ShortFilesNameBothCountsOrWrap) {
  Scratch dir("criteo_short");
  ts::CriteoFixtureOptions o;
  o.lines = 10;  // the run needs 3 steps x 2 ranks x 3 = 18
  const auto records = ts::write_criteo_fixture(dir / "short.tsv", o);
  WorkloadSpec spec = criteo_spec({dir / "short.tsv"}, 2, 3, 50);
  {
    CriteoBatchSource src(spec);
    src.make(0, 0);
    EXPECT_EQ(error_of([&] { src.make(1, 0); }),
              fmt::format("criteo_tsv input [\"{}\"]: the run needs 18 samples ((warmup_steps 0 + steps 3) x batch_size 3 x "
                          "devices 2), the files hold 10; set \"input\": {{\"on_short\": \"wrap\"}} to read them again from "
                          "the start",
                          dir / "short.tsv"));
  }
  spec.input.on_short = ShortInputPolicy::wrap;
  CriteoBatchSource src(spec);
  src.make(0, 0);
  src.make(0, 1);
  const Batch b = src.make(1, 0);  // samples 6..8 of the file
  EXPECT_EQ(b.kjt.values, expected_batch(spec, records, 1, 0).kjt.values);
  const Batch c = src.make(1, 1);  // samples 9, 0, 1: wrapped
  EXPECT_EQ(c.labels, (std::vector<float>{static_cast<float>(records[9].label), static_cast<float>(records[0].label),
                                          static_cast<float>(records[1].label)}));
  EXPECT_EQ(c.origin, fmt::format("{0}: batch 1 (line 10 to {0} line 2)", dir / "short.tsv"));
}

#include "embedscope/sessions/importers/torch_memory_snapshot/pickle.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "fixtures.h"

using namespace embedscope::sessions::pickle;
using namespace std::string_literals;
using embedscope::test::snapshot_expected;
using embedscope::test::snapshot_fixture;

namespace {
std::string bytes_of(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
std::string pickle_error_of(const std::string& data, const PickleLimits& limits = {}) {
  try {
    loads(data, "t.pickle", limits);
  } catch (const PickleError& e) {
    return e.what();
  }
  return "<no error>";
}
std::string file_error(const std::string& name) {
  try {
    load_file(snapshot_fixture(name));
  } catch (const PickleError& e) {
    return e.what();
  }
  return "<no error>";
}
}  // namespace

// Opcodes by hand (pickletools' spelling in the comments).
TEST(Pickle, ScalarsAndContainersOfProtocol2) {
  // {"a": [1, -2, 300, 70000, True, None, 1.5], "b": ("x", b"yz")}
  std::string p = "\x80\x02}q\x00(X\x01\x00\x00\x00" "aq\x01]q\x02(K\x01J\xfe\xff\xff\xffM\x2c\x01J\x70\x11\x01\x00\x88N"s;
  p += std::string("G\x3f\xf8\x00\x00\x00\x00\x00\x00", 9);  // BINFLOAT 1.5, big-endian
  p += "eX\x01\x00\x00\x00" "bq\x03X\x01\x00\x00\x00xC\x02yz\x86q\x04u."s;
  const Value v = loads(p);
  ASSERT_TRUE(v.is_dict());
  const Value* a = v.get("a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->items().size(), 7u);
  EXPECT_EQ(a->items()[0].as_int(), 1);
  EXPECT_EQ(a->items()[1].as_int(), -2);
  EXPECT_EQ(a->items()[2].as_int(), 300);
  EXPECT_EQ(a->items()[3].as_int(), 70000);
  EXPECT_EQ(a->items()[4].kind(), Value::Kind::boolean);
  EXPECT_TRUE(a->items()[5].is_none());
  EXPECT_DOUBLE_EQ(a->items()[6].as_double(), 1.5);
  const Value* b = v.get("b");
  ASSERT_EQ(b->kind(), Value::Kind::tuple);
  EXPECT_EQ(b->items()[0].as_string(), "x");
  EXPECT_EQ(b->items()[1].kind(), Value::Kind::bytes);
  EXPECT_EQ(b->items()[1].as_string(), "yz");
}

TEST(Pickle, LongIntegersAreExactUpTo64BitsUnsigned) {
  auto long1 = [](const std::string& le) { return loads("\x80\x02\x8a" + std::string(1, static_cast<char>(le.size())) + le + "."); };
  // 2^63 + 5: nine bytes, the last a zero sign byte
  const Value hi = long1(std::string("\x05\x00\x00\x00\x00\x00\x00\x80\x00", 9));
  EXPECT_EQ(hi.kind(), Value::Kind::unsigned_integer);
  EXPECT_EQ(hi.as_uint(), (uint64_t{1} << 63) + 5);
  // 2^64 - 1
  EXPECT_EQ(long1(std::string("\xff\xff\xff\xff\xff\xff\xff\xff\x00", 9)).as_uint(), ~uint64_t{0});
  // -2^63 and -1 (one byte 0xff)
  EXPECT_EQ(long1(std::string("\x00\x00\x00\x00\x00\x00\x00\x80", 8)).as_int(), INT64_MIN);
  EXPECT_EQ(long1("\xff").as_int(), -1);
  EXPECT_EQ(long1(std::string("\x00", 1)).as_int(), 0);
  EXPECT_EQ(loads("\x80\x02\x8a\x00."s).as_int(), 0);  // zero bytes: 0
  // 2^64: 65 bits; and -2^63 - 1
  EXPECT_NE(pickle_error_of("\x80\x02\x8a\x09" + std::string("\x00\x00\x00\x00\x00\x00\x00\x00\x01", 9) + ".")
                .find("t.pickle: byte 2: integer of 65 bits in a 9-byte LONG: wider than 64 bits"),
            std::string::npos);
  EXPECT_NE(pickle_error_of("\x80\x02\x8a\x09" + std::string("\xff\xff\xff\xff\xff\xff\xff\x7f\xff", 9) + ".").find("wider than 64 bits"),
            std::string::npos);
  // LONG4 of 4 bytes
  EXPECT_EQ(loads(std::string("\x80\x02\x8b\x04\x00\x00\x00\x10\x27\x00\x00.", 12)).as_int(), 10000);
}

TEST(Pickle, MemoSharesInsteadOfCopying) {
  // [s, s] where s is one string PUT once: both items share its bytes
  const Value v = loads("\x80\x02](X\x03\x00\x00\x00" "abcq\x00h\x00" "e."s);
  ASSERT_EQ(v.items().size(), 2u);
  EXPECT_EQ(&v.items()[0].as_string(), &v.items()[1].as_string());
  // protocol 4: FRAME, MEMOIZE, SHORT_BINUNICODE, LONG_BINGET
  const Value w = loads("\x80\x04\x95\x0b\x00\x00\x00\x00\x00\x00\x00]\x94(\x8c\x01z\x94j\x01\x00\x00\x00" "e."s);
  ASSERT_EQ(w.items().size(), 2u);
  EXPECT_EQ(w.items()[1].as_string(), "z");
  // memo ids out of order (the reader keeps 0, 1, 2, ... in a vector, any other in a map): PUT 7
  // between two MEMOIZEs, and MEMOIZE numbers len(memo) as Python does: ('a','b','c','c','b','a')
  const Value m = loads("\x80\x04(\x8c\x01" "a\x94\x8c\x01" "bq\x07\x8c\x01" "c\x94h\x02h\x07h\x00t."s);
  ASSERT_EQ(m.items().size(), 6u);
  const char* want[] = {"a", "b", "c", "c", "b", "a"};
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(m.items()[i].as_string(), want[i]) << i;
  EXPECT_THROW(loads("\x80\x02X\x01\x00\x00\x00" "aq\x05h\x04\x86."s), PickleError);  // GET of an id never PUT
}

TEST(Pickle, ReadsTheFixturesOfEveryProtocolAlike) {
  const Value p2 = load_file(snapshot_fixture("training_p2.pickle"));
  for (const char* name : {"training_p4.pickle", "training_p5.pickle", "training_p4.pickle.gz"}) {
    const Value v = load_file(snapshot_fixture(name));
    ASSERT_TRUE(v.is_dict()) << name;
    const auto& expected = snapshot_expected()[name];
    EXPECT_EQ(v.get("segments")->items().size(), expected["segments"].size()) << name;
    EXPECT_EQ(v.get("device_traces")->items().size(), expected["trace_entries"].size()) << name;
    for (size_t d = 0; d < expected["trace_entries"].size(); ++d)
      EXPECT_EQ(v.get("device_traces")->items()[d].items().size(), expected["trace_entries"][d].get<size_t>()) << name;
    EXPECT_EQ(v.get("segments")->items()[0].get("address")->as_uint(),
              p2.get("segments")->items()[0].get("address")->as_uint());
  }
  EXPECT_EQ(bytes_of(snapshot_fixture("training_p5.pickle"))[1], 5);  // the protocol byte
  const Value high = load_file(snapshot_fixture("high_address_p4.pickle"));
  const auto& seg0 = high.get("segments")->items()[0];
  EXPECT_EQ(seg0.get("address")->kind(), Value::Kind::unsigned_integer);
  EXPECT_EQ(std::to_string(seg0.get("address")->as_uint()),
            snapshot_expected()["high_address_p4.pickle"]["segments"][0]["address"].get<std::string>());
}

TEST(Pickle, HostileFilesAreRefusedWithTheOpcodeAndOffset) {
  const auto& h = snapshot_expected()["hostile"];
  EXPECT_NE(file_error("global_reduce.pickle")
                .find(fmt::format("global_reduce.pickle: byte {}: opcode GLOBAL (0x63) refused: it imports or calls a "
                                  "Python object, which a memory snapshot never needs (a pickle can execute code)",
                                  h["global_reduce.pickle"]["offset"].get<int>())),
            std::string::npos)
      << file_error("global_reduce.pickle");
  EXPECT_NE(file_error("stack_global.pickle")
                .find(fmt::format("byte {}: opcode STACK_GLOBAL (0x93) refused", h["stack_global.pickle"]["offset"].get<int>())),
            std::string::npos)
      << file_error("stack_global.pickle");
  EXPECT_NE(file_error("deep_nesting.pickle").find("containers nested deeper than 200: refused as hostile"), std::string::npos)
      << file_error("deep_nesting.pickle");
  EXPECT_NE(file_error("truncated.pickle").find("truncated"), std::string::npos) << file_error("truncated.pickle");
  EXPECT_NE(file_error("lying_length.pickle")
                .find(fmt::format("byte 2: truncated: BINUNICODE needs {} bytes, but only 6 follow (the length is larger "
                                  "than the whole file: it lies)",
                                  h["lying_length.pickle"]["claimed"].get<int64_t>())),
            std::string::npos)
      << file_error("lying_length.pickle");
  EXPECT_NE(file_error("wide_int.pickle").find("integer of 101 bits"), std::string::npos) << file_error("wide_int.pickle");
  // REDUCE alone, BUILD, NEWOBJ and an out-of-band buffer
  EXPECT_NE(pickle_error_of("\x80\x02NNR."s).find("byte 4: opcode REDUCE (0x52) refused"), std::string::npos);
  EXPECT_NE(pickle_error_of("\x80\x02NNb."s).find("byte 4: opcode BUILD (0x62) refused"), std::string::npos);
  EXPECT_NE(pickle_error_of("\x80\x02NN\x81."s).find("opcode NEWOBJ (0x81) refused"), std::string::npos);
  EXPECT_NE(pickle_error_of("\x80\x05\x97."s).find("byte 2: opcode NEXT_BUFFER (0x97) refused: it reads an out-of-band buffer"),
            std::string::npos);
  EXPECT_NE(pickle_error_of("\x80\x06N."s).find("pickle protocol 6 is not supported"), std::string::npos);
  EXPECT_NE(pickle_error_of("\x80\x02" "0."s).find("opcode POP (0x30) is not supported"), std::string::npos);
  EXPECT_NE(pickle_error_of("\x80\x02h\x05."s).find("memo GET of 5, which was never PUT"), std::string::npos);
  EXPECT_NE(pickle_error_of("\x80\x02NN."s).find("STOP with 2 values"), std::string::npos);
}

TEST(Pickle, CyclesAndMemoryBlowUpsAreRefused) {
  // a = []; a.append(a)
  EXPECT_NE(pickle_error_of("\x80\x02]q\x00h\x00" "a."s).find("a container contains itself"), std::string::npos);
  // billion laughs: l0 = ["x"], lk = [l(k-1)] * 9 through the memo, 30 levels (9^29 strings if
  // GET copied); memo sharing keeps it a few KiB, and the result is a DAG of depth 31
  std::string p = "\x80\x02](]q\x00X\x01\x00\x00\x00xa"s;
  for (int k = 1; k < 30; ++k) {
    p += "]q" + std::string(1, static_cast<char>(k)) + "(";
    for (int r = 0; r < 9; ++r) p += std::string("h") + static_cast<char>(k - 1);
    p += "e";
  }
  p += "e.";
  const Value laughs = loads(p);
  ASSERT_EQ(laughs.items().size(), 30u);
  EXPECT_EQ(laughs.items()[29].items().size(), 9u);
  EXPECT_EQ(laughs.items()[29].items()[0].identity(), laughs.items()[28].identity());
  // the memory bound, stated: values may take memory_factor bytes per pickle byte + 1 MiB
  std::string many = "\x80\x02](";
  for (int k = 0; k < 200000; ++k) many += "N";
  many += "e.";
  PickleLimits tight;
  tight.memory_factor = 4;
  EXPECT_NE(pickle_error_of(many, tight).find("the values would take more than"), std::string::npos);
  EXPECT_EQ(loads(many).items().size(), 200000u);  // within the default 160x
}

TEST(Pickle, GzipAndContentDetection) {
  const std::string gz = bytes_of(snapshot_fixture("training_p4.pickle.gz"));
  EXPECT_TRUE(is_gzip(gz));
  EXPECT_FALSE(is_pickle(gz));
  const std::string raw = gunzip(gz, "x.gz", int64_t{1} << 30);
  EXPECT_EQ(raw, bytes_of(snapshot_fixture("training_p4.pickle")));
  EXPECT_TRUE(is_pickle(raw));
  EXPECT_THROW(gunzip(gz.substr(0, gz.size() / 2), "x.gz", int64_t{1} << 30), PickleError);
  try {
    gunzip(gz, "x.gz", 1000);
    FAIL();
  } catch (const PickleError& e) {
    EXPECT_NE(std::string(e.what()).find("x.gz: gzip: inflates to more than 1000 bytes: refused"), std::string::npos);
  }
  EXPECT_NE(pickle_error_of(""s).find("t.pickle: empty: not a pickle"), std::string::npos);
}

// Found by fuzz_pickle (tests/fuzz) on deep_nesting.pickle under ASan: the refused value was
// freed recursively, a chain of stack frames per level. At 1,000,000 levels (2 MB of pickle, well
// inside the memory bound) a release build crashed the same way (SIGSEGV in `embedscope import`);
// freeing is iterative now.
TEST(Pickle, AMillionNestedListsAreRefusedWithoutExhaustingTheStack) {
  const size_t n = 1'000'000;
  const std::string deep = "\x80\x02"s + std::string(n, ']') + std::string(n - 1, 'a') + ".";
  EXPECT_NE(pickle_error_of(deep).find("containers nested deeper than 200: refused as hostile"), std::string::npos);
}

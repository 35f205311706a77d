#include "store/op_blocks.h"

#include <fmt/format.h>

namespace embedscope::sessions::detail {

namespace {
void put(std::string& b, uint64_t v) {
  while (v >= 0x80) {
    b.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  b.push_back(static_cast<char>(v));
}
uint64_t zigzag(uint64_t v) { return (v << 1) ^ (0 - (v >> 63)); }  // (v << 1) ^ (v >> 63), arithmetic
uint64_t unzigzag(uint64_t v) { return (v >> 1) ^ (0 - (v & 1)); }
}  // namespace

void OpPacker::add(const OpRecord& o) {
  const auto s = static_cast<uint64_t>(o.start_ns), e = static_cast<uint64_t>(o.end_ns);
  const auto st = static_cast<uint64_t>(o.step), c = o.correlation;
  put(data_, zigzag(s - start_));
  put(data_, zigzag(e - s));
  put(data_, static_cast<uint64_t>(static_cast<uint32_t>(o.category)));
  put(data_, zigzag(static_cast<uint64_t>(static_cast<int64_t>(o.name_id))));
  put(data_, zigzag(st - step_));
  put(data_, zigzag(static_cast<uint64_t>(o.bytes)));
  put(data_, zigzag(c - corr_));
  start_ = s;
  step_ = st;
  corr_ = c;
  ++count_;
}

void OpPacker::clear() {
  data_.clear();
  count_ = 0;
  start_ = step_ = corr_ = 0;
}

std::string pack_ops(const OpRecord* ops, size_t n) {
  OpPacker p;
  for (size_t i = 0; i < n; ++i) p.add(ops[i]);
  return p.data();
}

void unpack_ops(const void* data, size_t size, int64_t count, int32_t rank, int32_t lane, std::vector<OpRecord>& out) {
  const auto* p = static_cast<const unsigned char*>(data);
  const size_t before = out.size();
  const unsigned char* const end = p + size;
  auto get = [&]() -> uint64_t {
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (p == end) throw BadBlock(fmt::format("a block of {} ops ends after {} ops", count, out.size() - before));
      const unsigned char byte = *p++;
      v |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return v;
    }
    throw BadBlock("a block holds a number longer than 10 bytes");
  };
  if (count < 0) throw BadBlock(fmt::format("a block says it holds {} ops", count));
  uint64_t start = 0, step = 0, corr = 0;
  for (int64_t i = 0; i < count; ++i) {
    OpRecord o;
    o.rank = rank;
    o.lane = lane;
    start += unzigzag(get());
    o.start_ns = static_cast<int64_t>(start);
    o.end_ns = static_cast<int64_t>(start + unzigzag(get()));
    const uint64_t cat = get();
    if (cat >= static_cast<uint64_t>(kNumCategories))
      throw BadBlock(fmt::format("an op of rank {} has category {}", rank, cat));
    o.category = static_cast<OpCategory>(cat);
    o.name_id = static_cast<int32_t>(static_cast<int64_t>(unzigzag(get())));
    step += unzigzag(get());
    o.step = static_cast<int64_t>(step);
    o.bytes = static_cast<int64_t>(unzigzag(get()));
    corr += unzigzag(get());
    o.correlation = corr;
    out.push_back(o);
  }
  if (p != end) throw BadBlock(fmt::format("a block of {} ops has {} bytes left over", count, end - p));
}

}  // namespace embedscope::sessions::detail

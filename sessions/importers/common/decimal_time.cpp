#include "importers/common/decimal_time.h"

#include <cstddef>

namespace embedscope::sessions::importers {

namespace {
__extension__ typedef unsigned __int128 u128;  // GCC / Clang: exact 128-bit intermediate values
__extension__ typedef __int128 i128;
}  // namespace

namespace {
/// The common case of parse_us_to_ns in 64-bit arithmetic: an optional '-', at most 19 digits
/// with at most 3 after an optional '.', nothing else (Kineto's "1700000000000123.456" and
/// "18.250"). Returns false, leaving `out` alone, for any other text: the general path decides.
/// Same result as the general path: the value is exact (no digit below 1 ns), and it overflows
/// exactly when the general path does.
bool parse_us_to_ns_short(std::string_view s, int64_t& out) {
  const char* p = s.data();
  const char* const end = p + s.size();
  const bool neg = p != end && *p == '-';
  p += neg;
  auto digit = [](char c) { return static_cast<unsigned>(c - '0') <= 9; };
  uint64_t mant = 0;  // wraps past 19 digits: then the general path decides
  const char* const int_start = p;
  for (; p != end && digit(*p); ++p) mant = mant * 10 + static_cast<unsigned>(*p - '0');
  const auto int_digits = p - int_start;
  std::ptrdiff_t frac = 0;
  if (p != end && *p == '.') {
    const char* const frac_start = ++p;
    for (; p != end && digit(*p); ++p) mant = mant * 10 + static_cast<unsigned>(*p - '0');
    frac = p - frac_start;
  }
  if (p != end || int_digits + frac == 0 || int_digits + frac > 19 || frac > 3) return false;  // 19 digits < 2^64
  static constexpr uint64_t kScale[4] = {1000, 100, 10, 1};
  const u128 ns = static_cast<u128>(mant) * kScale[frac];
  if (ns > static_cast<u128>(INT64_MAX) + (neg ? 1 : 0)) return false;  // the general path says overflow
  out = neg ? static_cast<int64_t>(-static_cast<i128>(ns)) : static_cast<int64_t>(ns);
  return true;
}
}  // namespace

DecimalResult parse_us_to_ns(std::string_view s, int64_t& out) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\r' || s.back() == '\t')) s.remove_suffix(1);
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  if (parse_us_to_ns_short(s, out)) return DecimalResult::ok;
  size_t i = 0;
  bool neg = false;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) neg = s[i++] == '-';
  u128 mant = 0;
  int frac = 0, digits = 0;
  bool dot = false, dropped_nonzero = false;
  int dropped = 0;  // digits beyond what 128 bits hold (value then only grows in scale)
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c >= '0' && c <= '9') {
      ++digits;
      if (mant < (static_cast<u128>(1) << 120)) {
        mant = mant * 10 + static_cast<unsigned>(c - '0');
        if (dot) ++frac;
      } else {
        if (!dot) ++dropped;
        else if (c != '0') dropped_nonzero = true;
      }
    } else if (c == '.' && !dot) {
      dot = true;
    } else {
      break;
    }
  }
  if (digits == 0) return DecimalResult::bad;
  int exp = 0;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    bool eneg = false;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) eneg = s[i++] == '-';
    int ed = 0;
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i, ++ed)
      if (exp < 10000) exp = exp * 10 + (s[i] - '0');
    if (ed == 0) return DecimalResult::bad;
    if (eneg) exp = -exp;
  }
  if (i != s.size()) return DecimalResult::bad;
  // value_ns = mant * 10^(3 + exp + dropped - frac)
  int shift = 3 + exp + dropped - frac;
  bool rounded = dropped_nonzero;
  const u128 limit = static_cast<u128>(INT64_MAX) + (neg ? 1 : 0);
  if (shift >= 0) {
    for (; shift > 0; --shift) {
      if (mant > limit) return DecimalResult::overflow;
      mant *= 10;
    }
  } else {
    u128 rem_any = 0;
    unsigned last = 0;
    for (; shift < 0 && mant > 0; ++shift) {
      if (last) rem_any = 1;
      last = static_cast<unsigned>(mant % 10);
      mant /= 10;
    }
    if (last || rem_any) rounded = true;
    if (last >= 5) mant += 1;  // half away from zero
  }
  if (mant > limit) return DecimalResult::overflow;
  out = neg ? static_cast<int64_t>(-static_cast<i128>(mant)) : static_cast<int64_t>(mant);
  return rounded ? DecimalResult::rounded : DecimalResult::ok;
}

bool parse_integer(std::string_view s, int64_t& out, uint64_t& uout, bool& negative) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\r' || s.back() == '\t')) s.remove_suffix(1);
  size_t i = 0;
  negative = false;
  if (i < s.size() && s[i] == '-') negative = (++i, true);
  if (i == s.size()) return false;
  u128 v = 0;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + static_cast<unsigned>(s[i] - '0');
    if (v > UINT64_MAX) return false;
  }
  if (negative) {
    if (v > static_cast<u128>(INT64_MAX) + 1) return false;
    out = static_cast<int64_t>(-static_cast<i128>(v));
    uout = 0;
  } else {
    uout = static_cast<uint64_t>(v);
    out = v > INT64_MAX ? INT64_MAX : static_cast<int64_t>(v);
  }
  return true;
}

}  // namespace embedscope::sessions::importers

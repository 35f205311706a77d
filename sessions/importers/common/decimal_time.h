#pragma once
// Exact decimal -> integer conversion for trace timestamps: never through float64, so an epoch
// timestamp in microseconds with a fractional part (1.7e15 us, past 2^53 once in ns) keeps
// every nanosecond.

#include <cstdint>
#include <string_view>

namespace embedscope::sessions::importers {

enum class DecimalResult { ok, rounded, bad, overflow };

/// Parses `text`, a JSON number (or the content of a string holding one) in microseconds, into
/// `out` in nanoseconds, exactly. Accepts an optional '-', digits, an optional fraction and an optional
/// exponent ("1.5", "1661938466265032", "-1", "1.6e3"). Digits below 1 ns are rounded half away
/// from zero (returns `rounded`). Returns `bad` for anything else (empty, "1.2.3", "abc") and
/// `overflow` past +-9.2e18 ns (292 years).
DecimalResult parse_us_to_ns(std::string_view text, int64_t& out);

/// Parses a non-negative or negative decimal integer exactly into 64 bits (`out`); unsigned
/// values up to 2^64 - 1 are accepted in `uout` as well. Returns false for anything else.
bool parse_integer(std::string_view text, int64_t& out, uint64_t& uout, bool& negative);

}  // namespace embedscope::sessions::importers

#pragma once
// Units of the session's values, as people read them: byte counts and durations.

#include <cstdint>
#include <string>

namespace embedscope::sessions {

/// A byte count for messages and tables, in binary units with one decimal: 100 -> "100 B",
/// 1536 -> "1.5 KiB", 12.5 * 2^20 -> "12.5 MiB", up to TiB (larger values stay in TiB).
/// Negative counts keep their sign ("-1.5 KiB"). Never throws except std::bad_alloc.
std::string format_bytes(int64_t bytes);

/// "12.5 ms", "340.0 us", "1.20 s", "999 ns": a readable duration (2 decimals for s and ms,
/// 1 for us, whole ns below 1 us; negative durations keep their sign). From 10 minutes on:
/// "12.5 min" (below 100 min), "3.25 h" (below 48 h), "11.57 d" - never "1000000.00 s".
std::string format_duration(int64_t ns);

}  // namespace embedscope::sessions

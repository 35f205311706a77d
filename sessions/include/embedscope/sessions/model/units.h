#pragma once
// Units of the session's values, as people read them: byte counts.

#include <cstdint>
#include <string>

namespace embedscope::sessions {

/// A byte count for messages and tables, in binary units with one decimal: 100 -> "100 B",
/// 1536 -> "1.5 KiB", 12.5 * 2^20 -> "12.5 MiB", up to TiB (larger values stay in TiB).
/// Negative counts keep their sign ("-1.5 KiB"). Never throws except std::bad_alloc.
std::string format_bytes(int64_t bytes);

}  // namespace embedscope::sessions

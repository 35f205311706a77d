#pragma once
// Reading an input file into memory, gunzipped when it is gzip (or zlib) data, with the
// padding simdjson needs after the text. A gzip stream cut short keeps every byte decoded
// before the cut and says so (the importer counts it as data loss); it never throws for that.

#include <cstdint>
#include <string>
#include <vector>

namespace embedscope::sessions::importers {

/// Bytes simdjson may read past the end of a text (simdjson::SIMDJSON_PADDING or more).
inline constexpr size_t kTextPadding = 64;

struct InputText {
  std::vector<char> bytes;        ///< the text, followed by kTextPadding zero bytes
  size_t size = 0;                ///< text length, bytes (without the padding)
  int64_t file_bytes = 0;         ///< size on disk
  bool compressed = false;        ///< gzip / zlib data was inflated
  std::string gzip_error;         ///< a damaged or cut short gzip stream: zlib's reason; "" when whole
  const char* data() const { return bytes.data(); }
};

/// Reads `path`; inflates it when it starts with the gzip magic (1f 8b) or a zlib header.
/// Concatenated gzip members are read one after the other. Throws std::runtime_error naming
/// the file when it cannot be opened or read.
InputText read_input(const std::string& path);

/// Whether the first bytes of `path` are gzip's magic number.
bool is_gzip_file(const std::string& path);

}  // namespace embedscope::sessions::importers

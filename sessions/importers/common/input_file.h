#pragma once
// Reading an input file into memory, gunzipped when it is gzip (or zlib) data, with the
// padding simdjson needs after the text. A gzip stream cut short keeps every byte decoded
// before the cut and says so (the importer counts it as data loss); it never throws for that.
// A plain regular file is mapped (mmap), not copied: the text is the page cache's own pages,
// which saves a copy and a page fault per 4 KiB of the text (about a sixth of an import's CPU
// time on a plain 250 MB trace). Only the size at open is mapped, so a file still being appended
// to imports what it held then; a file truncated by another process during its import ends the
// process with SIGBUS when the vanished pages are read (as with any mapped file).

#include <cstdint>
#include <string>
#include <memory>

namespace embedscope::sessions::importers {

/// Bytes simdjson may read past the end of a text (simdjson::SIMDJSON_PADDING or more).
inline constexpr size_t kTextPadding = 64;

/// A file's text in memory, followed by kTextPadding zero bytes. Move-only.
class InputText {
 public:
  InputText() = default;
  InputText(InputText&& o) noexcept;
  InputText& operator=(InputText&& o) noexcept;
  InputText(const InputText&) = delete;
  InputText& operator=(const InputText&) = delete;
  ~InputText();

  size_t size = 0;                ///< text length, bytes (without the padding)
  int64_t file_bytes = 0;         ///< size on disk, bytes
  bool compressed = false;        ///< gzip / zlib data was inflated
  std::string gzip_error;         ///< a damaged or cut short gzip stream: zlib's reason; "" when whole
  /// The text: `size` bytes, then kTextPadding zero bytes.
  const char* data() const { return mapped_ ? static_cast<const char*>(mapped_) : owned_.get(); }

 private:
  friend InputText read_input(const std::string& path);
  std::unique_ptr<char[]> owned_; ///< the text when it is not mapped
  void* mapped_ = nullptr;        ///< the mapping of a plain file (text + padding), or nullptr
  size_t mapped_len_ = 0;         ///< its length, bytes (a multiple of the page size)
};

/// Reads `path`; inflates it when it starts with the gzip magic (1f 8b) or a zlib header.
/// Concatenated gzip members are read one after the other. A plain regular file is mapped
/// read-only (falling back to reading it when it cannot be). Throws std::runtime_error naming
/// the file when it cannot be opened or read.
InputText read_input(const std::string& path);

/// Whether the first bytes of `path` are gzip's magic number.
bool is_gzip_file(const std::string& path);

}  // namespace embedscope::sessions::importers

#include "importers/common/input_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

namespace embedscope::sessions::importers {

namespace {
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

[[noreturn]] void read_failed(const std::string& path) {
  throw std::runtime_error(fmt::format("{}: read error: {}", path, std::strerror(errno)));
}

/// A buffer of `capacity` bytes, not initialised (every byte is written before it is read).
std::unique_ptr<char[]> raw_buffer(size_t capacity) { return std::unique_ptr<char[]>(new char[capacity]); }

/// Reads all of `fd` into `buf` (capacity `cap`, grown as needed); returns the bytes read.
/// `size_hint` is the size fstat gave (0 for pipes and the like).
size_t read_all(int fd, const std::string& path, std::unique_ptr<char[]>& buf, size_t& cap, size_t size_hint) {
  cap = std::max<size_t>(size_hint + kTextPadding + 1, 1 << 16);  // + 1: the read that sees the end
  buf = raw_buffer(cap);
  size_t used = 0;
  for (;;) {
    if (cap - used < kTextPadding + 1) {
      auto bigger = raw_buffer(cap * 2);
      std::memcpy(bigger.get(), buf.get(), used);
      buf = std::move(bigger);
      cap *= 2;
    }
    const ssize_t n = ::read(fd, buf.get() + used, cap - used - kTextPadding);
    if (n < 0) {
      if (errno == EINTR) continue;
      read_failed(path);
    }
    if (n == 0) return used;
    used += static_cast<size_t>(n);
  }
}

bool gzip_magic(const char* b, size_t n) {
  return n >= 2 && static_cast<unsigned char>(b[0]) == 0x1f && static_cast<unsigned char>(b[1]) == 0x8b;
}

bool zlib_header(const char* b, size_t n) {
  if (n < 2) return false;
  const auto b0 = static_cast<unsigned char>(b[0]), b1 = static_cast<unsigned char>(b[1]);
  return (b0 & 0x0f) == 8 && ((b0 << 8) | b1) % 31 == 0;  // RFC 1950 CMF/FLG check
}

/// Maps `size` bytes of a plain file followed by kTextPadding zero bytes: an anonymous
/// zero-filled reservation, the file mapped over its start (the tail of the file's last page
/// reads as zeros, and so does the reservation's page after it). nullptr when it cannot.
void* map_text(int fd, size_t size, size_t& len) {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  len = (size + kTextPadding + page - 1) / page * page;
  void* region = mmap(nullptr, len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (region == MAP_FAILED) return nullptr;
  void* text = mmap(region, size, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0);
  if (text == MAP_FAILED) {
    munmap(region, len);
    return nullptr;
  }
  madvise(region, size, MADV_SEQUENTIAL);  // read once, front to back: read ahead, drop behind
  return region;
}
}  // namespace

InputText::InputText(InputText&& o) noexcept
    : size(o.size), file_bytes(o.file_bytes), compressed(o.compressed), gzip_error(std::move(o.gzip_error)),
      owned_(std::move(o.owned_)), mapped_(std::exchange(o.mapped_, nullptr)), mapped_len_(o.mapped_len_) {}

InputText& InputText::operator=(InputText&& o) noexcept {
  if (this != &o) {
    if (mapped_) munmap(mapped_, mapped_len_);
    size = o.size;
    file_bytes = o.file_bytes;
    compressed = o.compressed;
    gzip_error = std::move(o.gzip_error);
    owned_ = std::move(o.owned_);
    mapped_ = std::exchange(o.mapped_, nullptr);
    mapped_len_ = o.mapped_len_;
  }
  return *this;
}

InputText::~InputText() {
  if (mapped_) munmap(mapped_, mapped_len_);
}

bool is_gzip_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  unsigned char m[2] = {};
  const bool gz = std::fread(m, 1, 2, f) == 2 && m[0] == 0x1f && m[1] == 0x8b;
  std::fclose(f);
  return gz;
}

InputText read_input(const std::string& path) {
  InputText t;
  Fd fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (fd.fd < 0) throw std::runtime_error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  struct stat sb {};
  if (fstat(fd.fd, &sb) != 0) read_failed(path);
  const bool regular = S_ISREG(sb.st_mode) && sb.st_size > 0;
  if (regular) {
    char head[2] = {};
    const ssize_t n = ::pread(fd.fd, head, 2, 0);
    if (n < 0) read_failed(path);
    const auto size = static_cast<size_t>(sb.st_size);
    if (!gzip_magic(head, static_cast<size_t>(n)) && !zlib_header(head, static_cast<size_t>(n))) {
      size_t len = 0;
      if (void* m = map_text(fd.fd, size, len)) {
        t.mapped_ = m;
        t.mapped_len_ = len;
        t.size = size;
        t.file_bytes = static_cast<int64_t>(size);
        return t;
      }
    }
  }
  size_t cap = 0;
  std::unique_ptr<char[]> raw;
  const size_t raw_size = read_all(fd.fd, path, raw, cap, regular ? static_cast<size_t>(sb.st_size) : 0);
  t.file_bytes = static_cast<int64_t>(raw_size);
  if (!gzip_magic(raw.get(), raw_size) && !zlib_header(raw.get(), raw_size)) {
    std::memset(raw.get() + raw_size, 0, kTextPadding);
    t.size = raw_size;
    t.owned_ = std::move(raw);
    return t;
  }
  t.compressed = true;
  // The output buffer starts at the size gzip's trailer gives (ISIZE, the last member's size
  // mod 2^32), at least 4x the input: usually one allocation, grown by doubling otherwise.
  size_t guess = raw_size * 4;
  if (gzip_magic(raw.get(), raw_size) && raw_size >= 18) {
    uint32_t isize = 0;
    std::memcpy(&isize, raw.get() + raw_size - 4, 4);  // little-endian, as gzip stores it
    guess = std::max<size_t>(guess, std::min<size_t>(isize, raw_size * 1032));  // deflate's ratio is at most 1032:1
  }
  size_t out_cap = std::max<size_t>(guess + (1 << 16), 1 << 16);
  std::unique_ptr<char[]> out = raw_buffer(out_cap);
  z_stream s{};
  if (inflateInit2(&s, 15 + 32) != Z_OK) throw std::runtime_error(fmt::format("{}: zlib cannot start", path));
  s.next_in = reinterpret_cast<Bytef*>(raw.get());
  auto consumed = [&] { return static_cast<size_t>(s.next_in - reinterpret_cast<Bytef*>(raw.get())); };
  size_t used = 0;
  for (;;) {
    if (out_cap - used < (1 << 16)) {
      auto bigger = raw_buffer(out_cap * 2);
      std::memcpy(bigger.get(), out.get(), used);
      out = std::move(bigger);
      out_cap *= 2;
    }
    if (s.avail_in == 0) s.avail_in = static_cast<uInt>(std::min<size_t>(raw_size - consumed(), 1u << 30));
    s.next_out = reinterpret_cast<Bytef*>(out.get() + used);
    s.avail_out = static_cast<uInt>(std::min<size_t>(out_cap - used - kTextPadding, 1u << 30));
    const uInt before = s.avail_out;
    const int rc = inflate(&s, Z_NO_FLUSH);
    used += before - s.avail_out;
    if (rc == Z_STREAM_END) {
      if (consumed() >= raw_size) break;
      inflateReset(&s);  // another gzip member follows
      continue;
    }
    if (rc == Z_BUF_ERROR && consumed() >= raw_size) {
      t.gzip_error = "the compressed stream ends before its end marker (file cut short)";
      break;
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      t.gzip_error = s.msg ? s.msg : fmt::format("zlib error {}", rc);
      break;
    }
  }
  inflateEnd(&s);
  t.size = used;
  std::memset(out.get() + used, 0, kTextPadding);
  t.owned_ = std::move(out);
  return t;
}

}  // namespace embedscope::sessions::importers

#include "importers/common/input_file.h"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>

#include <fmt/format.h>

namespace embedscope::sessions::importers {

namespace {
struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

std::vector<char> read_all(const std::string& path) {
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) throw std::runtime_error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  std::vector<char> out;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f.get())) > 0) out.insert(out.end(), buf, buf + n);
  if (std::ferror(f.get())) throw std::runtime_error(fmt::format("{}: read error: {}", path, std::strerror(errno)));
  return out;
}

bool zlib_header(const std::vector<char>& raw) {
  if (raw.size() < 2) return false;
  const auto b0 = static_cast<unsigned char>(raw[0]), b1 = static_cast<unsigned char>(raw[1]);
  return (b0 & 0x0f) == 8 && ((b0 << 8) | b1) % 31 == 0;  // RFC 1950 CMF/FLG check
}
}  // namespace

bool is_gzip_file(const std::string& path) {
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) return false;
  unsigned char m[2] = {};
  return std::fread(m, 1, 2, f.get()) == 2 && m[0] == 0x1f && m[1] == 0x8b;
}

InputText read_input(const std::string& path) {
  InputText t;
  std::vector<char> raw = read_all(path);
  t.file_bytes = static_cast<int64_t>(raw.size());
  const bool gz = raw.size() >= 2 && static_cast<unsigned char>(raw[0]) == 0x1f && static_cast<unsigned char>(raw[1]) == 0x8b;
  if (!gz && !zlib_header(raw)) {
    t.size = raw.size();
    raw.resize(raw.size() + kTextPadding, '\0');
    t.bytes = std::move(raw);
    return t;
  }
  t.compressed = true;
  z_stream s{};
  if (inflateInit2(&s, 15 + 32) != Z_OK) throw std::runtime_error(fmt::format("{}: zlib cannot start", path));
  s.next_in = reinterpret_cast<Bytef*>(raw.data());
  s.avail_in = static_cast<uInt>(raw.size());
  std::vector<char>& out = t.bytes;
  out.resize(std::max<size_t>(raw.size() * 4, 1 << 16));
  size_t used = 0;
  for (;;) {
    if (out.size() - used < (1 << 16)) out.resize(out.size() * 2);
    s.next_out = reinterpret_cast<Bytef*>(out.data() + used);
    s.avail_out = static_cast<uInt>(std::min<size_t>(out.size() - used, 1u << 30));
    const uInt before = s.avail_out;
    const int rc = inflate(&s, Z_NO_FLUSH);
    used += before - s.avail_out;
    if (rc == Z_STREAM_END) {
      if (s.avail_in == 0) break;
      inflateReset(&s);  // another gzip member follows
      continue;
    }
    if (rc == Z_BUF_ERROR && s.avail_in == 0) {
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
  out.resize(used + kTextPadding);
  std::memset(out.data() + used, 0, kTextPadding);
  return t;
}

}  // namespace embedscope::sessions::importers

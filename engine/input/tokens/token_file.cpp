// Token-id files (input/token_file.h): Megatron-style raw .bin and NumPy .npy, read and written.

#include "embedscope/engine/workload/read_file.h"
#include "embedscope/engine/input/token_file.h"

#include <bit>
#include <cstring>
#include <fstream>
#include <iterator>
#include <regex>

#include <fmt/format.h>

#include "embedscope/engine/workload/spec_error.h"

namespace embedscope::engine {

static_assert(std::endian::native == std::endian::little, "token files are read on little-endian hosts");

const char* to_string(TokenDtype t) {
  switch (t) {
    case TokenDtype::uint16: return "uint16";
    case TokenDtype::uint32: return "uint32";
    case TokenDtype::int32: return "int32";
    case TokenDtype::int64: return "int64";
  }
  return "?";
}

int token_dtype_bytes(TokenDtype t) {
  switch (t) {
    case TokenDtype::uint16: return 2;
    case TokenDtype::uint32:
    case TokenDtype::int32: return 4;
    case TokenDtype::int64: return 8;
  }
  return 0;
}

namespace {

std::string slurp_token_file(const std::string& path) { return read_whole_file(path, "", "token file"); }

template <class T>
void append_tokens(const char* data, size_t n, std::vector<int64_t>& out) {
  out.reserve(out.size() + n);
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, data + i * sizeof(T), sizeof(T));
    out.push_back(static_cast<int64_t>(v));
  }
}

std::vector<int64_t> decode_tokens(const std::string& path, const char* data, size_t bytes, TokenDtype dtype) {
  const auto w = static_cast<size_t>(token_dtype_bytes(dtype));
  if (bytes % w != 0)
    throw SpecError(fmt::format("{}: {} bytes of data is not a multiple of the {}-byte {}", path, bytes, w, to_string(dtype)));
  if (bytes == 0) throw SpecError(fmt::format("{}: no token ids", path));
  std::vector<int64_t> out;
  const size_t n = bytes / w;
  switch (dtype) {
    case TokenDtype::uint16: append_tokens<uint16_t>(data, n, out); break;
    case TokenDtype::uint32: append_tokens<uint32_t>(data, n, out); break;
    case TokenDtype::int32: append_tokens<int32_t>(data, n, out); break;
    case TokenDtype::int64: append_tokens<int64_t>(data, n, out); break;
  }
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i] < 0)
      throw SpecError(fmt::format("{}: token id {} at offset {} (byte {}) is negative", path, out[i], i, i * w));
  return out;
}

}  // namespace

std::vector<int64_t> read_token_bin(const std::string& path, TokenDtype dtype) {
  if (dtype != TokenDtype::uint16 && dtype != TokenDtype::uint32)
    throw SpecError(fmt::format("{}: a .bin token file holds uint16 or uint32, not {}", path, to_string(dtype)));
  const std::string bytes = slurp_token_file(path);
  return decode_tokens(path, bytes.data(), bytes.size(), dtype);
}

std::vector<int64_t> read_token_npy(const std::string& path, TokenDtype* declared, std::string* descr_out) {
  const std::string b = slurp_token_file(path);
  // numpy.lib.format: "\x93NUMPY", major, minor, header length (u2 for 1.x, u4 for 2.x / 3.x),
  // then an ASCII (3.x: UTF-8) dict literal padded with spaces and ending in '\n'.
  if (b.size() < 10 || b.compare(0, 6, "\x93NUMPY") != 0)
    throw SpecError(fmt::format("{}: not a NumPy .npy file (no \\x93NUMPY magic)", path));
  const auto major = static_cast<unsigned char>(b[6]);
  size_t header_len = 0, header_at = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(b[8]) | static_cast<size_t>(static_cast<unsigned char>(b[9])) << 8;
    header_at = 10;
  } else if (major == 2 || major == 3) {
    if (b.size() < 12) throw SpecError(fmt::format("{}: truncated .npy header", path));
    for (int i = 3; i >= 0; --i) header_len = header_len << 8 | static_cast<unsigned char>(b[8 + static_cast<size_t>(i)]);
    header_at = 12;
  } else {
    throw SpecError(fmt::format("{}: .npy format version {} is not supported (1, 2 or 3)", path, major));
  }
  if (header_at + header_len > b.size()) throw SpecError(fmt::format("{}: truncated .npy header", path));
  const std::string header = b.substr(header_at, header_len);
  std::smatch m;
  if (!std::regex_search(header, m, std::regex(R"('descr'\s*:\s*'([^']*)')")))
    throw SpecError(fmt::format("{}: .npy header has no 'descr': {}", path, header));
  const std::string descr = m[1];
  TokenDtype dtype;
  if (descr == "<u2" || descr == "=u2") dtype = TokenDtype::uint16;
  else if (descr == "<u4" || descr == "=u4") dtype = TokenDtype::uint32;
  else if (descr == "<i4" || descr == "=i4") dtype = TokenDtype::int32;
  else if (descr == "<i8" || descr == "=i8") dtype = TokenDtype::int64;
  else
    throw SpecError(fmt::format("{}: .npy dtype '{}' is not a token dtype (valid: <u2, <u4, <i4, <i8)", path, descr));
  if (declared) *declared = dtype;
  if (descr_out) *descr_out = descr;
  if (!std::regex_search(header, m, std::regex(R"('fortran_order'\s*:\s*(True|False))")))
    throw SpecError(fmt::format("{}: .npy header has no 'fortran_order': {}", path, header));
  if (m[1] == "True") throw SpecError(fmt::format("{}: .npy array is in Fortran order (need a C-order 1-D array)", path));
  if (!std::regex_search(header, m, std::regex(R"('shape'\s*:\s*\(([^)]*)\))")))
    throw SpecError(fmt::format("{}: .npy header has no 'shape': {}", path, header));
  std::smatch d;
  const std::string shape = m[1];
  if (!std::regex_match(shape, d, std::regex(R"(\s*(\d+)\s*,\s*)")))
    throw SpecError(fmt::format("{}: .npy shape ({}) is not 1-D", path, shape));
  const auto n = static_cast<size_t>(std::stoull(d[1]));
  const size_t data_at = header_at + header_len;
  const size_t want = n * static_cast<size_t>(token_dtype_bytes(dtype));
  if (b.size() - data_at != want)
    throw SpecError(fmt::format("{}: .npy shape ({},) of {} needs {} data bytes, the file has {}", path, n,
                                to_string(dtype), want, b.size() - data_at));
  return decode_tokens(path, b.data() + data_at, want, dtype);
}

std::vector<int64_t> read_token_file(const std::string& path, TokenDtype dtype) {
  if (path.size() >= 4 && path.compare(path.size() - 4, 4, ".npy") == 0) return read_token_npy(path);
  return read_token_bin(path, dtype);
}

void check_token_ids(const std::vector<int64_t>& ids, int64_t vocab_size, const std::string& path, TokenDtype dtype) {
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= vocab_size)
      throw SpecError(fmt::format("{}: token id {} at offset {} (byte {}) is outside [0, vocab_size {})", path, ids[i],
                                  i, i * static_cast<size_t>(token_dtype_bytes(dtype)), vocab_size));
}

void write_token_bin(const std::string& path, const std::vector<int64_t>& ids, TokenDtype dtype) {
  if (dtype != TokenDtype::uint16 && dtype != TokenDtype::uint32)
    throw SpecError(fmt::format("{}: a .bin token file holds uint16 or uint32, not {}", path, to_string(dtype)));
  const int64_t limit = dtype == TokenDtype::uint16 ? int64_t{1} << 16 : int64_t{1} << 32;
  std::string bytes;
  bytes.reserve(ids.size() * static_cast<size_t>(token_dtype_bytes(dtype)));
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= limit)
      throw SpecError(fmt::format("{}: token id {} at offset {} does not fit {}", path, ids[i], i, to_string(dtype)));
    if (dtype == TokenDtype::uint16) {
      const auto v = static_cast<uint16_t>(ids[i]);
      bytes.append(reinterpret_cast<const char*>(&v), 2);
    } else {
      const auto v = static_cast<uint32_t>(ids[i]);
      bytes.append(reinterpret_cast<const char*>(&v), 4);
    }
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw SpecError(fmt::format("{}: cannot write the token file ({})", path, std::strerror(errno)));
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw SpecError(fmt::format("{}: write error", path));
}

}  // namespace embedscope::engine

#pragma once
// Hand-made input files for the engine's readers (FORMAT.md's KJT layout, numpy.lib.format's
// .npy), written byte by byte so that a test can cut, pad or mislabel them. Header-only.

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace embedscope::test_support {

/// A NumPy .npy file's bytes, format 1.0 (numpy.lib.format): the magic "\x93NUMPY", version
/// 1.0, the header length (2 bytes, little-endian), the header dict
/// `{'descr': DESCR, 'fortran_order': False, 'shape': SHAPE, }` padded with spaces to a 64-byte
/// multiple and ended by '\n', then `data` as given. `descr` e.g. "<u4"; `shape` e.g. "(3,)".
inline std::string npy_bytes(const std::string& descr, const std::string& shape, const std::string& data) {
  std::string h = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + h.size() + 1) % 64 != 0) h += ' ';
  h += '\n';
  std::string out = std::string("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(h.size() & 0xff);
  out += static_cast<char>(h.size() >> 8);
  return out + h + data;
}

/// Writes ids 0..n-1 to `path` as a 1-D .npy of little-endian unsigned `width`-byte ids
/// (width 2: '<u2', 4: '<u4').
inline void write_id_npy(const std::filesystem::path& path, int n, int width) {
  std::string data;
  for (int i = 0; i < n; ++i)
    for (int k = 0; k < width; ++k) data += static_cast<char>((i >> (8 * k)) & 0xff);
  std::ofstream(path, std::ios::binary) << npy_bytes(width == 2 ? "<u2" : "<u4", "(" + std::to_string(n) + ",)", data);
}

/// The bytes of a small KJT file (FORMAT.md): keys "a", "b", S 2, labels; `batches` batches of V 4
/// (lengths {1, 0, 2, 1}, ids 3+n .. 6+n in batch n, labels 0 and 1); `claimed` in the header's N.
/// Header 8 + 16 + 16 + 2 x (4 + 1) = 50 bytes; a batch 8 (V) + 32 (lengths) + 32 (ids) + 8 (labels) = 80.
inline std::string small_kjt_bytes(int batches, uint64_t claimed) {
  std::string b;
  auto put = [&](const auto& v) { b.append(reinterpret_cast<const char*>(&v), sizeof v); };
  b.append("ESKJT\0\0\0", 8);
  put(uint32_t{1});
  put(uint32_t{2});  // labels
  put(uint32_t{2});  // F
  put(uint32_t{0});  // D
  put(claimed);
  put(uint64_t{2});  // S
  for (const char* k : {"a", "b"}) {
    put(uint32_t{1});
    b.append(k, 1);
  }
  for (int n = 0; n < batches; ++n) {
    put(uint64_t{4});
    for (int64_t l : {1, 0, 2, 1}) put(l);
    for (int64_t id : {3, 4, 5, 6}) put(id + n);
    put(0.0f);
    put(1.0f);
  }
  return b;
}

}  // namespace embedscope::test_support

#pragma once
// Generated Criteo-format fixtures (engine/input/criteo/FORMAT.md) for the input tests: small
// files (KBs) written at test time from a fixed seed, with the values they hold returned so a
// test can check the reader against the generator, never against the reader itself.
// Header-only; zlib for the gzip variants.

#include <zlib.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace embedscope::test_support {

/// One sample as generated: label, 13 integers (nullopt = empty field), 26 categorical values
/// (nullopt = empty field), written as lowercase hexadecimal.
struct CriteoRecord {
  int label = 0;
  std::array<std::optional<int64_t>, 13> dense;
  std::array<std::optional<uint64_t>, 26> cat;
};

struct CriteoFixtureOptions {
  int64_t lines = 40;            ///< valid samples written
  uint64_t seed = 1;
  double empty_share = 0.1;      ///< probability that a dense or categorical field is empty
  /// Categorical values: the rank k of a Zipf(alpha) draw over `distinct` values (alpha 0:
  /// uniform), written as value k * 2654435761 + 17 (Knuth's multiplicative hash spreads them),
  /// so hot values are not small numbers.
  double alpha = 0.0;
  int64_t distinct = 1000;
  /// Lines (0-based among all lines written) replaced by a malformed line: a non-hex
  /// categorical in field C3 (column 17).
  std::vector<int64_t> malformed_at;
  bool crlf = false;             ///< "\r\n" line ends
  bool gzip = false;             ///< write gzip (zlib gzopen "wb")
  bool last_newline = true;      ///< false: the last line has no '\n'
};

/// The categorical value of Zipf rank k (see CriteoFixtureOptions::alpha).
inline uint64_t criteo_fixture_value(int64_t k) { return static_cast<uint64_t>(k) * 2654435761ULL + 17; }

inline std::string criteo_fixture_line(const CriteoRecord& r) {
  std::string s = std::to_string(r.label);
  for (const auto& d : r.dense) {
    s += '\t';
    if (d) s += std::to_string(*d);
  }
  char hex[32];
  for (const auto& c : r.cat) {
    s += '\t';
    if (c) {
      std::snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(*c));
      s += hex;
    }
  }
  return s;
}

/// Writes the fixture to `path` and returns the valid samples in file order.
inline std::vector<CriteoRecord> write_criteo_fixture(const std::filesystem::path& path, const CriteoFixtureOptions& o) {
  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<double> u01(0, 1);
  std::uniform_int_distribution<int64_t> dense_value(-2, 3000);
  std::vector<double> weights;
  for (int64_t k = 1; k <= o.distinct; ++k) weights.push_back(std::pow(static_cast<double>(k), -o.alpha));
  std::discrete_distribution<int64_t> zipf(weights.begin(), weights.end());
  std::vector<CriteoRecord> records;
  std::string text;
  const int64_t total = o.lines + static_cast<int64_t>(o.malformed_at.size());
  for (int64_t i = 0; i < total; ++i) {
    CriteoRecord r;
    r.label = u01(rng) < 0.26 ? 1 : 0;
    for (auto& d : r.dense)
      if (u01(rng) >= o.empty_share) d = dense_value(rng);
    for (auto& c : r.cat)
      if (u01(rng) >= o.empty_share) c = criteo_fixture_value(zipf(rng));
    std::string line = criteo_fixture_line(r);
    bool bad = false;
    for (int64_t m : o.malformed_at) bad = bad || m == i;
    if (bad) {
      // replace field C3 (the 17th tab-separated field, 0-based 16) with a non-hex value
      size_t pos = 0;
      for (int k = 0; k < 16; ++k) pos = line.find('\t', pos) + 1;
      const size_t end = line.find('\t', pos);
      line = line.substr(0, pos) + "xyz" + line.substr(end);
    } else {
      records.push_back(r);
    }
    text += line;
    if (i + 1 < total || o.last_newline) text += o.crlf ? "\r\n" : "\n";
  }
  if (o.gzip) {
    gzFile f = gzopen(path.string().c_str(), "wb");
    if (!f || gzwrite(f, text.data(), static_cast<unsigned>(text.size())) != static_cast<int>(text.size()) || gzclose(f) != Z_OK)
      throw std::runtime_error("cannot write " + path.string());
  } else {
    std::ofstream(path, std::ios::binary) << text;
  }
  return records;
}

/// Cuts a file to `keep` of its bytes (a truncated download).
inline void truncate_file(const std::filesystem::path& path, double keep) {
  const auto size = std::filesystem::file_size(path);
  std::filesystem::resize_file(path, static_cast<uintmax_t>(static_cast<double>(size) * keep));
}

}  // namespace embedscope::test_support

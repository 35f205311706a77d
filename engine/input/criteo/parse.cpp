// Criteo line parsing and DLRM's value transforms (criteo.h, FORMAT.md).
#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "embedscope/engine/input/criteo.h"

namespace embedscope::engine {

std::string criteo_field_name(int field) {
  if (field == 0) return "label";
  if (field <= kCriteoDenseFeatures) return fmt::format("I{}", field);
  return fmt::format("C{}", field - kCriteoDenseFeatures);
}

float criteo_dense_value(int64_t x) { return x <= 0 ? 0.0f : static_cast<float>(std::log1p(static_cast<double>(x))); }

int64_t criteo_row(uint64_t v, CategoricalMapping mapping, int64_t num_embeddings) {
  if (mapping == CategoricalMapping::raw) return static_cast<int64_t>(v);
  return static_cast<int64_t>(v % static_cast<uint64_t>(num_embeddings));
}

namespace {
template <class T>
bool parse_whole(std::string_view s, T& out, int base) {
  if (s.empty() || s.front() == '+') return false;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out, base);
  return ec == std::errc() && p == s.data() + s.size();
}
}  // namespace

std::optional<CriteoParseError> parse_criteo_line(std::string_view line, CategoricalMapping mapping, CriteoSample& out) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  int field = 0;
  size_t pos = 0;
  for (;;) {
    const size_t tab = line.find('\t', pos);
    const std::string_view v = line.substr(pos, tab == std::string_view::npos ? std::string_view::npos : tab - pos);
    if (field >= kCriteoFields) {
      int n = field + 1;
      for (size_t p = tab; p != std::string_view::npos; p = line.find('\t', p + 1)) ++n;
      return CriteoParseError{field, fmt::format("{} fields, expected {} (tab-separated)", n, kCriteoFields)};
    }
    if (field == 0) {
      if (v == "0") out.label = 0.0f;
      else if (v == "1") out.label = 1.0f;
      else return CriteoParseError{0, fmt::format("label '{}' is not 0 or 1", v.substr(0, 32))};
    } else if (field <= kCriteoDenseFeatures) {
      int64_t x = 0;
      if (!v.empty() && !parse_whole(v, x, 10))
        return CriteoParseError{field, fmt::format("'{}' is not a 64-bit decimal integer", v.substr(0, 32))};
      out.dense[static_cast<size_t>(field - 1)] = x;
    } else {
      const size_t k = static_cast<size_t>(field - 1 - kCriteoDenseFeatures);
      out.present[k] = !v.empty();
      out.categorical[k] = 0;
      if (!v.empty()) {
        bool ok = false;
        if (mapping == CategoricalMapping::raw) {
          int64_t x = 0;
          ok = parse_whole(v, x, 16);
          out.categorical[k] = static_cast<uint64_t>(x);
        } else {
          uint64_t x = 0;
          ok = v.front() != '-' && parse_whole(v, x, 16);
          out.categorical[k] = x;
        }
        if (!ok)
          return CriteoParseError{field, fmt::format("'{}' is not a {} hexadecimal value", v.substr(0, 32),
                                                     mapping == CategoricalMapping::raw ? "signed 64-bit" : "64-bit")};
      }
    }
    ++field;
    if (tab == std::string_view::npos) break;
    pos = tab + 1;
  }
  if (field != kCriteoFields)
    return CriteoParseError{field, fmt::format("{} field(s), expected {} (tab-separated)", field, kCriteoFields)};
  return std::nullopt;
}

}  // namespace embedscope::engine

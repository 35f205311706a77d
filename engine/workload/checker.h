#pragma once
// Internal to engine/workload: JSON pointers and the range checks shared by the reader
// (reader.cpp, while it builds the typed spec) and the validator (validate.cpp, on the typed
// spec), so that both report "<origin>: <pointer>: <reason>" with the same pointers and words.

#include <climits>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine::workload_detail {

/// Devices per workload (devices.count), 1..kMaxDevices.
constexpr int kMaxDevices = 64;
/// Ranks of a simulated cluster (devices.backend simulated), 1..kMaxSimulatedDevices.
constexpr int kMaxSimulatedDevices = kMaxSimulatedRanks;


/// Appends one reference token (RFC 6901: "~" -> "~0", "/" -> "~1").
inline std::string ptr_key(const std::string& base, std::string_view key) {
  std::string out = base;
  out += '/';
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}
inline std::string ptr_idx(const std::string& base, size_t i) { return fmt::format("{}/{}", base, i); }
/// The root pointer is "" in RFC 6901; messages show it as "/" so they stay readable.
inline const char* shown(const std::string& ptr) { return ptr.empty() ? "/" : ptr.c_str(); }


/// Range checks; each returns its value or throws SpecError "<origin>: <pointer>: <reason>".

class Checker {
 public:
  explicit Checker(std::string origin) : origin_(std::move(origin)) {}

  [[noreturn]] void fail(const std::string& ptr, const std::string& reason) const {
    throw SpecError(fmt::format("{}: {}: {}", origin_, shown(ptr), reason));
  }
  std::string where(const std::string& ptr) const {
    return fmt::format("{}: {}", origin_, shown(ptr));
  }

  template <class T>
  T gt0(const std::string& ptr, T v) const {
    if (!(v > 0)) fail(ptr, fmt::format("must be > 0, got {}", v));
    return v;
  }
  template <class T>
  T ge0(const std::string& ptr, T v) const {
    if (!(v >= 0)) fail(ptr, fmt::format("must be >= 0, got {}", v));
    return v;
  }
  template <class T>
  T ge(const std::string& ptr, T v, T lo) const {
    if (!(v >= lo)) fail(ptr, fmt::format("must be >= {}, got {}", lo, v));
    return v;
  }
  /// 0 < v <= hi ("must be > 0" below, "must be <= hi" above)
  template <class T>
  T gt0_max(const std::string& ptr, T v, T hi) const {
    gt0(ptr, v);
    if (!(v <= hi)) fail(ptr, fmt::format("must be <= {}, got {}", hi, v));
    return v;
  }
  /// 0 <= v <= hi
  template <class T>
  T ge0_max(const std::string& ptr, T v, T hi) const {
    ge0(ptr, v);
    if (!(v <= hi)) fail(ptr, fmt::format("must be <= {}, got {}", hi, v));
    return v;
  }
  /// lo <= v <= hi
  template <class T>
  T closed(const std::string& ptr, T v, T lo, T hi) const {
    if (!(v >= lo && v <= hi)) fail(ptr, fmt::format("must be in [{}, {}], got {}", lo, hi, v));
    return v;
  }
  /// lo <= v < hi
  template <class T>
  T half_open(const std::string& ptr, T v, T lo, T hi, std::string_view note = {}) const {
    if (!(v >= lo && v < hi)) {
      fail(ptr, fmt::format("must be in [{}, {}), got {}{}", lo, hi, v, note));
    }
    return v;
  }
  /// For fields stored as int: the lower bound was checked by the caller.
  int narrow(const std::string& ptr, int64_t v) const {
    if (v > INT_MAX) fail(ptr, fmt::format("must be <= {}, got {}", INT_MAX, v));
    if (v < INT_MIN) fail(ptr, fmt::format("must be >= {}, got {}", INT_MIN, v));
    return static_cast<int>(v);
  }

 private:
  std::string origin_;
};


/// Every range and cross-reference check of a typed spec (validate.cpp); throws through `c`.
void validate_spec(const WorkloadSpec& s, const Checker& c);

/// The workload's "rebalance" (rebalance_reader.cpp): read_rebalance checks the JSON's shape and
/// types (a string "off" or an object with exactly one of "every" / "when"), validate_rebalance
/// the ranges of RebalanceSpec (rebalance_spec.h) against the spec, rebalance_to_json writes it
/// back ("off" or the object; parse_workload reads it again to the same value).
RebalanceSpec read_rebalance(const Checker& c, const nlohmann::json& v);
void validate_rebalance(const WorkloadSpec& s, const Checker& c);
nlohmann::json rebalance_to_json(const RebalanceSpec& r);

}  // namespace embedscope::engine::workload_detail

namespace embedscope::engine::detail {
/// Parses JSON text; syntax errors become SpecError "<origin>: line L, column C: <message>",
/// a key given twice in one object SpecError naming the key (reader.cpp). Not in a public
/// header: presets.cpp includes this one; the workbench's scenario loader and the tests declare it.
nlohmann::json parse_json_text(const std::string& text, const std::string& origin);
/// Reads a JSON file of at most kMaxWorkloadFileBytes and parses it (parse_json_text); SpecError
/// names the file: "cannot open: <errno text>", "larger than 64 MiB; not a <what>", "cannot read".
nlohmann::json read_json_file(const std::string& path, const char* what);
}  // namespace embedscope::engine::detail

// The workload's "rebalance" policy (rebalance_spec.h): read from JSON (shape and types), checked
// on the typed spec (ranges, devices.count), and written back. Errors name the JSON pointer.

#include <cmath>
#include <limits>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "checker.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine::workload_detail {

namespace {

using nlohmann::json;

int64_t read_integer(const Checker& c, const json& v, const std::string& ptr) {
  if (v.is_number_integer() && !v.is_number_unsigned()) return v.get<int64_t>();
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      c.fail(ptr, fmt::format("must be <= {}, got {}", std::numeric_limits<int64_t>::max(), u));
    return static_cast<int64_t>(u);
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d) || d != std::floor(d)) c.fail(ptr, fmt::format("must be an integer, got {}", d));
    if (d >= 9223372036854775808.0 || d < -9223372036854775808.0)
      c.fail(ptr, fmt::format("must be an integer in 64 bits, got {}", d));
    return static_cast<int64_t>(d);
  }
  c.fail(ptr, fmt::format("must be an integer, got {}", v.type_name()));
}

double read_number(const Checker& c, const json& v, const std::string& ptr) {
  if (!v.is_number()) c.fail(ptr, fmt::format("must be a number, got {}", v.type_name()));
  const double d = v.get<double>();
  if (!std::isfinite(d)) c.fail(ptr, fmt::format("must be a finite number, got {}", d));
  return d;
}

void only_keys(const Checker& c, const json& v, const std::string& ptr, std::initializer_list<const char*> allowed) {
  for (const auto& [key, value] : v.items()) {
    bool ok = false;
    for (const char* a : allowed) ok = ok || key == a;
    if (!ok) c.fail(ptr_key(ptr, key), "unknown key");
  }
}

}  // namespace

RebalanceSpec read_rebalance(const Checker& c, const json& v) {
  const std::string p = "/rebalance";
  RebalanceSpec r;
  if (v.is_string()) {
    if (v.get<std::string>() != "off")
      c.fail(p, fmt::format("must be \"off\" or an object with \"every\" or \"when\", got \"{}\"", v.get<std::string>()));
    return r;
  }
  if (!v.is_object())
    c.fail(p, fmt::format("must be \"off\" or an object with \"every\" or \"when\", got {}", v.type_name()));
  only_keys(c, v, p, {"every", "when", "max_bytes_per_move", "cooldown_steps", "row_wise_hot_tables", "column_wise_hot_tables",
                        "balance"});
  const bool every = v.contains("every"), when = v.contains("when");
  if (every && when) c.fail(p, "give one of \"every\" and \"when\", not both");
  if (!every && !when) c.fail(p, "needs \"every\" (steps) or \"when\" ({\"imbalance_above\", \"window\"})");
  if (every) {
    r.trigger = RebalanceTrigger::every;
    r.every = read_integer(c, v["every"], p + "/every");
  } else {
    r.trigger = RebalanceTrigger::when;
    const json& w = v["when"];
    const std::string wp = p + "/when";
    if (!w.is_object()) c.fail(wp, fmt::format("must be an object, got {}", w.type_name()));
    only_keys(c, w, wp, {"imbalance_above", "window"});
    if (!w.contains("imbalance_above")) c.fail(wp + "/imbalance_above", "required");
    if (!w.contains("window")) c.fail(wp + "/window", "required");
    r.imbalance_above = read_number(c, w["imbalance_above"], wp + "/imbalance_above");
    r.window = read_integer(c, w["window"], wp + "/window");
  }
  if (v.contains("max_bytes_per_move")) {
    r.max_bytes_per_move = read_integer(c, v["max_bytes_per_move"], p + "/max_bytes_per_move");
    // 0 = unlimited, as absent and as `rebalance --max-bytes-per-move 0` (tester42 F7)
    c.ge0_max(p + "/max_bytes_per_move", r.max_bytes_per_move, kMaxMemoryBytes);
  }
  if (v.contains("cooldown_steps")) r.cooldown_steps = read_integer(c, v["cooldown_steps"], p + "/cooldown_steps");
  for (auto [key, field] : {std::pair{"row_wise_hot_tables", &r.row_wise_hot_tables},
                            std::pair{"column_wise_hot_tables", &r.column_wise_hot_tables}}) {
    if (!v.contains(key)) continue;
    const json& b = v[key];
    if (!b.is_boolean()) c.fail(p + "/" + key, fmt::format("must be true or false, got {}", b.type_name()));
    *field = b.get<bool>();
  }
  if (v.contains("balance")) {
    const json& b = v["balance"];
    const std::string bp = p + "/balance";
    if (!b.is_string()) c.fail(bp, fmt::format("must be \"ids\" or \"lookup_time\", got {}", b.type_name()));
    const std::string m = b.get<std::string>();
    if (m == "ids") r.balance = RebalanceBalance::ids;
    else if (m == "lookup_time") r.balance = RebalanceBalance::lookup_time;
    else c.fail(bp, fmt::format("must be \"ids\" or \"lookup_time\", got \"{}\"", m));
  }
  return r;
}

void validate_rebalance(const WorkloadSpec& s, const Checker& c) {
  const RebalanceSpec& r = s.rebalance;
  if (!r.enabled()) return;
  const std::string p = "/rebalance";
  if (s.devices.count < 2) c.fail(p, fmt::format("needs devices.count >= 2 (nothing to balance), got {}", s.devices.count));
  if (r.trigger == RebalanceTrigger::every) c.gt0_max(p + "/every", r.every, kMaxSteps);
  if (r.trigger == RebalanceTrigger::when) {
    const double x = r.imbalance_above;
    // max/mean over W ranks lies in [1, W]: 1 when balanced, W when one rank does every lookup
    if (!(x > 1.0 && x < static_cast<double>(s.devices.count)))
      c.fail(p + "/when/imbalance_above",
             fmt::format("must be in (1, devices.count = {}) (max/mean over {} ranks is in [1, {}]), got {}",
                         s.devices.count, s.devices.count, s.devices.count, x));
    c.gt0_max(p + "/when/window", r.window, kMaxSteps);
  }
  if (r.max_bytes_per_move != 0) c.gt0_max(p + "/max_bytes_per_move", r.max_bytes_per_move, kMaxMemoryBytes);
  c.ge0_max(p + "/cooldown_steps", r.cooldown_steps, kMaxSteps);
}

json rebalance_to_json(const RebalanceSpec& r) {
  if (!r.enabled()) return "off";
  json j = json::object();
  if (r.trigger == RebalanceTrigger::every) {
    j["every"] = r.every;
  } else {
    j["when"] = {{"imbalance_above", r.imbalance_above}, {"window", r.window}};
  }
  if (r.max_bytes_per_move > 0) j["max_bytes_per_move"] = r.max_bytes_per_move;
  j["cooldown_steps"] = r.cooldown_steps;
  if (r.row_wise_hot_tables) j["row_wise_hot_tables"] = true;
  if (r.column_wise_hot_tables) j["column_wise_hot_tables"] = true;
  if (r.balance == RebalanceBalance::lookup_time) j["balance"] = "lookup_time";
  return j;
}

}  // namespace embedscope::engine::workload_detail

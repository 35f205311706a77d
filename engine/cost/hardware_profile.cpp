// Hardware profiles (cost/hardware_profile.h): parsed from JSON with every field checked and
// named by its JSON pointer.
#include "embedscope/engine/cost/hardware_profile.h"

#include <cmath>
#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "embedscope/engine/cost/profile_trust.h"
#include "embedscope/engine/workload/json_kind.h"
#include "embedscope/engine/workload/spec_error.h"
#include "workload/checker.h"

namespace embedscope::resources {
const std::map<std::string, std::string>& hardware_profiles();
}  // namespace embedscope::resources

namespace embedscope::engine {

namespace {

using nlohmann::json;

// Reads the fields of one object, each by its JSON pointer; refuses unknown keys.
class Fields {
 public:
  Fields(const json& root, std::string origin, std::string ptr, std::set<std::string> keys)
      : origin_(std::move(origin)), ptr_(std::move(ptr)) {
    const json* v = &root;
    if (!ptr_.empty()) {
      const std::string key = ptr_.substr(1);
      if (!root.contains(key)) fail("", "missing");
      v = &root.at(key);
    }
    if (!v->is_object()) fail("", fmt::format("must be an object, got {}", v->type_name()));
    obj_ = v;
    for (const auto& [k, _] : v->items())
      if (!keys.count(k)) fail("/" + k, fmt::format("unknown key \"{}\" (known: {})", k, fmt::join(keys, ", ")));
  }
  [[noreturn]] void fail(const std::string& field, const std::string& reason) const {
    // the root's JSON pointer is "": say "the document" rather than print an empty one (tester33 D16)
    const std::string where = ptr_ + field;
    throw SpecError(fmt::format("{}: {}: {}", origin_, where.empty() ? "the document" : where, reason));
  }
  const json& get(const std::string& key) const {
    if (!obj_->contains(key)) fail("/" + key, "missing");
    return obj_->at(key);
  }
  std::string text(const std::string& key) const {
    const json& v = get(key);
    if (!v.is_string()) fail("/" + key, fmt::format("must be a string, got {}", v.type_name()));
    return v.get<std::string>();
  }
  double number(const std::string& key, double lo, double hi, bool lo_open) const {
    const json& v = get(key);
    if (!v.is_number()) fail("/" + key, fmt::format("must be a number, got {}", v.type_name()));
    const double x = v.get<double>();
    if (!std::isfinite(x) || (lo_open ? !(x > lo) : !(x >= lo)) || x > hi)
      fail("/" + key, fmt::format("must be in {}{:g}, {:g}], got {}", lo_open ? "(" : "[", lo, hi, v.dump()));
    return x;
  }
  int64_t integer(const std::string& key, int64_t lo, int64_t hi) const {
    const json& v = get(key);
    if (!v.is_number_integer()) fail("/" + key, fmt::format("must be an integer, got {}", v.dump()));
    const auto x = v.get<int64_t>();
    if (x < lo || x > hi) fail("/" + key, fmt::format("must be in [{}, {}], got {}", lo, hi, x));
    return x;
  }

 private:
  std::string origin_, ptr_;
  const json* obj_ = nullptr;
};

}  // namespace

LinkProfile default_host_link() { return HardwareProfile{}.host_link; }

namespace {

// The optional tensor-core rate of bf16 / fp16 GEMMs (GpuProfile::dense_bf16_flops_per_s): both
// fields or neither; "/gpu/dense_bf16_efficiency: missing (required with dense_bf16_flops_per_s)".
void read_bf16_rate(const json& gpu, const Fields& g, GpuProfile& out) {
  const bool rate = gpu.contains("dense_bf16_flops_per_s"), eff = gpu.contains("dense_bf16_efficiency");
  if (!rate && !eff) return;
  if (!rate) g.fail("/dense_bf16_efficiency", "given without /gpu/dense_bf16_flops_per_s (the rate it is a fraction of)");
  if (!eff) g.fail("/dense_bf16_efficiency", "missing (required with /gpu/dense_bf16_flops_per_s)");
  out.dense_bf16_flops_per_s = g.number("dense_bf16_flops_per_s", 0, 1e18, true);
  out.dense_bf16_efficiency = g.number("dense_bf16_efficiency", 0, 1, true);
}

// The optional tensor-core rate of TF32 GEMMs (GpuProfile::dense_tf32_flops_per_s): both fields or
// neither, as the bf16 pair.
void read_tf32_rate(const json& gpu, const Fields& g, GpuProfile& out) {
  const bool rate = gpu.contains("dense_tf32_flops_per_s"), eff = gpu.contains("dense_tf32_efficiency");
  if (!rate && !eff) return;
  if (!rate) g.fail("/dense_tf32_efficiency", "given without /gpu/dense_tf32_flops_per_s (the rate it is a fraction of)");
  if (!eff) g.fail("/dense_tf32_efficiency", "missing (required with /gpu/dense_tf32_flops_per_s)");
  out.dense_tf32_flops_per_s = g.number("dense_tf32_flops_per_s", 0, 1e18, true);
  out.dense_tf32_efficiency = g.number("dense_tf32_efficiency", 0, 1, true);
}

LinkProfile link(const json& j, const std::string& origin, const char* key) {
  Fields f(j, origin, std::string("/") + key, {"name", "bus_bandwidth_bytes_per_s", "latency_ns"});
  return {f.text("name"), f.number("bus_bandwidth_bytes_per_s", 0, 1e15, true), f.integer("latency_ns", 0, int64_t{1} << 40)};
}

// The dense op's non-GEMM rates (GpuProfile): both or neither, each > 0.
void dense_rates(const json& gpu, const Fields& g, GpuProfile& out) {
  const bool inter = gpu.contains("dense_interaction_ops_per_s"), elem = gpu.contains("dense_elementwise_ops_per_s");
  if (inter != elem)
    g.fail(inter ? "/dense_elementwise_ops_per_s" : "/dense_interaction_ops_per_s",
           fmt::format("missing (given with /gpu/{}: the dense op's work outside its GEMMs needs both rates)",
                       inter ? "dense_interaction_ops_per_s" : "dense_elementwise_ops_per_s"));
  if (!inter) return;
  out.dense_interaction_ops_per_s = g.number("dense_interaction_ops_per_s", 0, 1e18, true);
  out.dense_elementwise_ops_per_s = g.number("dense_elementwise_ops_per_s", 0, 1e18, true);
}

// The optional per-item host-work coefficients of "gpu" (hardware_profile.h GpuProfile), ns >= 0.
void read_host_work(const json& gpu, const Fields& g, GpuProfile& out) {
  for (auto [key, field] : {std::pair{"lookup_bag_ns", &GpuProfile::lookup_bag_ns},
                            std::pair{"input_id_ns", &GpuProfile::input_id_ns},
                            std::pair{"bucketize_item_ns", &GpuProfile::bucketize_item_ns},
                            std::pair{"update_line_ns", &GpuProfile::update_line_ns},
                            std::pair{"lookup_line_ns", &GpuProfile::lookup_line_ns}})
    if (gpu.contains(key)) out.*field = g.number(key, 0, 1e9, false);
}

HardwareProfile from_json(const json& j, const std::string& origin) {
  Fields top(j, origin, "", {"name", "description", "gpu", "cluster", "intra_node", "inter_node", "host_link", "cpu", "sources",
                                 "fit_quality"});
  HardwareProfile p;
  p.name = top.text("name");
  if (p.name.find_first_not_of(" \t\r\n") == std::string::npos)  // tester46 F6: shown as "(hardware profile )"
    top.fail("/name", "must not be empty (runs on the profile say \"hardware profile NAME\")");
  if (j.contains("description")) p.description = top.text("description");
  Fields g(j, origin, "/gpu",
           {"name", "memory_bytes", "hbm_bandwidth_bytes_per_s", "dense_flops_per_s", "dense_efficiency",
            "tbe_forward_efficiency", "tbe_backward_efficiency", "memory_kernel_efficiency", "kernel_launch_ns",
            "dense_interaction_ops_per_s", "dense_elementwise_ops_per_s",
            "lookup_bag_ns", "input_id_ns", "bucketize_item_ns", "update_line_ns", "lookup_line_ns",
            "dense_bf16_flops_per_s", "dense_bf16_efficiency", "dense_tf32_flops_per_s", "dense_tf32_efficiency"});
  p.gpu.name = g.text("name");
  p.gpu.memory_bytes = g.integer("memory_bytes", 1, int64_t{1} << 50);
  p.gpu.hbm_bandwidth_bytes_per_s = g.number("hbm_bandwidth_bytes_per_s", 0, 1e15, true);
  p.gpu.dense_flops_per_s = g.number("dense_flops_per_s", 0, 1e18, true);
  p.gpu.dense_efficiency = g.number("dense_efficiency", 0, 1, true);
  p.gpu.tbe_forward_efficiency = g.number("tbe_forward_efficiency", 0, 1, true);
  p.gpu.tbe_backward_efficiency = g.number("tbe_backward_efficiency", 0, 1, true);
  p.gpu.memory_kernel_efficiency = g.number("memory_kernel_efficiency", 0, 1, true);
  p.gpu.kernel_launch_ns = g.integer("kernel_launch_ns", 0, int64_t{1} << 40);
  dense_rates(j.at("gpu"), g, p.gpu);
  read_host_work(j.at("gpu"), g, p.gpu);
  read_bf16_rate(j.at("gpu"), g, p.gpu);
  read_tf32_rate(j.at("gpu"), g, p.gpu);
  Fields c(j, origin, "/cluster", {"gpus_per_node", "max_nodes"});
  p.gpus_per_node = static_cast<int>(c.integer("gpus_per_node", 1, 1024));
  p.max_nodes = static_cast<int>(c.integer("max_nodes", 1, 1 << 20));
  p.intra_node = link(j, origin, "intra_node");
  p.inter_node = link(j, origin, "inter_node");
  p.host_link = j.contains("host_link") ? link(j, origin, "host_link") : default_host_link();
  if (j.contains("cpu")) {
    Fields u(j, origin, "/cpu", {"cores", "threads_per_rank", "background_threads", "oversubscription_penalty", "other_groups",
                                        "handoff_ns", "sync_lag_ns", "call_wait_ns"});
    p.cpu.cores = static_cast<int>(u.integer("cores", 1, 1 << 20));
    p.cpu.threads_per_rank = u.number("threads_per_rank", 0, 1e6, true);
    p.cpu.background_threads = u.number("background_threads", 0, 1e6, false);
    if (j.at("cpu").contains("oversubscription_penalty"))
      p.cpu.oversubscription_penalty = u.number("oversubscription_penalty", 0, 1e3, false);
    if (j.at("cpu").contains("other_groups")) p.cpu.other_groups = u.number("other_groups", 0, 1e6, false);
    if (j.at("cpu").contains("handoff_ns")) p.cpu.handoff_ns = u.integer("handoff_ns", 0, int64_t{1} << 40);
    if (j.at("cpu").contains("sync_lag_ns")) p.cpu.sync_lag_ns = u.number("sync_lag_ns", 0, 1e12, false);
    if (j.at("cpu").contains("call_wait_ns")) p.cpu.call_wait_ns = u.integer("call_wait_ns", 0, int64_t{1} << 40);
  }
  if (j.contains("sources")) {  // any JSON pointer -> a citation
    if (!j.at("sources").is_object()) top.fail("/sources", "must be an object (JSON pointer -> citation)");
    for (const auto& [k, v] : j.at("sources").items()) {
      if (!v.is_string()) top.fail("/sources/" + k, "must be a string (a citation)");
      p.sources[k] = v.get<std::string>();
    }
  }
  if (j.contains("fit_quality")) {  // calibrate's record of its fit (cost/profile_trust.h reads it)
    if (!j.at("fit_quality").is_object()) top.fail("/fit_quality", "must be an object (embedscope calibrate's record of its fit)");
    p.fit_quality_json = j.at("fit_quality").dump();
    check_fit_quality(p, origin);  // its error band readable, or refused naming the field
  }
  return p;
}

}  // namespace

HardwareProfile parse_hardware_profile(const std::string& json_text, const std::string& origin) {
  return from_json(detail::parse_json_text(json_text, origin), origin);
}

std::vector<std::string> hardware_profile_names() {
  std::vector<std::string> names;
  for (const auto& [name, text] : resources::hardware_profiles()) names.push_back(name);
  return names;
}

bool hardware_profile_is_file(const std::string& name_or_path) {
  if (name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".json")) return true;
  // a built-in name is the built-in, whatever files sit in the folder (retest47 R6: a run's own
  // output named h100_sxm hid the built-in); any other name of an existing file is that file
  // (tester46 F12); ./NAME reads a file named like a built-in
  if (resources::hardware_profiles().contains(name_or_path)) return false;
  std::error_code ec;
  return !name_or_path.empty() && std::filesystem::exists(name_or_path, ec) && !std::filesystem::is_directory(name_or_path, ec);
}

HardwareProfile load_hardware_profile(const std::string& name_or_path) {
  // a name that is neither a built-in profile nor a file to read, said as what it is, with the
  // names that would work (a directory was an "unknown hardware profile"; a missing or unreadable
  // path gave no list)
  auto not_a_profile = [&](const std::string& why) {
    return SpecError(fmt::format("/devices/hardware: \"{}\" {} (built in: {}; or give a profile JSON file)", name_or_path,
                                 why, fmt::join(hardware_profile_names(), ", ")));
  };
  const auto& built_in = resources::hardware_profiles();
  const auto it = built_in.find(name_or_path);
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(name_or_path, ec);
  if (it == built_in.end() && std::filesystem::is_directory(st))
    throw not_a_profile("is a directory, not a hardware profile file");
  // there (a link) but not to be resolved: a loop, a dangling link; or a path (x/y.json) to nothing
  const bool link = std::filesystem::is_symlink(std::filesystem::symlink_status(name_or_path, ec));
  if (it == built_in.end() && !std::filesystem::exists(st) && (link || hardware_profile_is_file(name_or_path))) {
    std::error_code why;
    (void)std::filesystem::status(name_or_path, why);
    throw not_a_profile(fmt::format("cannot be opened as a hardware profile file: {}",
                                    why ? why.message() : std::string("No such file or directory")));
  }
  if (hardware_profile_is_file(name_or_path)) {
    try {
      return from_json(detail::read_json_file(name_or_path, "hardware profile"), name_or_path);
    } catch (const SpecError&) {
      // one of embedscope's other JSON files (tester46 F12: a scaling study got "/batch_size_per_gpu:
      // unknown key"): say what it is
      if (const JsonFileKind kind = json_file_kind(name_or_path);
          kind != JsonFileKind::none && kind != JsonFileKind::hardware_profile)
        throw SpecError(fmt::format("{} is {}, not a hardware profile (give a built-in profile: {}; or a profile JSON "
                                    "file: resources/hardware, embedscope calibrate -o)",
                                    name_or_path, json_file_kind_name(kind), fmt::join(hardware_profile_names(), ", ")));
      throw;
    }
  }
  if (it == built_in.end())
    throw SpecError(fmt::format("/devices/hardware: unknown hardware profile \"{}\" (built in: {}; or give a profile JSON "
                                "file)",
                                name_or_path, fmt::join(hardware_profile_names(), ", ")));
  return parse_hardware_profile(it->second, "hardware profile " + name_or_path);
}

}  // namespace embedscope::engine

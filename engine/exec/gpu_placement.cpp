#include "embedscope/engine/exec/gpu_placement.h"

#include <fmt/format.h>

#include "embedscope/engine/workload/spec.h"
#include "embedscope/sessions/model/units.h"

namespace embedscope::engine {

namespace {
std::string ranks_text(const std::vector<int>& r) {
  if (r.size() == 1) return fmt::format("rank {}", r.front());
  return fmt::format("ranks {}-{}", r.front(), r.back());  // a block: consecutive
}
std::string device_text(const std::string& what, int d, const std::vector<std::string>& names) {
  return static_cast<size_t>(d) < names.size() && !names[static_cast<size_t>(d)].empty()
             ? fmt::format("{} {} ({})", what, d, names[static_cast<size_t>(d)])
             : fmt::format("{} {}", what, d);
}
}  // namespace

std::vector<int> GpuPlacement::ranks_on(int device) const {
  std::vector<int> out;
  for (size_t r = 0; r < gpu_of_rank.size(); ++r)
    if (gpu_of_rank[r] == device) out.push_back(static_cast<int>(r));
  return out;
}

GpuPlacement place_ranks(int ranks, int ranks_per_gpu, int devices, const std::string& what) {
  if (ranks < 1) throw std::logic_error("place_ranks: no rank");
  if (devices < 1) throw SpecError(fmt::format("/devices/ranks_per_gpu: {} ranks need a {}, but none is visible", ranks, what));
  GpuPlacement p;
  p.devices = devices;
  p.ranks_per_gpu = ranks_per_gpu > 0 ? ranks_per_gpu : (ranks + devices - 1) / devices;
  const int need = (ranks + p.ranks_per_gpu - 1) / p.ranks_per_gpu;
  if (need > devices)
    throw SpecError(fmt::format("/devices/ranks_per_gpu: {} ranks at {} per {} need {} {}s, but {} {} visible", ranks,
                                p.ranks_per_gpu, what, need, what, devices, devices == 1 ? "is" : "are"));
  for (int r = 0; r < ranks; ++r) p.gpu_of_rank.push_back(r / p.ranks_per_gpu);
  return p;
}

void check_placement_memory(const GpuPlacement& placement, int64_t memory_bytes, const std::vector<int64_t>& device_bytes,
                            const std::vector<std::string>& device_names, const std::string& what) {
  bool fits = true;
  std::string detail;
  for (int d = 0; d < placement.devices_used(); ++d) {
    const std::vector<int> on = placement.ranks_on(d);
    const int64_t cap = static_cast<size_t>(d) < device_bytes.size() ? device_bytes[static_cast<size_t>(d)] : 0;
    const int64_t need = memory_bytes * static_cast<int64_t>(on.size());
    const bool ok = cap <= 0 || need <= cap;
    fits = fits && ok;
    detail += fmt::format("{}{}: {} need {} of {}{}", d ? "; " : "", device_text(what, d, device_names), ranks_text(on),
                          sessions::format_bytes(need), cap > 0 ? sessions::format_bytes(cap) : std::string("unlimited"),
                          ok ? "" : " (does not fit)");
  }
  if (fits) return;
  throw SpecError(fmt::format("/devices/memory_bytes: the ranks on one {} do not fit in its memory together (memory_bytes "
                              "{} per rank): {}",
                              what, sessions::format_bytes(memory_bytes), detail));
}

std::string describe_placement(const GpuPlacement& placement, const std::vector<std::string>& device_names,
                               const std::string& what) {
  std::string out;
  for (int d = 0; d < placement.devices_used(); ++d)
    out += fmt::format("{}{}: {}", d ? "; " : "", device_text(what, d, device_names), ranks_text(placement.ranks_on(d)));
  return out;
}

}  // namespace embedscope::engine

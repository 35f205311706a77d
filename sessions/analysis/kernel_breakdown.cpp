#include "embedscope/sessions/analysis/kernel_breakdown.h"

#include <algorithm>
#include <map>

namespace embedscope::sessions {

KernelBreakdown kernel_breakdown(const std::vector<GpuSpan>& spans) {
  KernelBreakdown b;
  std::map<int32_t, KernelBreakdownRow> by_name;
  std::map<importers::KernelClass, KernelTypeRow> by_type;
  for (const auto& s : spans) {
    const int64_t d = s.end - s.start;
    KernelBreakdownRow& k = by_name[s.name_id];
    if (k.count == 0) {
      k.name_id = s.name_id;
      k.cls = s.cls;
      k.min_ns = k.max_ns = d;
    }
    ++k.count;
    k.total_ns += d;
    k.min_ns = std::min(k.min_ns, d);
    k.max_ns = std::max(k.max_ns, d);
    KernelTypeRow& t = by_type[s.cls];
    t.cls = s.cls;
    ++t.count;
    t.total_ns += d;
    b.total_ns += d;
    ++b.events;
  }
  const auto share = [&](int64_t ns) { return b.total_ns != 0 ? static_cast<double>(ns) / static_cast<double>(b.total_ns) : 0.0; };
  for (auto& [id, k] : by_name) {
    k.mean_ns = static_cast<double>(k.total_ns) / static_cast<double>(k.count);
    k.share = share(k.total_ns);
    b.kernels.push_back(k);
  }
  for (auto& [cls, t] : by_type) {
    t.share = share(t.total_ns);
    b.types.push_back(t);
  }
  std::stable_sort(b.kernels.begin(), b.kernels.end(), [](const auto& x, const auto& y) { return x.total_ns > y.total_ns; });
  std::stable_sort(b.types.begin(), b.types.end(), [](const auto& x, const auto& y) { return x.total_ns > y.total_ns; });
  return b;
}

KernelBreakdown gpu_kernel_breakdown(const SessionReader& session, const GpuKernelOptions& options) {
  std::vector<GpuSpan> all;
  bool rounded = false;
  for (auto& r : kept_gpu_events(session, options)) {
    rounded = rounded || r.counters.microsecond_rounding;
    all.insert(all.end(), r.spans.begin(), r.spans.end());
  }
  KernelBreakdown b = kernel_breakdown(all);
  b.microsecond_rounding = rounded;
  return b;
}

}  // namespace embedscope::sessions

#include "embedscope/sessions/analysis/gpu_sharing.h"

#include <algorithm>

#include "embedscope/sessions/analysis/analysis.h"  // rank_list

namespace embedscope::sessions {

std::vector<RankGpu> rank_gpus(const std::vector<RankInfo>& ranks) {
  std::vector<RankInfo> sorted = ranks;
  std::stable_sort(sorted.begin(), sorted.end(), [](const RankInfo& a, const RankInfo& b) { return a.rank < b.rank; });
  std::vector<RankGpu> out;
  for (const auto& r : sorted) {
    if (r.device.find("(cuda:") == std::string::npos) continue;
    auto it = std::find_if(out.begin(), out.end(), [&](const RankGpu& g) { return g.device == r.device; });
    if (it == out.end()) it = out.insert(out.end(), RankGpu{r.device, {}});
    if (std::find(it->ranks.begin(), it->ranks.end(), r.rank) == it->ranks.end()) it->ranks.push_back(r.rank);
  }
  return out;
}

std::string gpus_text(const std::vector<RankInfo>& ranks) {
  const std::vector<RankGpu> gpus = rank_gpus(ranks);
  if (gpus.empty()) return "";
  if (gpus.size() == 1)
    return (gpus[0].ranks.size() > 1 ? " sharing 1 GPU (" : " on 1 GPU (") + gpus[0].device + ")";
  const bool shared = std::any_of(gpus.begin(), gpus.end(), [](const RankGpu& g) { return g.ranks.size() > 1; });
  std::string list;
  for (const auto& g : gpus) {
    if (!list.empty()) list += shared ? "; " : ", ";
    if (!shared) {
      list += g.device;
    } else {
      list += (g.ranks.size() == 1 ? "rank " : "ranks ") + rank_list(g.ranks) +
              (g.ranks.size() == 1 ? " on " : " sharing ") + g.device;
    }
  }
  return " on " + std::to_string(gpus.size()) + " GPUs (" + list + ")";
}

}  // namespace embedscope::sessions

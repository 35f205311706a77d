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

void separate_gpus_of_files(std::vector<RankDeviceSource>& ranks) {
  const auto is_gpu = [](const std::string& d) {
    const size_t at = d.rfind("(cuda:");
    return at != std::string::npos && !d.empty() && d.back() == ')' && d.find("'s host)", at) == std::string::npos;
  };
  std::vector<std::string> renamed(ranks.size());
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankDeviceSource& a = ranks[i];
    if (!is_gpu(a.device)) continue;
    bool other_file = false, one_host = !a.host.empty();
    int32_t lowest_of_file = a.rank;
    for (const RankDeviceSource& b : ranks) {
      if (b.device != a.device) continue;
      if (b.file == a.file) {
        lowest_of_file = std::min(lowest_of_file, b.rank);
      } else {
        other_file = true;
        one_host = one_host && b.host == a.host;
      }
    }
    if (other_file && !one_host)
      renamed[i] = a.device.substr(0, a.device.size() - 1) + " of rank " + std::to_string(lowest_of_file) + "'s host)";
  }
  for (size_t i = 0; i < ranks.size(); ++i)
    if (!renamed[i].empty()) ranks[i].device = std::move(renamed[i]);
}

}  // namespace embedscope::sessions

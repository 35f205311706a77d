#include "core/lane_labels.h"

#include <map>
#include <set>

namespace embedscope::ui {

namespace {
// The text inside the innermost bracket at the end of `s` ("a (b (c))" -> "c"), or "".
std::string innermost(const std::string& s) {
  const size_t open = s.rfind('(');
  if (open == std::string::npos) return "";
  const size_t close = s.find(')', open);
  return close == std::string::npos ? "" : s.substr(open + 1, close - open - 1);
}

// "thread 2910249 (...)" -> "2910249"; "" when `lane` is no thread lane.
std::string thread_id(const std::string& lane) {
  if (lane.rfind("thread ", 0) != 0) return "";
  const size_t end = lane.find(' ', 7);
  return lane.substr(7, end == std::string::npos ? std::string::npos : end - 7);
}

std::string before_bracket(const std::string& s) {
  const size_t b = s.find(" (");
  return b == std::string::npos ? s : s.substr(0, b);
}
}  // namespace

bool is_gpu_lane(const std::string& lane) {
  return lane == "gpu_compute" || lane == "gpu_comm" || lane == "gpu_copy" || lane == "gpu_sync";
}

std::string short_lane_name(const std::string& lane) {
  if (lane == "gpu_compute") return "GPU compute stream";
  if (lane == "gpu_comm") return "GPU comm stream";
  if (lane == "gpu_copy") return "GPU copy stream";
  if (lane == "gpu_sync") return "GPU sync waits";
  // an Nsight export's NVTX row under its thread (tester42 F24): the thread's short name + NVTX
  if (static const std::string kNvtx = " NVTX";
      lane.rfind("thread ", 0) == 0 && lane.size() > kNvtx.size() && lane.compare(lane.size() - kNvtx.size(), kNvtx.size(), kNvtx) == 0)
    return short_lane_name(lane.substr(0, lane.size() - kNvtx.size())) + kNvtx;
  if (lane.rfind("thread ", 0) == 0)
    if (std::string name = innermost(lane); !name.empty()) return name;
  std::string out = before_bracket(lane);
  if (out.rfind("annotations of ", 0) == 0) out = "annot. " + out.substr(15);
  return out;
}

std::vector<std::string> lane_labels(const std::vector<LaneLabelInput>& rows) {
  auto label = [](const LaneLabelInput& r, const std::string& name) {
    return "rank " + std::to_string(r.rank) + " " + name + (r.overlapping ? " (overlap)" : "");
  };
  std::set<int32_t> gpu_ranks;  // their host threads say "host"
  for (const auto& r : rows)
    if (is_gpu_lane(r.lane)) gpu_ranks.insert(r.rank);
  auto name_of = [&](const LaneLabelInput& r) {
    const bool host = gpu_ranks.count(r.rank) && (r.lane == "compute" || r.lane == "comm");
    if (r.shares_gpu && r.lane == "gpu_comm") return short_lane_name(r.lane) + " (shared GPU)";
    return host ? "host " + r.lane : short_lane_name(r.lane);
  };
  std::vector<std::string> out;
  std::map<std::string, int> count;
  for (const auto& r : rows) count[out.emplace_back(label(r, name_of(r)))]++;
  for (size_t i = 0; i < rows.size(); ++i) {  // alike: say more
    if (count[out[i]] < 2) continue;
    const std::string id = thread_id(rows[i].lane);
    out[i] = label(rows[i], id.empty() ? rows[i].lane : short_lane_name(rows[i].lane) + " " + id);
  }
  std::map<std::string, int> again, seen;
  for (const auto& l : out) again[l]++;
  for (auto& l : out)
    if (again[l] > 1) l += " #" + std::to_string(++seen[l]);
  return out;
}

std::string shared_gpu_comm_note(const std::string& ranks, const std::string& device, bool other_gpus) {
  return "ranks " + ranks + " share " + device +
         ": their collectives among themselves ran on this stream as device-to-device copies (memcpy_dtod, "
         "copy-engine speed) and add_f32_cuda reduction kernels of the intra-device communicator, not NCCL kernels" +
         (other_gpus ? "; ranks on other GPUs are reached through NCCL by each GPU's first rank" : "");
}

}  // namespace embedscope::ui

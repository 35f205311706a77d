// Processor sharing of a collective's members on a node's shared cores (cost/shared_cores.h).
#include "embedscope/engine/cost/shared_cores.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "embedscope/engine/cost/cost_model.h"

namespace embedscope::engine {

CoreGroup core_group(const HardwareProfile& hw, int rank, int world, int ranks_per_node) {
  if (world < 1 || ranks_per_node < 1 || rank < 0 || rank >= world)
    throw std::invalid_argument("core_group: rank " + std::to_string(rank) + " of a world of " + std::to_string(world) +
                                " ranks, " + std::to_string(ranks_per_node) + " per node");
  if (hw.cpu.cores > 0) return {0, world};  // one machine: its emulated nodes share its cores
  const int node = rank / ranks_per_node;
  return {node, std::min(ranks_per_node, world - node * ranks_per_node)};
}

double processor_sharing_time(std::vector<double> work, int ranks_on_node, const std::function<double(int)>& factor) {
  if (static_cast<int>(work.size()) > ranks_on_node)
    throw std::invalid_argument("processor_sharing_time: " + std::to_string(work.size()) + " members on a node of " +
                                std::to_string(ranks_on_node) + " ranks");
  for (double& w : work) w = std::max(0.0, w);
  std::sort(work.begin(), work.end());
  double t = 0, prev = 0;
  for (size_t k = 0; k < work.size(); ++k) {
    t += (work[k] - prev) * factor(ranks_on_node - static_cast<int>(k));
    prev = work[k];
  }
  return t;
}

int64_t shared_cores_collective_ns(const std::vector<int64_t>& member_ns, int ranks_on_node, const HardwareProfile& hw) {
  std::vector<double> w(member_ns.begin(), member_ns.end());
  return std::llround(processor_sharing_time(std::move(w), ranks_on_node,
                                             [&](int m) { return contention_factor(hw, m); }));
}

int64_t contended_ns(int64_t ns, const HardwareProfile& hw, int ranks_on_node) {
  const double f = contention_factor(hw, ranks_on_node);
  return f == 1.0 ? ns : static_cast<int64_t>(std::llround(static_cast<double>(ns) * f));
}

ComputeSharing::ComputeSharing(const HardwareProfile& hw) : hw_(hw) {}

void ComputeSharing::start(int64_t key, int64_t start_ns, double work_ns) {
  jobs_.push_back({key, std::max(static_cast<double>(start_ns), clock_), std::max(0.0, work_ns)});
}

ComputeSharing::Reached ComputeSharing::advance(std::vector<double>& rem, double until, bool to_first_end) const {
  rem.clear();
  for (const Job& j : jobs_) rem.push_back(j.remaining);
  double t = clock_;
  for (;;) {
    // running: started by t and, looking for a time, not done (to the first end every started
    // op runs, one of no work ending at once)
    const auto running = [&](size_t i) { return jobs_[i].start <= t && (to_first_end || rem[i] > 0); };
    int active = 0;
    double next_start = std::numeric_limits<double>::infinity();
    size_t first = jobs_.size();  // the running op with the least work left
    for (size_t i = 0; i < jobs_.size(); ++i) {
      if (jobs_[i].start > t) {
        next_start = std::min(next_start, jobs_[i].start);
      } else if (running(i)) {
        ++active;
        if (first == jobs_.size() || rem[i] < rem[first]) first = i;
      }
    }
    if (!to_first_end && t >= until) return {t, jobs_.size(), active};
    if (active == 0) {  // nothing runs until the next start
      if (!to_first_end && next_start > until) return {until, jobs_.size(), 0};
      t = next_start;
      continue;
    }
    while (static_cast<int>(factor_.size()) <= active) factor_.push_back(contention_factor(hw_, static_cast<int>(factor_.size())));
    const double f = factor_[static_cast<size_t>(active)];
    const double end = t + rem[first] * f;
    const double to = std::min({end, next_start, until});
    for (size_t i = 0; i < jobs_.size(); ++i)
      if (running(i)) rem[i] = std::max(0.0, rem[i] - (to - t) / f);
    if (to == end) {
      rem[first] = 0;
      if (to_first_end) return {end, first, active};
    }
    t = to;
  }
}

std::optional<std::pair<double, int64_t>> ComputeSharing::next_completion() const {
  if (jobs_.empty()) return std::nullopt;
  std::vector<double> rem;
  const Reached r = advance(rem, std::numeric_limits<double>::infinity(), true);
  return std::pair<double, int64_t>{r.t, jobs_[r.ended].key};
}

int ComputeSharing::running_at(int64_t t_ns) const {
  std::vector<double> rem;
  return advance(rem, static_cast<double>(t_ns), false).active;
}

std::pair<int64_t, int64_t> ComputeSharing::complete_next() {
  if (jobs_.empty()) throw std::logic_error("ComputeSharing::complete_next: no op running");
  std::vector<double> rem;
  const Reached r = advance(rem, std::numeric_limits<double>::infinity(), true);
  const double t = r.t;
  const size_t i = r.ended;
  for (size_t j = 0; j < jobs_.size(); ++j) jobs_[j].remaining = rem[j];
  clock_ = t;
  const int64_t key = jobs_[i].key;
  jobs_.erase(jobs_.begin() + static_cast<std::ptrdiff_t>(i));
  return {std::llround(t), key};
}

std::vector<std::vector<double>> compute_concurrency(const std::vector<std::pair<int64_t, int64_t>>& spans) {
  std::vector<std::pair<int64_t, int>> ev;  // (time, +1 open / -1 close), closes first at a tie
  for (const auto& [a, b] : spans)
    if (b > a) ev.emplace_back(a, 1), ev.emplace_back(b, -1);
  std::sort(ev.begin(), ev.end());
  // the elementary intervals [at[i], at[i + 1]) with open[i] spans open
  std::vector<int64_t> at;
  std::vector<int> open;
  int now = 0, most = 0;
  for (size_t i = 0; i < ev.size(); ++i) {
    now += ev[i].second;
    most = std::max(most, now);
    if (i + 1 == ev.size() || ev[i + 1].first != ev[i].first) {
      at.push_back(ev[i].first);
      open.push_back(now);
    }
  }
  std::vector<std::vector<double>> out(spans.size(), std::vector<double>(static_cast<size_t>(most) + 1, 0.0));
  for (size_t s = 0; s < spans.size(); ++s) {
    const auto [a, b] = spans[s];
    if (b <= a) continue;
    for (auto i = static_cast<size_t>(std::lower_bound(at.begin(), at.end(), a) - at.begin());
         i + 1 < at.size() && at[i] < b; ++i)
      out[s][static_cast<size_t>(open[i])] += static_cast<double>(std::min(b, at[i + 1]) - at[i]);
  }
  return out;
}

double op_dilation(const std::vector<double>& busy, const std::vector<double>& f) {
  if (busy.empty() || f.empty()) return 0;
  double work = 0;  // per unit of time
  for (size_t k = 1; k < busy.size(); ++k)
    if (busy[k] > 0) work += busy[k] / f[std::min(k, f.size() - 1)];
  return work > 0 ? 1.0 / work : 0.0;
}

double oversubscribed_share(const HardwareProfile& hw, int ranks_on_node) {
  if (hw.cpu.cores <= 0) return 0.0;
  return std::clamp(sync_lag_factor(hw, ranks_on_node) - 1.0, 0.0, 1.0);
}

int64_t collective_call_ns(const std::vector<CallMember>& members, const HardwareProfile& hw) {
  if (members.empty()) return 0;
  bool one_node = true;
  int most = 0;  // the members' largest node
  for (const CallMember& m : members) {
    one_node = one_node && m.node == members.front().node;
    most = std::max(most, m.ranks_on_node);
  }
  // a cpu call's wait for a core on an oversubscribed node (hardware_profile.h call_wait_ns)
  const int64_t wait = hw.cpu.cores > 0 && members.size() > 1 && hw.cpu.call_wait_ns > 0
                           ? std::llround(static_cast<double>(hw.cpu.call_wait_ns) * oversubscribed_share(hw, most))
                           : 0;
  if (hw.cpu.cores > 0 && one_node) {
    std::vector<int64_t> own;
    own.reserve(members.size());
    for (const CallMember& m : members) own.push_back(m.own_ns);
    return shared_cores_collective_ns(own, members.front().ranks_on_node, hw) + wait;
  }
  int64_t longest = 0;
  for (const CallMember& m : members) longest = std::max(longest, contended_ns(m.own_ns, hw, m.ranks_on_node));
  return longest + wait;
}

}  // namespace embedscope::engine

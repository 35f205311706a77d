#pragma once
// The search's progress meter (search.h SearchProgress, PlanSearchOptions::progress): counts the
// proposals and the scored plans, keeps the best that fits so far, and passes that on at most
// once a second, so that a long `plan --auto` says where it is (tester62c: 22 s silent). Internal
// to the planner.

#include <chrono>
#include <functional>
#include <string>

#include "embedscope/engine/planner/search.h"

namespace embedscope::engine::planner_detail {

class ProgressMeter {
 public:
  explicit ProgressMeter(std::function<void(const SearchProgress&)> report) : report_(std::move(report)) {}

  /// One proposal (`scored` false: `ns` its pre-ranking estimate) or one plan scored by its step
  /// programs (`scored` true: `ns` plan_stats' critical path); `fits` whether it fits the devices.
  /// A scored plan that fits replaces any estimate as the best; a later estimate does not.
  void count(const std::string& proposer, double ns, bool fits, bool scored) {
    if (!report_) return;
    ++(scored ? p_.scored : p_.proposals);
    if (fits && (scored ? !p_.best_scored || ns < p_.best_ns
                        : !p_.best_scored && (p_.best_proposer.empty() || ns < p_.best_ns)))
      p_.best_proposer = proposer, p_.best_ns = ns, p_.best_scored = scored;
    if (const auto now = Clock::now(); now >= next_) {
      next_ = now + std::chrono::seconds(1);
      p_.seconds = std::chrono::duration<double>(now - started_).count();
      report_(p_);
    }
  }

 private:
  using Clock = std::chrono::steady_clock;
  std::function<void(const SearchProgress&)> report_;
  SearchProgress p_;
  Clock::time_point started_ = Clock::now();
  Clock::time_point next_ = started_ + std::chrono::seconds(1);
};

}  // namespace embedscope::engine::planner_detail

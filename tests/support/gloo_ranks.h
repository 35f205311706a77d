#pragma once
// Runs a test body on the ranks of one in-process Gloo group: n threads, rank r's ProcessGroup
// "world" of members 0..n-1 over Rendezvous::in_process(), each with the collective timeout
// given. Shared by the tests of the collectives, the network emulation, its cost floor and the
// lm_embedding wire precision.
#include <chrono>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "embedscope/engine/comm/gloo_process_group.h"

namespace embedscope::test_support {

/// Runs fn(group) on `n` threads, one rank each, with collective timeout `timeout`; returns each
/// rank's exception message ("" for a rank whose fn returned), in rank order.
inline std::vector<std::string> on_gloo_ranks(int n, std::chrono::milliseconds timeout,
                                              const std::function<void(engine::ProcessGroup&)>& fn) {
  auto rv = engine::Rendezvous::in_process();
  std::vector<int> members(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) members[static_cast<size_t>(i)] = i;
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      engine::ProcessGroup pg(rv, "world", members, r, timeout);
      try {
        fn(pg);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

}  // namespace embedscope::test_support

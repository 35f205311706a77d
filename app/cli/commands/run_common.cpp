// The ending, progress lines and second-signal stop shared by the commands that run a workload
// (commands/run_common.h).

#include "run_common.h"

#include <iostream>

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "output/output.h"

namespace embedscope::cli {

using nlohmann::json;

int report_failed_run(const std::string& ended, const std::string& error, const std::string& session, bool as_json,
                      bool bad_input) {
  fmt::print(stderr, "error: run ended {}: {}\nsession: {}\n", ended, error, session);
  if (as_json) std::cout << dump(json{{"ended", ended}, {"error", error}, {"session", session}}) << "\n";
  return bad_input ? 2 : 1;
}

}  // namespace embedscope::cli

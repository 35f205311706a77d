// refuse_output_that_is_an_input and refuse_existing_output (output_guard.h).

#include "output_guard.h"

#include <filesystem>

#include <fmt/format.h>

#include "embedscope/engine/workload/spec_error.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::cli {

std::string empty_output_name_refusal(const std::string& value, std::string_view remedy) {
  return value.empty() ? fmt::format("an empty name; {}", remedy) : std::string();
}

std::string input_that_is(const std::string& out, const std::vector<std::string>& inputs) {
  std::error_code ec;
  if (out.empty() || !std::filesystem::exists(out, ec)) return {};
  for (const auto& in : inputs) {
    std::error_code e2;
    if (in.empty() || std::filesystem::is_directory(in, e2) || !std::filesystem::equivalent(in, out, e2) || e2) continue;
    return in;
  }
  return {};
}

void refuse_output_that_is_an_input(const std::string& out, std::string_view flag,
                                    const std::vector<std::string>& inputs, std::string_view command) {
  if (const std::string in = input_that_is(out, inputs); !in.empty())
    throw engine::SpecError(fmt::format("{} {}: is an input of this {} ({}); writing there would destroy it "
                                        "(--force-overwrite does not allow that): choose another {}",
                                        flag, out, command, in, flag));
}

void refuse_existing_output(const std::string& out, std::string_view flag, bool overwrite, std::string_view command) {
  std::error_code ec;
  if (out.empty() || !std::filesystem::exists(out, ec)) return;
  // even with --force-overwrite: a session a live run writes (tester54 F1: it was replaced)
  if (overwrite) return sessions::refuse_replacing_live_session(out);
  throw engine::SpecError(fmt::format("{} {}: already exists; choose another name or allow overwriting it "
                                      "(embedscope {} ... {} {} --force-overwrite)",
                                      flag, out, command, flag, out));
}

}  // namespace embedscope::cli

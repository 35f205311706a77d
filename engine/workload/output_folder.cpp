// make_output_folder (output_folder.h).

#include "embedscope/engine/workload/output_folder.h"

#include <filesystem>

#include <fmt/format.h>

#include "embedscope/engine/workload/spec_error.h"

namespace embedscope::engine {

void make_output_folder(const std::string& out, std::string_view flag) {
  const std::filesystem::path dir = std::filesystem::path(out).parent_path();
  std::error_code ec;
  if (dir.empty() || std::filesystem::is_directory(dir, ec)) return;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir))
    throw SpecError(fmt::format("{} {}: cannot make the folder {}: {}", flag, out, dir.string(),
                                ec ? ec.message() : std::string("not a directory")));
}

}  // namespace embedscope::engine

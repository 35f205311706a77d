#pragma once
// read_whole_file: the one way the engine and the CLI read a small input file whole (a plan, a
// text to tokenize, a token file), with the errors every other reader gives: the flag or key and
// the path named, and SpecError (CLI exit 2). A directory used to reach std::ifstream, whose read
// threw libstdc++'s "basic_filebuf::underflow error reading the file: Is a directory" (exit 1,
// no file named; tester47 F4).

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "embedscope/engine/workload/spec_error.h"

namespace embedscope::engine {

/// The bytes of the file at `path`. `label` prefixes every message ("--plan ", "--input ", or
/// "" when the path alone names it); `what` says what the file was to be ("plan file", "text
/// file", "token file"). Throws SpecError:
///   "{label}{path}: is a directory, not a {what}"
///   "{label}{path}: cannot open the {what}: {strerror}"   (missing, no permission)
///   "{label}{path}: cannot read: {strerror}"               (an I/O error part-way)
/// Example: read_whole_file("d", "--plan ", "plan file") on a directory d ->
/// "--plan d: is a directory, not a plan file".
inline std::string read_whole_file(const std::string& path, const std::string& label, const char* what) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw SpecError(fmt::format("{}{}: is a directory, not a {}", label, path, what));
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) throw SpecError(fmt::format("{}{}: cannot open the {}: {}", label, path, what, std::strerror(errno)));
  std::string bytes;
  char buf[1 << 16];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.append(buf, n);
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) throw SpecError(fmt::format("{}{}: cannot read: {}", label, path, std::strerror(err)));
  return bytes;
}

}  // namespace embedscope::engine

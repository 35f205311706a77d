// StagedSession and refuse_output_among_inputs (staged_output.h).

#include "staged_output.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <utility>

#include <fmt/format.h>

#include "embedscope/sessions/store/session.h"

namespace embedscope::cli {

namespace ss = embedscope::sessions;

StagedSession::StagedSession(std::string out, bool overwrite) : out_(std::move(out)), overwrite_(overwrite) {
  ss::SessionWriter::check_path(out_, overwrite_);
  const std::filesystem::path out_path(out_);
  const std::filesystem::path dir = out_path.parent_path();
  std::error_code ec;
  if (!dir.empty() && !std::filesystem::is_directory(dir, ec))
    throw ss::SessionError(fmt::format("{}: cannot create the session file: the folder {} does not exist", out_, dir.string()));
  // a hidden name beside `out` that fits in a file name (255 bytes) with SQLite's "-journal" after
  // it, however long `out`'s own name is (tester37: a valid 245-byte name failed on its "<out>.importing-PID")
  std::string stem = out_path.filename().string();
  if (stem.size() > 200) stem.resize(200);
  temp_ = (dir / fmt::format(".{}.importing-{}", stem, getpid())).string();
  ss::SessionWriter::remove_files(temp_);  // a stale one of a killed process with the same pid
}

StagedSession::~StagedSession() {
  if (!committed_) ss::SessionWriter::remove_files(temp_);
}

void StagedSession::commit() {
  try {
    ss::SessionWriter::check_path(out_, overwrite_);
  } catch (...) {
    ss::SessionWriter::remove_files(temp_);
    committed_ = true;
    throw;
  }
  for (const char* suffix : {"-wal", "-shm", "-journal"}) std::remove((out_ + suffix).c_str());
  if (std::rename(temp_.c_str(), out_.c_str()) != 0) {
    const int err = errno;
    ss::SessionWriter::remove_files(temp_);
    committed_ = true;
    throw ss::SessionError(fmt::format("{}: cannot put the imported session in place (rename from {}): {}", out_, temp_,
                                       std::strerror(err)));
  }
  committed_ = true;
  // the writer left WAL mode at close; an empty -wal / -shm may remain under the temporary name
  for (const char* suffix : {"-wal", "-shm", "-journal"}) std::remove((temp_ + suffix).c_str());
}

void refuse_output_among_inputs(const std::string& out, const std::vector<std::string>& inputs,
                                const std::vector<std::string>& files) {
  std::error_code ec;
  if (!std::filesystem::exists(out, ec)) return;
  for (const auto* list : {&inputs, &files})
    for (const auto& in : *list) {
      std::error_code e2;
      if (std::filesystem::is_directory(in, e2) || !std::filesystem::equivalent(in, out, e2) || e2) continue;
      throw ss::SessionError(fmt::format("{}: is an input of this import ({}); writing the session there would destroy "
                                         "it (--force-overwrite does not allow that): choose another output (-o)",
                                         out, in));
    }
}

}  // namespace embedscope::cli

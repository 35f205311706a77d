// CriteoStream: the lines of several files, plain or gzip, through zlib (criteo.h).
#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <zlib.h>

#include "embedscope/engine/input/criteo.h"

namespace embedscope::engine {

namespace {
constexpr size_t kBufferBytes = size_t{1} << 20;
gzFile as_gz(void* p) { return static_cast<gzFile>(p); }
}  // namespace

CriteoStream::CriteoStream(std::vector<std::string> paths) : paths_(std::move(paths)), buf_(kBufferBytes) {
  if (paths_.empty()) throw InputFileError("criteo_tsv input: no files");
  open(0);
}

CriteoStream::~CriteoStream() {
  if (gz_) gzclose(as_gz(gz_));
}

void CriteoStream::open(size_t k) {
  if (gz_) gzclose(as_gz(gz_));
  gz_ = nullptr;
  file_ = k;
  line_ = 0;
  begin_ = end_ = 0;
  carry_.clear();
  eof_ = false;
  errno = 0;
  gzFile f = gzopen(paths_[k].c_str(), "rb");
  if (!f)
    throw InputFileError(fmt::format("{}: cannot open: {}", paths_[k], errno ? std::strerror(errno) : "out of memory"));
  gzbuffer(f, 256 * 1024);
  gz_ = f;
}

void CriteoStream::rewind() { open(0); }

bool CriteoStream::fill() {
  if (eof_) return false;
  const int n = gzread(as_gz(gz_), buf_.data(), static_cast<unsigned>(buf_.size()));
  if (n < 0) {
    int code = 0;
    const char* msg = gzerror(as_gz(gz_), &code);
    throw InputFileError(fmt::format("{}: cannot read after line {}: {}{}", file(), line_,
                                     code == Z_ERRNO ? std::strerror(errno) : msg,
                                     code == Z_BUF_ERROR ? " (a truncated gzip file?)" : ""));
  }
  begin_ = 0;
  end_ = static_cast<size_t>(n);
  if (n == 0) {
    // gzread returns 0 at the end, and also when a gzip stream ends early: gzerror tells them apart
    int code = 0;
    const char* msg = gzerror(as_gz(gz_), &code);
    if (code != Z_OK && code != Z_STREAM_END)
      throw InputFileError(fmt::format("{}: cannot read after line {}: {}{}", file(), line_, msg,
                                       code == Z_BUF_ERROR ? " (a truncated gzip file?)" : ""));
    eof_ = true;
    return false;
  }
  return true;
}

bool CriteoStream::next(std::string_view& line) {
  carry_.clear();
  for (;;) {
    if (begin_ < end_) {
      const char* s = buf_.data() + begin_;
      const void* nl = std::memchr(s, '\n', end_ - begin_);
      if (nl) {
        const size_t len = static_cast<size_t>(static_cast<const char*>(nl) - s);
        begin_ += len + 1;
        ++line_;
        if (carry_.empty()) {
          line = std::string_view(s, len);
        } else {
          carry_.append(s, len);
          line = carry_;
        }
        if (line.size() > kMaxLineBytes)
          throw InputFileError(fmt::format("{}: line {}: longer than {} bytes; not a Criteo file", file(), line_, kMaxLineBytes));
        return true;
      }
      carry_.append(s, end_ - begin_);
      begin_ = end_;
      if (carry_.size() > kMaxLineBytes)
        throw InputFileError(fmt::format("{}: line {}: longer than {} bytes; not a Criteo file", file(), line_ + 1, kMaxLineBytes));
    }
    if (fill()) continue;
    if (!carry_.empty()) {  // the last line has no '\n'
      ++line_;
      line = carry_;
      return true;
    }
    if (file_ + 1 >= paths_.size()) return false;
    open(file_ + 1);
  }
}

}  // namespace embedscope::engine

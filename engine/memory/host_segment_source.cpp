// The host segment source (allocator.h host_segment_source): anonymous mmap'ed memory. Its
// refusals are the machine's, not the modelled device's: they throw HostMemoryError naming the
// call, the bytes, errno and this process's address-space limit (ulimit -v), where one is set.
#include <sys/mman.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "embedscope/engine/memory/allocator.h"
#include "embedscope/sessions/model/units.h"

namespace embedscope::engine {

using sessions::format_bytes;

int64_t address_space_in_use() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmSize:", 0) == 0) {
      try {
        return std::stoll(line.substr(7)) * 1024;  // "VmSize:  123456 kB"
      } catch (const std::exception&) {
        return 0;
      }
    }
  return 0;
}

std::string address_space_limit_note() {
  rlimit r{};
  if (getrlimit(RLIMIT_AS, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return "";
  const int64_t in_use = address_space_in_use();
  return fmt::format("; this process's address space is limited to {} (ulimit -v){}",
                     format_bytes(static_cast<int64_t>(r.rlim_cur)),
                     in_use > 0 ? fmt::format(" and {} of it is in use", format_bytes(in_use)) : std::string());
}

namespace {

[[noreturn]] void refuse(const char* call, int64_t bytes, const char* what, int err) {
  throw HostMemoryError(fmt::format("host memory: {} of {} ({}) failed: {}{}", call, format_bytes(bytes), what,
                                    std::strerror(err), address_space_limit_note()));
}

class HostSegmentSource final : public SegmentSource {
 public:
  const char* name() const override { return "host"; }
  void* map(int64_t bytes) override { return mmap_bytes(bytes, PROT_READ | PROT_WRITE, "a segment"); }
  void unmap(void* p, int64_t bytes) override { munmap(p, page_bytes(bytes)); }
  void* reserve_range(int64_t bytes) override { return mmap_bytes(bytes, PROT_NONE, "an address range, PROT_NONE"); }
  bool commit(void* base, int64_t from, int64_t to) override {
    if (mprotect(static_cast<char*>(base) + from, static_cast<size_t>(to - from), PROT_READ | PROT_WRITE) != 0)
      refuse("mprotect", to - from, "pages of an address range made usable", errno);
    return true;
  }
  void decommit(void* base, int64_t from, int64_t to) override {
    madvise(static_cast<char*>(base) + from, static_cast<size_t>(to - from), MADV_DONTNEED);
    mprotect(static_cast<char*>(base) + from, static_cast<size_t>(to - from), PROT_NONE);
  }
  void release_range(void* base, int64_t bytes) override { munmap(base, page_bytes(bytes)); }

 private:
  static size_t page_bytes(int64_t bytes) { return static_cast<size_t>(std::max<int64_t>(bytes, 4096)); }
  static void* mmap_bytes(int64_t bytes, int prot, const char* what) {
    void* p = mmap(nullptr, page_bytes(bytes), prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) refuse("mmap", bytes, what, errno);
    return p;
  }
};

}  // namespace

std::shared_ptr<SegmentSource> host_segment_source() {
  static const auto s = std::make_shared<HostSegmentSource>();
  return s;
}

// VmmPages (allocator.h): the page bookkeeping of the CUDA VMM source.
VmmPages::VmmPages(int64_t granularity) : granularity_(granularity) {
  if (granularity <= 0) throw std::invalid_argument(fmt::format("VmmPages: granularity must be > 0, got {}", granularity));
}

std::pair<int64_t, int64_t> VmmPages::grow_to(int64_t bytes) {
  const int64_t need = round_up(std::max<int64_t>(bytes, 0)) / granularity_;
  if (need <= pages_) return {pages_, pages_};
  const std::pair<int64_t, int64_t> r{pages_, need};
  pages_ = need;
  return r;
}

std::pair<int64_t, int64_t> VmmPages::shrink_to(int64_t bytes) {
  const int64_t need = round_up(std::max<int64_t>(bytes, 0)) / granularity_;
  if (need >= pages_) return {pages_, pages_};
  const std::pair<int64_t, int64_t> r{need, pages_};
  pages_ = need;
  return r;
}
}  // namespace embedscope::engine

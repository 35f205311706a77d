// libFuzzer target: the pickle reader of PyTorch memory snapshots
// (sessions/importers/torch_memory_snapshot/pickle.h) on arbitrary bytes, plain or gzip.
// loads() either returns a value or throws PickleError naming the byte offset; its limits
// (depth, memory per input byte, inflated size) must hold for every input, which ASan's
// allocation limit (-malloc_limit_mb, -rss_limit_mb of the fuzz script) checks. Every value
// returned is walked to the bottom (each shared container once), as a consumer that recurses would.
// Seeds: tests/data/memory_snapshots/*.pickle*.
#include "embedscope/sessions/importers/torch_memory_snapshot/pickle.h"

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <unordered_set>

namespace {

namespace sp = embedscope::sessions::pickle;

/// Counts the values under `v`, each shared container once (a "billion laughs" pickle shares
/// one list a billion times: a walk that follows every reference is the consumer's problem).
/// Traps when the nesting is deeper than PickleLimits::max_depth allows.
size_t walk(const sp::Value& v, int depth, std::unordered_set<const void*>& seen) {
  if (depth > sp::PickleLimits{}.max_depth + 1) __builtin_trap();  // the depth bound did not hold
  if (v.identity() && !seen.insert(v.identity()).second) return 0;
  size_t n = 1 + v.as_string().size() / 1024;
  for (const auto& item : v.items()) n += walk(item, depth + 1, seen);
  for (const auto& [key, value] : v.pairs()) n += walk(key, depth + 1, seen) + walk(value, depth + 1, seen);
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  sp::PickleLimits limits;
  limits.max_inflated = int64_t{64} << 20;  // gzip bombs: the bound is tested, not the default's size
  try {
    std::string inflated;
    std::string_view text = bytes;
    if (sp::is_gzip(bytes)) {
      inflated = sp::gunzip(bytes, "fuzz", limits.max_inflated);
      text = inflated;
    }
    std::unordered_set<const void*> seen;
    (void)walk(sp::loads(text, "fuzz", limits), 0, seen);
  } catch (const sp::PickleError&) {
  }
  return 0;
}

#pragma once
// Names with stable addresses for the whole import, shared by the importers (SessionWriter
// caches op names by pointer, so a name must not move while the writer may still see it).

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>

namespace embedscope::sessions::importers {

/// Interns strings: id(s) returns the same dense id (0, 1, ...) for equal texts, and text(id)
/// a reference that stays valid as long as the Interner lives. Not thread-safe.
class Interner {
 public:
  uint32_t id(std::string_view s) {
    if (auto it = ids_.find(s); it != ids_.end()) return it->second;
    store_.emplace_back(s);
    const auto id = static_cast<uint32_t>(store_.size() - 1);
    ids_.emplace(store_.back(), id);
    return id;
  }
  const std::string& text(uint32_t id) const { return store_[id]; }
  /// Distinct texts so far (ids are 0 .. size() - 1).
  size_t size() const { return store_.size(); }

 private:
  std::deque<std::string> store_;
  std::unordered_map<std::string_view, uint32_t> ids_;
};

}  // namespace embedscope::sessions::importers

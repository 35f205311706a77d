#pragma once
// What an OOM left in a session, for the tests of runs that end oom (host and device paths).

#include <optional>
#include <set>
#include <string>

#include "embedscope/sessions/store/session.h"

namespace embedscope::test_support {

/// The tags ("weights", "activations", ...) of the allocated blocks in `session`'s first memory
/// snapshot taken for an OOM (reason "oom"); nullopt when the session has no such snapshot.
inline std::optional<std::set<std::string>> oom_snapshot_tags(const sessions::SessionReader& session) {
  for (const auto& sn : session.memory_snapshots()) {
    if (sn.reason != "oom") continue;
    std::set<std::string> tags;
    for (const auto& b : session.memory_blocks(sn.id))
      if (b.allocated) tags.insert(b.tag);
    return tags;
  }
  return std::nullopt;
}

}  // namespace embedscope::test_support

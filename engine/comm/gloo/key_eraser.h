#pragma once
// A rendezvous store whose keys can be removed (tester50 F7). Gloo's Store has no delete; a
// store that can delete (the launch FileStore of exec/launch/store.h, the in-process HashStore of
// Rendezvous::in_process) also derives from KeyEraser, and ProcessGroup (comm/gloo/
// process_group.cpp) finds it with a dynamic_cast on the store given to Rendezvous::over_store.
// Internal to the engine (a header of its own, not in include/: the public gloo_process_group.h
// is included by nearly every source of the engine).

#include <string>

namespace embedscope::engine {

/// Removal of keys of a gloo::rendezvous::Store, beside it (a mixin: the store class derives
/// from both).
class KeyEraser {
 public:
  virtual ~KeyEraser() = default;
  /// Removes `key` (as the store's own set/get name it); nothing when it is not set. Throws
  /// nothing (a key that cannot be removed stays, as every key did before).
  virtual void erase_key(const std::string& key) noexcept = 0;
};

}  // namespace embedscope::engine

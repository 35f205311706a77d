#pragma once
// SpecError: the one exception type for bad input to the engine (a workload, a flag, a file).

#include <stdexcept>

namespace embedscope::engine {

/// Bad input: a spec, a flag or a file. The message names the JSON pointer (or the file or
/// flag) and the reason, e.g. "/tables/3/embedding_dim: must be > 0, got 0". CLI exit code 2.
class SpecError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace embedscope::engine

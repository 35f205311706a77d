#pragma once
// Every problem the engine's validator finds in a workload document, not only the first: the
// designer marks each bad field at once (tester60a F8: with embedding_dim 0 and batch_size -1 it
// marked the first, and fixing it revealed the next). Qt-free.

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace embedscope::ui {

/// One problem: its JSON pointer ("/batch_size") and the validator's message without the origin
/// ("/batch_size: must be > 0, got -1").
struct WorkloadError {
  std::string pointer, message;
  friend bool operator==(const WorkloadError&, const WorkloadError&) = default;
};

/// The validator's (engine::parse_workload with `origin`) problems of `doc`, in the order it finds
/// them: the first, then those it finds once each earlier bad value is taken out (a key of an
/// object: the engine's default then applies; a key it requires: 1 in a number's place), at most
/// `max_errors`. Stops at a problem without a pointer, one naming a whole table or feature entry
/// (taking it out would renumber the rows), or one that names a pointer again. Empty for a
/// document that parses. Cost: one parse per problem (and per required key).
std::vector<WorkloadError> every_workload_error(nlohmann::json doc, const std::string& origin, size_t max_errors = 16);

}  // namespace embedscope::ui

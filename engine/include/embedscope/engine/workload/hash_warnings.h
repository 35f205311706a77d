#pragma once
// A warning for a hashed table that stores no fewer rows than it has ids (TableSpec::hash_size
// >= num_embeddings): valid (hash_size is in [1, num_embeddings]), but hashing then saves no
// byte and only makes ids collide (XXH64 maps n ids onto n rows at random: about n / e rows stay
// empty), so `run` and `plan` say so before they start (a typo's likely sign).

#include <string>
#include <vector>

#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine {

/// One warning per such table, naming its JSON pointer. Example (50,000 ids, hash_size 50000):
///   "/tables/0/hash_size: 50000 = num_embeddings of table \"t0\": hashing saves no byte here and
///   makes ids collide (about 37 % of the rows stay empty, as many ids share one); leave it out
///   for no hashing, or give fewer rows".
std::vector<std::string> hash_size_warnings(const WorkloadSpec& spec);

}  // namespace embedscope::engine

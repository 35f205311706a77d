// Warnings for hash_size >= num_embeddings (workload/hash_warnings.h).
#include "embedscope/engine/workload/hash_warnings.h"

#include <fmt/format.h>

namespace embedscope::engine {

std::vector<std::string> hash_size_warnings(const WorkloadSpec& spec) {
  std::vector<std::string> out;
  for (size_t i = 0; i < spec.tables.size(); ++i) {
    const TableSpec& t = spec.tables[i];
    if (t.hash_size <= 0 || t.hash_size < t.num_embeddings) continue;
    // n ids onto n rows uniformly: a row stays empty with probability (1 - 1/n)^n -> 1/e
    out.push_back(fmt::format("/tables/{}/hash_size: {} {} num_embeddings of table \"{}\": hashing saves no byte here "
                              "and makes ids collide (about 37 % of the rows stay empty, as many ids share one); leave "
                              "it out for no hashing, or give fewer rows",
                              i, t.hash_size, t.hash_size == t.num_embeddings ? "=" : ">=", t.name));
  }
  return out;
}

}  // namespace embedscope::engine

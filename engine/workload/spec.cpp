// WorkloadSpec's lookups between features and tables.

#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine {

int WorkloadSpec::table_of_feature(size_t f) const {
  if (f >= features.size()) return -1;
  const std::string& name = features[f].name;
  for (size_t t = 0; t < tables.size(); ++t) {
    for (const std::string& n : tables[t].feature_names) {
      if (n == name) return static_cast<int>(t);
    }
  }
  return -1;
}

int WorkloadSpec::feature_index(const std::string& name) const {
  for (size_t f = 0; f < features.size(); ++f) {
    if (features[f].name == name) return static_cast<int>(f);
  }
  return -1;
}

}  // namespace embedscope::engine

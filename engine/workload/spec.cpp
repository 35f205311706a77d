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

FeatureIndex::FeatureIndex(const WorkloadSpec& spec) : table_of_feature_(spec.features.size(), -1) {
  for (size_t f = 0; f < spec.features.size(); ++f) by_name_.emplace(spec.features[f].name, static_cast<int>(f));
  std::map<std::string, int> table_of_name;  // the first table listing a name
  features_of_table_.resize(spec.tables.size());
  for (size_t t = 0; t < spec.tables.size(); ++t)
    for (const std::string& n : spec.tables[t].feature_names) {
      table_of_name.emplace(n, static_cast<int>(t));
      features_of_table_[t].push_back(feature_index(n));
    }
  for (size_t f = 0; f < spec.features.size(); ++f)
    if (auto it = table_of_name.find(spec.features[f].name); it != table_of_name.end()) table_of_feature_[f] = it->second;
}

int FeatureIndex::feature_index(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? -1 : it->second;
}

}  // namespace embedscope::engine

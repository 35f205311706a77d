#pragma once
// "shared_with" (TableSpec::shared_tables): tables that use another table's rows, folded into
// it after reading. Internal to workload/ (reader.cpp).

#include <string>
#include <vector>

#include "checker.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine::workload_detail {

/// Folds every table t with a non-empty shared_with[t] into the table it names (the owner):
/// t's feature_names are appended to the owner's, t is recorded in owner.shared_tables and
/// removed from s.tables. Runs after validate_spec (so every other error names the pointer of
/// the file as written). Errors (SpecError through c, naming /tables/<t>/<field>):
///   shared_with names no table, or t itself; the owner shares another table's rows itself (a
///   chain or a cycle); num_embeddings, embedding_dim, pooling, data_type, hash_size,
///   optimizer_state_type or low_rank_dim differ from the owner's (the rows are the owner's);
///   a sharding override for t (/sharding/tables/<t>: the owner's placement applies).
void fold_shared_tables(WorkloadSpec& s, const std::vector<std::string>& shared_with, const Checker& c);

}  // namespace embedscope::engine::workload_detail

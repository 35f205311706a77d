#include "core/load_data.h"

#include <algorithm>
#include <set>
#include <stdexcept>

#include "embedscope/sessions/analysis/analysis.h"  // rank_list
#include "embedscope/sessions/model/id_buckets.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::ui {

std::vector<int64_t> RowHistogram::boundaries() const {
  std::set<int64_t> b;
  if (sharding_type == "row_wise" || sharding_type == "table_row_wise" || sharding_type == "vocab_parallel")
    for (const auto& s : shards)
      if (s.row_offset > 0 && s.row_offset < num_rows) b.insert(s.row_offset);
  return {b.begin(), b.end()};
}

double RowHistogram::ids_per_row(size_t b) const {
  const int64_t rows = row_end.at(b) - row_begin.at(b);
  return rows > 0 ? static_cast<double>(ids.at(b)) / static_cast<double>(rows) : 0.0;
}

size_t RowHistogram::hottest_bucket() const {
  size_t hot = 0;
  for (size_t b = 1; b < ids.size(); ++b)
    if (ids_per_row(b) > ids_per_row(hot)) hot = b;
  return hot;
}

RowHistogram row_histogram(const sessions::SessionReader& session, int table) {
  const auto tables = sessions::workload_tables(session);
  if (table < 0 || static_cast<size_t>(table) >= tables.size())
    throw std::out_of_range(session.path() + ": the workload has no table " + std::to_string(table));
  RowHistogram h;
  h.table = tables[static_cast<size_t>(table)].name;
  h.num_rows = tables[static_cast<size_t>(table)].num_embeddings;
  const int64_t buckets = h.num_rows > 0 ? sessions::id_buckets_of(h.num_rows) : 0;
  for (int64_t b = 0; b < buckets; ++b) {
    h.row_begin.push_back(sessions::id_bucket_begin(h.num_rows, b));
    h.row_end.push_back(sessions::id_bucket_begin(h.num_rows, b + 1));
  }
  h.ids.assign(static_cast<size_t>(buckets), 0);
  for (const auto& b : session.id_histogram())
    if (b.table == table && b.bucket >= 0 && b.bucket < buckets) h.ids[static_cast<size_t>(b.bucket)] += b.ids;
  try {  // the shard boundaries (table `shards`, or the plan JSON of older files)
    for (const auto& sh : session.shards()) {
      if (sh.table_name != h.table) continue;
      h.sharding_type = sh.sharding_type;
      h.shards.push_back({sh.rank, sh.row_offset, sh.num_rows});
    }
  } catch (const std::exception&) {
    h.shards.clear();  // no plan: the histogram without boundaries
  }
  // a live rebalance that re-sharded the table (tester63b F4: a table split row_wise after step 2
  // read "table_wise on rank(s) 0" with no row ranges): the shards of its last change, which
  // plan_change_records writes whole (one row per shard of the table's new plan)
  int64_t last = -1;
  const std::vector<sessions::PlanChangeRecord> changes = session.plan_changes();
  for (const auto& c : changes)
    if (c.table == table) last = std::max(last, c.step);
  if (last >= 0) {
    std::vector<int32_t> before;
    for (const auto& s : h.shards) before.push_back(s.rank);
    const std::string start_type = h.sharding_type.empty() ? std::string("unplanned") : h.sharding_type;
    h.shards.clear();
    for (const auto& c : changes) {
      if (c.table != table || c.step != last) continue;
      h.sharding_type = c.to_type;
      h.shards.push_back({c.to_rank, c.row_offset, c.num_rows < 0 ? h.num_rows : c.num_rows});
    }
    h.plan_note = "from step " + std::to_string(last) + " (a live rebalance); " + start_type + " on rank(s) " +
                  sessions::rank_list(before) + " before";
  }
  return h;
}

}  // namespace embedscope::ui

#include "core/load_data.h"

#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "embedscope/engine/id_histogram.h"

namespace embedscope::ui {

std::vector<int64_t> RowHistogram::boundaries() const {
  std::set<int64_t> b;
  if (sharding_type == "row_wise" || sharding_type == "table_row_wise")
    for (const auto& s : shards)
      if (s.row_offset > 0 && s.row_offset < num_rows) b.insert(s.row_offset);
  return {b.begin(), b.end()};
}

RowHistogram row_histogram(const sessions::SessionReader& session, int table) {
  const auto tables = sessions::workload_tables(session);
  if (table < 0 || static_cast<size_t>(table) >= tables.size())
    throw std::out_of_range(session.path() + ": the workload has no table " + std::to_string(table));
  RowHistogram h;
  h.table = tables[static_cast<size_t>(table)].name;
  h.num_rows = tables[static_cast<size_t>(table)].num_embeddings;
  const int64_t buckets = h.num_rows > 0 ? engine::IdHistogram::buckets_of(h.num_rows) : 0;
  for (int64_t b = 0; b < buckets; ++b) {
    h.row_begin.push_back(engine::IdHistogram::bucket_begin(h.num_rows, b));
    h.row_end.push_back(engine::IdHistogram::bucket_begin(h.num_rows, b + 1));
  }
  h.ids.assign(static_cast<size_t>(buckets), 0);
  for (const auto& b : session.id_histogram())
    if (b.table == table && b.bucket >= 0 && b.bucket < buckets) h.ids[static_cast<size_t>(b.bucket)] += b.ids;
  try {
    for (const auto& t : nlohmann::json::parse(session.meta("sharding_plan_json", "{}")).value("tables", nlohmann::json::array())) {
      if (t.value("name", "") != h.table) continue;
      h.sharding_type = t.value("sharding_type", "");
      for (const auto& s : t.value("shards", nlohmann::json::array()))
        h.shards.push_back({s.value("rank", 0), s.value("row_offset", int64_t{0}), s.value("num_rows", int64_t{0})});
    }
  } catch (const std::exception&) {
    h.shards.clear();  // no plan: the histogram without boundaries
  }
  return h;
}

}  // namespace embedscope::ui

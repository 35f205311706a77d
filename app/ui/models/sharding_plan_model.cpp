#include "models/sharding_plan_model.h"

#include <map>
#include <tuple>

#include <nlohmann/json.hpp>

#include "embedscope/engine/sharding.h"

namespace embedscope::ui {

namespace {
using json = nlohmann::json;

const char* short_type(const std::string& t) {
  if (t == "data_parallel") return "DP";
  if (t == "table_wise") return "TW";
  if (t == "row_wise") return "RW";
  if (t == "column_wise") return "CW";
  if (t == "table_row_wise") return "TWRW";
  return t.c_str();
}

// The plan as written by engine::to_json(spec, plan), back into an engine::ShardingPlan.
engine::ShardingPlan plan_from_json(const json& j) {
  engine::ShardingPlan plan;
  plan.world_size = j.at("world_size").get<int>();
  plan.local_world_size = j.value("local_world_size", plan.world_size);
  int t = 0;
  for (const auto& tj : j.at("tables")) {
    engine::TablePlan tp;
    tp.table = t++;
    tp.type = engine::sharding_type_from_string(tj.at("sharding_type").get<std::string>(), "sharding_plan_json");
    tp.node = tj.value("node", -1);
    for (const auto& s : tj.at("shards"))
      tp.shards.push_back({s.at("rank").get<int>(), s.at("row_offset").get<int64_t>(), s.at("num_rows").get<int64_t>(),
                           s.at("col_offset").get<int64_t>(), s.at("num_cols").get<int64_t>()});
    plan.tables.push_back(std::move(tp));
  }
  return plan;
}
}  // namespace

ShardingPlanModel::ShardingPlanModel(const sessions::SessionReader& session, const sessions::RunStats& stats,
                                     QObject* parent)
    : QAbstractItemModel(parent) {
  json plan;
  try {
    plan = json::parse(session.meta("sharding_plan_json", "{}"));
  } catch (const std::exception&) {
    return;
  }
  if (!plan.is_object() || !plan.contains("tables") || !plan["tables"].is_array()) return;
  const int world = plan.value("world_size", 0);
  if (world <= 0) return;
  ranks_.resize(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) ranks_[static_cast<size_t>(r)].rank = r;
  std::map<std::tuple<int, int, int>, size_t> where;  // (rank, table, shard) -> index in that rank's shards
  int t = 0;
  for (const auto& tj : plan["tables"]) {
    int s = 0;
    for (const auto& sj : tj.value("shards", json::array())) {
      const int shard = s++;
      const int rank = sj.value("rank", -1);
      if (rank < 0 || rank >= world) continue;
      ShardRow row;
      row.table = tj.value("name", std::string());
      row.type = tj.value("sharding_type", std::string());
      row.shard = shard;
      row.num_rows = sj.value("num_rows", int64_t{0});
      row.num_cols = sj.value("num_cols", int64_t{0});
      row.row_offset = sj.value("row_offset", int64_t{0});
      row.col_offset = sj.value("col_offset", int64_t{0});
      row.weight_bytes = row.num_rows * row.num_cols * 4;
      auto& shards = ranks_[static_cast<size_t>(rank)].shards;
      where[{rank, t, shard}] = shards.size();
      shards.push_back(std::move(row));
    }
    ++t;
  }
  for (const auto& c : session.load()) {
    if (c.step < 0 || c.rank < 0 || c.rank >= world) continue;  // warmup steps are not measured
    RankRow& r = ranks_[static_cast<size_t>(c.rank)];
    r.ids += c.ids;
    r.bytes_in += c.bytes_in;
    r.bytes_out += c.bytes_out;
    if (auto it = where.find({c.rank, c.table, c.shard}); it != where.end()) {
      ShardRow& s = r.shards[it->second];
      s.ids += c.ids;
      s.bytes_in += c.bytes_in;
      s.bytes_out += c.bytes_out;
    }
  }
  for (const auto& rs : stats.ranks)
    if (rs.rank >= 0 && rs.rank < world && rs.peak_allocated_bytes > 0)
      ranks_[static_cast<size_t>(rs.rank)].peak_bytes = rs.peak_allocated_bytes;
  try {  // the planner's estimate for the workload as run
    const engine::WorkloadSpec spec = engine::parse_workload(json::parse(session.meta("workload_json", "{}")), "workload_json");
    for (const auto& e : engine::estimate_memory(spec, plan_from_json(plan)))
      if (e.rank >= 0 && e.rank < world) ranks_[static_cast<size_t>(e.rank)].planned_bytes = e.total();
  } catch (const std::exception&) {  // a session without its workload (hand-built, imported): no estimate
  }
}

QModelIndex ShardingPlanModel::index(int row, int column, const QModelIndex& parent) const {
  if (row < 0 || column < 0 || column >= ColumnCount || row >= rowCount(parent)) return {};
  // top-level rows carry id 0; a shard row carries its rank + 1
  return createIndex(row, column, parent.isValid() ? static_cast<quintptr>(parent.row() + 1) : quintptr{0});
}

QModelIndex ShardingPlanModel::parent(const QModelIndex& child) const {
  if (!child.isValid() || child.internalId() == 0) return {};
  return createIndex(static_cast<int>(child.internalId() - 1), 0, quintptr{0});
}

int ShardingPlanModel::rowCount(const QModelIndex& parent) const {
  if (!parent.isValid()) return static_cast<int>(ranks_.size());
  if (parent.internalId() != 0 || parent.column() != 0) return 0;
  return static_cast<int>(ranks_[static_cast<size_t>(parent.row())].shards.size());
}

int ShardingPlanModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() && parent.internalId() != 0 ? 0 : ColumnCount;
}

QVariant ShardingPlanModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.column() >= ColumnCount) return {};
  const bool is_rank = index.internalId() == 0;
  const RankRow& r = ranks_[static_cast<size_t>(is_rank ? index.row() : static_cast<int>(index.internalId() - 1))];
  if (role == Qt::TextAlignmentRole && index.column() >= PlannedMemory) return int(Qt::AlignRight | Qt::AlignVCenter);
  if (role != Qt::DisplayRole && role != Qt::UserRole) return {};
  auto bytes = [&](int64_t b) -> QVariant {
    if (b < 0) return role == Qt::UserRole ? QVariant() : QVariant(QString());
    return role == Qt::UserRole ? QVariant::fromValue<qlonglong>(b) : QString::fromStdString(engine::format_bytes(b));
  };
  auto count = [&](int64_t n) -> QVariant { return QVariant::fromValue<qlonglong>(n); };
  if (is_rank) {
    switch (index.column()) {
      case Name: return role == Qt::UserRole ? QVariant(r.rank) : QVariant(QString("rank %1").arg(r.rank));
      case Sharding: {
        if (role == Qt::UserRole) return static_cast<int>(r.shards.size());
        std::map<std::string, int> by_type;
        for (const auto& s : r.shards) ++by_type[short_type(s.type)];
        QStringList parts;
        for (const auto& [type, n] : by_type) parts << QString("%1: %2").arg(QString::fromStdString(type)).arg(n);
        return parts.isEmpty() ? QString("no shards") : parts.join(", ");
      }
      case Size: {
        int64_t weights = 0;
        for (const auto& s : r.shards) weights += s.weight_bytes;
        if (role == Qt::UserRole) return QVariant::fromValue<qlonglong>(weights);
        return "weights " + QString::fromStdString(engine::format_bytes(weights));
      }
      case PlannedMemory: return bytes(r.planned_bytes);
      case PeakMemory: return bytes(r.peak_bytes);
      case IdsLookedUp: return count(r.ids);
      case BytesIn: return bytes(r.bytes_in);
      case BytesOut: return bytes(r.bytes_out);
      default: return {};
    }
  }
  const ShardRow& s = r.shards[static_cast<size_t>(index.row())];
  switch (index.column()) {
    case Name: return QString::fromStdString(s.table);
    case Sharding: return QString("%1 #%2").arg(QString::fromStdString(s.type)).arg(s.shard);
    case Size:
      if (role == Qt::UserRole) return QVariant::fromValue<qlonglong>(s.num_rows * s.num_cols);
      return QString("%1 x %2 @ %3, %4").arg(s.num_rows).arg(s.num_cols).arg(s.row_offset).arg(s.col_offset);
    case PlannedMemory: return bytes(s.weight_bytes);
    case PeakMemory: return role == Qt::UserRole ? QVariant() : QVariant(QString());
    case IdsLookedUp: return count(s.ids);
    case BytesIn: return bytes(s.bytes_in);
    case BytesOut: return bytes(s.bytes_out);
    default: return {};
  }
}

QVariant ShardingPlanModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return QAbstractItemModel::headerData(section, orientation, role);
  static const char* names[] = {"rank / table", "shards",       "rows x cols @ offset", "planned memory",
                                "peak allocated", "ids looked up", "bytes in",             "bytes out"};
  return section >= 0 && section < ColumnCount ? QString(names[section]) : QVariant();
}

}  // namespace embedscope::ui

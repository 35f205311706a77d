#include "models/sharding_plan_model.h"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include <QColor>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/plan_history.h"
#include "embedscope/engine/rebalance/reshard.h"
#pragma push_macro("slots")  // Qt's `slots` keyword macro vs HostRowStore::slots()
#undef slots
#include "embedscope/engine/model/host_cache.h"
#pragma pop_macro("slots")
#include "embedscope/engine/model/low_rank.h"
#include "embedscope/engine/planner/lm_memory_estimate.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/lm_spec.h"
#include "embedscope/sessions/analysis/estimate_rounding.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/model/units.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::ui {

namespace {
using json = nlohmann::json;

// TorchRec's abbreviations (DESIGN.md vocabulary) of the spellings in engine/workload/enums.h.
const char* short_type(const std::string& t) {
  const auto type = engine::enum_from_name<engine::ShardingType>(t);
  if (!type) return t.c_str();
  switch (*type) {
    case engine::ShardingType::data_parallel: return "DP";
    case engine::ShardingType::table_wise: return "TW";
    case engine::ShardingType::row_wise: return "RW";
    case engine::ShardingType::column_wise: return "CW";
    case engine::ShardingType::table_row_wise: return "TWRW";
    case engine::ShardingType::table_column_wise: return "TWCW";
    case engine::ShardingType::grid_shard: return "GRID";
  }
  return t.c_str();
}

// The session's shards (table `shards`, or the plan JSON of older files) as an
// engine::ShardingPlan over `world` ranks, for the planner's estimate. local_world_size is
// the shard count of a table_row_wise table (one shard per rank of its node) or of a grid_shard
// table's column block, else the world.
engine::ShardingPlan plan_of(const std::vector<sessions::ShardRecord>& shards, int world) {
  engine::ShardingPlan plan;
  plan.world_size = world;
  plan.local_world_size = world;
  for (const auto& sh : shards) {
    if (sh.table < 0) continue;
    if (static_cast<size_t>(sh.table) >= plan.tables.size()) plan.tables.resize(static_cast<size_t>(sh.table) + 1);
    engine::TablePlan& tp = plan.tables[static_cast<size_t>(sh.table)];
    tp.table = sh.table;
    tp.type = engine::sharding_type_from_string(sh.sharding_type, "shards");
    tp.node = sh.node;
    tp.shards.push_back({sh.rank, sh.row_offset, sh.num_rows, sh.col_offset, sh.num_cols});
  }
  for (const auto& tp : plan.tables) {
    if (tp.type == engine::ShardingType::table_row_wise) plan.local_world_size = static_cast<int>(tp.shards.size());
    if (tp.type == engine::ShardingType::grid_shard && !tp.shards.empty())
      plan.local_world_size = static_cast<int>(std::count_if(tp.shards.begin(), tp.shards.end(), [&](const engine::Shard& s) {
        return s.col_offset == tp.shards.front().col_offset;
      }));
  }
  return plan;
}
}  // namespace

ShardingPlanModel::ShardingPlanModel(const sessions::SessionReader& session, const sessions::RunStats& stats,
                                     QObject* parent)
    : QAbstractItemModel(parent), cuda_(session.meta(sessions::meta::kBackend) == "cuda") {
  std::vector<sessions::ShardRecord> initial;  // the plan the run started with, as the session stores it
  try {
    initial = session.shards();
  } catch (const std::exception&) {  // an older file whose plan JSON is unreadable: no plan
    return;
  }
  // live rebalances: the plan shown is the one the run ended with
  const std::vector<sessions::PlanChangeRecord> changes = session.plan_changes();
  {
    std::set<int64_t> steps;
    for (const auto& c : changes) steps.insert(c.step);
    plan_changes_ = static_cast<int>(steps.size());
  }
  const std::vector<sessions::ShardRecord> plan =
      changes.empty() ? initial : shards_at(initial, changes, std::numeric_limits<int64_t>::max());
  int world = static_cast<int>(std::strtol(session.meta(sessions::meta::kWorldSize, "0").c_str(), nullptr, 10));
  for (const auto& sh : plan) world = std::max(world, sh.rank + 1);
  if (plan.empty() || world <= 0) return;
  ranks_.resize(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) ranks_[static_cast<size_t>(r)].rank = r;
  std::map<std::tuple<int, int, int>, size_t> where;  // (rank, table, shard) -> index in that rank's shards
  for (const auto& sh : plan) {
    if (sh.rank < 0) continue;
    ShardRow row;
    row.table = sh.table_name;
    row.type = sh.sharding_type;
    row.shard = sh.shard_index;
    row.num_rows = sh.num_rows;
    row.num_cols = sh.num_cols;
    row.row_offset = sh.row_offset;
    row.col_offset = sh.col_offset;
    row.weight_bytes = row.num_rows * row.num_cols * 4;
    auto& shards = ranks_[static_cast<size_t>(sh.rank)].shards;
    where[{sh.rank, sh.table, sh.shard_index}] = shards.size();
    shards.push_back(std::move(row));
  }
  // the measured steps of `stats` only (tester43 F15): a live session read again here may hold
  // counters of a step in progress for some ranks, which the rank table (stats) did not count
  int64_t last_step = std::numeric_limits<int64_t>::max();
  if (!stats.per_step.empty()) {
    last_step = stats.per_step.front().step;
    for (const auto& t : stats.per_step) last_step = std::max(last_step, t.step);
  }
  // nor a pipeline's drain steps, which stats leaves out of the ranks' counts (tester48 F4)
  for (const auto& t : stats.per_step)
    if (t.drain) last_step = std::min(last_step, t.step - 1);
  // Each counter is credited to the shard that served it in its step (tester49 F3): the shard of
  // the plan in force then (core/plan_history.h shards_at), the row of the plan shown when it is
  // the same shard (rank, type, rows and columns), else a row of its own for that former shard
  // on the rank that served it - not the shard of the plan shown that reuses its index (a
  // table_wise table split row_wise credited its row_wise shard #0 with the table_wise ids).
  // A rank's hot-row replica (kHotRowReplicaShard) gets a row of its own (tester49 F8a).
  std::vector<std::string> table_names;  // by table index, from the plan the run started with
  for (const auto& sh : initial)
    if (sh.table >= 0) {
      if (static_cast<size_t>(sh.table) >= table_names.size()) table_names.resize(static_cast<size_t>(sh.table) + 1);
      table_names[static_cast<size_t>(sh.table)] = sh.table_name;
    }
  std::map<int64_t, std::vector<sessions::ShardRecord>> plan_from;  // first step of a plan -> its shards
  std::set<int64_t> change_steps;
  for (const auto& c : changes) change_steps.insert(c.step);
  auto served_by = [&](const sessions::LoadCounter& c) -> const sessions::ShardRecord* {
    const auto next = change_steps.upper_bound(c.step);
    const int64_t from = next == change_steps.begin() ? std::numeric_limits<int64_t>::min() : *std::prev(next);
    auto it = plan_from.find(from);
    if (it == plan_from.end()) it = plan_from.emplace(from, shards_at(initial, changes, c.step)).first;
    for (const auto& sh : it->second)
      if (sh.table == c.table && sh.shard_index == c.shard) return &sh;
    return nullptr;
  };
  auto same_shard = [](const sessions::ShardRecord& a, const ShardRow& b, int rank, int b_rank) {
    return rank == b_rank && a.sharding_type == b.type && a.row_offset == b.row_offset && a.num_rows == b.num_rows &&
           a.col_offset == b.col_offset && a.num_cols == b.num_cols;
  };
  std::map<std::tuple<int, int, int, std::string, int64_t, int64_t, int64_t, int64_t>, size_t> former;
  for (const auto& c : session.load()) {
    if (c.step < 0 || c.step > last_step || c.rank < 0 || c.rank >= world) continue;  // warmup steps are not measured
    RankRow& r = ranks_[static_cast<size_t>(c.rank)];
    r.ids += c.ids;
    r.bytes_in += c.bytes_in;
    r.bytes_out += c.bytes_out;
    ShardRow* s = nullptr;
    if (c.shard == sessions::kHotRowReplicaShard) {
      auto it = where.find({c.rank, c.table, c.shard});
      if (it == where.end()) {
        ShardRow row;
        row.table = c.table >= 0 && static_cast<size_t>(c.table) < table_names.size() ? table_names[static_cast<size_t>(c.table)]
                                                                                     : fmt::format("table {}", c.table);
        row.type = "hot_rows";
        row.shard = sessions::kHotRowReplicaShard;
        it = where.emplace(std::tuple{c.rank, c.table, c.shard}, r.shards.size()).first;
        r.shards.push_back(std::move(row));
      }
      s = &r.shards[it->second];
    } else if (auto it = where.find({c.rank, c.table, c.shard}); it != where.end()) {
      s = &r.shards[it->second];
      if (!changes.empty()) {
        const sessions::ShardRecord* then = served_by(c);
        if (then && !same_shard(*then, *s, then->rank, c.rank)) s = nullptr;
        if (!then) s = nullptr;
      }
    } else {
      s = nullptr;
    }
    if (!s && !changes.empty() && c.shard != sessions::kHotRowReplicaShard) {
      if (const sessions::ShardRecord* then = served_by(c)) {  // a shard of an earlier plan
        const auto key = std::tuple{c.rank, c.table, c.shard, then->sharding_type, then->row_offset, then->num_rows,
                                    then->col_offset, then->num_cols};
        auto it = former.find(key);
        if (it == former.end()) {
          ShardRow row;
          row.table = then->table_name;
          row.type = then->sharding_type;
          row.shard = c.shard;
          row.num_rows = then->num_rows;
          row.num_cols = then->num_cols;
          row.row_offset = then->row_offset;
          row.col_offset = then->col_offset;
          row.weight_bytes = 0;  // no longer held
          it = former.emplace(key, r.shards.size()).first;
          r.shards.push_back(std::move(row));
        }
        s = &r.shards[it->second];
        s->served_until = std::max(s->served_until, c.step);
      }
    }
    if (!s) continue;
    s->ids += c.ids;
    s->bytes_in += c.bytes_in;
    s->bytes_out += c.bytes_out;
    s->cache_hits += c.cache_hits;
    s->cache_misses += c.cache_misses;
  }
  for (const auto& rs : stats.ranks)
    if (rs.rank >= 0 && rs.rank < world && rs.peak_allocated_bytes > 0)
      ranks_[static_cast<size_t>(rs.rank)].peak_bytes = rs.peak_allocated_bytes;
  if (fill_lm_estimate(session.meta(sessions::meta::kWorkloadJson, "{}"))) {
    // an lm_embedding rank's traffic is its collectives' (every rank all-reduces or
    // reduce-scatters the whole masked [T x H] partial sum, Megatron's VocabParallelEmbedding),
    // not its lookups' ids x 8 and rows x H x 2 or 4 (tester62a F9: a 43x spread that the wire
    // does not have): the bytes `stats` and `run` give each rank, over the measured steps
    lm_steps_ = stats.counted_steps();
    for (const auto& rs : stats.ranks)
      if (rs.rank >= 0 && rs.rank < world) {
        ranks_[static_cast<size_t>(rs.rank)].bytes_in = rs.bytes_received;
        ranks_[static_cast<size_t>(rs.rank)].bytes_out = rs.bytes_sent;
      }
    return;
  }
  try {  // the planner's estimate for the workload as run
    const engine::WorkloadSpec spec = engine::parse_workload(json::parse(session.meta(sessions::meta::kWorkloadJson, "{}")), sessions::meta::kWorkloadJson);
    // each shard's bytes as the run stores them (shard_weight_bytes: the table's data_type, or A's
    // rows and the copy of B of a low-rank table; rows x cols x 4 above is fp32's); shards in
    // host memory: the device holds the cache (host_cached) or nothing, the host the rows and
    // state (model/host_cache.h, as the run's table storage counts them)
    for (auto& rr : ranks_)
      for (ShardRow& s : rr.shards) {
        const auto t = std::find_if(spec.tables.begin(), spec.tables.end(), [&](const engine::TableSpec& ts) { return ts.name == s.table; });
        if (t == spec.tables.end() || s.former()) continue;  // a former shard holds no bytes now
        if (s.hot_row_replica()) {  // hot rows x dim, fp32 (validate: hot rows are fp32 only)
          const auto o = spec.sharding.per_table.find(s.table);
          s.num_rows = o == spec.sharding.per_table.end() ? 0 : static_cast<int64_t>(o->second.hot_rows.size());
          s.num_cols = t->embedding_dim;
          s.weight_bytes = s.num_rows * s.num_cols * 4;
          continue;
        }
        if (t->placement == engine::TablePlacement::device) {  // as stored: data_type, low-rank A and B
          s.weight_bytes = engine::shard_weight_bytes(*t, s.num_rows, s.num_cols);
          continue;
        }
        s.placement = engine::enum_name(t->placement);
        s.weight_bytes = 0;
        s.host_bytes = engine::shard_weight_bytes(*t, s.num_rows, s.num_cols) +
                       engine::shard_optimizer_state_bytes(spec.optimizer.type, *t, s.num_rows, s.num_cols);
        if (t->placement != engine::TablePlacement::host_cached) continue;
        s.cache_bytes = engine::cache_device_bytes(t->cache_load_factor, s.num_rows, s.num_cols);
        s.host_bytes += 8 * s.num_rows * (t->cache_policy == engine::CachePolicy::lfu ? 2 : 1);
      }
    for (const auto& e : engine::estimate_memory(spec, plan_of(plan, world)))
      if (e.rank >= 0 && e.rank < world) ranks_[static_cast<size_t>(e.rank)].planned_bytes = e.total();
    compare_peaks(spec, initial, changes, session.memory_counters(), world);
  } catch (const std::exception&) {  // a session without its workload (hand-built, imported): no estimate
  }
}

bool ShardingPlanModel::fill_lm_estimate(const std::string& workload_json) {
  const json wl = json::parse(workload_json, nullptr, false);
  if (wl.is_discarded() || !engine::is_lm_workload(wl)) return false;
  lm_ = true;
  try {  // one plan all along: the peak is compared with the estimate shown
    const int world = static_cast<int>(ranks_.size());
    for (const auto& e : engine::estimate_lm_memory(engine::parse_stored_lm_workload(wl, sessions::meta::kWorkloadJson)))
      if (e.rank >= 0 && e.rank < world)
        ranks_[static_cast<size_t>(e.rank)].planned_bytes = ranks_[static_cast<size_t>(e.rank)].peak_planned_bytes =
            e.peak_allocated_bytes;  // the replay through the rank's caching allocator (lm45)
  } catch (const std::exception&) {  // a stored workload that no longer parses: no estimate (its token file is not read)
  }
  return true;
}

void ShardingPlanModel::compare_peaks(const engine::WorkloadSpec& spec, const std::vector<sessions::ShardRecord>& initial,
                                      const std::vector<sessions::PlanChangeRecord>& changes,
                                      const std::vector<sessions::MemoryCounter>& counters, int world) {
  if (changes.empty()) {  // one plan all along: the one shown
    for (auto& r : ranks_) r.peak_planned_bytes = r.planned_bytes;
    return;
  }
  std::set<int64_t> change_steps;  // the first step of each new plan
  for (const auto& c : changes) change_steps.insert(c.step);
  for (auto& r : ranks_) {
    if (r.peak_bytes < 0) continue;
    const auto step = peak_step(counters, r.rank, r.peak_bytes);
    if (!step) {
      r.peak_when = "the plan changed mid-run and the session has no memory counters to say when the peak happened: "
                    "not compared with a plan";
      continue;
    }
    const engine::ShardingPlan before = plan_of(shards_at(initial, changes, *step), world);
    try {
      int64_t planned = engine::estimate_memory(spec, before).at(static_cast<size_t>(r.rank)).total();
      if (change_steps.count(*step + 1)) {
        // a move followed this step, and its counter is the one written after the move: the peak
        // came in the step or in the move, which holds both plans' shards of the changed tables
        // and the all-to-all's buffers at once - the larger is the plan before plus those
        const engine::ShardingPlan after = plan_of(shards_at(initial, changes, *step + 1), world);
        const auto move = engine::rebalance::move_transient_bytes(spec, before, after).at(static_cast<size_t>(r.rank));
        r.peak_when = fmt::format("step {} or the live rebalance's move after it (one memory counter covers both): the "
                                  "plan before it ({}) + the move's new shards {}, sent {}, received {}",
                                  *step, sessions::format_bytes(planned), sessions::format_bytes(move.new_shards),
                                  sessions::format_bytes(move.send), sessions::format_bytes(move.recv));
        r.peak_note = QString("at the move after step %1").arg(*step);
        planned += move.total();
      } else {
        const auto from = change_steps.upper_bound(*step);  // the plan in force began at the change before it
        r.peak_when = from == change_steps.begin()
                          ? fmt::format("{} {}, under the plan the run started with", *step < 0 ? "warm-up step" : "step", *step)
                          : fmt::format("step {}, under the plan in force from step {}", *step, *std::prev(from));
        // a rank whose estimate the changes left alone is compared with the figure shown: no note
        if (from != change_steps.end() && planned != r.planned_bytes) r.peak_note = "under an earlier plan";
      }
      r.peak_planned_bytes = planned;
    } catch (const std::exception& e) {  // a plan the estimate or the move cannot read
      r.peak_when = std::string("not compared with a plan: ") + e.what();
    }
  }
}

QString ShardingPlanModel::hit_rate_text(int64_t hits, int64_t misses, bool cached) {
  if (!cached || hits + misses <= 0) return "-";
  return QString("%1%").arg(100.0 * static_cast<double>(hits) / static_cast<double>(hits + misses), 0, 'f', 1);
}

bool ShardingPlanModel::over_within_rounding(const RankRow& r) {
  // one allocator block or 0.1 %, whichever is larger (sessions/analysis/estimate_rounding.h)
  return sessions::over_within_estimate_rounding(r.peak_planned_bytes, r.peak_bytes);
}

bool ShardingPlanModel::over_the_plan(const RankRow& r) {
  return r.peak_planned_bytes >= 0 && r.peak_bytes > r.peak_planned_bytes && !over_within_rounding(r);
}

std::vector<int> ShardingPlanModel::under_planned() const {
  std::vector<int> out;
  for (const auto& r : ranks_)
    if (over_the_plan(r)) out.push_back(r.rank);
  return out;
}

QString ShardingPlanModel::within_rounding_text() const {
  QStringList parts;
  for (const auto& r : ranks_)
    if (over_within_rounding(r))
      parts << QString("rank %1 planned %2, peak %3 (+%4)")
                   .arg(r.rank)
                   .arg(QString::fromStdString(sessions::format_bytes(r.peak_planned_bytes)))
                   .arg(QString::fromStdString(sessions::format_bytes(r.peak_bytes)))
                   .arg(QString::fromStdString(sessions::format_bytes(r.peak_bytes - r.peak_planned_bytes)));
  if (parts.empty()) return {};
  return QString("the measured peak is the plan's to within its rounding (at most one 512 B allocator block or 0.1% above it, "
                 "whichever is larger): %1").arg(parts.join("; "));
}

QString ShardingPlanModel::under_planned_text() const {
  const std::vector<int> under = under_planned();
  if (under.empty()) return {};
  QStringList parts;
  for (int r : under) {
    const RankRow& row = ranks_[static_cast<size_t>(r)];
    const int64_t over = row.peak_bytes - row.peak_planned_bytes;
    parts << QString("rank %1 planned %2, peak %3 (+%4, %5% of the plan)%6")
                 .arg(r)
                 .arg(QString::fromStdString(sessions::format_bytes(row.peak_planned_bytes)))
                 .arg(QString::fromStdString(sessions::format_bytes(row.peak_bytes)))
                 .arg(QString::fromStdString(sessions::format_bytes(over)))
                 .arg(row.peak_planned_bytes > 0 ? 100.0 * static_cast<double>(over) / static_cast<double>(row.peak_planned_bytes) : 100.0,
                      0, 'f', 2)
                 .arg(row.peak_when.empty() ? QString() : QString(" (%1)").arg(QString::fromStdString(row.peak_when).toHtmlEscaped()));
  }
  return QString("<span style=\"color:#d01010\"><b>the plan under-estimated the measured peak</b>: %1%2</span>")
      .arg(parts.join("; "),
           cuda_ ? QString(" (a cuda session planned before the estimate counted the cuda backend's device copies of "
                           "the dense part - each layer's inputs, parameters and outputs and the SGD step's, staged in "
                           "the rank's memory each step - is under by about those)")
           : lm_ ? QString(" (the lm_embedding estimate replays the rank's buffers through its caching allocator, "
                           "planner/lm_memory_estimate.h: a peak above it is a buffer the replay does not model)")
                 : QString());
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
  const bool peak_cell = is_rank && index.column() == PeakMemory;
  const bool over = peak_cell && over_the_plan(r);
  const QString when = r.peak_when.empty() ? QString() : QString(" (%1)").arg(QString::fromStdString(r.peak_when));
  if (over && role == Qt::ForegroundRole) return QColor(0xd0, 0x10, 0x10);
  if (over && role == Qt::ToolTipRole)
    return QString("the plan under-estimated this rank: planned %1, measured peak %2 (%3 more)%4")
        .arg(QString::fromStdString(sessions::format_bytes(r.peak_planned_bytes)))
        .arg(QString::fromStdString(sessions::format_bytes(r.peak_bytes)))
        .arg(QString::fromStdString(sessions::format_bytes(r.peak_bytes - r.peak_planned_bytes)))
        .arg(when);
  if (over && role == Qt::DisplayRole)
    return QString("%1 (+%2 over the plan)")
        .arg(QString::fromStdString(sessions::format_bytes(r.peak_bytes)))
        .arg(QString::fromStdString(sessions::format_bytes(r.peak_bytes - r.peak_planned_bytes)));
  if (peak_cell && role == Qt::ToolTipRole && !r.peak_when.empty())  // a rebalanced run: when, and against what
    return QString("measured peak %1%2%3")
        .arg(QString::fromStdString(sessions::format_bytes(r.peak_bytes)))
        .arg(r.peak_planned_bytes >= 0
                 ? QString(", within the estimate of the plan in force then (%1)")
                       .arg(QString::fromStdString(sessions::format_bytes(r.peak_planned_bytes)))
                 : QString())
        .arg(when);
  if (peak_cell && role == Qt::DisplayRole && !r.peak_note.isEmpty() && r.peak_bytes >= 0)  // not under the plan shown
    return QString("%1 (%2)").arg(QString::fromStdString(sessions::format_bytes(r.peak_bytes)), r.peak_note);
  if (role != Qt::DisplayRole && role != Qt::UserRole) return {};
  auto bytes = [&](int64_t b) -> QVariant {
    if (b < 0) return role == Qt::UserRole ? QVariant() : QVariant(QString());
    return role == Qt::UserRole ? QVariant::fromValue<qlonglong>(b) : QString::fromStdString(sessions::format_bytes(b));
  };
  auto count = [&](int64_t n) -> QVariant { return QVariant::fromValue<qlonglong>(n); };
  if (is_rank) {
    switch (index.column()) {
      case Name: return role == Qt::UserRole ? QVariant(r.rank) : QVariant(QString("rank %1").arg(r.rank));
      case Sharding: {
        // the plan's shards it holds now (not a former shard, nor a hot-row replica)
        const auto held = [](const ShardRow& s) { return !s.former() && !s.hot_row_replica(); };
        if (role == Qt::UserRole) return static_cast<int>(std::count_if(r.shards.begin(), r.shards.end(), held));
        std::map<std::string, int> by_type;
        for (const auto& s : r.shards)
          if (held(s)) ++by_type[short_type(s.type)];
        QStringList parts;
        for (const auto& [type, n] : by_type) parts << QString("%1: %2").arg(QString::fromStdString(type)).arg(n);
        return parts.isEmpty() ? QString("no shards") : parts.join(", ");
      }
      case Size: {
        int64_t weights = 0, cache = 0, host = 0, hits = 0, misses = 0;
        bool in_host = false, cached = false;
        for (const auto& s : r.shards) {
          weights += s.weight_bytes;
          cache += s.cache_bytes;
          host += s.host_bytes;
          in_host |= s.in_host_memory();
          if (s.placement == "host_cached") {
            cached = true;
            hits += s.cache_hits;
            misses += s.cache_misses;
          }
        }
        if (role == Qt::UserRole) return QVariant::fromValue<qlonglong>(weights + cache);
        QString text = "weights " + QString::fromStdString(sessions::format_bytes(weights));
        if (in_host)
          text += QString(", device cache %1, host %2, hit rate %3")
                      .arg(QString::fromStdString(sessions::format_bytes(cache)),
                           QString::fromStdString(sessions::format_bytes(host)), hit_rate_text(hits, misses, cached));
        return text;
      }
      case PlannedMemory: return bytes(r.planned_bytes);
      case PeakMemory: return bytes(r.peak_bytes);
      case IdsLookedUp: return count(r.ids);
      case BytesIn:
      case BytesOut: {
        const int64_t b = index.column() == BytesIn ? r.bytes_in : r.bytes_out;
        if (!lm_ || role == Qt::UserRole || lm_steps_ <= 0) return bytes(b);
        return QString("%1 (%2 a step)")
            .arg(QString::fromStdString(sessions::format_bytes(b)), QString::fromStdString(sessions::format_bytes(b / lm_steps_)));
      }
      default: return {};
    }
  }
  const ShardRow& s = r.shards[static_cast<size_t>(index.row())];
  switch (index.column()) {
    case Name: return QString::fromStdString(s.table);
    case Sharding:
      if (s.hot_row_replica()) return QString("hot-row replica");
      if (s.former()) return QString("%1 #%2 (until step %3)").arg(QString::fromStdString(s.type)).arg(s.shard).arg(s.served_until);
      return QString("%1 #%2").arg(QString::fromStdString(s.type)).arg(s.shard);
    case Size: {
      if (role == Qt::UserRole) return QVariant::fromValue<qlonglong>(s.num_rows * s.num_cols);
      if (s.hot_row_replica()) return QString("%1 x %2 (the table's hot rows)").arg(s.num_rows).arg(s.num_cols);
      QString text = QString("%1 x %2 @ %3, %4").arg(s.num_rows).arg(s.num_cols).arg(s.row_offset).arg(s.col_offset);
      if (s.in_host_memory())
        text += QString("; %1: device cache %2, host %3, hit rate %4")
                    .arg(QString::fromStdString(s.placement), QString::fromStdString(sessions::format_bytes(s.cache_bytes)),
                         QString::fromStdString(sessions::format_bytes(s.host_bytes)),
                         hit_rate_text(s.cache_hits, s.cache_misses, s.placement == "host_cached"));
      return text;
    }
    case PlannedMemory: return bytes(s.weight_bytes + s.cache_bytes);
    case PeakMemory: return role == Qt::UserRole ? QVariant() : QVariant(QString());
    case IdsLookedUp: return count(s.ids);
    case BytesIn:  // an lm_embedding rank's bytes are its collectives', on its row, not a shard's lookups'
      return lm_ ? (role == Qt::UserRole ? QVariant() : QVariant(QString())) : bytes(s.bytes_in);
    case BytesOut: return lm_ ? (role == Qt::UserRole ? QVariant() : QVariant(QString())) : bytes(s.bytes_out);
    default: return {};
  }
}

QVariant ShardingPlanModel::headerData(int section, Qt::Orientation orientation, int role) const {
  const bool bytes_column = section == BytesIn || section == BytesOut;
  if (orientation == Qt::Horizontal && role == Qt::ToolTipRole && bytes_column)
    return lm_ ? QString("an lm_embedding rank's bytes on the wire: what its collectives sent to and received from the "
                         "other ranks over the measured steps, and per step (`stats` and `run`'s rank table: every "
                         "collective of the rank, the split checks included): under vocab_parallel every rank all-reduces or reduce-scatters the whole "
                         "[tokens x hidden] partial sum, whatever ids it looked up")
               : QString("the lookups' bytes over the measured steps: in = the ids and lengths received for them, out = "
                         "the pooled rows produced for other ranks (and this one)");
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return QAbstractItemModel::headerData(section, orientation, role);
  if (lm_ && bytes_column) return QString(section == BytesIn ? "bytes received" : "bytes sent");
  static const char* names[] = {"rank / table", "shards",       "rows x cols @ offset", "planned memory",
                                "peak allocated", "ids looked up", "bytes in",             "bytes out"};
  return section >= 0 && section < ColumnCount ? QString(names[section]) : QVariant();
}

}  // namespace embedscope::ui

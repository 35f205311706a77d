#include "program_sink.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "embedscope/engine/input/id_share.h"
#include "embedscope/engine/input/realized_share.h"
#include "embedscope/engine/input/input.h"
#include "embedscope/engine/kernels/kernels.h"
#include "embedscope/engine/quant/row_codec.h"

namespace embedscope::engine::program {

using sessions::Lane;
using sessions::OpCategory;

double hot_id_share(const WorkloadSpec& spec, int table, int feature, int64_t row_begin, int64_t row_end) {
  const TableSpec& t = spec.tables[static_cast<size_t>(table)];
  const auto e = spec.sharding.per_table.find(t.name);
  if (e == spec.sharding.per_table.end()) return 0.0;
  const auto& hot = e->second.hot_rows;
  // each hot row's own realized share, so that a row range's realized share less its hot rows'
  // is exactly the realized share of its other rows (realized_id_share is additive over rows)
  double share = 0.0;
  for (auto it = std::lower_bound(hot.begin(), hot.end(), row_begin); it != hot.end() && *it < row_end; ++it)
    share += realized_id_share(spec, t, feature, *it, 1);
  return share;
}

double expected_slot_ids(const WorkloadSpec& spec, const detail::Slot& sl, bool& exact) {
  const FeatureSpec& f = spec.features[static_cast<size_t>(sl.feature)];
  const TableSpec& t = spec.tables[static_cast<size_t>(sl.table)];
  double share = 1.0;
  if (sl.bucketize_by_rows && sl.s.num_rows != t.rows()) {
    share = realized_id_share(spec, t, sl.feature, sl.s.row_offset, sl.s.num_rows);
    exact = false;
  }
  if (sl.bucketize_by_rows) {  // hot rows' ids stay on the rank of their bag (sharding/hot_rows.cpp)
    const double hot = hot_id_share(spec, sl.table, sl.feature, sl.s.row_offset, sl.s.row_offset + sl.s.num_rows);
    if (hot > 0) {
      share = std::max(0.0, share - hot);
      exact = false;
    }
  }
  if (!f.pooling_factor.fixed || spec.invalid_ids == InvalidIdPolicy::drop) exact = false;
  return static_cast<double>(spec.batch_size) * f.pooling_factor.mean * share;
}

ProgramSink::ProgramSink(const WorkloadSpec& s, const ShardingPlan& plan, int r, StepProgram& p)
    : owned_layout_(std::in_place, s, plan), spec(s), layout(*owned_layout_), rank(r), world(layout.world), B(layout.B),
      program(p) {
  init_groups();
}

ProgramSink::ProgramSink(const WorkloadSpec& s, const detail::Layout& l, int r, StepProgram& p)
    : spec(s), layout(l), rank(r), world(layout.world), B(layout.B), program(p) {
  init_groups();
}

void ProgramSink::init_groups() {
  world_ranks.resize(static_cast<size_t>(world));
  std::iota(world_ranks.begin(), world_ranks.end(), 0);
  const int node = rank / layout.local, l = rank % layout.local;
  for (int i = 0; i < layout.local; ++i) node_ranks.push_back(node * layout.local + i);
  for (int m = 0; m < layout.nodes; ++m) cross_ranks.push_back(m * layout.local + l);
  node_group = fmt::format("node{}", node);
  cross_group = fmt::format("cross{}", l);
}

int ProgramSink::add(std::string name, Lane lane, OpCategory cat, int batch, std::string what) {
  ProgramOp op;
  op.id = static_cast<int>(program.ops.size());
  op.name = std::move(name);
  op.lane = lane;
  op.category = cat;
  op.batch = batch;
  op.what = std::move(what);
  program.ops.push_back(std::move(op));
  return program.ops.back().id;
}

int ProgramSink::own(int op, int kind, int arg) {
  if (owners) {
    if (owners->size() < program.ops.size()) owners->resize(program.ops.size());
    (*owners)[static_cast<size_t>(op)] = {owner, kind, arg};
  }
  return op;
}

void ProgramSink::wait(int op, int on) {
  auto& w = program.ops[static_cast<size_t>(op)].waits_for;
  if (on >= 0 && std::find(w.begin(), w.end(), on) == w.end()) w.push_back(on);
}

double ProgramSink::lookup_bytes(double ids, int64_t dim, double bags, TableDataType dt) {
  return ids * (static_cast<double>(row_bytes(dt, dim)) + 8.0) + bags * 4.0 * static_cast<double>(dim);
}

double ProgramSink::update_bytes(double ids, int64_t dim, double bags, OptimizerType type, TableDataType dt,
                                 OptimizerStateType st) {
  const int64_t state = optimizer_state_bytes(type, 1, dim, st);  // state bytes per row
  return bags * 4.0 * static_cast<double>(dim) +
         ids * (8.0 + 2.0 * static_cast<double>(row_bytes(dt, dim)) + 2.0 * static_cast<double>(state));
}

double ProgramSink::lookup_bytes(double ids, const TableSpec& t, int64_t cols, double bags) {
  if (t.low_rank_dim <= 0) return lookup_bytes(ids, cols, bags, t.data_type);
  const auto r = static_cast<double>(t.low_rank_dim), c = static_cast<double>(cols);
  return ids * (4.0 * r + 8.0) + 4.0 * r * c + bags * 4.0 * c;
}

double ProgramSink::update_bytes(double ids, const TableSpec& t, int64_t cols, double bags, OptimizerType type) {
  if (t.low_rank_dim <= 0) return update_bytes(ids, cols, bags, type, t.data_type, t.optimizer_state_type);
  const int64_t r = t.low_rank_dim;
  const auto a_state = static_cast<double>(optimizer_state_bytes(type, 1, r, t.optimizer_state_type));
  const auto b_state = static_cast<double>(optimizer_state_bytes(type, r, cols, t.optimizer_state_type));
  const auto rd = static_cast<double>(r), c = static_cast<double>(cols);
  return bags * 4.0 * c + ids * (8.0 + 8.0 * rd + 2.0 * a_state) + 2.0 * (4.0 * rd * c + b_state);
}

double ProgramSink::update_row_lines(const TableSpec& t, int64_t cols, OptimizerType type) {
  const bool low_rank = t.low_rank_dim > 0;
  const int64_t dim = low_rank ? t.low_rank_dim : cols;
  const int64_t row = low_rank ? 4 * dim : row_bytes(t.data_type, dim);
  const int64_t state = optimizer_state_bytes(type, 1, dim, t.optimizer_state_type);
  const auto lines = [](int64_t bytes) { return static_cast<double>((bytes + 63) / 64); };
  return lines(row) + lines(state);
}

double ProgramSink::lookup_row_lines(const TableSpec& t, int64_t cols) {
  const int64_t row = t.low_rank_dim > 0 ? 4 * t.low_rank_dim : row_bytes(t.data_type, cols);
  return static_cast<double>((row + 63) / 64);
}

int ProgramSink::compute(std::string name, OpCategory cat, int batch, std::string what, int64_t rows, int64_t flops,
                         int64_t bytes) {
  const int id = add(std::move(name), Lane::compute, cat, batch, std::move(what));
  program.ops[static_cast<size_t>(id)].rows = rows;
  program.ops[static_cast<size_t>(id)].flops = flops;
  program.ops[static_cast<size_t>(id)].bytes = bytes;
  wait(id, last_compute_);
  wait(id, sync_comm_);
  sync_comm_ = -1;
  last_compute_ = id;
  return id;
}

int ProgramSink::copy(std::string name, int batch, std::string what, int64_t h2d, int64_t d2h,
                      const std::vector<int>& after) {
  const int id = add(std::move(name), Lane::gpu_copy, OpCategory::memcpy, batch, std::move(what));
  program.ops[static_cast<size_t>(id)].bytes_h2d = h2d;
  program.ops[static_cast<size_t>(id)].bytes_d2h = d2h;
  wait(id, last_copy_);
  for (int a : after) wait(id, a);
  last_copy_ = id;
  return id;
}

int ProgramSink::comm(std::string name, int batch, std::vector<CollectiveCall> calls, bool sync, std::string what,
                      int launched_by) {
  std::vector<CollectiveCall> checked;
  for (auto& c : calls) {
    if (c.kind == CollectiveKind::all_to_all || c.kind == CollectiveKind::reduce_scatter) {
      const auto n = static_cast<int64_t>(c.peers.size());
      checked.push_back(all_gather((c.name + "/split_check").c_str(), c.peers, c.group,
                                   std::vector<int64_t>(c.peers.size(), 2 * n), 8, "int64"));
    }
    checked.push_back(std::move(c));
  }
  const int id = add(std::move(name), Lane::comm, OpCategory::comm, batch, std::move(what));
  program.ops[static_cast<size_t>(id)].collectives = std::move(checked);
  wait(id, last_comm_);
  if (launched_by >= 0)
    program.ops[static_cast<size_t>(id)].launched_by = launched_by;
  else
    wait(id, last_compute_);
  if (sync) sync_comm_ = id;
  last_comm_ = id;
  return id;
}

CollectiveCall ProgramSink::all_to_all(const char* name, const std::vector<int>& peers, const std::string& group,
                                       std::vector<int64_t> send, std::vector<int64_t> recv, int64_t eb,
                                       const char* dt, bool exact) const {
  CollectiveCall c;
  c.kind = CollectiveKind::all_to_all;
  c.name = name;
  c.group = group;
  c.peers = peers;
  c.group_rank = static_cast<int>(std::find(peers.begin(), peers.end(), rank) - peers.begin());
  c.send_elements = std::move(send);
  c.recv_elements = std::move(recv);
  c.elem_bytes = eb;
  c.dtype = dt;
  c.exact = exact;
  return c;
}

CollectiveCall ProgramSink::reduce_scatter(const char* name, const std::vector<int>& peers, const std::string& group,
                                           const std::vector<int64_t>& counts, int64_t eb, const char* dt) const {
  CollectiveCall c = all_to_all(name, peers, group, counts, {}, eb, dt);
  c.kind = CollectiveKind::reduce_scatter;
  c.recv_elements.assign(counts.size(), counts[static_cast<size_t>(c.group_rank)]);
  return c;
}

CollectiveCall ProgramSink::all_reduce(const char* name, const std::vector<int>& peers, const std::string& group,
                                       int64_t count, int64_t eb, const char* dt) const {
  CollectiveCall c = all_to_all(name, peers, group, {}, {}, eb, dt);
  c.kind = CollectiveKind::all_reduce;
  c.count = count;
  return c;
}

CollectiveCall ProgramSink::all_gather(const char* name, const std::vector<int>& peers, const std::string& group,
                                       const std::vector<int64_t>& counts, int64_t eb, const char* dt, bool exact) const {
  CollectiveCall c = all_to_all(name, peers, group, {}, counts, eb, dt, exact);
  c.kind = CollectiveKind::all_gather;
  c.send_elements.assign(counts.size(), counts[static_cast<size_t>(c.group_rank)]);
  return c;
}

}  // namespace embedscope::engine::program

#include "program_sink.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

namespace embedscope::engine::program {

using sessions::Lane;
using sessions::OpCategory;

ProgramSink::ProgramSink(const WorkloadSpec& s, const ShardingPlan& plan, int r, StepProgram& p)
    : spec(s), layout(s, plan), rank(r), world(layout.world), B(layout.B), program(p) {
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

void ProgramSink::wait(int op, int on) {
  auto& w = program.ops[static_cast<size_t>(op)].waits_for;
  if (on >= 0 && std::find(w.begin(), w.end(), on) == w.end()) w.push_back(on);
}

int ProgramSink::compute(std::string name, OpCategory cat, int batch, std::string what, int64_t rows, int64_t flops) {
  const int id = add(std::move(name), Lane::compute, cat, batch, std::move(what));
  program.ops[static_cast<size_t>(id)].rows = rows;
  program.ops[static_cast<size_t>(id)].flops = flops;
  wait(id, last_compute_);
  wait(id, sync_comm_);
  sync_comm_ = -1;
  last_compute_ = id;
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

CollectiveCall ProgramSink::all_gather(const char* name, const std::vector<int>& peers, const std::string& group,
                                       const std::vector<int64_t>& counts, int64_t eb, const char* dt, bool exact) const {
  CollectiveCall c = all_to_all(name, peers, group, {}, counts, eb, dt, exact);
  c.kind = CollectiveKind::all_gather;
  c.send_elements.assign(counts.size(), counts[static_cast<size_t>(c.group_rank)]);
  return c;
}

}  // namespace embedscope::engine::program

// The planner search's pre-ranking estimate (planner/prerank.h).
#include "planner/prerank.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "embedscope/engine/cost/cache_model.h"
#include "embedscope/engine/cost/cost_model.h"
#include "embedscope/engine/cost/network_floor.h"
#include "embedscope/engine/cost/shared_cores.h"
#include "program/data_parallel_bytes.h"
#include "program/input_op_bytes.h"
#include "program/program_sink.h"

namespace embedscope::engine::planner_detail {

void Perf::add(const Perf& o) {
  fwd_compute += o.fwd_compute;
  fwd_comms += o.fwd_comms;
  bwd_compute += o.bwd_compute;
  bwd_comms += o.bwd_comms;
  host += o.host;
  for (size_t c = 0; c < kCalls; ++c) bytes[c] += o.bytes[c];
  calls |= o.calls;
  dp_tables += o.dp_tables;
  dp_calls_ns += o.dp_calls_ns;
  world_bwd_ns += o.world_bwd_ns;
  hot_values += o.hot_values;
}

void add_line_terms(const WorkloadSpec& spec, const HardwareProfile& hw, const TableSpec& t, const Shard& s,
                    const std::vector<int>& features, const std::vector<double>& ids, Perf& p) {
  const GpuProfile& g = hw.gpu;
  if (!(g.lookup_line_ns > 0) && !(g.update_line_ns > 0)) return;
  std::vector<std::pair<int, double>> per_feature;
  for (size_t k = 0; k < ids.size() && k < features.size(); ++k) per_feature.emplace_back(features[k], ids[k]);
  const double distinct = shard_distinct_rows(spec, t, s, per_feature);
  p.fwd_compute += distinct * program::ProgramSink::lookup_row_lines(t, s.num_cols) * g.lookup_line_ns;
  p.bwd_compute += distinct * program::ProgramSink::update_row_lines(t, s.num_cols, spec.optimizer.type) * g.update_line_ns;
}

CallModel::CallModel(const WorkloadSpec& spec, const HardwareProfile& hw, int world, int local)
    : spec_(spec), hw_(hw), W_(world), L_(std::max(1, local)), nodes_((world + std::max(1, local) - 1) / std::max(1, local)),
      world_(static_cast<size_t>(world)) {
  std::iota(world_.begin(), world_.end(), 0);
  bucketize_ns_ = 1e9 * program::bucketize_bytes(spec) / (hw.gpu.hbm_bandwidth_bytes_per_s * hw.gpu.memory_kernel_efficiency);
}

double CallModel::world_all_reduce_ns(int64_t count, int64_t elem_bytes) const {
  CollectiveCall c;
  c.kind = CollectiveKind::all_reduce;
  c.group = "world";
  c.peers = world_;
  c.count = count;
  c.elem_bytes = elem_bytes;
  std::vector<CallMember> ms;
  ms.reserve(world_.size());
  for (int r : world_) {
    c.group_rank = r;
    ms.push_back({collective_ns(c, r, L_, hw_), core_group(hw_, r, W_, L_).id, ranks_on_node(r)});
  }
  return static_cast<double>(std::max(collective_call_ns(ms, hw_), emulated_floor_ns(c, L_, spec_.network)));
}

int CallModel::ranks_on_node(int r) const { return core_group(hw_, r, W_, L_).ranks; }

double CallModel::call_ns(const std::vector<int>& members, const std::vector<double>& own, double scale,
                          bool paced) const {
  const size_t n = members.size();
  if (n <= 1) return 0.0;  // a group of one costs nothing (cost_model.h collective_ns)
  const double T = std::accumulate(own.begin(), own.end(), 0.0);
  const double nn = static_cast<double>(n);
  std::vector<CallMember> ms;
  ms.reserve(n);
  std::vector<int> on_node(static_cast<size_t>(nodes_), 0);  // members on each node
  for (int m : members) ++on_node[static_cast<size_t>(m / L_)];
  int64_t floor = 0;
  for (size_t k = 0; k < n; ++k) {
    const int r = members[k];
    const int same = on_node[static_cast<size_t>(r / L_)];  // members on r's node, r included
    const int peers = static_cast<int>(n) - 1, intra_peers = same - 1, inter_peers = peers - intra_peers;
    const double b = scale * std::max(own[k] * (nn - 1.0) / nn, (T - own[k]) / nn);
    const double intra = peers > 0 ? b * intra_peers / peers : 0.0, inter = peers > 0 ? b * inter_peers / peers : 0.0;
    ms.push_back({member_collective_ns(intra, inter, inter_peers > 0, hw_), core_group(hw_, r, W_, L_).id, ranks_on_node(r)});
    if (paced) floor = std::max(floor, emulated_member_floor_ns(intra, inter, intra_peers > 0, inter_peers > 0, spec_.network));
  }
  return static_cast<double>(std::max(collective_call_ns(ms, hw_), floor));
}

double CallModel::dp_calls_ns(int64_t rows, int64_t cols, int64_t low_rank_dim) const {
  // sharding/data_parallel.cpp: the dense gradient's all-reduce and the touched flags', each a
  // world call of its own (program/data_parallel_bytes.h)
  return world_all_reduce_ns(program::dp_gradient_elements(rows, cols, low_rank_dim), 4) +
         world_all_reduce_ns(program::dp_flag_elements(rows), 4);
}

PhaseMax CallModel::critical_path(const std::vector<Perf>& per) const {
  const double launch = static_cast<double>(hw_.gpu.kernel_launch_ns);
  const auto W = static_cast<size_t>(W_);
  std::vector<double> fwd(W, 0.0), bwd(W, 0.0);
  unsigned calls = 0;
  for (const Perf& p : per) calls |= p.calls;
  const auto own = [&](const std::vector<int>& members, Call c) {
    std::vector<double> x;
    x.reserve(members.size());
    for (int r : members) x.push_back(per[static_cast<size_t>(r)].bytes[c]);
    return x;
  };
  const auto has = [&](Call c) { return (calls >> c & 1u) != 0; };
  const auto add = [&](std::vector<double>& phase, const std::vector<int>& members, double ns) {
    for (int r : members) phase[static_cast<size_t>(r)] += ns;
  };
  const double fwd_scale = spec_.qcomms.forward_precision == CommPrecision::fp32 ? 1.0 : 0.5;
  const double bwd_scale = spec_.qcomms.backward_precision == CommPrecision::fp32 ? 1.0 : 0.5;
  // the split check before every all-to-all and reduce-scatter (program_sink.h): an all-gather
  // of 2 n int64 counts a member, to and from each peer; not paced by an emulated network
  // (ProcessGroup::all_to_all_impl), so without its floor; timed only where the cost model
  // times it (cost_model.h split_check_timed: cpu ranks), 0 on a GPU profile (tester50 F1)
  const auto check_ns = [&](const std::vector<int>& members) {
    if (!split_check_timed(hw_)) return 0.0;
    const double n = static_cast<double>(members.size());
    return call_ns(members, std::vector<double>(members.size(), n * 16.0 * n), 1.0, false);
  };
  const double world_check = check_ns(world_);
  for (Call c : {kSplits, kLengths, kIds})
    if (has(c)) add(fwd, world_, world_check + call_ns(world_, own(world_, c), 1.0));
  for (Call c : {kPooled, kRow})  // the gradient dist: an all-to-all (checked) or an all-gather
    if (has(c)) {
      const std::vector<double> x = own(world_, c);
      add(fwd, world_, world_check + call_ns(world_, x, fwd_scale));
      add(bwd, world_, (c == kPooled ? world_check : 0.0) + call_ns(world_, x, bwd_scale));
    }
  if (has(kTwrwIntra)) {  // reduce-scatter (checked) in the node, then all-gather back
    for (int node = 0; node < nodes_; ++node) {
      std::vector<int> members;
      for (int r = node * L_; r < std::min(W_, (node + 1) * L_); ++r) members.push_back(r);
      const std::vector<double> x = own(members, kTwrwIntra);
      add(fwd, members, check_ns(members) + call_ns(members, x, fwd_scale));
      add(bwd, members, call_ns(members, x, bwd_scale));
    }
    for (int l = 0; l < L_; ++l) {  // all-to-all (checked) across nodes, both ways
      std::vector<int> members;
      for (int r = l; r < W_; r += L_) members.push_back(r);
      const std::vector<double> x = own(members, kTwrwCross);
      const double check = check_ns(members);
      add(fwd, members, check + call_ns(members, x, fwd_scale));
      add(bwd, members, check + call_ns(members, x, bwd_scale));
    }
  }
  // world calls every rank joins: factorized row_wise tables' B all-reduces, one per table, and
  // hot-row replication's one fused all-reduce of every hot table's block (fp32)
  double world_bwd = 0, hot_values = 0;
  for (const Perf& p : per) world_bwd += p.world_bwd_ns, hot_values += p.hot_values;
  if (hot_values > 0) world_bwd += world_all_reduce_ns(std::llround(hot_values), 4);
  PhaseMax m;
  for (size_t r = 0; r < W; ++r) {
    const Perf& p = per[r];
    const double f = contention_factor(hw_, ranks_on_node(static_cast<int>(r)));
    // forward: bucketize, kjt_permute and lookup, a launch each (the "input" op is no phase's)
    m.fwd_compute = std::max(m.fwd_compute, (p.fwd_compute + bucketize_ns_ + 3.0 * launch) * f);
    m.bwd_compute = std::max(m.bwd_compute, (p.bwd_compute + launch * (1.0 + 2.0 * p.dp_tables)) * f);
    m.fwd_comms = std::max(m.fwd_comms, fwd[r]);
    m.bwd_comms = std::max(m.bwd_comms, bwd[r] + p.dp_calls_ns + world_bwd);
    m.host = std::max(m.host, p.host);
  }
  return m;
}

}  // namespace embedscope::engine::planner_detail

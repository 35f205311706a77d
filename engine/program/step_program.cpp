#include "embedscope/engine/program/step_program.h"

#include <cmath>
#include <numeric>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "../src/layout.h"
#include "embedscope/engine/collective_math.h"
#include "embedscope/engine/dense.h"
#include "embedscope/engine/sharding/plan_json.h"

namespace embedscope::engine {

const char* to_string(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::all_to_all: return "all_to_all";
    case CollectiveKind::reduce_scatter: return "reduce_scatter";
    case CollectiveKind::all_gather: return "all_gather";
    case CollectiveKind::all_reduce: return "all_reduce";
  }
  return "all_to_all";
}

// The records' byte counts (collective_math.h): every peer's slice but this rank's own.
int64_t CollectiveCall::bytes_sent() const {
  const int n = static_cast<int>(peers.size());
  if (kind == CollectiveKind::all_reduce) return all_reduce_bytes(count, n, elem_bytes).sent;
  if (kind == CollectiveKind::all_gather) return all_gather_bytes(recv_elements, group_rank, elem_bytes).sent;
  return all_to_all_bytes(send_elements, recv_elements, group_rank, elem_bytes).sent;
}
int64_t CollectiveCall::bytes_received() const {
  const int n = static_cast<int>(peers.size());
  if (kind == CollectiveKind::all_reduce) return all_reduce_bytes(count, n, elem_bytes).received;
  if (kind == CollectiveKind::all_gather) return all_gather_bytes(recv_elements, group_rank, elem_bytes).received;
  return all_to_all_bytes(send_elements, recv_elements, group_rank, elem_bytes).received;
}

const char* to_string(PhaseKind k) {
  switch (k) {
    case PhaseKind::start_batch: return "start_batch";
    case PhaseKind::lookup: return "lookup";
    case PhaseKind::finish_output_dist: return "finish_output_dist";
    case PhaseKind::train: return "train";
  }
  return "start_batch";
}

std::vector<const ProgramOp*> StepProgram::lane(sessions::Lane l) const {
  std::vector<const ProgramOp*> out;
  for (const auto& op : ops)
    if (op.lane == l) out.push_back(&op);
  return out;
}

namespace {

using detail::Layout;
using detail::Slot;
using sessions::Lane;
using sessions::OpCategory;

int64_t elem_bytes_of(CommPrecision p) { return p == CommPrecision::fp32 ? 4 : 2; }
const char* dtype_of(CommPrecision p) {
  return p == CommPrecision::fp16 ? "float16" : p == CommPrecision::bf16 ? "bfloat16" : "float32";
}

// Issues ops in order and derives what each waits for: the previous op of its lane; a comm op
// also the compute op after which it was queued (or, launched from inside a running op, that
// op as launched_by); a compute op the last comm op queued synchronously before it (the
// compute worker waited for it).
class Emitter {
 public:
  explicit Emitter(StepProgram& p) : p_(p) {}
  int compute(std::string name, OpCategory cat, int batch, std::string what, int64_t rows = 0, int64_t flops = 0) {
    ProgramOp& op = add(std::move(name), Lane::compute, cat, batch, std::move(what));
    op.rows = rows;
    op.flops = flops;
    wait(op, last_compute_);
    wait(op, sync_comm_);
    sync_comm_ = -1;
    last_compute_ = op.id;
    return op.id;
  }
  /// A comm op queued after the last compute op; `sync`: the compute worker waits for it.
  int comm(std::string name, int batch, std::vector<CollectiveCall> calls, bool sync, std::string what,
           int launched_by = -1) {
    ProgramOp& op = add(std::move(name), Lane::comm, OpCategory::comm, batch, std::move(what));
    op.collectives = std::move(calls);
    wait(op, last_comm_);
    if (launched_by >= 0)
      op.launched_by = launched_by;
    else
      wait(op, last_compute_);
    if (sync) sync_comm_ = op.id;
    last_comm_ = op.id;
    return op.id;
  }
  int last_comm() const { return last_comm_; }

 private:
  ProgramOp& add(std::string name, Lane lane, OpCategory cat, int batch, std::string what) {
    ProgramOp op;
    op.id = static_cast<int>(p_.ops.size());
    op.name = std::move(name);
    op.lane = lane;
    op.category = cat;
    op.batch = batch;
    op.what = std::move(what);
    p_.ops.push_back(std::move(op));
    return p_.ops.back();
  }
  static void wait(ProgramOp& op, int id) {
    if (id >= 0 && std::find(op.waits_for.begin(), op.waits_for.end(), id) == op.waits_for.end())
      op.waits_for.push_back(id);
  }
  StepProgram& p_;
  int last_compute_ = -1, last_comm_ = -1, sync_comm_ = -1;
};

// Records one schedule entry around the ops a phase emits.
class PhaseScope {
 public:
  PhaseScope(StepProgram& p, PhaseKind kind, int batch, bool sync) : p_(p) {
    p_.schedule.push_back({kind, batch, sync, static_cast<int>(p_.ops.size()), 0});
  }
  ~PhaseScope() { p_.schedule.back().num_ops = static_cast<int>(p_.ops.size()) - p_.schedule.back().first_op; }
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  StepProgram& p_;
};

class Builder {
 public:
  Builder(const WorkloadSpec& spec, const ShardingPlan& plan, int rank, StepProgram& p)
      : spec_(spec), L_(spec, plan), me_(rank), W_(L_.world), B_(L_.B), p_(p), e_(p) {
    std::vector<int> all(static_cast<size_t>(W_));
    std::iota(all.begin(), all.end(), 0);
    world_ = all;
    for (const auto& tp : plan.tables) any_twrw_ |= tp.type == ShardingType::table_row_wise;
    const int node = me_ / L_.local, l = me_ % L_.local;
    for (int i = 0; i < L_.local; ++i) node_.push_back(node * L_.local + i);
    for (int m = 0; m < L_.nodes; ++m) cross_.push_back(m * L_.local + l);
    mine_ = L_.slots_to[static_cast<size_t>(me_)];
  }

  // ---- the phases of one batch (trainer.cpp runs the same ones) -------------------------------
  /// input, bucketize, and the KJT all-to-all (splits, lengths, ids).
  void start_batch(int batch, bool sync) {
    PhaseScope ph(p_, PhaseKind::start_batch, batch, sync);
    e_.compute("input", OpCategory::input, batch,
               fmt::format("make this rank's batch ({} samples, {} features) and check its ids", B_, spec_.features.size()));
    e_.compute("bucketize", OpCategory::input, batch,
               "group the ids by destination shard (row-wise tables: by row range)");
    const size_t nmine = mine_.size();
    std::vector<int64_t> ss(static_cast<size_t>(W_)), sr(static_cast<size_t>(W_), static_cast<int64_t>(nmine));
    std::vector<int64_t> ls(static_cast<size_t>(W_)), lr(static_cast<size_t>(W_), static_cast<int64_t>(nmine) * B_);
    std::vector<int64_t> is(static_cast<size_t>(W_), 0), ir(static_cast<size_t>(W_), 0);
    bool exact = true;
    for (int d = 0; d < W_; ++d) {
      const auto& to = L_.slots_to[static_cast<size_t>(d)];
      ss[static_cast<size_t>(d)] = static_cast<int64_t>(to.size());
      ls[static_cast<size_t>(d)] = static_cast<int64_t>(to.size()) * B_;
      double ids = 0;
      for (int k : to) ids += expected_ids(L_.slots[static_cast<size_t>(k)], exact);
      is[static_cast<size_t>(d)] = std::llround(ids);
    }
    double mine_ids = 0;
    for (int k : mine_) mine_ids += expected_ids(L_.slots[static_cast<size_t>(k)], exact);
    for (int s = 0; s < W_; ++s) ir[static_cast<size_t>(s)] = std::llround(mine_ids);
    comm("input_dist/splits", batch, {a2a("input_dist/splits", world_, "world", ss, sr, 8, "int64", true)}, sync,
            "all-to-all of the id count of every (shard, feature) bucket");
    comm("input_dist/lengths", batch, {a2a("input_dist/lengths", world_, "world", ls, lr, 8, "int64", true)}, sync,
            "all-to-all of the bag lengths of every bucket");
    comm("input_dist/ids", batch, {a2a("input_dist/ids", world_, "world", is, ir, 8, "int64", exact)}, sync,
            "all-to-all of the ids, each to the rank holding its shard");
  }

  /// kjt_permute, lookup and the output dist (pooled embeddings to the ranks owning the samples).
  void lookup_and_output_dist(int batch, bool sync, bool input_dist_earlier) {
    PhaseScope ph(p_, PhaseKind::lookup, batch, sync);
    e_.compute("kjt_permute", OpCategory::input, batch,
               input_dist_earlier ? "arrange the received ids per local shard (their input dist ran in the previous step)"
                                  : "arrange the received ids per local shard");
    bool exact = true;
    double ids = 0;
    for (int k : mine_) ids += static_cast<double>(W_) * expected_ids(L_.slots[static_cast<size_t>(k)], exact);
    for (int t : L_.dp_tables)
      for (const auto& fname : spec_.tables[static_cast<size_t>(t)].feature_names)
        ids += static_cast<double>(B_) * spec_.features[static_cast<size_t>(spec_.feature_index(fname))].pooling_factor.mean;
    e_.compute("lookup", OpCategory::lookup, batch,
               fmt::format("pooled lookup of {} local shard bucket(s) and {} data-parallel table(s)", mine_.size(),
                           L_.dp_tables.size()),
               std::llround(ids));
    const CommPrecision prec = spec_.qcomms.forward_precision;
    const int64_t eb = elem_bytes_of(prec);
    const char* dt = dtype_of(prec);
    {  // table_wise / column_wise: all-to-all of B x cols blocks (always run: every rank joins)
      std::vector<int64_t> sc(static_cast<size_t>(W_)), rc(static_cast<size_t>(W_), 0);
      const int64_t my_cols = a2a_cols(me_);
      for (int r = 0; r < W_; ++r) {
        sc[static_cast<size_t>(r)] = B_ * my_cols;
        rc[static_cast<size_t>(r)] = B_ * a2a_cols(r);
      }
      comm("output_dist/all_to_all", batch, {a2a("output_dist/all_to_all", world_, "world", sc, rc, eb, dt, true)},
              sync, "all-to-all of the pooled embeddings of table-wise and column-wise shards");
    }
    if (!L_.rw_features.empty()) {
      const int64_t width = L_.sum_dims(L_.rw_features);
      std::vector<int64_t> counts(static_cast<size_t>(W_), B_ * width);
      CollectiveCall c = a2a("output_dist/reduce_scatter", world_, "world", counts, counts, eb, dt, true);
      c.kind = CollectiveKind::reduce_scatter;
      comm("output_dist/reduce_scatter", batch, {c}, sync,
              "reduce-scatter of the row-wise shards' partial sums (each rank gets its samples' sums)");
    }
    if (any_twrw_) {
      const int my_node = me_ / L_.local;
      const int64_t width = L_.sum_dims(L_.twrw_features[static_cast<size_t>(my_node)]);
      std::vector<int64_t> counts(static_cast<size_t>(L_.local), L_.nodes * B_ * width);
      CollectiveCall rs = a2a("output_dist/reduce_scatter_intra_node", node_, fmt::format("node{}", my_node), counts,
                              counts, eb, dt, true);
      rs.kind = CollectiveKind::reduce_scatter;
      comm("output_dist/reduce_scatter_intra_node", batch, {rs}, sync,
              "reduce-scatter of the table-row-wise partial sums inside the node");
      std::vector<int64_t> sc(static_cast<size_t>(L_.nodes), B_ * width), rc(static_cast<size_t>(L_.nodes));
      for (int m = 0; m < L_.nodes; ++m) rc[static_cast<size_t>(m)] = B_ * L_.sum_dims(L_.twrw_features[static_cast<size_t>(m)]);
      comm("output_dist/all_to_all_cross_node", batch,
              {a2a("output_dist/all_to_all_cross_node", cross_, fmt::format("cross{}", me_ % L_.local), sc, rc, eb, dt, true)},
              sync, "all-to-all of the table-row-wise sums across nodes, to the ranks owning the samples");
    }
  }

  /// The dense part, the gradient dist, the embedding update and the dense all-reduce.
  void finish_output_dist(int batch) { PhaseScope ph(p_, PhaseKind::finish_output_dist, batch, true); }

  void train(int batch, bool output_dist_earlier) {
    PhaseScope ph(p_, PhaseKind::train, batch, true);
    DenseModel dense(spec_, L_.dim);
    auto buckets = dense_buckets(dense.param_tensors(), spec_.dense ? spec_.dense->bucket_cap_bytes : int64_t{25} << 20);
    if (buckets.empty()) buckets.emplace_back(0, 0);
    const int fb = e_.compute(
        "dense_forward_backward", OpCategory::dense, batch,
        std::string(output_dist_earlier ? "(its output dist ran on the comm lane under the previous step) " : "") +
            fmt::format("dense forward, BCE loss and backward of {} parameters; launches {} DDP bucket all-reduce(s)",
                        dense.num_params(), buckets.size()),
        0, 6 * B_ * dense.num_params());
    for (size_t k = 0; k < buckets.size(); ++k) {
      const auto [lo, hi] = buckets[k];
      const bool last = k + 1 == buckets.size();
      CollectiveCall c;
      c.kind = CollectiveKind::all_reduce;
      c.name = "dense_all_reduce";
      c.group = "world";
      c.peers = world_;
      c.group_rank = me_;
      c.count = last ? 2 + hi : hi - lo;  // the last bucket carries the loss and the cancel vote
      c.elem_bytes = 4;
      c.dtype = "float32";
      comm("dense_all_reduce", batch, {c}, false,
              fmt::format("DDP bucket {}: all-reduce of dense gradients [{}, {}){}", k, lo, hi,
                          last ? " with the loss and the cancel vote" : ""),
              fb);
    }
    const CommPrecision prec = spec_.qcomms.backward_precision;
    const int64_t eb = elem_bytes_of(prec);
    const char* dt = dtype_of(prec);
    {
      std::vector<int64_t> sc(static_cast<size_t>(W_)), rc(static_cast<size_t>(W_), B_ * a2a_cols(me_));
      for (int d = 0; d < W_; ++d) sc[static_cast<size_t>(d)] = B_ * a2a_cols(d);
      comm("grad_dist/all_to_all", batch, {a2a("grad_dist/all_to_all", world_, "world", sc, rc, eb, dt, true)}, true,
              "all-to-all of the pooled-embedding gradients back to the table-wise and column-wise shards");
    }
    if (!L_.rw_features.empty()) {
      const int64_t width = L_.sum_dims(L_.rw_features);
      comm("grad_dist/all_gather", batch,
              {gather("grad_dist/all_gather", world_, "world", std::vector<int64_t>(static_cast<size_t>(W_), B_ * width),
                      eb, dt, true)},
              true, "all-gather of the row-wise gradients (every shard needs every sample's)");
    }
    if (any_twrw_) {
      const int my_node = me_ / L_.local;
      const int64_t width = L_.sum_dims(L_.twrw_features[static_cast<size_t>(my_node)]);
      std::vector<int64_t> sc(static_cast<size_t>(L_.nodes)), rc(static_cast<size_t>(L_.nodes), B_ * width);
      for (int m = 0; m < L_.nodes; ++m) sc[static_cast<size_t>(m)] = B_ * L_.sum_dims(L_.twrw_features[static_cast<size_t>(m)]);
      comm("grad_dist/all_to_all_cross_node", batch,
              {a2a("grad_dist/all_to_all_cross_node", cross_, fmt::format("cross{}", me_ % L_.local), sc, rc, eb, dt, true)},
              true, "all-to-all of the table-row-wise gradients across nodes");
      comm("grad_dist/all_gather_intra_node", batch,
              {gather("grad_dist/all_gather_intra_node", node_, fmt::format("node{}", my_node),
                      std::vector<int64_t>(static_cast<size_t>(L_.local), L_.nodes * B_ * width), eb, dt, true)},
              true, "all-gather of the table-row-wise gradients inside the node");
    }
    bool exact = true;
    double ids = 0;
    for (int k : mine_) ids += static_cast<double>(W_) * expected_ids(L_.slots[static_cast<size_t>(k)], exact);
    e_.compute("backward_fused_optimizer", OpCategory::optimizer, batch,
               fmt::format("sparse gradients of the local shards and the fused {} update of their rows",
                           to_string(spec_.optimizer.type)),
               std::llround(ids));
    for (int t : L_.dp_tables) {
      const TableSpec& ts = spec_.tables[static_cast<size_t>(t)];
      double n_ids = 0;
      for (const auto& fname : ts.feature_names)
        n_ids += static_cast<double>(B_) * spec_.features[static_cast<size_t>(spec_.feature_index(fname))].pooling_factor.mean;
      // distinct rows among n uniform ids over N rows: N (1 - (1 - 1/N)^n)
      const double N = static_cast<double>(ts.num_embeddings);
      const int64_t rows = std::llround(N * (1.0 - std::pow(1.0 - 1.0 / N, n_ids)));
      e_.compute("backward_data_parallel", OpCategory::optimizer, batch,
                 fmt::format("sparse row gradients of data-parallel table {}", ts.name), std::llround(n_ids));
      std::vector<int64_t> one(static_cast<size_t>(W_), 1), n_rows(static_cast<size_t>(W_), rows), vals(static_cast<size_t>(W_), rows * ts.embedding_dim);
      comm("grad_dist/data_parallel_counts", batch,
              {gather("grad_dist/data_parallel_counts", world_, "world", one, 8, "int64", true)}, true,
              "all-gather of each replica's gradient row count");
      comm("grad_dist/data_parallel_all_gather", batch,
              {gather("grad_dist/data_parallel_rows", world_, "world", n_rows, 8, "int64", false),
               gather("grad_dist/data_parallel_values", world_, "world", vals, 4, "float32", false)},
              true, "all-gather of every replica's gradient rows and values");
      e_.compute("optimizer_data_parallel", OpCategory::optimizer, batch,
                 fmt::format("merge the replicas' gradients and update every replica of {}", ts.name), W_ * rows);
    }
    e_.compute("dense_optimizer", OpCategory::optimizer, batch,
               "average the all-reduced dense gradients and apply SGD (waits for every bucket)");
    ProgramOp& last = p_.ops.back();
    for (const auto& op : p_.ops)
      if (op.name == "dense_all_reduce" && std::find(last.waits_for.begin(), last.waits_for.end(), op.id) == last.waits_for.end())
        last.waits_for.push_back(op.id);
  }

 private:
  // Expected ids of a slot that one rank sends (B bags of the slot's feature).
  double expected_ids(const Slot& sl, bool& exact) const {
    const FeatureSpec& f = spec_.features[static_cast<size_t>(sl.feature)];
    const int64_t N = spec_.tables[static_cast<size_t>(sl.table)].num_embeddings;
    double share = 1.0;
    if (detail::is_rw(sl.type) && sl.s.num_rows != N) {
      share = static_cast<double>(sl.s.num_rows) / static_cast<double>(N);
      exact = false;
    }
    if (!f.pooling_factor.fixed || spec_.invalid_ids == InvalidIdPolicy::drop) exact = false;
    return static_cast<double>(B_) * f.pooling_factor.mean * share;
  }
  // A comm op; every all-to-all and reduce-scatter first cross-checks its splits (comm.h): an
  // all-gather of each member's send and receive counts, recorded as "<name>/split_check".
  int comm(std::string name, int batch, std::vector<CollectiveCall> calls, bool sync, std::string what,
           int launched_by = -1) {
    std::vector<CollectiveCall> out;
    for (auto& c : calls) {
      if (c.kind == CollectiveKind::all_to_all || c.kind == CollectiveKind::reduce_scatter) {
        const int64_t n = static_cast<int64_t>(c.peers.size());
        out.push_back(gather((c.name + "/split_check").c_str(), c.peers, c.group,
                             std::vector<int64_t>(c.peers.size(), 2 * n), 8, "int64", true));
      }
      out.push_back(std::move(c));
    }
    return e_.comm(std::move(name), batch, std::move(out), sync, std::move(what), launched_by);
  }
  int64_t a2a_cols(int r) const {
    int64_t c = 0;
    for (int k : L_.a2a_slots_to[static_cast<size_t>(r)]) c += L_.slots[static_cast<size_t>(k)].s.num_cols;
    return c;
  }
  CollectiveCall a2a(const char* name, const std::vector<int>& peers, std::string group, std::vector<int64_t> send,
                     std::vector<int64_t> recv, int64_t eb, const char* dtype, bool exact) const {
    CollectiveCall c;
    c.group_rank = static_cast<int>(std::find(peers.begin(), peers.end(), me_) - peers.begin());
    c.kind = CollectiveKind::all_to_all;
    c.name = name;
    c.group = std::move(group);
    c.peers = peers;
    c.send_elements = std::move(send);
    c.recv_elements = std::move(recv);
    c.elem_bytes = eb;
    c.dtype = dtype;
    c.exact = exact;
    return c;
  }
  // all-gather(v) as the records hold it: this rank's block to every peer, every peer's block back.
  CollectiveCall gather(const char* name, const std::vector<int>& peers, std::string group,
                        const std::vector<int64_t>& counts, int64_t eb, const char* dtype, bool exact) const {
    CollectiveCall c = a2a(name, peers, std::move(group), {}, counts, eb, dtype, exact);
    c.send_elements.assign(counts.size(), counts[static_cast<size_t>(c.group_rank)]);
    c.kind = CollectiveKind::all_gather;
    return c;
  }

  const WorkloadSpec& spec_;
  Layout L_;
  int me_, W_;
  int64_t B_;
  StepProgram& p_;
  Emitter e_;
  bool any_twrw_ = false;
  std::vector<int> world_, node_, cross_, mine_;
};

}  // namespace

StepProgram build_step_program(const WorkloadSpec& spec, const ShardingPlan& plan, int rank, int64_t iteration) {
  validate_plan(spec, plan, "sharding plan");
  if (rank < 0 || rank >= plan.world_size)
    throw SpecError(fmt::format("--rank: {} is outside [0, {})", rank, plan.world_size));
  const int64_t total = spec.warmup_steps + spec.steps;
  if (iteration < 0 || iteration >= total)
    throw SpecError(fmt::format("--iteration: {} is outside [0, {}) (warmup_steps + steps)", iteration, total));
  StepProgram p;
  p.rank = rank;
  p.world_size = plan.world_size;
  p.iteration = iteration;
  p.step = iteration - spec.warmup_steps;
  p.pipeline = spec.pipeline;
  Builder b(spec, plan, rank, p);
  auto has = [&](int64_t i) { return i < total; };
  switch (spec.pipeline) {
    case PipelineKind::base:
      b.start_batch(0, true);
      b.lookup_and_output_dist(0, true, false);
      b.finish_output_dist(0);
      b.train(0, false);
      break;
    case PipelineKind::sparse_dist:  // the next batch's input dist runs under the dense part
      if (iteration == 0) b.start_batch(0, true);
      b.lookup_and_output_dist(0, true, iteration > 0);
      b.finish_output_dist(0);
      if (has(iteration + 1)) b.start_batch(1, false);
      b.train(0, false);
      break;
    case PipelineKind::semi_sync:  // the next batch's lookup and output dist run under the dense part
      if (iteration == 0) {
        b.start_batch(0, true);
        b.lookup_and_output_dist(0, true, false);
      }
      b.finish_output_dist(0);
      if (has(iteration + 1)) {
        if (iteration == 0) b.start_batch(1, true);
        b.lookup_and_output_dist(1, false, iteration > 0);
        if (has(iteration + 2)) b.start_batch(2, false);
      }
      b.train(0, iteration > 0);
      break;
  }
  return p;
}

int64_t steady_iteration(const WorkloadSpec& spec) {
  const int64_t total = spec.warmup_steps + spec.steps;
  const int64_t want = spec.pipeline == PipelineKind::base ? 0 : 1;
  return std::min(want, total - 1);
}

nlohmann::json to_json(const StepProgram& p) {
  nlohmann::json j;
  j["rank"] = p.rank;
  j["world_size"] = p.world_size;
  j["iteration"] = p.iteration;
  j["step"] = p.step;
  j["pipeline"] = to_string(p.pipeline);
  auto& sched = j["schedule"] = nlohmann::json::array();
  for (const auto& ph : p.schedule) {
    std::vector<int> ids(static_cast<size_t>(ph.num_ops));
    std::iota(ids.begin(), ids.end(), ph.first_op);
    sched.push_back({{"phase", to_string(ph.kind)}, {"batch", ph.batch}, {"sync", ph.sync}, {"ops", ids}});
  }
  auto& ops = j["ops"] = nlohmann::json::array();
  for (const auto& op : p.ops) {
    nlohmann::json o;
    o["id"] = op.id;
    o["name"] = op.name;
    o["lane"] = sessions::to_string(op.lane);
    o["category"] = sessions::to_string(op.category);
    o["batch"] = op.batch;
    o["waits_for"] = op.waits_for;
    if (op.launched_by >= 0) o["launched_by"] = op.launched_by;
    if (op.rows) o["rows"] = op.rows;
    if (op.flops) o["flops"] = op.flops;
    o["what"] = op.what;
    auto& cs = o["collectives"] = nlohmann::json::array();
    for (const auto& c : op.collectives) {
      nlohmann::json cj{{"kind", to_string(c.kind)}, {"name", c.name},         {"group", c.group},
                        {"peers", c.peers},          {"send_elements", c.send_elements},
                        {"recv_elements", c.recv_elements}, {"dtype", c.dtype}, {"exact", c.exact}};
      if (c.kind == CollectiveKind::all_reduce) cj["count"] = c.count;
      cj["bytes_sent"] = c.bytes_sent();
      cj["bytes_received"] = c.bytes_received();
      cs.push_back(std::move(cj));
    }
    ops.push_back(std::move(o));
  }
  return j;
}

std::string to_text(const StepProgram& p) {
  std::string out = fmt::format("rank {} of {}, iteration {} (step {}), pipeline {}\nschedule:", p.rank, p.world_size,
                                p.iteration, p.step, to_string(p.pipeline));
  for (const auto& ph : p.schedule)
    out += fmt::format(" {}({:+}{})", to_string(ph.kind), ph.batch, ph.sync ? "" : ", async");
  out += "\n";
  out += fmt::format("{:>3}  {:<7} {:>5}  {:<40} {:<14} {}\n", "id", "lane", "batch", "op", "waits for", "collectives");
  for (const auto& op : p.ops) {
    std::string waits;
    for (int w : op.waits_for) waits += (waits.empty() ? "" : ",") + std::to_string(w);
    if (op.launched_by >= 0) waits += (waits.empty() ? "" : ",") + fmt::format("in {}", op.launched_by);
    std::string cs;
    for (const auto& c : op.collectives)
      cs += fmt::format("{}{} {} {} elements", cs.empty() ? "" : "; ", to_string(c.kind), c.group,
                        c.kind == CollectiveKind::all_reduce
                            ? c.count
                            : std::accumulate(c.send_elements.begin(), c.send_elements.end(), int64_t{0}));
    out += fmt::format("{:>3}  {:<7} {:>+5}  {:<40} {:<14} {}\n", op.id, sessions::to_string(op.lane), op.batch, op.name,
                       waits, cs);
  }
  return out;
}

}  // namespace embedscope::engine

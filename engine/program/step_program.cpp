#include "embedscope/engine/program/step_program.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <string_view>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sharding/embedding_sharding.h"
#include "program_sink.h"
#include "input_op_bytes.h"
#include "embedscope/engine/comm/collective_math.h"
#include "embedscope/engine/cost/cache_model.h"
#include "embedscope/engine/model/dense.h"
#include "embedscope/sessions/model/units.h"
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
  if (kind == CollectiveKind::all_reduce) return all_reduce_bytes(count, n, group_rank, elem_bytes).sent;
  if (kind == CollectiveKind::all_gather) return all_gather_bytes(recv_elements, group_rank, elem_bytes).sent;
  return all_to_all_bytes(send_elements, recv_elements, group_rank, elem_bytes).sent;
}
int64_t CollectiveCall::bytes_received() const {
  const int n = static_cast<int>(peers.size());
  if (kind == CollectiveKind::all_reduce) return all_reduce_bytes(count, n, group_rank, elem_bytes).received;
  if (kind == CollectiveKind::all_gather) return all_gather_bytes(recv_elements, group_rank, elem_bytes).received;
  return all_to_all_bytes(send_elements, recv_elements, group_rank, elem_bytes).received;
}

bool is_split_check(const CollectiveCall& c) {
  constexpr std::string_view suffix = "/split_check";
  const std::string_view name = c.name;
  return name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix;
}

const char* to_string(PhaseKind k) {
  switch (k) {
    case PhaseKind::start_batch: return "start_batch";
    case PhaseKind::lookup: return "lookup";
    case PhaseKind::finish_output_dist: return "finish_output_dist";
    case PhaseKind::train: return "train";
    case PhaseKind::prefetch: return "prefetch";
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
using program::ProgramSink;
using program::RankOp;
using sessions::OpCategory;

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

// The phases of one batch; every op tagged with its owner (program_sink.h OpOwner), which the
// threaded executor (exec/threaded/rank.h) hands it to. The dists of the sharding types come
// from their modules (sharding/embedding_sharding.h).
class Builder {
 public:
  Builder(const WorkloadSpec& spec, const detail::Layout& layout, int rank, StepProgram& p, bool cold_start = false,
          std::vector<program::OpOwner>* owners = nullptr)
      : cold_(cold_start), spec_(spec), sink_(spec, layout, rank, p), L_(sink_.layout), me_(rank), W_(L_.world), B_(L_.B), p_(p),
        shardings_(sharding::embedding_shardings(L_)), mine_(L_.slots_to[static_cast<size_t>(rank)]) {
    sink_.owners = owners;
    // this rank's shards in host memory, with their expected cache behaviour per batch
    std::map<std::pair<int, int>, size_t> at;
    for (int k : mine_) {
      const Slot& sl = L_.slots[static_cast<size_t>(k)];
      const TableSpec& t = spec_.tables[static_cast<size_t>(sl.table)];
      if (t.placement == TablePlacement::device) continue;
      auto [it, fresh] = at.emplace(std::pair{sl.table, sl.shard}, host_.size());
      if (fresh) host_.push_back({sl.table, sl.s, {}, {}});
      bool exact = true;
      host_[it->second].ids.emplace_back(sl.feature, static_cast<double>(W_) * expected_ids(sl, exact));
    }
    for (auto& h : host_) h.est = estimate_cache(spec_, spec_.tables[static_cast<size_t>(h.table)], h.s, h.ids);
  }

  /// input, bucketize, and the KJT all-to-all (splits, lengths, ids).
  void start_batch(int batch, bool sync) {
    PhaseScope ph(p_, PhaseKind::start_batch, batch, sync);
    // the batch in device memory: ids and bag lengths (int64), dense features (fp32)
    const double kjt_bytes = program::kjt_bytes(spec_);
    const double dense_in = spec_.dense ? 4.0 * static_cast<double>(B_ * (spec_.dense->num_dense_features + 1)) : 0.0;
    const int input = own(sink_.compute("input", OpCategory::input, batch,
                  fmt::format("make this rank's batch ({} samples, {} features) and check its ids", B_,
                              spec_.features.size()),
                  0, 0, std::llround(kjt_bytes + dense_in)), RankOp::input);
    work(input, HostWork::input_ids, program::input_ids(spec_));
    const int bucketize = own(sink_.compute("bucketize", OpCategory::input, batch,
                  "group the ids by destination shard (row-wise tables: by row range)", 0, 0,
                  std::llround(program::bucketize_bytes(spec_))), RankOp::bucketize);
    double scanned = 0;  // every destination slot scans its feature's bags and ids
    for (const Slot& sl : L_.slots) scanned += program::bucketize_slot_items(spec_, sl.feature);
    work(bucketize, HostWork::bucketize_items, scanned);
    // no shard is looked up remotely (every table data_parallel, TorchRec's DP tables): no input
    // dist (tester33 D11: three empty all-to-alls the simulator charged)
    if (L_.slots.empty()) return;
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
    const auto& world = sink_.world_ranks;
    own(sink_.comm("input_dist/splits", batch, {sink_.all_to_all("input_dist/splits", world, "world", ss, sr, 8, "int64")},
               sync, "all-to-all of the id count of every (shard, feature) bucket"), RankOp::input_dist_splits);
    own(sink_.comm("input_dist/lengths", batch, {sink_.all_to_all("input_dist/lengths", world, "world", ls, lr, 8, "int64")},
               sync, "all-to-all of the bag lengths of every bucket"), RankOp::input_dist_lengths);
    ids_op_[batch] = own(sink_.comm("input_dist/ids", batch,
                                {sink_.all_to_all("input_dist/ids", world, "world", is, ir, 8, "int64", exact)}, sync,
                                "all-to-all of the ids, each to the rank holding its shard"), RankOp::input_dist_ids);
  }

  /// kjt_permute, lookup and the output dist (pooled embeddings to the ranks owning the samples).
  void lookup_and_output_dist(int batch, bool sync, bool input_dist_earlier) {
    PhaseScope ph(p_, PhaseKind::lookup, batch, sync);
    bool exact = true;
    double ids = 0, bytes = 0;
    const double bags = static_cast<double>(W_ * B_);  // every rank's B bags of each slot
    for (int k : mine_) {
      const Slot& sl = L_.slots[static_cast<size_t>(k)];
      const double n = static_cast<double>(W_) * expected_ids(sl, exact);
      ids += n;
      bytes += ProgramSink::lookup_bytes(n, spec_.tables[static_cast<size_t>(sl.table)], sl.s.num_cols, bags);
    }
    const int permute = sink_.compute(
        "kjt_permute", OpCategory::input, batch,
        input_dist_earlier ? "arrange the received ids per local shard (their input dist ran in the previous step)"
                           : "arrange the received ids per local shard",
        0, 0, std::llround(program::kjt_permute_bytes(ids, bags, static_cast<double>(mine_.size()))));
    own(permute, RankOp::kjt_permute);
    // bags pooled (ProgramOp::work_items): every local slot's W x B, empty ones included
    double pooled_bags = bags * static_cast<double>(mine_.size());
    for (const auto& m : shardings_) {
      const auto w = m->local_lookup_work(sink_);
      ids += w.ids;
      bytes += w.bytes;
      pooled_bags += w.bags;
    }
    // tables in host memory: the rows the lookup misses, fetched before it (a batch whose ids came
    // a step ahead was prefetched into the caches of its prefetch_pipeline tables)
    double fetch = 0, rows = 0;
    for (const auto& h : host_) {
      // a prefetched batch: what its prefetch had no room for (cache_model.h host_traffic)
      const HostTraffic tr = traffic(h, input_dist_earlier && prefetches(h), batch);
      fetch += tr.lookup_h2d;
      rows += tr.lookup_h2d / (4.0 * static_cast<double>(h.s.num_cols));
    }
    int fetch_op = -1;
    if (std::llround(fetch) > 0)
      fetch_op = own(sink_.copy("host_fetch", batch,
                            fmt::format("fetch the {:.1f} rows the lookup misses (expected) from host memory", rows),
                            std::llround(fetch), 0, {permute}), RankOp::host_fetch);
    lookup_op_[batch] = sink_.compute("lookup", OpCategory::lookup, batch,
                                      fmt::format("pooled lookup of {} local shard bucket(s) and {} replicated table(s)",
                                                  mine_.size(), L_.dp_tables.size()),
                                      std::llround(ids), 0, std::llround(bytes));
    own(lookup_op_[batch], RankOp::lookup);
    work(lookup_op_[batch], HostWork::lookup_bags, pooled_bags);
    // the cache lines of the local shards' distinct rows it reads (HostWork::lookup_row_lines)
    double read_lines = 0;
    for (const ShardRows& sh : shard_rows()) read_lines += sh.distinct * ProgramSink::lookup_row_lines(*sh.table, sh.cols);
    ProgramOp& lk = p_.ops[static_cast<size_t>(lookup_op_[batch])];
    lk.work2 = HostWork::lookup_row_lines;
    lk.work2_items = std::llround(read_lines);
    sink_.depend(lookup_op_[batch], fetch_op);
    for (size_t k = 0; k < shardings_.size(); ++k) {
      ModuleScope module(sink_, k);
      shardings_[k]->emit_output_dist(sink_, batch, sync);
    }
  }

  void finish_output_dist(int batch) { PhaseScope ph(p_, PhaseKind::finish_output_dist, batch, true); }

  /// The misses of batch `batch` (ids a step ahead) fetched into the caches of this rank's
  /// prefetch_pipeline shards, once its input dist has its ids (no op on a rank without one).
  void prefetch(int batch) {
    PhaseScope ph(p_, PhaseKind::prefetch, batch, true);
    double h2d = 0, rows = 0;
    bool any = false;
    for (const auto& h : host_) {
      if (!prefetches(h)) continue;
      any = true;
      h2d += traffic(h, true, batch).prefetch_h2d;
      rows += est(h, batch).misses;
    }
    if (!any) return;
    const auto found = ids_op_.find(batch);
    prefetch_op_ = own(sink_.copy("prefetch", batch,
                              fmt::format("prefetch the {:.1f} rows batch {:+} will miss (expected) into the device "
                                          "caches, pinned until its lookup",
                                          rows, batch),
                              std::llround(h2d), 0, {found == ids_op_.end() ? -1 : found->second}), RankOp::prefetch);
  }

  /// The dense part, the gradient dist, the embedding update and the dense all-reduce.
  void train(int batch, bool output_dist_earlier) {
    PhaseScope ph(p_, PhaseKind::train, batch, true);
    const DenseModel dense(spec_, L_.dim, /*layout_only=*/true);
    auto buckets = dense_buckets(dense.param_tensors(), spec_.dense ? spec_.dense->bucket_cap_bytes : int64_t{25} << 20);
    if (buckets.empty()) buckets.emplace_back(0, 0);
    const int fb = sink_.compute(
        "dense_forward_backward", OpCategory::dense, batch,
        std::string(output_dist_earlier ? "(its output dist ran on the comm lane under the previous step) " : "") +
            fmt::format("dense forward, BCE loss and backward of {} parameters; launches {} DDP bucket all-reduce(s)",
                        dense.num_params(), buckets.size()),
        0, 6 * B_ * dense.num_params());
    own(fb, RankOp::dense_forward_backward);
    sink_.program.ops[static_cast<size_t>(fb)].dense_work = dense.work(B_);
    if (spec_.dense) sink_.program.ops[static_cast<size_t>(fb)].dense_precision = spec_.dense->precision;
    std::vector<int> bucket_ops;
    for (size_t k = 0; k < buckets.size(); ++k) {
      const auto [lo, hi] = buckets[k];
      const bool last = k + 1 == buckets.size();
      CollectiveCall c;
      c.kind = CollectiveKind::all_reduce;
      c.name = "dense_all_reduce";
      c.group = "world";
      c.peers = sink_.world_ranks;
      c.group_rank = me_;
      c.count = last ? 2 + hi : hi - lo;  // the last bucket carries the loss and the cancel vote
      c.elem_bytes = 4;
      c.dtype = "float32";
      bucket_ops.push_back(sink_.comm("dense_all_reduce", batch, {c}, false,
                                      fmt::format("DDP bucket {}: all-reduce of dense gradients [{}, {}){}", k, lo, hi,
                                                  last ? " with the loss and the cancel vote" : ""),
                                      fb));
      own(bucket_ops.back(), RankOp::dense_all_reduce, static_cast<int>(k));
    }
    for (size_t k = 0; k < shardings_.size(); ++k) {
      ModuleScope module(sink_, k);
      shardings_[k]->emit_grad_dist(sink_, batch);
    }
    bool exact = true;
    double ids = 0, bytes = 0;
    for (int k : mine_) {
      const Slot& sl = L_.slots[static_cast<size_t>(k)];
      const double n = static_cast<double>(W_) * expected_ids(sl, exact);
      ids += n;
      const TableSpec& ts = spec_.tables[static_cast<size_t>(sl.table)];
      bytes += ProgramSink::update_bytes(n, ts, sl.s.num_cols, static_cast<double>(W_ * B_), spec_.optimizer.type);
    }
    // the cache lines of the distinct rows the update reads and writes back (HostWork::update_row_lines)
    double row_lines = 0;
    for (const ShardRows& sh : shard_rows())
      row_lines += sh.distinct * ProgramSink::update_row_lines(*sh.table, sh.cols, spec_.optimizer.type);
    // tables in host memory: the optimizer state rows (in host memory) there and back, the
    // updated rows not cached (host: all) there and back, the dirty rows the lookups evicted back
    double h2d = 0, d2h = 0;
    for (const auto& h : host_) {
      const HostTraffic tr = traffic(h, false, batch);
      h2d += tr.update_h2d;
      d2h += tr.update_d2h;
    }
    int update_op = -1;
    if (std::llround(h2d) + std::llround(d2h) > 0) {
      const auto lk = lookup_op_.find(batch);
      update_op = sink_.copy("host_update", batch,
                             "the optimizer's host traffic (expected): state rows there and back, uncached rows written "
                             "through, dirty rows evicted",
                             std::llround(h2d), std::llround(d2h), {lk == lookup_op_.end() ? -1 : lk->second});
      own(update_op, RankOp::host_update);
    }
    const int bwd = sink_.compute("backward_fused_optimizer", OpCategory::optimizer, batch,
                                  fmt::format("sparse gradients of the local shards and the fused {} update of their rows",
                                              to_string(spec_.optimizer.type)),
                                  std::llround(ids), 0, std::llround(bytes));
    own(bwd, RankOp::backward_fused_optimizer);
    work(bwd, HostWork::update_row_lines, row_lines);
    sink_.depend(bwd, update_op);
    sink_.depend(bwd, prefetch_op_);  // FBGEMM: the TBE backward waits for the prefetch of the next batch
    for (size_t k = 0; k < shardings_.size(); ++k) {
      ModuleScope module(sink_, k);
      shardings_[k]->emit_update(sink_, batch);
    }
    const int opt = sink_.compute("dense_optimizer", OpCategory::optimizer, batch,
                                  "average the all-reduced dense gradients and apply SGD (waits for every bucket)", 0, 0,
                                  3 * 4 * dense.num_params());
    own(opt, RankOp::dense_optimizer);
    auto& waits = p_.ops[static_cast<size_t>(opt)].waits_for;
    for (int id : bucket_ops)
      if (std::find(waits.begin(), waits.end(), id) == waits.end()) waits.push_back(id);
  }

 private:
  // the executor's own op (program_sink.h OpOwner)
  int own(int op, RankOp kind, int arg = 0) { return sink_.own(op, kind, arg); }
  // op `op`'s per-item host work (ProgramOp::work, work_items)
  void work(int op, HostWork kind, double items) {
    ProgramOp& o = p_.ops[static_cast<size_t>(op)];
    o.work = kind;
    o.work_items = std::llround(items);
  }
  // module k emits (its ops' owner), the executor again after
  struct ModuleScope {
    ModuleScope(ProgramSink& sink, size_t k) : sink_(sink) { sink_.owner = static_cast<int>(k); }
    ~ModuleScope() { sink_.owner = -1; }
    ModuleScope(const ModuleScope&) = delete;
    ModuleScope& operator=(const ModuleScope&) = delete;
    ProgramSink& sink_;
  };
  double expected_ids(const Slot& sl, bool& exact) const { return program::expected_slot_ids(spec_, sl, exact); }
  // a local shard's table, columns and expected distinct rows of one batch: cost/cache_model.h
  // shard_distinct_rows of the ids every rank sends it, its slots (the features reading it)
  // together; in (table, row offset, column offset) order, computed once (no batch dependence)
  struct ShardRows {
    const TableSpec* table;
    int64_t cols;
    double distinct;
  };
  const std::vector<ShardRows>& shard_rows() {
    if (shard_rows_) return *shard_rows_;
    bool exact = true;
    std::map<std::tuple<int, int64_t, int64_t>, std::pair<const Slot*, std::vector<std::pair<int, double>>>> shard_ids;
    for (int k : mine_) {
      const Slot& sl = L_.slots[static_cast<size_t>(k)];
      auto& sh = shard_ids[{sl.table, sl.s.row_offset, sl.s.col_offset}];
      sh.first = &sl;
      sh.second.emplace_back(sl.feature, static_cast<double>(W_) * expected_ids(sl, exact));
    }
    shard_rows_.emplace();
    for (const auto& [key, sh] : shard_ids) {
      const TableSpec& ts = spec_.tables[static_cast<size_t>(std::get<0>(key))];
      shard_rows_->push_back({&ts, sh.first->s.num_cols, shard_distinct_rows(spec_, ts, sh.first->s, sh.second)});
    }
    return *shard_rows_;
  }
  std::optional<std::vector<ShardRows>> shard_rows_;
  // a local shard in host memory: its features' expected ids per batch and its cache estimate
  struct HostShard {
    int table;
    Shard s;
    std::vector<std::pair<int, double>> ids;
    CacheEstimate est;
  };
  bool prefetches(const HostShard& h) const {
    const TableSpec& t = spec_.tables[static_cast<size_t>(h.table)];
    return t.prefetch_pipeline && t.placement == TablePlacement::host_cached;
  }
  // the shard's cache estimate for batch `batch` of this program (relative: 0 is the iteration's
  // own): the steady state, or with cold_start the lookup after iteration + batch lookups
  const CacheEstimate& est(const HostShard& h, int batch) const {
    if (!cold_) return h.est;
    const int64_t before = std::max<int64_t>(0, p_.iteration + batch);
    auto key = std::make_tuple(h.table, h.s.row_offset, h.s.col_offset, before);
    auto it = cold_est_.find(key);
    if (it == cold_est_.end())
      it = cold_est_.emplace(key, estimate_cache(spec_, spec_.tables[static_cast<size_t>(h.table)], h.s, h.ids, before)).first;
    return it->second;
  }
  HostTraffic traffic(const HostShard& h, bool prefetched, int batch) const {
    return host_traffic(spec_.tables[static_cast<size_t>(h.table)], spec_.optimizer.type, h.s.num_cols, est(h, batch),
                        prefetched);
  }
  bool cold_ = false;
  mutable std::map<std::tuple<int, int64_t, int64_t, int64_t>, CacheEstimate> cold_est_;
  std::vector<HostShard> host_;
  std::map<int, int> ids_op_, lookup_op_;  // by batch: its input_dist/ids and lookup ops in this program
  int prefetch_op_ = -1;
  const WorkloadSpec& spec_;
  ProgramSink sink_;
  const Layout& L_;
  int me_, W_;
  int64_t B_;
  StepProgram& p_;
  std::vector<std::unique_ptr<sharding::EmbeddingSharding>> shardings_;
  std::vector<int> mine_;
};

}  // namespace

std::vector<Phase> step_schedule(const WorkloadSpec& spec, int64_t iteration) {
  const int64_t total = spec.warmup_steps + spec.steps;
  auto has = [&](int64_t i) { return i < total; };
  std::vector<Phase> out;
  auto phase = [&](PhaseKind k, int batch, bool sync) { out.push_back({k, batch, sync, 0, 0}); };
  const bool prefetching = std::any_of(spec.tables.begin(), spec.tables.end(), [](const TableSpec& t) {
    return t.prefetch_pipeline && t.placement == TablePlacement::host_cached;
  });
  switch (spec.pipeline) {
    case PipelineKind::base:
      phase(PhaseKind::start_batch, 0, true);
      phase(PhaseKind::lookup, 0, true);
      phase(PhaseKind::finish_output_dist, 0, true);
      phase(PhaseKind::train, 0, true);
      break;
    case PipelineKind::sparse_dist:  // the next batch's input dist runs under the dense part
      if (iteration == 0) phase(PhaseKind::start_batch, 0, true);
      phase(PhaseKind::lookup, 0, true);
      phase(PhaseKind::finish_output_dist, 0, true);
      if (has(iteration + 1)) {
        phase(PhaseKind::start_batch, 1, false);
        if (prefetching) phase(PhaseKind::prefetch, 1, true);
      }
      phase(PhaseKind::train, 0, true);
      break;
    case PipelineKind::semi_sync:  // the next batch's lookup and output dist run under the dense part
      if (iteration == 0) {
        phase(PhaseKind::start_batch, 0, true);
        phase(PhaseKind::lookup, 0, true);
      }
      phase(PhaseKind::finish_output_dist, 0, true);
      if (has(iteration + 1)) {
        if (iteration == 0) phase(PhaseKind::start_batch, 1, true);
        phase(PhaseKind::lookup, 1, false);
        if (has(iteration + 2)) {
          phase(PhaseKind::start_batch, 2, false);
          if (prefetching) phase(PhaseKind::prefetch, 2, true);
        }
      }
      phase(PhaseKind::train, 0, true);
      break;
  }
  return out;
}

StepProgram build_step_program(const WorkloadSpec& spec, const ShardingPlan& plan, int rank, int64_t iteration) {
  return build_step_program(spec, plan, rank, iteration, false);
}

StepProgram build_step_program(const WorkloadSpec& spec, const ShardingPlan& plan, int rank, int64_t iteration,
                               bool cold_start) {
  validate_plan(spec, plan, "sharding plan");
  return program::build_step_program(spec, plan, detail::Layout(spec, plan), rank, iteration, cold_start);
}

int64_t cold_start_iterations(const WorkloadSpec& spec, const ShardingPlan& plan) {
  validate_plan(spec, plan, "sharding plan");
  return program::cold_start_iterations(spec, detail::Layout(spec, plan));
}

StepProgram program::build_step_program(const WorkloadSpec& spec, const ShardingPlan& plan, const detail::Layout& layout,
                                        int rank, int64_t iteration, std::vector<OpOwner>& owners) {
  owners.clear();
  StepProgram p = build_step_program(spec, plan, layout, rank, iteration, false, &owners);
  owners.resize(p.ops.size());  // an op emitted last without a tag stays untagged (kind -1)
  return p;
}

StepProgram program::build_step_program(const WorkloadSpec& spec, const ShardingPlan& plan, const detail::Layout& layout,
                                        int rank, int64_t iteration, bool cold_start, std::vector<OpOwner>* owners) {
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
  Builder b(spec, layout, rank, p, cold_start, owners);
  for (const Phase& ph : step_schedule(spec, iteration)) switch (ph.kind) {
      case PhaseKind::start_batch: b.start_batch(ph.batch, ph.sync); break;
      // the ids of a batch looked up at the start of a step were received in the step before
      // (sparse_dist's batch 0, semi_sync's batch 1), except in the first step
      case PhaseKind::lookup:
        b.lookup_and_output_dist(ph.batch, ph.sync,
                                 iteration > 0 && ((spec.pipeline == PipelineKind::sparse_dist && ph.batch == 0) ||
                                                   (spec.pipeline == PipelineKind::semi_sync && ph.batch == 1)));
        break;
      case PhaseKind::finish_output_dist: b.finish_output_dist(ph.batch); break;
      case PhaseKind::prefetch: b.prefetch(ph.batch); break;
      // semi_sync trains a batch whose output dist ran under the previous step
      case PhaseKind::train: b.train(ph.batch, spec.pipeline == PipelineKind::semi_sync && iteration > 0); break;
    }
  return p;
}

int64_t program::cold_start_iterations(const WorkloadSpec& spec, const detail::Layout& layout) {
  const int64_t total = spec.warmup_steps + spec.steps;
  // every shard in host_cached memory, with its features' expected ids a batch (as the Builder)
  std::map<std::pair<int, int>, std::pair<Shard, std::vector<std::pair<int, double>>>> shards;
  for (const Slot& sl : layout.slots) {
    if (spec.tables[static_cast<size_t>(sl.table)].placement != TablePlacement::host_cached) continue;
    bool exact = true;
    auto& e = shards[{sl.table, sl.shard}];
    e.first = sl.s;
    e.second.emplace_back(sl.feature, static_cast<double>(layout.world) * expected_slot_ids(spec, sl, exact));
  }
  double T = 0;
  for (const auto& [key, sh] : shards)
    T = std::max(T, estimate_cache(spec, spec.tables[static_cast<size_t>(key.first)], sh.first, sh.second).fill_batches);
  if (shards.empty()) return 0;
  if (!std::isfinite(T) || T + 2 >= static_cast<double>(total)) return total;
  return static_cast<int64_t>(std::ceil(T)) + 2;
}

int64_t steady_iteration(const WorkloadSpec& spec) {
  const int64_t total = spec.warmup_steps + spec.steps;
  const int64_t want = spec.pipeline == PipelineKind::base ? 0 : 1;
  return std::min(want, total - 1);
}

int place_in_run(const WorkloadSpec& spec, int64_t iteration) {
  if (spec.pipeline == PipelineKind::base) return 0;
  const int64_t total = spec.warmup_steps + spec.steps;
  return (iteration == 0 ? 1 : 0) | (iteration + 1 < total ? 2 : 0) | (iteration + 2 < total ? 4 : 0);
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
    if (op.bytes) o["bytes"] = op.bytes;
    if (op.bytes_h2d) o["bytes_h2d"] = op.bytes_h2d;
    if (op.bytes_d2h) o["bytes_d2h"] = op.bytes_d2h;
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
  out += fmt::format("{:>3}  {:<8} {:>5}  {:<40} {:<14} {}\n", "id", "lane", "batch", "op", "waits for", "collectives");
  for (const auto& op : p.ops) {
    std::string waits;
    for (int w : op.waits_for) waits += (waits.empty() ? "" : ",") + std::to_string(w);
    if (op.launched_by >= 0) waits += (waits.empty() ? "" : ",") + fmt::format("in {}", op.launched_by);
    std::string cs;
    bool checked = false;
    for (const auto& c : op.collectives) {
      if (is_split_check(c)) {
        checked = true;  // shown as "+ split check" on the collective it checks
        continue;
      }
      cs += fmt::format("{}{}{} {}, {} out / {} in{}{}", cs.empty() ? "" : "; ",
                        c.name == op.name ? "" : c.name + ": ", to_string(c.kind), c.group,
                        sessions::format_bytes(c.bytes_sent()), sessions::format_bytes(c.bytes_received()),
                        c.exact ? "" : " (expected)", checked ? " + split check" : "");
      checked = false;
    }
    if (op.lane == sessions::Lane::gpu_copy)  // the host link's bytes
      cs = fmt::format("host link: {} host -> device, {} device -> host (expected)", sessions::format_bytes(op.bytes_h2d),
                       sessions::format_bytes(op.bytes_d2h));
    out += fmt::format("{:>3}  {:<8} {:>+5}  {:<40} {:<14} {}\n", op.id, sessions::to_string(op.lane), op.batch, op.name,
                       waits, cs);
  }
  return out;
}

}  // namespace embedscope::engine

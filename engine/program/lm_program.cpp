// build_lm_step_program and simulate_lm_step (program/lm_program.h).

#include "embedscope/engine/program/lm_program.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "embedscope/engine/cost/cost_model.h"
#include "embedscope/engine/cost/shared_cores.h"
#include "embedscope/engine/input/id_share.h"
#include "embedscope/engine/quant/quant.h"
#include "embedscope/engine/sharding/vocab_parallel.h"
#include "embedscope/engine/workload/spec_error.h"

namespace embedscope::engine {

namespace {

using sessions::Lane;
using sessions::OpCategory;

/// Appends ops in issue order; each waits for the op issued before it (one thread runs them).
struct LmProgramWriter {
  StepProgram& p;
  std::vector<int> world;
  int rank = 0;

  int add(const std::string& name, Lane lane, OpCategory cat, const std::string& what) {
    ProgramOp op;
    op.id = static_cast<int>(p.ops.size());
    op.name = name;
    op.lane = lane;
    op.category = cat;
    op.what = what;
    for (int k = op.id - 1; k >= 0; --k)  // the previous op of its lane
      if (p.ops[static_cast<size_t>(k)].lane == lane) {
        op.waits_for.push_back(k);
        break;
      }
    if (op.id > 0 && (op.waits_for.empty() || op.waits_for.back() != op.id - 1)) op.waits_for.push_back(op.id - 1);
    p.ops.push_back(std::move(op));
    return p.ops.back().id;
  }
  void compute(const std::string& name, OpCategory cat, const std::string& what, int64_t rows, int64_t flops,
               int64_t bytes) {
    ProgramOp& op = p.ops[static_cast<size_t>(add(name, Lane::compute, cat, what))];
    op.rows = rows;
    op.flops = flops;
    op.bytes = bytes;
  }
  void comm(const std::string& name, std::vector<CollectiveCall> calls, const std::string& what) {
    std::vector<CollectiveCall> checked;
    for (auto& c : calls) {
      if (c.kind == CollectiveKind::all_to_all || c.kind == CollectiveKind::reduce_scatter) {
        const auto n = static_cast<int64_t>(world.size());
        checked.push_back(all_gather(c.name + "/split_check", std::vector<int64_t>(world.size(), 2 * n), 8, "int64"));
      }
      checked.push_back(std::move(c));
    }
    p.ops[static_cast<size_t>(add(name, Lane::comm, OpCategory::comm, what))].collectives = std::move(checked);
  }
  CollectiveCall base(CollectiveKind k, const std::string& name, int64_t eb, const char* dt, bool exact = true) const {
    CollectiveCall c;
    c.kind = k;
    c.name = name;
    c.group = "world";
    c.peers = world;
    c.group_rank = rank;
    c.elem_bytes = eb;
    c.dtype = dt;
    c.exact = exact;
    return c;
  }
  /// `wire`: the precision of the elements (lm_wire_precision for activations, fp32 otherwise)
  CollectiveCall all_reduce(const std::string& name, int64_t count, CommPrecision wire = CommPrecision::fp32) const {
    CollectiveCall c = base(CollectiveKind::all_reduce, name, static_cast<int64_t>(precision_bytes(wire)),
                            precision_dtype(wire));
    c.count = count;
    return c;
  }
  /// counts: elements each member contributes (group order).
  CollectiveCall all_gather(const std::string& name, std::vector<int64_t> counts, int64_t eb, const char* dt) const {
    CollectiveCall c = base(CollectiveKind::all_gather, name, eb, dt);
    c.send_elements.assign(counts.size(), counts[static_cast<size_t>(rank)]);
    c.recv_elements = std::move(counts);
    return c;
  }
  /// counts: elements of each member's block.
  CollectiveCall reduce_scatter(const std::string& name, const std::vector<int64_t>& counts, CommPrecision wire) const {
    CollectiveCall c = base(CollectiveKind::reduce_scatter, name, static_cast<int64_t>(precision_bytes(wire)),
                            precision_dtype(wire));
    c.send_elements = counts;
    c.recv_elements.assign(counts.size(), counts[static_cast<size_t>(rank)]);
    return c;
  }
  CollectiveCall all_gather(const std::string& name, std::vector<int64_t> counts, CommPrecision wire) const {
    return all_gather(name, std::move(counts), static_cast<int64_t>(precision_bytes(wire)), precision_dtype(wire));
  }
  CollectiveCall all_to_all(const std::string& name, std::vector<int64_t> send, std::vector<int64_t> recv, int64_t eb,
                            const char* dt, bool exact) const {
    CollectiveCall c = base(CollectiveKind::all_to_all, name, eb, dt, exact);
    c.send_elements = std::move(send);
    c.recv_elements = std::move(recv);
    return c;
  }
};

// 1 - (1 - q)^x for q in [0, 1], x >= 0
double lm_one_minus_pow(double q, double x) {
  if (q >= 1.0) return x > 0 ? 1.0 : 0.0;
  return -std::expm1(x * std::log1p(-q));
}

// The expected distinct rows among n ids drawn over the rows [lo, hi) of the vocabulary (the
// batch's ids that fall there): sum over the rows of 1 - (1 - p_k)^n, p_k the row's share of the
// range's mass; id k's mass (k + 1)^-alpha (Zipf tokens), or even (token files). Rows grouped as
// cost/cache_model.cpp groups ranks: one by one up to 1,024, then runs of ratio 1.02, each row of
// a run at the run's mean share. Example: uniform, 4 rows, 8 ids: 4 x (1 - (3/4)^8) = 3.60.
double lm_distinct_rows(const LmWorkloadSpec& spec, int64_t lo, int64_t hi, double n) {
  hi = std::min(hi, spec.vocab_size);
  if (hi <= lo || n <= 0) return 0.0;
  const double rows = static_cast<double>(hi - lo);
  if (spec.ids_from_file()) return rows * lm_one_minus_pow(1.0 / rows, n);
  const double alpha = spec.token_zipf_alpha;
  const double total = zipf_mass(hi, alpha) - zipf_mass(lo, alpha);
  double u = 0;
  for (int64_t a = lo; a < hi;) {
    const int64_t k = a - lo;
    const int64_t b = k < 1024 ? a + 1 : std::min(hi, std::max(a + 1, lo + static_cast<int64_t>(std::ceil(static_cast<double>(k) * 1.02))));
    const double m = static_cast<double>(b - a);
    u += m * lm_one_minus_pow(std::min(1.0, (zipf_mass(b, alpha) - zipf_mass(a, alpha)) / total / m), n);
    a = b;
  }
  return u;
}

}  // namespace

LmLookupBytes lm_lookup_bytes(const LmWorkloadSpec& spec, int64_t ids) {
  const int64_t elem = spec.data_type == LmDataType::fp32 ? 4 : 2;
  return {ids * 8, ids * spec.hidden_size * elem};
}

CommPrecision lm_wire_precision(const LmWorkloadSpec& spec) {
  switch (spec.data_type) {
    case LmDataType::bf16: return CommPrecision::bf16;
    case LmDataType::fp16: return CommPrecision::fp16;
    case LmDataType::fp32: break;
  }
  return CommPrecision::fp32;
}

bool lm_op_gemm_in_half_precision(const LmWorkloadSpec& spec, const ProgramOp& op) {
  if (spec.data_type == LmDataType::fp32 || op.lane != Lane::compute || op.flops <= 0) return false;
  return op.name == "output_projection/logits" || op.name == "output_projection/backward";
}

bool is_lm_embedding_collective(std::string_view name) {
  for (std::string_view prefix : {"embedding/", "input_dist/", "output_dist/", "grad_dist/"})
    if (name.substr(0, prefix.size()) == prefix) return true;
  return false;
}

StepProgram build_lm_step_program(const LmWorkloadSpec& spec, int rank, int64_t step) {
  validate(spec, "workload");
  const int p = spec.world_size;
  if (rank < 0 || rank >= p)
    throw SpecError(fmt::format("workload: rank {} outside the {} ranks of /devices/count", rank, p));
  StepProgram prog;
  prog.rank = rank;
  prog.world_size = p;
  prog.iteration = prog.step = step;
  LmProgramWriter w{prog, {}, rank};
  for (int r = 0; r < p; ++r) w.world.push_back(r);

  const bool dp = spec.sharding == LmSharding::data_parallel, rw = spec.sharding == LmSharding::row_wise;
  const bool sp = spec.sequence_parallel;
  const int64_t V = spec.padded_vocab_size(), H = spec.hidden_size, T = spec.tokens_per_micro_batch();
  const int64_t L = spec.body_layers;
  const int64_t Tl = sp ? T / p : T, Tc = rw ? T * p : T;
  const VocabRange rows = dp ? VocabRange{0, V} : vocab_range(V, p, rank);
  const int64_t R = rows.size();
  // The expected share of the batch's ids in rank r's rows: the Zipf mass of the range (id k
  // drawn with P ~ (k + 1)^-alpha over [0, vocab_size): the frequent tokens' rows are rank 0's),
  // or the range's share of the rows for ids read from a file.
  const double zipf_total = spec.ids_from_file() ? 0.0 : zipf_mass(spec.vocab_size, spec.token_zipf_alpha);
  auto share = [&](int r) {
    if (dp) return 1.0;
    const VocabRange vr = vocab_range(V, p, r);
    if (spec.ids_from_file()) return static_cast<double>(vr.size()) / static_cast<double>(V);
    const int64_t lo = std::min(vr.begin, spec.vocab_size), hi = std::min(vr.end, spec.vocab_size);
    return (zipf_mass(hi, spec.token_zipf_alpha) - zipf_mass(lo, spec.token_zipf_alpha)) / zipf_total;
  };
  const bool ids_exact = dp || p == 1;
  const int64_t my_ids = std::llround(static_cast<double>(T) * share(rank));
  constexpr int64_t f = 4;
  // the activations' and their gradients' collectives: data_type's elements (lm_wire_precision)
  const CommPrecision wire = lm_wire_precision(spec);
  const auto wb = static_cast<int64_t>(precision_bytes(wire));
  const char* wdt = precision_dtype(wire);
  // a cpu rank's random row accesses (program/step_program.h HostWork): the distinct rows of the
  // ids this rank looks up (the same rows the embedding backward accumulates into) x the cache
  // lines of a stored row for the lookup (lookup_row_lines, its ProgramOp::work2 as the DLRM
  // lookup's) and of a fp32 gradient row for the backward (update_row_lines: a read-modify-write
  // of the row at a random place, as the DLRM fused update's)
  const auto lines = [](int64_t bytes) { return (bytes + 63) / 64; };
  const double distinct = lm_distinct_rows(spec, rows.begin, rows.end, static_cast<double>(rw ? p * my_ids : my_ids));
  const int64_t read_lines = std::llround(distinct * static_cast<double>(lines(H * (spec.data_type == LmDataType::fp32 ? 4 : 2))));
  const int64_t grad_lines = std::llround(distinct * static_cast<double>(lines(H * f)));
  const auto lookup_lines = [&] {
    ProgramOp& op = prog.ops.back();
    op.work2 = HostWork::lookup_row_lines;
    op.work2_items = read_lines;
  };
  const int64_t params = R * H * (spec.tie_word_embeddings ? 1 : 2) + L * (H * H + H);

  w.compute("input", OpCategory::input, "draw the batch's tokens (inputs and next-token targets)", 0, 0, T * 16);
  // the token embedding's forward
  if (rw) {
    std::vector<int64_t> send(static_cast<size_t>(p)), recv(static_cast<size_t>(p));
    for (int r = 0; r < p; ++r) {
      send[static_cast<size_t>(r)] = std::llround(static_cast<double>(T) * share(r));
      recv[static_cast<size_t>(r)] = my_ids;
    }
    std::vector<int64_t> send_rows(send), recv_rows(recv);
    for (auto& c : send_rows) c *= H;
    for (auto& c : recv_rows) c *= H;
    w.compute("bucketize", OpCategory::input, "group the batch's ids by the rank that owns their row", 0, 0, T * 16);
    w.comm("input_dist",
           {w.all_to_all("input_dist/splits", std::vector<int64_t>(static_cast<size_t>(p), 1),
                         std::vector<int64_t>(static_cast<size_t>(p), 1), 8, "int64", true),
            w.all_to_all("input_dist/ids", send, recv, 8, "int64", p == 1)},
           "ids to the ranks that own their rows (all-to-alls of the counts and the ids)");
    const int64_t got = p * my_ids;
    w.compute("lookup", OpCategory::lookup, "read the rows of the ids received", got, 0, got * (H * f + 8) + got * H * f);
    lookup_lines();
    // the rows go back where the ids came from: this rank sends what it received
    w.comm("output_dist", {w.all_to_all("output_dist/rows", recv_rows, send_rows, wb, wdt, p == 1)},
           "the rows back to the ranks whose tokens they are (all-to-all)");
  } else {
    w.compute("lookup", OpCategory::lookup,
              dp ? "read the rows of every token" : "read the rows this rank holds; other ids masked to zero", my_ids, 0,
              my_ids * (H * f + 8) + T * H * f);
    lookup_lines();
    if (!dp && !sp)
      w.comm("embedding/all_reduce", {w.all_reduce("embedding/all_reduce", T * H, wire)},
             "sum the ranks' partial embeddings [T x H] (Megatron VocabParallelEmbedding)");
    if (!dp && sp)
      w.comm("embedding/reduce_scatter",
             {w.reduce_scatter("embedding/reduce_scatter", std::vector<int64_t>(static_cast<size_t>(p), Tl * H), wire)},
             "sum the partial embeddings into each rank's T/p tokens (sequence parallel)");
  }
  w.compute("body_forward", OpCategory::dense, "the residual dense layers on the local tokens", 0, 2 * L * Tl * H * H,
            ((2 * L + 1) * Tl * H + L * H * H) * f);
  // the output projection with the vocab-parallel cross-entropy
  if (rw || sp) {
    const int64_t per = rw ? T : Tl;
    const std::string name = rw ? "output_projection/all_gather" : "sequence_parallel/all_gather";
    std::vector<CollectiveCall> calls{w.all_gather(name, std::vector<int64_t>(static_cast<size_t>(p), per * H), wire)};
    if (rw)
      calls.push_back(w.all_gather("output_projection/targets_all_gather", std::vector<int64_t>(static_cast<size_t>(p), per),
                                   8, "int64"));
    w.comm(name, std::move(calls), "gather the hidden states of every rank's tokens for the projection");
  }
  // the projection as the GEMMs read it: fp32, or the bf16 / fp16 read copy's 2-byte elements
  // (model/lm_embedding.h lm_read_code); its fp32 gradient is written at 4 B
  const int64_t ob = spec.data_type == LmDataType::fp32 ? f : 2;
  w.compute("output_projection/logits", OpCategory::dense, "this rank's slice of the logits [Tc x rows] and its row max",
            0, 2 * Tc * R * H, (Tc * H + Tc * R) * f + R * H * ob);
  if (!dp) w.comm("cross_entropy/max", {w.all_reduce("cross_entropy/max", Tc)}, "the logits' max over the vocabulary (all-reduce max)");
  w.compute("cross_entropy/exp", OpCategory::dense, "exp of the shifted logits and their row sums", 0, 0, 2 * Tc * R * f);
  if (!dp)
    w.comm("cross_entropy/all_reduce",
           {w.all_reduce("cross_entropy/predicted_logit", Tc), w.all_reduce("cross_entropy/sum_exp", Tc)},
           "the target's logit and the sum of exps over the vocabulary (all-reduce sum)");
  w.compute("output_projection/backward", OpCategory::dense, "softmax gradient, the projection's and its input's gradients",
            0, 4 * Tc * R * H, (2 * Tc * R + R * H + 2 * Tc * H) * f + R * H * ob);
  if (dp)
    w.comm("loss/all_reduce", {w.all_reduce("loss/all_reduce", 1)}, "the loss sum over every rank's tokens");
  else if (rw || sp)
    w.comm("output_projection/grad_reduce_scatter",
           {w.reduce_scatter("output_projection/grad_reduce_scatter",
                             std::vector<int64_t>(static_cast<size_t>(p), (rw ? T : Tl) * H), wire)},
           "sum the projection input's gradient into each rank's tokens");
  else
    w.comm("output_projection/grad_all_reduce", {w.all_reduce("output_projection/grad_all_reduce", T * H, wire)},
           "sum the projection input's gradient over the vocabulary slices");
  w.compute("body_backward", OpCategory::dense, "the dense layers' backward", 0, 4 * L * Tl * H * H,
            ((2 * L + 2) * Tl * H + 3 * L * H * H) * f);
  // the token embedding's backward
  if (rw) {
    std::vector<int64_t> send(static_cast<size_t>(p)), recv(static_cast<size_t>(p), my_ids * H);
    for (int r = 0; r < p; ++r) send[static_cast<size_t>(r)] = std::llround(static_cast<double>(T) * share(r)) * H;
    w.comm("grad_dist", {w.all_to_all("grad_dist/rows", send, recv, wb, wdt, p == 1)},
           "the rows' gradients to the ranks that own them (all-to-all)");
  } else if (sp) {
    w.comm("embedding/grad_all_gather",
           {w.all_gather("embedding/grad_all_gather", std::vector<int64_t>(static_cast<size_t>(p), Tl * H), wire)},
           "gather every rank's slice of the embedding gradient (backward of the reduce-scatter)");
  }
  const int64_t bwd_ids = rw ? p * my_ids : my_ids;
  w.compute("embedding_backward", OpCategory::lookup, "accumulate the gradients of the rows looked up", bwd_ids, 0,
            bwd_ids * (8 + 3 * H * f));
  prog.ops.back().work = HostWork::update_row_lines;
  prog.ops.back().work_items = grad_lines;
  const bool body_differs = dp || rw || sp;
  if (p > 1 && (dp || body_differs)) {
    std::vector<CollectiveCall> calls;
    if (dp) {
      calls.push_back(w.all_reduce("embedding/grad_all_reduce", V * H));
      if (!spec.tie_word_embeddings) calls.push_back(w.all_reduce("output_projection/grad_all_reduce", V * H));
    }
    if (L > 0) calls.push_back(w.all_reduce("body/grad_all_reduce", L * (H * H + H)));
    if (!calls.empty()) w.comm("grad_all_reduce", std::move(calls), "sum the gradients of replicated parameters");
  }
  w.compute("optimizer", OpCategory::optimizer, "SGD on the rank's parameters (gradients zeroed)", R, 0, params * 4 * f);
  for (ProgramOp& op : prog.ops)
    if (!ids_exact)
      for (CollectiveCall& c : op.collectives)
        if (c.name == "input_dist/ids" || c.name == "output_dist/rows" || c.name == "grad_dist/rows") c.exact = false;
  return prog;
}

LmSimulatedStep simulate_lm_step(const LmWorkloadSpec& spec, const HardwareProfile& hw, int gpus_per_node) {
  const int p = spec.world_size;
  const auto P = static_cast<size_t>(p);
  LmSimulatedStep out;
  for (int r = 0; r < p; ++r) out.programs.push_back(build_lm_step_program(spec, r, 0));
  out.rank_start_ns.resize(P);
  out.rank_end_ns.resize(P);
  out.collective_ns.resize(P);
  std::vector<int64_t> t(P, 0);
  const int gpn = std::max(1, gpus_per_node);
  // the ranks sharing r's cores (cost/shared_cores.h core_group: a cpu profile's machine, else the node)
  const auto cores = [&](size_t r) { return core_group(hw, static_cast<int>(r), p, gpn); };
  const size_t n = out.programs[0].ops.size();
  for (size_t k = 0; k < n; ++k) {
    const ProgramOp& op0 = out.programs[0].ops[k];
    for (size_t r = 0; r < P; ++r) out.rank_start_ns[r].push_back(t[r]);
    if (op0.lane == Lane::compute) {
      for (size_t r = 0; r < P; ++r) {
        const ProgramOp& op = out.programs[r].ops[k];
        const int64_t alone = lm_op_gemm_in_half_precision(spec, op) ? half_precision_gemm_ns(op, hw) : compute_ns(op, hw);
        const int64_t took = contended_ns(alone, hw, cores(r).ranks);
        t[r] += took;
        if (r == 0 && (op.name == "body_forward" || op.name == "body_backward")) out.body_compute_ns += took;
      }
    } else {
      for (size_t c = 0; c < op0.collectives.size(); ++c) {
        int64_t ready = 0;
        std::vector<CallMember> members;
        for (size_t r = 0; r < P; ++r) {
          ready = std::max(ready, t[r]);
          members.push_back({collective_ns(out.programs[r].ops[k].collectives[c], static_cast<int>(r), gpn, hw),
                             cores(r).id, cores(r).ranks});
        }
        // the simulated executor's rule of a call's time (cost/shared_cores.h): processor sharing
        // of a cpu node's cores, else the largest member's (contended) time
        const int64_t dur = collective_call_ns(members, hw);
        const int64_t waited = ready - t[0];
        for (size_t r = 0; r < P; ++r) {
          out.collective_ns[r].emplace_back(t[r], ready + dur);
          t[r] = ready + dur;
        }
        out.comm_ns += waited + dur;
        if (is_lm_embedding_collective(op0.collectives[c].name)) out.embedding_comm_ns += waited + dur;
        out.bytes_sent += op0.collectives[c].bytes_sent();
        const bool body = op0.collectives[c].name == "body/grad_all_reduce";
        if (body) out.body_comm_ns += waited + dur;
        // Megatron and TorchRec run no split check: its bytes apart (tester55 F4)
        const bool check = is_split_check(op0.collectives[c]);
        for (size_t r = 0; r < P; ++r) {
          const int64_t b = out.programs[r].ops[k].collectives[c].bytes_sent();
          (check ? out.split_check_bytes_all_ranks : out.bytes_sent_all_ranks) += b;
          if (body) out.body_bytes_all_ranks += b;
        }
      }
    }
    for (size_t r = 0; r < P; ++r) out.rank_end_ns[r].push_back(t[r]);
  }
  out.step_ns = *std::max_element(t.begin(), t.end());
  out.start_ns = out.rank_start_ns[0];
  out.end_ns = out.rank_end_ns[0];
  out.program = out.programs[0];
  return out;
}

}  // namespace embedscope::engine

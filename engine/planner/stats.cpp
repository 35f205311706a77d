// The planner's statistics of one plan (planner/stats.h): expected lookups, TorchRec's
// imbalance measures, and the per-rank phase times of the plan's StepPrograms.
#include "embedscope/engine/planner/stats.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embedscope/engine/cost/cost_model.h"
#include "embedscope/engine/cost/network_floor.h"
#include "embedscope/engine/cost/shared_cores.h"
#include "embedscope/engine/input/realized_share.h"
#include "embedscope/engine/program/step_program.h"
#include "embedscope/engine/sharding/plan_json.h"
#include "program/program_sink.h"
#include "sharding/layout.h"

namespace embedscope::engine {

std::vector<double> expected_lookups_per_rank(const WorkloadSpec& spec, const ShardingPlan& plan) {
  const FeatureIndex index(spec);
  std::vector<double> out(static_cast<size_t>(plan.world_size), 0.0);
  const double bw = static_cast<double>(spec.batch_size) * plan.world_size;
  for (const TablePlan& tp : plan.tables) {
    const TableSpec& t = spec.tables[static_cast<size_t>(tp.table)];
    for (const int fi : index.features_of_table()[static_cast<size_t>(tp.table)]) {
      if (fi < 0) continue;
      const FeatureSpec& f = spec.features[static_cast<size_t>(fi)];
      const double ids = bw * f.pooling_factor.mean;  // the table's ids per step, all ranks' batches
      for (const Shard& s : tp.shards) {
        double share = 1.0;
        if (tp.type == ShardingType::data_parallel) share = 1.0 / plan.world_size;
        else if (tp.type == ShardingType::row_wise || tp.type == ShardingType::table_row_wise ||
                 tp.type == ShardingType::grid_shard)
          share = s.num_rows == t.rows() ? 1.0 : realized_id_share(spec, t, fi, s.row_offset, s.num_rows);
        out[static_cast<size_t>(s.rank)] += ids * share;
      }
    }
  }
  return out;
}

// ---- TorchRec's measures (torchrec/distributed/planner/stats.py)

double total_variation(const std::vector<double>& p) {
  if (p.empty()) return -1.0;
  const double u = 1.0 / static_cast<double>(p.size());
  double m = 0;
  for (double x : p) m = std::max(m, std::abs(x - u));
  return m;
}

double total_distance(const std::vector<double>& p) {
  if (p.empty()) return -1.0;
  const double u = 1.0 / static_cast<double>(p.size());
  double s = 0;
  for (double x : p) s += std::abs(x - u);
  return s;
}

double chi_divergence(const std::vector<double>& p, double alpha) {
  if (p.empty()) return -1.0;
  const double k = static_cast<double>(p.size());
  double s = 0;
  for (double x : p) s += std::pow(std::abs(x - 1.0 / k), alpha) * std::pow(k, alpha - 1.0);
  return s;
}

double kl_divergence(const std::vector<double>& p) {
  if (p.empty()) return -1.0;
  const double k = static_cast<double>(p.size());
  double s = 0;
  for (double x : p)
    if (x > 0) s += x * std::log(k * x);
  return s;
}

double max_chi_divergence(int k, double alpha) {
  const double n = k;
  return std::pow(n - 1.0, alpha) / n + (n - 1.0) / n;
}

double max_kl_divergence(int k) { return std::log(static_cast<double>(k)); }
double max_total_variation(int k) { return 1.0 - 1.0 / static_cast<double>(k); }
double max_total_distance(int k) { return 2.0 * (1.0 - 1.0 / static_cast<double>(k)); }

Imbalance imbalance(const std::vector<double>& x) {
  Imbalance im;
  const double sum = std::accumulate(x.begin(), x.end(), 0.0);
  if (x.empty() || sum <= 0) return im;
  const double mx = *std::max_element(x.begin(), x.end());
  im.max_over_mean = mx / (sum / static_cast<double>(x.size()));
  std::vector<double> p(x.size());
  for (size_t i = 0; i < x.size(); ++i) p[i] = x[i] / sum;
  im.total_variation = total_variation(p);
  im.total_distance = total_distance(p);
  im.chi_divergence = chi_divergence(p, 1.0);
  im.kl_divergence = kl_divergence(p);
  return im;
}

// ---- the plan's phase times

namespace {

enum class Phase4 { none, fwd_compute, fwd_comms, bwd_compute, bwd_comms };

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

Phase4 phase_of(const ProgramOp& op) {
  if (op.lane == sessions::Lane::comm) {
    if (starts_with(op.name, "input_dist") || starts_with(op.name, "output_dist")) return Phase4::fwd_comms;
    if (starts_with(op.name, "grad_dist")) return Phase4::bwd_comms;
    return Phase4::none;  // dense_all_reduce
  }
  if (op.name == "bucketize" || op.name == "kjt_permute" || op.name == "lookup") return Phase4::fwd_compute;
  if (op.name == "backward_fused_optimizer" || op.name == "backward_data_parallel" ||
      op.name == "optimizer_data_parallel")
    return Phase4::bwd_compute;
  return Phase4::none;  // input, dense_forward_backward, dense_optimizer
}

}  // namespace

PlanStats plan_stats(const WorkloadSpec& spec, const ShardingPlan& plan, const HardwareProfile& hw) {
  validate_plan(spec, plan, "sharding plan");
  PlanStats st;
  st.hardware = hw.name;
  const int W = plan.world_size;
  const int gpn = std::max(1, plan.local_world_size);
  const detail::Layout layout(spec, plan);
  const int64_t it = steady_iteration(spec);
  const auto mem = estimate_memory(spec, plan);
  const auto lookups = expected_lookups_per_rank(spec, plan);
  st.ranks.resize(static_cast<size_t>(W));
  // A call's time is the simulated executor's (cost/shared_cores.h collective_call_ns: processor
  // sharing of a cpu node's cores, else the largest member's contended time), the same for each
  // member, and never under the member's own floor of the emulated network of spec.network
  // (cost/network_floor.h emulated_member_floors_ns: the Gloo emulation's rule, which may hold
  // members of one call for different times): the calls are matched across ranks as the
  // simulator's rendezvous does, by (group, sequence within the group on the rank), every
  // collective counted (dense_all_reduce too).
  const bool floored = spec.network.limited();
  std::map<std::pair<std::string, int64_t>, size_t> call_of;
  std::vector<std::vector<CallMember>> call_members;
  std::vector<std::vector<CollectiveCall>> call_calls;  // floored: each call's members' calls, group order
  struct RankCall {
    Phase4 phase;
    size_t call;
    int group_rank;
  };
  std::vector<std::vector<RankCall>> rank_calls(static_cast<size_t>(W));
  for (int r = 0; r < W; ++r) {
    RankStats& rs = st.ranks[static_cast<size_t>(r)];
    rs.rank = r;
    rs.lookups = lookups[static_cast<size_t>(r)];
    rs.hbm_bytes = mem[static_cast<size_t>(r)].total();
    rs.ddr_bytes = mem[static_cast<size_t>(r)].host;
    if (rs.hbm_bytes <= spec.devices.memory_bytes && allocator_runs_out(spec, mem[static_cast<size_t>(r)], ShortfallScope::plan))
      rs.reserved_bytes = mem[static_cast<size_t>(r)].peak_reserved;
    const CoreGroup cores = core_group(hw, r, W, gpn);  // a cpu profile's machine, else the node
    const int ranks_on_node = cores.ranks;
    const StepProgram p = program::build_step_program(spec, plan, layout, r, it);
    std::map<std::string, int64_t> seq;  // the rank's next sequence number per group
    int64_t dense_ns = 0;
    for (const ProgramOp& op : p.ops) {
      if (op.lane == sessions::Lane::gpu_copy) {  // the host link (cost_model.h host_copy_ns)
        (op.name == "prefetch" ? rs.prefetch_ns : rs.host_ns) += host_copy_ns(op, hw);
        continue;
      }
      const Phase4 ph = phase_of(op);
      if (op.lane == sessions::Lane::comm) {
        for (const CollectiveCall& c : op.collectives) {
          const auto [at, added] = call_of.try_emplace({c.group, seq[c.group]++}, call_members.size());
          if (added) call_members.emplace_back(), call_calls.emplace_back();
          call_members[at->second].push_back({collective_ns(c, r, gpn, hw), cores.id, ranks_on_node});
          if (floored) {
            auto& calls = call_calls[at->second];
            calls.resize(std::max(calls.size(), c.peers.size()));
            if (static_cast<size_t>(c.group_rank) < calls.size()) calls[static_cast<size_t>(c.group_rank)] = c;
          }
          if (ph != Phase4::none) rank_calls[static_cast<size_t>(r)].push_back({ph, at->second, c.group_rank});
        }
        continue;
      }
      // compute on cpu ranks shares the node's cores, as in the simulator (1 for GPUs)
      const int64_t ns = contended_ns(compute_ns(op, hw), hw, ranks_on_node);
      if (op.name == "dense_forward_backward") dense_ns += ns;
      switch (ph) {
        case Phase4::fwd_compute: rs.fwd_compute_ns += ns; break;
        case Phase4::bwd_compute: rs.bwd_compute_ns += ns; break;
        default: break;
      }
    }
    rs.host_ns += std::max<int64_t>(0, rs.prefetch_ns - dense_ns);  // the prefetch the dense part does not hide
  }
  std::vector<int64_t> call_ns(call_members.size());
  std::vector<std::vector<int64_t>> call_floors(call_members.size());  // floored: each member's, group order
  for (size_t k = 0; k < call_members.size(); ++k) {
    call_ns[k] = collective_call_ns(call_members[k], hw);
    if (!floored) continue;
    std::vector<const CollectiveCall*> calls;
    for (const CollectiveCall& c : call_calls[k]) calls.push_back(&c);
    call_floors[k] = emulated_member_floors_ns(calls, gpn, spec.network);
  }
  for (int r = 0; r < W; ++r) {
    RankStats& rs = st.ranks[static_cast<size_t>(r)];
    for (const RankCall& rc : rank_calls[static_cast<size_t>(r)]) {
      const auto& floors = call_floors[rc.call];
      const int64_t floor = static_cast<size_t>(rc.group_rank) < floors.size() ? floors[static_cast<size_t>(rc.group_rank)] : 0;
      (rc.phase == Phase4::fwd_comms ? rs.fwd_comms_ns : rs.bwd_comms_ns) += std::max(call_ns[rc.call], floor);
    }
  }
  for (const TablePlan& tp : plan.tables)
    for (const Shard& s : tp.shards) ++st.ranks[static_cast<size_t>(s.rank)].shards[static_cast<size_t>(tp.type)];
  int64_t m[5] = {0, 0, 0, 0, 0};
  std::vector<double> perf, hbm, look;
  for (const RankStats& rs : st.ranks) {
    m[0] = std::max(m[0], rs.fwd_compute_ns);
    m[1] = std::max(m[1], rs.fwd_comms_ns);
    m[2] = std::max(m[2], rs.bwd_compute_ns);
    m[3] = std::max(m[3], rs.bwd_comms_ns);
    m[4] = std::max(m[4], rs.host_ns);
    st.max_rank_total_ns = std::max(st.max_rank_total_ns, rs.total_ns());
    perf.push_back(static_cast<double>(rs.total_ns()));
    hbm.push_back(static_cast<double>(rs.hbm_bytes));
    look.push_back(rs.lookups);
  }
  st.critical_path_ns = m[0] + m[1] + m[2] + m[3] + m[4];
  st.perf = imbalance(perf);
  st.hbm = imbalance(hbm);
  st.lookups = imbalance(look);
  try {
    check_memory_fits(spec, mem);
    check_node_memory_fits(mem, plan.local_world_size, hw);
  } catch (const SpecError& e) {
    st.fits = false;
    st.does_not_fit = e.what();
  }
  return st;
}

namespace {
// "S > M" of a node's sum and the host's memory, in exact bytes where the rounded figures read
// the same (never "99.5 KiB > 99.5 KiB", as check_memory_fits)
std::pair<std::string, std::string> sum_and_host(int64_t sum, int64_t host) {
  if (format_bytes(sum) != format_bytes(host)) return {format_bytes(sum), format_bytes(host)};
  return {fmt::format("{} B", sum), fmt::format("{} B", host)};
}
}  // namespace

namespace {
// How many emulated nodes `ranks` ranks of `local_world_size` make, and the words for them:
// "node 0 (ranks 0-7)", or "nodes 0-7 (ranks 0-7)" for several (one host all the same)
struct HostRanks {
  size_t nodes = 1;
  std::string text;
};
HostRanks host_ranks(size_t ranks, int local_world_size, int first_rank, int last_rank) {
  const size_t per_node = local_world_size > 0 ? static_cast<size_t>(local_world_size) : ranks;
  HostRanks h;
  h.nodes = (ranks + per_node - 1) / per_node;
  h.text = h.nodes == 1 ? fmt::format("node 0 (ranks {}-{})", first_rank, last_rank)
                        : fmt::format("nodes 0-{} (ranks {}-{})", h.nodes - 1, first_rank, last_rank);
  return h;
}
}  // namespace

// The emulated nodes of a cpu profile are this one machine (tester46 F1: `--nodes 8
// --gpus-per-node 1` made 8 "nodes" of one rank, each within the host's 23.5 GiB, where the 8
// ranks need 125.6 GiB of it together; `--devices 8` was refused): every rank of the world is
// counted against the host's memory together, whatever local_world_size.
void check_node_memory_fits(const std::vector<DeviceMemoryEstimate>& est, int local_world_size, const HardwareProfile& hw) {
  if (hw.cpu.cores <= 0 || est.empty()) return;
  // a rank's share of the host: its device total and its tables in host memory (the same RAM)
  const auto need = [](const DeviceMemoryEstimate& e) { return e.total() + e.host; };
  int64_t total = 0, host = 0;
  size_t fullest = 0;
  for (size_t r = 0; r < est.size(); ++r) {
    total += need(est[r]);
    host += est[r].host;
    if (need(est[r]) > need(est[fullest])) fullest = r;
  }
  if (total <= hw.gpu.memory_bytes) return;
  const HostRanks h = host_ranks(est.size(), local_world_size, est.front().rank, est.back().rank);
  const DeviceMemoryEstimate& e = est[fullest];
  const auto [sum_text, host_text] = sum_and_host(total, hw.gpu.memory_bytes);
  throw SpecError(fmt::format(
      "/devices/memory_bytes: the ranks of a node share its memory (cpu profile {}: its ranks are threads of one host, "
      "and {} is that host's memory{}), and the workload does not fit under this sharding plan:\n  {} {} {} "
      "together{} > {}; {} fullest rank {}: {} (weights {}, optimizer state {}, {}dense {}, buffers {}{})",
      hw.name, format_bytes(hw.gpu.memory_bytes),
      h.nodes > 1 ? fmt::format("; its {} emulated nodes are that same host", h.nodes) : std::string(), h.text,
      h.nodes > 1 ? "need" : "needs", sum_text,
      host > 0 ? fmt::format(" (of which {} for tables in host memory)", format_bytes(host)) : std::string(), host_text,
      h.nodes > 1 ? "their" : "its", e.rank, format_bytes(need(e)), format_bytes(e.weights),
      format_bytes(e.optimizer_state), e.cache > 0 ? fmt::format("device cache {}, ", format_bytes(e.cache)) : std::string(),
      format_bytes(e.dense), format_bytes(e.buffers),
      e.host > 0 ? fmt::format(", tables in host memory {}", format_bytes(e.host)) : std::string()));
}

NodeExcess node_excess(const PlanStats& st, int local_world_size, const HardwareProfile& hw) {
  NodeExcess out;
  if (hw.cpu.cores <= 0 || st.ranks.empty()) return out;
  int64_t sum = 0;  // the world's ranks together: the emulated nodes are one host (check_node_memory_fits)
  for (const RankStats& r : st.ranks) sum += r.hbm_bytes + r.ddr_bytes;
  if (sum <= hw.gpu.memory_bytes) return out;
  out.bytes = sum - hw.gpu.memory_bytes;
  const auto [sum_text, host_text] = sum_and_host(sum, hw.gpu.memory_bytes);
  const HostRanks h = host_ranks(st.ranks.size(), local_world_size, st.ranks.front().rank, st.ranks.back().rank);
  // "on node 0 (ranks 0-3 need ...", "on nodes 0-1 (ranks 0-3 need ..."
  out.where = fmt::format("on {} need {} together > {}, the host's memory)", h.text.substr(0, h.text.size() - 1),
                          sum_text, host_text);
  return out;
}

namespace {

std::string ms(int64_t ns) { return fmt::format("{:.3f}", static_cast<double>(ns) * 1e-6); }

std::string shards_text(const RankStats& r) {
  // TorchRec's abbreviations (planner/stats.py), in ShardingType order
  static const char* abbrev[kShardingTypeCount] = {"DP", "TW", "RW", "CW", "TWRW", "TWCW", "GS"};
  std::string s;
  for (size_t t = 0; t < kShardingTypeCount; ++t)
    if (r.shards[static_cast<size_t>(t)] > 0)
      s += fmt::format("{}{} {}", s.empty() ? "" : ", ", abbrev[t], r.shards[static_cast<size_t>(t)]);
  return s.empty() ? "-" : s;
}

void imbalance_lines(std::string& out, const char* name, const Imbalance& im) {
  out += fmt::format("{} imbalance: max/mean {:.3f}, total variation {:.3f}, total distance {:.3f}, chi divergence "
                     "{:.3f}, KL divergence {:.3f}\n",
                     name, im.max_over_mean, im.total_variation, im.total_distance, im.chi_divergence,
                     im.kl_divergence);
}

nlohmann::json imbalance_json(const Imbalance& im) {
  return {{"max_over_mean", im.max_over_mean}, {"total_variation", im.total_variation},
          {"total_distance", im.total_distance}, {"chi_divergence", im.chi_divergence},
          {"kl_divergence", im.kl_divergence}};
}

}  // namespace

std::string to_text(const PlanStats& s) {
  std::string out = fmt::format("planner statistics (times from hardware profile {}, ms per step)\n", s.hardware);
  // the host link's column (host_ns; with the raw prefetch time in brackets when there is one)
  bool prefetch = false;
  for (const RankStats& r : s.ranks) prefetch |= r.prefetch_ns > 0;
  const auto host = [&](const RankStats& r) {
    return prefetch ? fmt::format("{} ({})", ms(r.host_ns), ms(r.prefetch_ns)) : ms(r.host_ns);
  };
  const int hw = prefetch ? 19 : 9;
  out += fmt::format("{:<5} {:<22} {:>12} {:>11} {:>10} {:>9} {:>9} {:>9} {:>9} {:>{}} {:>9}\n", "rank", "shards",
                     "lookups", "HBM", "DDR", "fwd comp", "fwd comm", "bwd comp", "bwd comm",
                     prefetch ? "host (prefetch)" : "host", hw, "total");
  for (const RankStats& r : s.ranks)
    out += fmt::format("{:<5} {:<22} {:>12.0f} {:>11} {:>10} {:>9} {:>9} {:>9} {:>9} {:>{}} {:>9}\n", r.rank,
                       shards_text(r), r.lookups, format_bytes(r.hbm_bytes), format_bytes(r.ddr_bytes),
                       ms(r.fwd_compute_ns), ms(r.fwd_comms_ns), ms(r.bwd_compute_ns), ms(r.bwd_comms_ns), host(r), hw,
                       ms(r.total_ns()));
  if (s.ranks.end() != std::find_if(s.ranks.begin(), s.ranks.end(), [](const RankStats& r) { return r.host_ns > 0; }))
    out += "host: the host link's copies of tables in host memory (host_fetch + host_update + the prefetch the dense "
           "part does not hide), timed as the simulator times them" +
           std::string(prefetch ? "; in brackets the prefetch of the next batch, under the dense part" : "") + "\n";
  out += fmt::format("critical path (sum over phases of the max over ranks): {} ms; longest rank: {} ms\n",
                     ms(s.critical_path_ns), ms(s.max_rank_total_ns));
  // tester44 F6: the figure is not the step time
  out += "  the embedding part only: the dense part (its forward/backward, all-reduce and optimizer) is the same "
         "under every plan and left out, as TorchRec's planner leaves it out; `run --plan auto --simulate PROFILE` "
         "times the whole step\n";
  imbalance_lines(out, "lookups", s.lookups);
  imbalance_lines(out, "perf", s.perf);
  imbalance_lines(out, "HBM", s.hbm);
  const int k = static_cast<int>(s.ranks.size());
  if (k > 0)
    out += fmt::format("total variation 0 to {:.3f}, total distance 0 to {:.3f}, chi divergence 0 to {:.3f}, KL "
                       "divergence 0 to {:.3f} for {} ranks (higher: more imbalanced)\n",
                       max_total_variation(k), max_total_distance(k), max_chi_divergence(k), max_kl_divergence(k), k);
  if (!s.fits) out += s.does_not_fit + "\n";
  return out;
}

nlohmann::json to_json(const PlanStats& s) {
  nlohmann::json j;
  j["hardware"] = s.hardware;
  j["critical_path_ns"] = s.critical_path_ns;
  j["max_rank_total_ns"] = s.max_rank_total_ns;
  j["fits"] = s.fits;
  if (!s.fits) j["does_not_fit"] = s.does_not_fit;
  auto& ranks = j["ranks"] = nlohmann::json::array();
  for (const RankStats& r : s.ranks) {
    nlohmann::json sh = nlohmann::json::object();
    for (size_t t = 0; t < kShardingTypeCount; ++t)
      if (r.shards[t] > 0) sh[enum_name(static_cast<ShardingType>(t))] = r.shards[t];
    ranks.push_back({{"rank", r.rank}, {"shards", sh}, {"lookups", r.lookups}, {"hbm_bytes", r.hbm_bytes},
                     {"ddr_bytes", r.ddr_bytes}, {"fwd_compute_ns", r.fwd_compute_ns},
                     {"fwd_comms_ns", r.fwd_comms_ns}, {"bwd_compute_ns", r.bwd_compute_ns},
                     {"bwd_comms_ns", r.bwd_comms_ns}, {"host_ns", r.host_ns}, {"prefetch_ns", r.prefetch_ns},
                     {"total_ns", r.total_ns()}});
  }
  j["imbalance"] = {{"perf", imbalance_json(s.perf)}, {"hbm", imbalance_json(s.hbm)},
                    {"lookups", imbalance_json(s.lookups)}};
  const int k = static_cast<int>(s.ranks.size());
  if (k > 0) {
    j["max_total_variation"] = max_total_variation(k);
    j["max_total_distance"] = max_total_distance(k);
    j["max_chi_divergence"] = max_chi_divergence(k);
    j["max_kl_divergence"] = max_kl_divergence(k);
  }
  return j;
}

}  // namespace embedscope::engine

// The simulated executor (exec/simulated/executor.h): every rank's step program timed by the
// cost model, collectives matched across their groups, a session written as a run would (the
// storage, memory and load figures it records besides the times: step_records.h).
#include "executor.h"
#include "step_records.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <tuple>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embedscope/engine/comm/gloo_process_group.h"
#include "embedscope/engine/cost/cost_model.h"
#include "embedscope/engine/cost/network_floor.h"
#include "embedscope/engine/cost/shared_cores.h"
#include "embedscope/engine/exec/table_storage_json.h"
#include "embedscope/engine/program/step_program.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "planner/memory_replay.h"
#include "program/pipeline_fill.h"
#include "program/program_sink.h"
#include "sharding/layout.h"

namespace embedscope::engine::simulated {

namespace {

using sessions::Lane;

/// A collective record carries its group's members and per-peer splits when the group has at
/// most this many members (the real executors' largest world): a node's or a cross-node group's
/// of any cluster (tester44 F15: above 64 ranks every record lost its member list, even node15's
/// 8). A larger group's records (the world of a 128+ rank cluster) leave both out: W records of W
/// numbers a call would be world^2 numbers per collective.
constexpr int kMaxRecordedPeers = 64;

struct SimCollective {
  int group = 0;               // index into Simulation::group_names
  CallMember member;           // its figure with the node to itself (collective_ns), node, ranks there
  const CollectiveCall* call;  // in the rank's program (kept alive while the key is current)
  // a split-size check the cost model does not time (cost_model.h split_check_timed: GPU
  // profiles): no cost and no meeting of the members, so that a rank's wait for its peers lands
  // in the call it checks, as in TorchRec's all-to-all (tester50 F1); recorded with no duration
  bool untimed_check = false;
};

struct SimOp {
  const ProgramOp* op = nullptr;
  int64_t duration_ns = 0;     // compute ops (cpu ranks: the work with the node to itself, shared while it runs)
  int64_t span_ns = 0;         // compute ops: the span their launched_by ops' fraction is of
  double launch_fraction = 0;  // launched_by ops: when in the launching op they are ready
  int64_t handoff_ns = 0;      // cpu ranks: after a dependency on the other of compute / comm (CpuContention)
  double sync_lag_ns = 0;      // cpu ranks: mean scheduling lag of an arrival at a collective (CpuContention)
  // in a phase of the pipeline's fill (program/pipeline_fill.h; iteration 0's program only): in a
  // run without warm-up its collectives and comm span are step -1's, as the measured executors
  // record them (trace50)
  bool fill = false;
  std::vector<SimCollective> collectives;
};

// One rank's step: its program, the ops' timed form, per-lane order, and progress.
struct RankStep {
  StepProgram program;
  std::vector<SimOp> ops;
  std::vector<int> lane_ops[3];  // op ids per lane (compute, comm, host link), in order
};

struct Rendezvous {
  int arrived = 0, consumed = 0;
  int64_t ready_ns = 0, duration_ns = 0;  // the last member's arrival; the call's time without the floor
  // the members' own times and nodes, for the call's time (cost/shared_cores.h
  // collective_call_ns: processor sharing on a cpu node, calib39), set when the last arrives
  std::vector<CallMember> members;
  // a cpu run's emulated network: each member's call (group order), then each member's floor
  // from ready_ns (cost/network_floor.h emulated_member_floors_ns), set when the last arrives
  std::vector<const CollectiveCall*> calls;
  std::vector<int64_t> floors;
  bool timed = false;
};

// A cpu rank's scheduling lag at a collective (hardware_profile.h CpuContention::sync_lag_ns):
// an exponential draw of mean `mean_ns` (the caller delays the arrival by what exceeds the mean), from a hash of (rank, iteration, op, collective)
// (splitmix64), so that a simulation is deterministic and independent of the threads building it.
int64_t sync_lag_draw(double mean_ns, int rank, int64_t it, int op, int coll) {
  uint64_t z = (static_cast<uint64_t>(rank) << 40) ^ (static_cast<uint64_t>(it) << 20) ^
               (static_cast<uint64_t>(op) << 8) ^ static_cast<uint64_t>(coll);
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  const double u = (static_cast<double>(z >> 11) + 0.5) / 9007199254740992.0;  // (0, 1)
  return static_cast<int64_t>(std::llround(-std::log(u) * mean_ns));
}

// 0 compute, 1 comm, 2 the host link (gpu_copy: the copies of tables in host memory)
int lane_index(Lane l) { return l == Lane::comm ? 1 : l == Lane::gpu_copy ? 2 : 0; }

}  // namespace

SimulatedExecutor::SimulatedExecutor(const WorkloadSpec& spec, const ShardingPlan& plan, const TrainerOptions& options)
    : spec_(spec), plan_(plan), opt_(options) {}

void SimulatedExecutor::prepare() {
  hw_ = load_hardware_profile(spec_.devices.hardware);
  prepared_ = true;
}

void SimulatedExecutor::run(sessions::SessionWriter* session, RunResult& result) {
  if (!prepared_) prepare();
  const int W = spec_.devices.count;
  const int gpn = plan_.local_world_size;
  const int64_t total = spec_.warmup_steps + spec_.steps;
  const detail::Layout layout(spec_, plan_);
  // host_cached tables: the iterations whose caches are still filling (program_sink.h)
  const int64_t cold_iterations = program::cold_start_iterations(spec_, layout);
  // each rank's allocator replayed (planner/memory_replay.h): the estimate `plan` prints, and the
  // allocator's figures at each replayed step end (the memory counters below, tester51 F7)
  const std::vector<detail::ReplayedMemory> replayed =
      detail::replay_memory(spec_, plan_, layout, detail::SlotShares(spec_, layout), true);
  std::vector<DeviceMemoryEstimate> memory;
  for (int r = 0; r < W; ++r) memory.push_back(detail::estimate_from_replay(replayed[static_cast<size_t>(r)], r));
  const bool host_tables = std::any_of(spec_.tables.begin(), spec_.tables.end(),
                                       [](const TableSpec& t) { return t.placement != TablePlacement::device; });
  result.samples_per_step = spec_.batch_size * W;
  result.table_storage = planned_table_storage(spec_, plan_, layout, W);

  if (session) {
    session->set_metadata(sessions::meta::kSimulated, "1");
    session->set_metadata(sessions::meta::kGpuNames, hw_.gpu.name + " (simulated)");
    session->set_metadata(sessions::meta::kClock, "simulated ns since the run's start (cost model, no clock read)");
    session->set_metadata(sessions::meta::kGlooVersion, "not used (simulated)");
    session->set_metadata(sessions::meta::kCudaVersion, "not used (simulated)");
    session->set_metadata(sessions::meta::kNcclVersion, "not used (simulated)");
    auto link = [](const LinkProfile& l) {
      return nlohmann::json{{"name", l.name}, {"bus_bandwidth_bytes_per_s", l.bus_bandwidth_bytes_per_s},
                            {"latency_ns", l.latency_ns}};
    };
    session->set_metadata(sessions::meta::kSimulatedHardwareJson,
                          nlohmann::json{{"name", hw_.name},
                                         {"description", hw_.description},
                                         {"gpu", hw_.gpu.name},
                                         {"gpus_per_node", gpn},
                                         {"nodes", W / gpn},
                                         {"intra_node", link(hw_.intra_node)},
                                         {"inter_node", link(hw_.inter_node)},
                                         {"host_link", link(hw_.host_link)}}
                              .dump());
    for (int r = 0; r < W; ++r) {
      session->add_rank({r, fmt::format("node{} (simulated)", r / gpn), hw_.gpu.name + " (simulated)",
                         spec_.devices.memory_bytes});
      session->add_lane({r, static_cast<int32_t>(Lane::compute), "compute", "stream"});
      session->add_lane({r, static_cast<int32_t>(Lane::comm), "comm", "stream"});
      if (host_tables) session->add_lane({r, static_cast<int32_t>(Lane::gpu_copy), "host link", "stream"});
    }
  }

  // Groups by name ("world", "node<n>", "cross<l>"), interned.
  std::map<std::string, int> group_ids;
  auto group_of = [&](const std::string& name) {
    return group_ids.emplace(name, static_cast<int>(group_ids.size())).first->second;
  };
  const auto intern = [](const std::string& s) { return exec::intern_op_name(s); };  // names outlive the run

  // The timed programs of every rank for the current place in the run (first, steady, last
  // two), rebuilt when the place changes (at most four times).
  // A cpu run's emulated network (TrainerOptions::simulated_network_floor), a floor under every
  // member of every collective by the Gloo backend's emulation's rule (cost/network_floor.h
  // emulated_member_floors_ns, which the planner's statistics use too: from the last member's
  // arrival, an all-reduce's members until the slowest port is done, another call's member until
  // its own port and each sender's fair-share delivery to it are; commit 0c3457e8, tester48 F5),
  // so that a run measured over an emulated link is simulated over it.
  const NetworkSpec& floor_net = opt_.simulated_network_floor;
  const bool floored = floor_net.limited();
  std::vector<RankStep> steps(static_cast<size_t>(W));
  int current_key = -1;
  auto build_rank = [&](int r, int64_t it) {
    RankStep& rs = steps[static_cast<size_t>(r)];
    rs.program = program::build_step_program(spec_, plan_, layout, r, it, it < cold_iterations);
    rs.ops.clear();
    rs.lane_ops[0].clear();
    rs.lane_ops[1].clear();
    rs.lane_ops[2].clear();
    std::map<int, int> buckets;  // launching op -> launched ops so far
    std::map<int, int> bucket_count;
    for (const ProgramOp& op : rs.program.ops)
      if (op.launched_by >= 0) ++bucket_count[op.launched_by];
    for (const ProgramOp& op : rs.program.ops) {
      SimOp s;
      s.op = &op;
      // cpu ranks (a calibrated this_machine) share the machine's cores: compute and Gloo's
      // copies alike (cost_model.h contention_factor; 1 for GPUs)
      // the ranks sharing r's cores: a cpu profile's machine (all W, whatever the node shape), else its node
      const CoreGroup cores = core_group(hw_, r, W, gpn);
      const auto contended = [&](int64_t ns) { return contended_ns(ns, hw_, cores.ranks); };
      if (hw_.cpu.cores > 0 && hw_.cpu.handoff_ns > 0 && op.lane != Lane::gpu_copy)
        s.handoff_ns = contended(hw_.cpu.handoff_ns);  // cpu ranks' wake-up after the other thread (CpuContention)
      if (hw_.cpu.cores > 0 && hw_.cpu.sync_lag_ns > 0 && op.lane == Lane::comm)  // cpu ranks' scheduling lag
        s.sync_lag_ns = hw_.cpu.sync_lag_ns * sync_lag_factor(hw_, cores.ranks);
      if (op.lane == Lane::comm) {
        for (const CollectiveCall& c : op.collectives) {
          s.collectives.push_back({-1, {collective_ns(c, r, gpn, hw_), cores.id, cores.ranks}, &c,
                                   !split_check_timed(hw_) && is_split_check(c)});
        }
      } else if (op.lane == Lane::gpu_copy) {
        s.duration_ns = host_copy_ns(op, hw_);
      } else if (hw_.cpu.cores > 0) {
        // cpu ranks: the node's cores shared among the compute ops running at each moment
        // (cost/shared_cores.h ComputeSharing, conc46); a launched op's point inside it by the
        // static factor (its progress is not tracked)
        s.duration_ns = compute_ns(op, hw_);
        s.span_ns = contended(s.duration_ns);
      } else {
        s.duration_ns = s.span_ns = contended(compute_ns(op, hw_));
      }
      if (op.launched_by >= 0) {
        const int k = buckets[op.launched_by]++;
        s.launch_fraction = 1.0 / 3.0 + 2.0 / 3.0 * static_cast<double>(k + 1) / bucket_count[op.launched_by];
      }
      rs.lane_ops[lane_index(op.lane)].push_back(op.id);
      rs.ops.push_back(std::move(s));
    }
    if (it == 0)
      for (const Phase& ph : rs.program.schedule)
        if (program::pipeline_fill_phase(spec_.pipeline, ph))
          for (int i = ph.first_op; i < ph.first_op + ph.num_ops; ++i) rs.ops[static_cast<size_t>(i)].fill = true;
  };
  // The programs depend on the iteration only through its place in the run (first, last two,
  // steady state; base: none), so they are built at most four times, on every core: building
  // 1,024 ranks' programs is most of a simulation's time.
  // Tables in host_cached memory start with empty caches: the first cold_iterations are built
  // each on its own, with the cache model's cold-start traffic (program_sink.h).
  const unsigned threads = std::max(1u, std::min(std::thread::hardware_concurrency(), 16u));
  auto build = [&](int64_t it) {
    const int key = it < cold_iterations ? 8 + static_cast<int>(it) : place_in_run(spec_, it);
    if (key == current_key) return;
    current_key = key;
    std::vector<std::thread> pool;
    std::exception_ptr failed;
    std::mutex mu;
    for (unsigned t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        try {
          for (int r = static_cast<int>(t); r < W; r += static_cast<int>(threads)) build_rank(r, it);
        } catch (...) {
          std::lock_guard<std::mutex> lock(mu);
          failed = std::current_exception();
        }
      });
    for (auto& th : pool) th.join();
    if (failed) std::rethrow_exception(failed);
    for (RankStep& rs : steps)  // group names interned in one thread
      for (SimOp& s : rs.ops)
        for (SimCollective& c : s.collectives) c.group = group_of(c.call->group);
  };

  std::vector<int64_t> rank_clock(static_cast<size_t>(W), 0);  // when each rank starts its next step
  std::vector<std::vector<uint64_t>> group_seq(static_cast<size_t>(W));
  std::vector<std::vector<int64_t>> step_ns(static_cast<size_t>(W));
  std::vector<RankSummary> summary(static_cast<size_t>(W));
  for (int r = 0; r < W; ++r) {
    summary[static_cast<size_t>(r)].rank = r;
    summary[static_cast<size_t>(r)].memory_bytes = memory[static_cast<size_t>(r)].total();
  }
  int64_t measured_ns = 0;
  // the writer's commits at most this far behind the simulation (SessionWriter::sync)
  constexpr std::chrono::milliseconds kSyncInterval{500};
  auto last_sync = std::chrono::steady_clock::now();
  CacheMemo cache_memo;  // (rank, table, shard, lookups before or -1)

  for (int64_t it = 0; it < total; ++it) {
    build(it);
    const int64_t step = it - spec_.warmup_steps;
    const bool measured = it >= spec_.warmup_steps;
    // a run without warm-up: the pipeline's fill (SimOp::fill) is recorded at step -1, outside the
    // measured bytes, as the measured executors do (exec/threaded/rank.h fill_phase_); its time
    // stays in step 0's window
    const bool fill_to_warmup = measured && it == 0;
    struct Progress {
      size_t next[3] = {0, 0, 0};
      int coll = 0;               // the comm op in progress: its next collective
      int64_t cursor = 0;         // and when it gets there
      bool registered = false;    // that collective's arrival is counted
      uint64_t seq = 0;
      std::vector<int64_t> start, end;
      std::vector<uint64_t> correlation;  // per comm op: its first collective's sequence (the op's correlation)
      int64_t lane_free[3] = {0, 0, 0};
    };
    std::vector<Progress> pr(static_cast<size_t>(W));
    for (int r = 0; r < W; ++r) {
      auto& p = pr[static_cast<size_t>(r)];
      const auto n = steps[static_cast<size_t>(r)].ops.size();
      p.start.assign(n, -1);
      p.end.assign(n, -1);
      p.correlation.assign(n, 0);
      p.lane_free[0] = p.lane_free[1] = p.lane_free[2] = rank_clock[static_cast<size_t>(r)];
      group_seq[static_cast<size_t>(r)].resize(group_ids.size(), 0);
    }
    std::unordered_map<uint64_t, Rendezvous> rendezvous;
    // cpu ranks: the machine's cores (cost/shared_cores.h core_group: one group of all W ranks, whatever
    // the node shape) shared among its running compute ops (an op's key: rank << 32 | op id)
    const bool sharing = hw_.cpu.cores > 0;
    std::vector<ComputeSharing> nodes;
    if (sharing) nodes.assign(1, ComputeSharing(hw_));
    const auto cores_of = [&](int r) -> ComputeSharing& { return nodes[static_cast<size_t>(core_group(hw_, r, W, gpn).id)]; };
    std::vector<sessions::OpEvent> events;
    std::vector<sessions::CollectiveRecord> records;

    // Advances rank r as far as it can; true if anything changed.
    auto advance = [&](int r) {
      RankStep& rs = steps[static_cast<size_t>(r)];
      Progress& p = pr[static_cast<size_t>(r)];
      bool any = false;
      for (bool moved = true; moved;) {
        moved = false;
        for (int lane = 0; lane < 3; ++lane) {
          if (p.next[lane] >= rs.lane_ops[lane].size()) continue;
          const int id = rs.lane_ops[lane][p.next[lane]];
          const SimOp& s = rs.ops[static_cast<size_t>(id)];
          const ProgramOp& op = *s.op;
          int64_t ready = p.lane_free[lane];
          bool blocked = false;
          for (int w : op.waits_for) {
            if (p.end[static_cast<size_t>(w)] < 0) {
              blocked = true;
              continue;
            }
            // a dependency on the other of the compute and comm threads: this one's wake-up
            const Lane wl = rs.ops[static_cast<size_t>(w)].op->lane;
            const bool other_thread = s.handoff_ns > 0 && wl != Lane::gpu_copy && wl != op.lane;
            ready = std::max(ready, p.end[static_cast<size_t>(w)] + (other_thread ? s.handoff_ns : 0));
          }
          if (op.launched_by >= 0) {
            const auto lb = static_cast<size_t>(op.launched_by);
            if (p.start[lb] < 0) blocked = true;
            else
              ready = std::max(ready, p.start[lb] + static_cast<int64_t>(s.launch_fraction *
                                                                         static_cast<double>(rs.ops[lb].span_ns)));
          }
          if (blocked) continue;
          if (lane == 0 && sharing) {  // runs from `ready` on the node's shared cores; ends when completed below
            if (p.start[static_cast<size_t>(id)] >= 0) continue;
            p.start[static_cast<size_t>(id)] = ready;
            cores_of(r).start((static_cast<int64_t>(r) << 32) | id, ready,
                                                      static_cast<double>(s.duration_ns));
            any = true;
            continue;
          }
          if (lane != 1) {  // compute and host link: one op at a time, for its duration
            p.start[static_cast<size_t>(id)] = ready;
            p.end[static_cast<size_t>(id)] = p.lane_free[lane] = ready + s.duration_ns;
            ++p.next[lane];
            moved = any = true;
            continue;
          }
          if (p.start[static_cast<size_t>(id)] < 0) {
            p.start[static_cast<size_t>(id)] = p.cursor = ready;
            p.coll = 0;
            p.registered = false;
            any = true;
          }
          // the record of collective c of this op, from the member's arrival (p.cursor) to `end`
          const bool fill = fill_to_warmup && s.fill;
          const auto record = [&](const SimCollective& c, int64_t end) {
            if (session) {
              const CollectiveCall& cc = *c.call;
              sessions::CollectiveRecord rec;
              rec.rank = r;
              rec.op = to_string(cc.kind);
              rec.name = cc.name;
              rec.group = cc.group;
              rec.sequence = p.seq;
              rec.dtype = cc.dtype;
              rec.step = fill ? step - 1 : step;
              rec.start_ns = p.cursor;
              rec.end_ns = end;
              rec.bytes_sent = cc.bytes_sent();
              rec.bytes_received = cc.bytes_received();
              if (static_cast<int>(cc.peers.size()) <= kMaxRecordedPeers) {
                rec.peers.assign(cc.peers.begin(), cc.peers.end());
                rec.send_elements = cc.send_elements;
                rec.recv_elements = cc.recv_elements;
              }
              records.push_back(std::move(rec));
            }
            if (measured && !fill) {
              summary[static_cast<size_t>(r)].bytes_sent += c.call->bytes_sent();
              summary[static_cast<size_t>(r)].bytes_received += c.call->bytes_received();
            }
          };
          while (p.coll < static_cast<int>(s.collectives.size())) {
            const SimCollective& c = s.collectives[static_cast<size_t>(p.coll)];
            const int n = static_cast<int>(c.call->peers.size());
            if (c.untimed_check) {  // its sequence number taken, recorded at the arrival, no wait
              p.seq = ++group_seq[static_cast<size_t>(r)][static_cast<size_t>(c.group)];
              if (p.coll == 0) p.correlation[static_cast<size_t>(id)] = p.seq;
              record(c, p.cursor);
              ++p.coll;
              p.registered = false;
              any = true;
              continue;
            }
            if (!p.registered) {
              if (s.sync_lag_ns > 0) {  // the member's lag beyond its mean (hardware_profile.h sync_lag_ns)
                // on shared cores: its competitors are the compute ops running then, plus its own thread (conc46)
                const double mean = sharing ? hw_.cpu.sync_lag_ns *
                                                  sync_lag_factor(hw_, cores_of(r).running_at(p.cursor) + 1)
                                            : s.sync_lag_ns;
                p.cursor += std::max<int64_t>(0, sync_lag_draw(mean, r, it, id, p.coll) - std::llround(mean));
              }
              p.seq = ++group_seq[static_cast<size_t>(r)][static_cast<size_t>(c.group)];
              if (p.coll == 0) p.correlation[static_cast<size_t>(id)] = p.seq;
              Rendezvous& rv = rendezvous[(static_cast<uint64_t>(c.group) << 40) | p.seq];
              ++rv.arrived;
              rv.ready_ns = std::max(rv.ready_ns, p.cursor);
              rv.members.push_back(c.member);
              if (floored) {
                rv.calls.resize(static_cast<size_t>(n), nullptr);
                rv.calls[static_cast<size_t>(c.call->group_rank)] = c.call;
              }
              p.registered = any = true;
            }
            const uint64_t key = (static_cast<uint64_t>(c.group) << 40) | p.seq;
            Rendezvous& rv = rendezvous.at(key);
            if (rv.arrived < n) break;  // waiting for the group's other members
            if (!rv.timed) {
              // the one rule of a call's time (cost/shared_cores.h collective_call_ns, which the
              // planner's statistics and the LM simulation use too): cpu ranks of one node share
              // its cores, a member that is done stops competing (processor sharing); else the
              // largest member's contended time. Never under the member's emulated network floor.
              rv.duration_ns = collective_call_ns(rv.members, hw_);
              if (floored) rv.floors = emulated_member_floors_ns(rv.calls, gpn, floor_net);
              rv.timed = true;
            }
            const int64_t floor = rv.floors.empty() ? 0 : rv.floors[static_cast<size_t>(c.call->group_rank)];
            const int64_t end = rv.ready_ns + std::max(rv.duration_ns, floor);
            record(c, end);
            if (++rv.consumed == n) rendezvous.erase(key);
            p.cursor = end;
            ++p.coll;
            p.registered = false;
            any = true;
          }
          if (p.coll < static_cast<int>(s.collectives.size())) continue;  // blocked in a collective
          p.end[static_cast<size_t>(id)] = p.lane_free[1] = p.cursor;
          ++p.next[1];
          moved = any = true;
        }
      }
      return any;
    };

    for (bool done = false; !done;) {
      bool progress = false;
      done = true;
      for (int r = 0; r < W; ++r) {
        progress |= advance(r);
        const auto& p = pr[static_cast<size_t>(r)];
        const auto& rs = steps[static_cast<size_t>(r)];
        done &= p.next[0] == rs.lane_ops[0].size() && p.next[1] == rs.lane_ops[1].size() &&
                p.next[2] == rs.lane_ops[2].size();
      }
      if (!done && !progress && sharing) {
        // every rank is as far as it can get: the compute op that ends first of all nodes ends
        // (nothing not yet started can start before it: all that waits, waits on a running op)
        int best = -1;
        double best_end = 0;
        for (size_t n = 0; n < nodes.size(); ++n)
          if (const auto c = nodes[n].next_completion(); c && (best < 0 || c->first < best_end)) {
            best = static_cast<int>(n);
            best_end = c->first;
          }
        if (best >= 0) {
          const auto [end, key] = nodes[static_cast<size_t>(best)].complete_next();
          const int r = static_cast<int>(key >> 32), id = static_cast<int>(key & 0xffffffff);
          Progress& p = pr[static_cast<size_t>(r)];
          p.end[static_cast<size_t>(id)] = p.lane_free[0] = std::max(end, p.start[static_cast<size_t>(id)]);
          ++p.next[0];
          continue;
        }
      }
      if (!done && !progress)
        throw std::logic_error(fmt::format("simulated step {}: the ranks' programs wait on each other (a collective "
                                           "not issued by every member of its group)",
                                           step));
    }

    // The step's records.
    int64_t slowest = 0;
    for (int r = 0; r < W; ++r) {
      const RankStep& rs = steps[static_cast<size_t>(r)];
      const Progress& p = pr[static_cast<size_t>(r)];
      const int64_t t0 = rank_clock[static_cast<size_t>(r)];
      int64_t t1 = t0;
      int64_t lookup_ns = 0;  // the rank's lookup ops of this step, shared over its shards' load counters below
      int64_t fill_lookup_ns = 0;  // the pipeline's fill's lookup (step -1's counters)
      for (size_t i = 0; i < rs.ops.size(); ++i) {
        const ProgramOp& op = *rs.ops[i].op;
        const bool fill = fill_to_warmup && rs.ops[i].fill;  // the pipeline's fill: step -1 (SimOp::fill)
        t1 = std::max(t1, p.end[i]);
        if (op.category == sessions::OpCategory::lookup) (fill ? fill_lookup_ns : lookup_ns) += p.end[i] - p.start[i];
        // the fill's lookup is a warm-up step's, as the measured ranks count it (fixb49)
        if (measured && !fill && op.category == sessions::OpCategory::lookup)
          summary[static_cast<size_t>(r)].ids_looked_up += op.rows;
        if (!session && !opt_.keep_events) continue;
        sessions::OpEvent ev;
        ev.rank = r;
        ev.lane = op.lane;
        ev.category = op.category;
        ev.name = intern(op.name);
        // the fill's comm spans go with their records (the measured executors' comm worker
        // records them at step -1); its compute spans stay in step 0, as there
        ev.step = fill && op.lane == Lane::comm ? step - 1 : step;
        ev.start_ns = p.start[i];
        ev.end_ns = p.end[i];
        ev.correlation = p.correlation[i];
        for (const auto& c : op.collectives) ev.bytes += c.bytes_sent() + c.bytes_received();
        ev.bytes += op.bytes_h2d + op.bytes_d2h;
        events.push_back(ev);
      }
      rank_clock[static_cast<size_t>(r)] = t1;
      if (measured) step_ns[static_cast<size_t>(r)].push_back(t1 - t0);
      slowest = std::max(slowest, t1 - t0);
      // the step's lookups (phases of its schedule), whose expected ids the load counters below
      // hold: the fill's lookup (semi_sync's batch 0 in a run without warm-up) at step -1, as the
      // measured ranks write it (fixb49), so that a step's counters add up to its lookup rows
      // (RankSummary::ids_looked_up); a step that looks nothing up (semi_sync's last) has every
      // shard's counter at 0 ids, as a measured rank's step that only trains. A warm-up step of
      // two lookups (semi_sync's first) gets one batch's counters: no figure counts a warm-up step's.
      int own_lookups = 0, fill_lookups = 0;
      for (const Phase& ph : rs.program.schedule)
        if (ph.kind == PhaseKind::lookup)
          ++(fill_to_warmup && program::pipeline_fill_phase(spec_.pipeline, ph) ? fill_lookups : own_lookups);
      if (session) {
        const int64_t bytes = memory[static_cast<size_t>(r)].total();
        // expected load of every local shard, and the cache totals of the run (step_records.h)
        std::vector<sessions::LoadCounter> counters = expected_load_counters(
            spec_, layout, r, it, step, cold_iterations, {own_lookups, fill_lookups, lookup_ns, fill_lookup_ns}, measured,
            cache_memo, result.table_storage);
        // the step row and its load counters in one transaction (add_step_records), as the
        // measured ranks write theirs (exec/threaded/rank.cpp) and the simulated LM run
        // (lm_simulated.cpp): a session cut by a failed write keeps every step row it holds with
        // its counters, and no counter without its row. No id histogram: nothing draws an id.
        session->add_step_records({step, r, t0, t1, 0.0, bytes, bytes}, counters, {});
        sessions::MemoryCounter m;
        m.step = step;
        m.rank = r;
        fill_replayed_counter(m, replayed[static_cast<size_t>(r)], memory[static_cast<size_t>(r)], it);
        session->add_memory(m);
      }
    }
    if (session) {
      session->add_ops(events);
      for (auto& rec : records) session->add_collective(std::move(rec));
      // the simulation outruns the writer (thousands of steps a second): every kSyncInterval it
      // waits for the writer to commit what it was handed, so that a SIGKILL loses at most about
      // that much (before, a kill at 1.5 s left nothing committed and one at 4 s lost 7,692 of
      // its 9,616 steps)
      if (std::chrono::steady_clock::now() - last_sync >= kSyncInterval) {
        session->sync();
        last_sync = std::chrono::steady_clock::now();
      }
    }
    if (opt_.keep_events) result.events.insert(result.events.end(), events.begin(), events.end());
    if (measured) measured_ns += slowest;
    if (opt_.on_step) {
      StepProgress sp;
      sp.total_steps = spec_.steps;
      sp.step = measured ? step + 1 : 0;
      sp.warmup_done = std::min(it + 1, spec_.warmup_steps);
      if (sp.step > 0 && measured_ns > 0) {
        sp.samples_per_s = static_cast<double>(result.samples_per_step * sp.step) / (static_cast<double>(measured_ns) * 1e-9);
        sp.eta_s = 0;  // the simulation's own time is not the run's
      }
      opt_.on_step(sp);
    }
    // a session that can no longer be written (a full disk): stop after the step in which the
    // writer said so, as the measured ranks do (rank.cpp) and simulate_lm; run_training's close
    // (exec::close_run_session) says what the session kept, and the run exits 1. Before (sim51),
    // the simulation ran every remaining step into a writer that wrote nothing more.
    if (session && session->write_failed()) {
      result.ended = RunEnd::write_failed;
      break;
    }
    if (opt_.cancel && opt_.cancel->load()) {
      result.ended = RunEnd::cancelled;
      break;
    }
  }
  for (size_t i = 0; i < step_ns[0].size(); ++i) {
    int64_t m = 0;
    for (int r = 0; r < W; ++r) m = std::max(m, step_ns[static_cast<size_t>(r)][i]);
    result.step_time_ns.push_back(m);
  }
  result.ranks = std::move(summary);
  if (session) session->set_metadata(sessions::meta::kTableStorageJson, table_storage_json(result.table_storage, false).dump());
}

}  // namespace embedscope::engine::simulated

// simulate_lm (exec/lm_run.h): an lm_embedding workload's step program timed by the cost model
// on a modelled cluster, written as a session marked simulated.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/exec/lm_run.h"
#include "exec/executor.h"
#include "embedscope/engine/planner/lm_memory_estimate.h"
#include "embedscope/engine/program/lm_program.h"
#include "embedscope/profiler/cpu/tracer.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::engine {


LmRunResult simulate_lm(const LmWorkloadSpec& spec, const LmSimulateOptions& options) {
  validate(spec, "workload");
  const HardwareProfile hw = load_hardware_profile(options.hardware);
  const int p = spec.world_size;
  const int gpn = options.gpus_per_node > 0 ? options.gpus_per_node : std::min(p, hw.gpus_per_node);
  const LmSimulatedStep sim = simulate_lm_step(spec, hw, gpn);
  const auto memory = estimate_lm_memory(spec);

  std::unique_ptr<sessions::SessionWriter> writer;
  if (!options.session_path.empty()) {
    writer = std::make_unique<sessions::SessionWriter>(options.session_path, options.overwrite);
    profiler::RunClock clock;
    write_lm_session_plan(*writer, spec, clock.wall_anchor_ns());
    namespace meta = sessions::meta;
    writer->set_metadata(meta::kBackend, "simulated");
    writer->set_metadata(meta::kSimulated, "1");
    writer->set_metadata(meta::kGpuNames, hw.gpu.name + " (simulated)");
    writer->set_metadata(meta::kClock, "simulated ns since the run's start (cost model, no clock read)");
    writer->set_metadata(meta::kGlooVersion, "not used (simulated)");
    auto link = [](const LinkProfile& l) {
      return nlohmann::json{{"name", l.name}, {"bus_bandwidth_bytes_per_s", l.bus_bandwidth_bytes_per_s},
                            {"latency_ns", l.latency_ns}};
    };
    writer->set_metadata(meta::kSimulatedHardwareJson,
                         nlohmann::json{{"name", hw.name},
                                        {"description", hw.description},
                                        {"gpu", hw.gpu.name},
                                        {"gpus_per_node", gpn},
                                        {"nodes", (p + gpn - 1) / gpn},
                                        {"intra_node", link(hw.intra_node)},
                                        {"inter_node", link(hw.inter_node)}}
                             .dump());
    for (int r = 0; r < p; ++r) {
      writer->add_rank({r, fmt::format("node{} (simulated)", r / gpn), hw.gpu.name + " (simulated)", 0});
      writer->add_lane({r, static_cast<int32_t>(sessions::Lane::compute), "compute", "stream"});
      writer->add_lane({r, static_cast<int32_t>(sessions::Lane::comm), "comm", "stream"});
    }
  }

  LmRunResult result;
  result.ranks.resize(static_cast<size_t>(p));
  std::vector<std::map<std::string, uint64_t>> group_sequence(static_cast<size_t>(p));  // per rank: group -> last sequence
  // the simulation outruns the writer: every kSyncInterval it waits for the writer to commit what
  // it was handed, so that a SIGKILL loses at most about that much (exec/simulated/executor.cpp's
  // rule; before, a killed LM simulation lost the steps the writer had not reached)
  constexpr std::chrono::milliseconds kSyncInterval{500};
  auto last_sync = std::chrono::steady_clock::now();
  // sequences a step: the group's one micro batch (vocab_parallel) or every rank's
  const int64_t sequences = spec.micro_batch_size * (spec.sharding == LmSharding::vocab_parallel ? 1 : p);
  for (int64_t st = 0; st < spec.steps; ++st) {
    if (st > 0 && options.cancel && options.cancel->load()) {  // Ctrl-C / SIGTERM: after the current step
      result.ended = RunEnd::cancelled;
      break;
    }
    // a session that can no longer be written (a full disk): stop after the step in which the
    // writer learnt of it, as run_lm and a DLRM run do; the close below says what was kept
    if (st > 0 && writer && writer->write_failed()) {
      result.ended = RunEnd::write_failed;  // the session's end message: "the run stopped there"
      break;
    }
    const int64_t t0 = st * sim.step_ns;
    result.step_ns.push_back(sim.step_ns);
    for (int r = 0; r < p; ++r) {
      const auto ri = static_cast<size_t>(r);
      const StepProgram& prog = sim.programs[ri];
      std::vector<sessions::OpEvent> events;
      size_t k = 0;  // the rank's collectives, in order
      for (size_t i = 0; i < prog.ops.size(); ++i) {
        const ProgramOp& op = prog.ops[i];
        sessions::OpEvent e;
        e.rank = r;
        e.lane = op.lane;
        e.category = op.category;
        e.name = exec::intern_op_name(op.name);
        e.step = st;
        e.start_ns = t0 + sim.rank_start_ns[ri][i];
        e.end_ns = t0 + sim.rank_end_ns[ri][i];
        for (const CollectiveCall& c : op.collectives) {
          // a span per collective under its own name, as the measured run's comm worker records
          // them ("embedding/grad_all_reduce", not the op's "grad_all_reduce"): the analyses that
          // pick the token embedding's collectives by name see the same in both (tester33 D4)
          sessions::OpEvent ce = e;
          ce.name = exec::intern_op_name(c.name);
          ce.start_ns = t0 + sim.collective_ns[ri][k].first;
          ce.end_ns = t0 + sim.collective_ns[ri][k].second;
          ce.bytes = c.bytes_sent() + c.bytes_received();
          // each group numbers its collectives 1, 2, ... on every member, as the Gloo groups of the
          // measured run do (its comm span's correlation is the collective's sequence,
          // threaded/lm_executor.cpp), so the session's collective instances form: waits for
          // peers, cross-rank critical-path links, bytes sent = received per collective
          const uint64_t sequence = ++group_sequence[ri][c.group];
          ce.correlation = sequence;
          events.push_back(ce);
          sessions::CollectiveRecord rec;
          rec.rank = r;
          rec.op = to_string(c.kind);
          rec.name = c.name;
          rec.group = c.group;
          rec.sequence = sequence;
          rec.dtype = c.dtype;
          rec.step = st;
          rec.start_ns = t0 + sim.collective_ns[ri][k].first;
          rec.end_ns = t0 + sim.collective_ns[ri][k].second;
          rec.bytes_sent = c.bytes_sent();
          rec.bytes_received = c.bytes_received();
          rec.peers.assign(c.peers.begin(), c.peers.end());
          rec.send_elements = c.send_elements;
          rec.recv_elements = c.recv_elements;
          result.ranks[ri].bytes_sent += rec.bytes_sent;
          result.ranks[ri].bytes_received += rec.bytes_received;
          ++k;
          if (writer) writer->add_collective(rec);
          result.collectives.push_back(std::move(rec));
        }
        if (op.collectives.empty()) events.push_back(e);
      }
      if (writer) {
        // the estimate's replay of the rank's caching allocator (planner/lm_memory_estimate.h)
        const int64_t bytes = memory[ri].peak_allocated_bytes, reserved = memory[ri].peak_reserved_bytes;
        sessions::MemoryCounter m;
        m.step = st;
        m.rank = r;
        m.allocated = m.peak_allocated = bytes;
        m.reserved = m.peak_reserved = reserved;
        writer->add_memory(m);
        sessions::LoadCounter lc;  // the program's expected ids served by the rank's shard
        lc.step = st;
        lc.rank = r;
        lc.table = 0;
        lc.shard = r;
        for (const ProgramOp& op : prog.ops)
          if (is_lm_lookup_op(op)) lc.ids = op.rows;
        for (const sessions::OpEvent& e : events)  // the forward lookup's simulated time (tester47 F16)
          if (e.category == sessions::OpCategory::lookup && std::string_view(e.name) == "lookup") lc.lookup_ns += e.end_ns - e.start_ns;
        const LmLookupBytes lb = lm_lookup_bytes(spec, lc.ids);
        lc.bytes_in = lb.bytes_in;
        lc.bytes_out = lb.bytes_out;
        // the step row and its load counter in one transaction (add_step_records), as the
        // measured run's ranks write theirs; no token histogram: nothing draws a token here (the
        // simulated DLRM run writes no id histogram either)
        writer->add_step_records({st, r, t0, t0 + sim.step_ns, 0.0, bytes, bytes}, {lc}, {});
        writer->add_ops(events);
      }
      result.ops.insert(result.ops.end(), events.begin(), events.end());
    }
    if (writer && std::chrono::steady_clock::now() - last_sync >= kSyncInterval) {
      writer->sync();
      last_sync = std::chrono::steady_clock::now();
    }
    if (options.on_step) {
      StepProgress sp;
      sp.step = st + 1;
      sp.total_steps = spec.steps;
      if (sim.step_ns > 0) sp.samples_per_s = static_cast<double>(sequences) / (static_cast<double>(sim.step_ns) * 1e-9);
      options.on_step(sp);
    }
  }
  for (int r = 0; r < p; ++r) {
    result.ranks[static_cast<size_t>(r)].rows = memory[static_cast<size_t>(r)].rows;
    result.ranks[static_cast<size_t>(r)].peak_allocated = memory[static_cast<size_t>(r)].peak_allocated_bytes;
  }
  result.wall_ns = static_cast<int64_t>(result.step_ns.size()) * sim.step_ns;
  if (writer) {
    std::string error;
    const bool kept = exec::close_run_session(*writer, result.ended, error);
    if (result.ended == RunEnd::write_failed)  // a full disk (tester49 F3): as run_lm says it
      throw LmRunError(result.ended, error, kept ? options.session_path : std::string());
  }
  return result;
}

}  // namespace embedscope::engine

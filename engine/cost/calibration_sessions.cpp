// calibrate's reading of measured sessions (cost/calibration.h, calibration_detail.h): the workload
// and plan, the samples its fits take (compute ops, collectives' call times, hand-off gaps), the
// measured step and collective times, and the simulation of a session with a profile.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "calibration_detail.h"
#include "embedscope/engine/cost/handoff.h"
#include "embedscope/engine/cost/shared_cores.h"
#include "embedscope/engine/exec/backend.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/program/step_program.h"
#include "embedscope/engine/sharding/plan_json.h"
#include "embedscope/engine/workload/spec_error.h"
#include "embedscope/sessions/analysis/rank_session.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::engine::calib {

namespace ss = embedscope::sessions;
using nlohmann::json;

Loaded load_session(const ss::SessionReader& reader, const std::string& path) {
  if (reader.meta(ss::meta::kSimulated) == "1")
    throw SpecError(fmt::format("{}: a simulated session: its times are the cost model's, not measured", path));
  const std::string workload = reader.meta(ss::meta::kWorkloadJson);
  const std::string plan_text = reader.meta(ss::meta::kShardingPlanJson);
  // an lm_embedding session has its workload but no DLRM plan: say what it is before what it
  // lacks (tester43 F19: "no workload_json ... or not a session Embedscope ran" of an LM run)
  if (const json lw = json::parse(workload, nullptr, false); lw.is_object() && lw.value("model", "") == "lm_embedding")
    throw SpecError(fmt::format("{}: an lm_embedding session (calibration pairs DLRM step programs only)", path));
  if (workload.empty() || plan_text.empty())
    throw SpecError(fmt::format("{}: no workload_json or sharding_plan_json metadata (an imported trace, or not a "
                                "session Embedscope ran): nothing to pair its ops with",
                                path));
  const json w = json::parse(workload, nullptr, false);
  if (w.is_discarded()) throw SpecError(fmt::format("{}: workload_json is not JSON", path));
  if (w.is_object() && w.value("model", "") == "lm_embedding")
    throw SpecError(fmt::format("{}: an lm_embedding session (calibration pairs DLRM step programs only)", path));
  // one process's session of a multi-process run (launch's X.rankR.db): its one rank's times would
  // be fitted and checked as the run's (cli43); refused as rebalance refuses it, naming X.db
  if (const auto part = ss::partial_rank_session(reader))
    throw SpecError(ss::partial_rank_session_refusal(
        *part, path, "ops and collectives", "the fit and the check would take one rank's times for the whole run's",
        "calibrate from"));
  // a merged session of several processes written before the merge summed the run's load: its
  // load keys are the first process's, the sibling rank processes counted as other load (a
  // launch run of 4 processes read G 7.38 for the run's ~1.1), which the fit and the check would take for the run's
  if (const json from = json::parse(reader.meta(ss::meta::kMergedFromJson, "[]"), nullptr, false);
      from.is_array() && from.size() >= 2 && !reader.meta(ss::meta::kCpuSelfCores).empty() &&
      reader.meta(ss::meta::kCpuLoadMerged).empty()) {
    std::string files;
    for (const auto& f : from)
      if (f.is_object() && f.contains("file") && f["file"].is_string())
        files += (files.empty() ? "" : " ") + f["file"].get<std::string>();
    throw SpecError(fmt::format(
        "{}: a merged session of {} processes whose measured load (cpu_self_cores {}, cpu_other_cores {}) is one "
        "process's, the other rank processes of the run counted as other load (merged before embedscope summed a "
        "run's load over its processes): the fit and the check would take that for the run's load; merge the rank "
        "sessions again (embedscope merge {} -o NEW.db) and calibrate from NEW.db",
        path, from.size(), reader.meta(ss::meta::kCpuSelfCores), reader.meta(ss::meta::kCpuOtherCores), files));
  }
  Loaded l;
  l.spec = parse_workload(w, path + " (workload_json)");
  l.plan = plan_from_json(l.spec, json::parse(plan_text), path + " (sharding_plan_json)");
  l.local = l.spec.sharding.local_world_size > 0 ? l.spec.sharding.local_world_size : l.spec.devices.count;
  return l;
}

// The run's other load as task groups (calibration.h, hardware_profile.h CpuContention
// other_groups): the cores other processes kept busy / the cores this one did (metadata
// cpu_other_cores, cpu_self_cores): with autogroup each busy group gets an equal share, so the
// others are that many groups' worth; -1 without them. (The sampled runnable-thread counts
// cpu_other_runnable / cpu_own_runnable are not used: the scheduler shares per group, not per
// thread - measured here, the process got the same cores at 2 and 8 ranks.)
double measured_other_groups(const ss::SessionReader& reader) {
  const std::string self = reader.meta(ss::meta::kCpuSelfCores, ""), other = reader.meta(ss::meta::kCpuOtherCores, "");
  if (self.empty() || other.empty()) return -1;
  const double s = std::atof(self.c_str()), o = std::atof(other.c_str());
  if (!(s > 0) || !(o >= 0)) return -1;
  return o / s;
}

int64_t measured_step_ns(const ss::SessionReader& reader, const std::string& path) {
  std::map<int64_t, int64_t> slowest;
  for (const auto& s : reader.steps())
    if (s.step >= 0) slowest[s.step] = std::max(slowest[s.step], s.end_ns - s.start_ns);
  std::vector<int64_t> t;
  for (const auto& [step, ns] : slowest) t.push_back(ns);
  if (t.empty()) throw SpecError(fmt::format("{}: no measured step", path));
  return median(t);
}

// The collectives' time of a session (CalibrationCheck::measured_comm_ns): per measured step and
// rank the sum of its collectives' call times (the last member's end - the last member's start:
// what the simulator gives every member), the mean over ranks, the median over steps. 0 without
// collectives.
// A call no member spent time in: a split check a GPU profile's simulation does not time
// (cost_model.h split_check_timed, sim50), recorded at each member's arrival. No machine
// measures that, so it is no sample of the collective fit nor of the members' waits (a session
// simulated on a GPU profile and read as measured, as the tests do, kept 0 ns for 32 B).
static bool cal_untimed_call(const std::vector<ss::CollectiveRecord>& members) {
  return std::all_of(members.begin(), members.end(), [](const ss::CollectiveRecord& m) { return m.end_ns == m.start_ns; });
}

int64_t comm_step_ns(const ss::SessionReader& reader) {
  std::map<std::pair<std::string, uint64_t>, std::vector<ss::CollectiveRecord>> by_call;
  for (auto& c : reader.collectives())
    if (c.step >= 0) by_call[{c.group, c.sequence}].push_back(std::move(c));
  std::map<int64_t, std::map<int, int64_t>> sum;  // step -> rank -> ns
  for (const auto& [key, members] : by_call) {
    int64_t last = 0, call_end = 0;
    for (const auto& m : members) last = std::max(last, m.start_ns), call_end = std::max(call_end, m.end_ns);
    for (const auto& m : members) sum[m.step][m.rank] += std::max<int64_t>(0, call_end - last);
  }
  std::vector<int64_t> per_step;
  for (const auto& [step, ranks] : sum) {
    int64_t total = 0;
    for (const auto& [r, ns] : ranks) total += ns;
    per_step.push_back(total / static_cast<int64_t>(ranks.size()));
  }
  return median(per_step);
}

double mean_wait_ns(const ss::SessionReader& reader) {
  std::map<std::pair<std::string, uint64_t>, std::vector<ss::CollectiveRecord>> calls;
  for (auto& c : reader.collectives())
    if (c.step >= 0) calls[{c.group, c.sequence}].push_back(std::move(c));
  std::map<std::pair<std::string, uint64_t>, std::vector<int64_t>> by_call;  // arrivals
  for (const auto& [key, members] : calls)
    if (!cal_untimed_call(members))
      for (const auto& m : members) by_call[key].push_back(m.start_ns);
  double sum = 0;
  for (const auto& [key, arrivals] : by_call) {
    const int64_t last = *std::max_element(arrivals.begin(), arrivals.end());
    double w = 0;
    for (int64_t a : arrivals) w += static_cast<double>(last - a);
    sum += w / static_cast<double>(arrivals.size());
  }
  return by_call.empty() ? 0.0 : sum / static_cast<double>(by_call.size());
}

// A session's workload and plan simulated with the profile file `profile_path`: the median
// slowest-rank step time; the session written to `session_out` when not empty.
int64_t simulate_session(const Loaded& l, const std::string& path, const std::string& profile_path,
                         const std::string& session_out) {
  WorkloadSpec sim = l.spec;
  sim.devices.backend = Backend::simulated;
  sim.devices.hardware = profile_path;
  sim.sharding.local_world_size = l.local;
  sim.rebalance = {};
  sim.network = {};  // the simulated backend takes it as a floor (TrainerOptions)
  sim = with_resolved_backend(sim, path);
  TrainerOptions o;
  o.simulated_network_floor = l.spec.network;
  o.trace = !session_out.empty();
  o.session_path = session_out;
  o.session_overwrite = true;
  const RunResult r = run_training(sim, l.plan, o);
  if (r.ended != RunEnd::complete) throw SpecError(fmt::format("{}: the simulation did not complete: {}", path, r.error));
  return median(r.step_time_ns);
}

SessionData read_session(const std::string& path, int session, CalibrationSamples& out) {
  const ss::SessionReader reader(path);
  SessionData sd;
  sd.path = path;
  sd.l = load_session(reader, path);
  const Loaded& l = sd.l;
  sd.ranks = l.spec.devices.count;
  sd.cores = std::atoi(reader.meta(ss::meta::kCpuCores, "0").c_str());
  sd.load = reader.meta(ss::meta::kLoadAverage, "");
  sd.groups = measured_other_groups(reader);
  sd.measured_ns = measured_step_ns(reader, path);
  sd.wait_ns = mean_wait_ns(reader);
  // the session's compute-lane ops per (rank, measured step), in time order
  std::map<std::pair<int, int>, std::string> lane_name;
  for (const auto& ln : reader.lanes()) lane_name[{ln.rank, ln.lane}] = ln.name;
  std::map<std::pair<int, int64_t>, std::vector<const ss::OpRecord*>> ops, comm_ops;
  std::map<std::tuple<int, int, size_t>, std::pair<Sample, std::vector<int64_t>>> durations;
  std::map<std::tuple<int, int, int>, std::vector<int64_t>> gaps;  // (rank, place, op id) -> hand-off gaps
  std::map<std::pair<int, int64_t>, int64_t> step_start;
  for (const auto& st : reader.steps()) step_start[{st.rank, st.step}] = st.start_ns;
  const std::vector<ss::OpRecord> all = reader.all_ops();
  // every compute op's measured concurrency: the compute spans of its step open on its machine
  // during it (Sample::busy, conc46): the ranks the ranks table puts on the op's host, whatever
  // the emulated node shape (sharding.local_world_size), as the simulator shares a cpu profile's
  // cores among all ranks (cost/shared_cores.h core_group); the simulator shares the cores among
  // the ops of one step (exec/simulated/: each step simulated on its own)
  std::map<const ss::OpRecord*, std::vector<double>> busy_of;
  {
    std::map<int, std::string> host_of;
    for (const auto& ri : reader.ranks()) host_of[ri.rank] = ri.host;
    std::map<std::pair<std::string, int64_t>, std::vector<const ss::OpRecord*>> on_node;  // (host, step)
    for (const auto& op : all)
      if (lane_name[{op.rank, op.lane}] == "compute")
        on_node[{host_of[op.rank], op.step}].push_back(&op);
    for (const auto& [node, v] : on_node) {
      std::vector<std::pair<int64_t, int64_t>> spans;
      for (const auto* o : v) spans.emplace_back(o->start_ns, o->end_ns);
      auto at_k = compute_concurrency(spans);
      for (size_t i = 0; i < v.size(); ++i) busy_of[v[i]] = std::move(at_k[i]);
    }
  }
  for (const auto& op : all) {
    if (op.step < 0) continue;
    const std::string& lane = lane_name[{op.rank, op.lane}];
    if (lane == "compute") ops[{op.rank, op.step}].push_back(&op);
    else if (lane == "comm") comm_ops[{op.rank, op.step}].push_back(&op);
  }
  if (ops.empty()) throw SpecError(fmt::format("{}: no compute op of a measured step", path));
  const auto& names = reader.strings();
  for (auto& [key, list] : ops) {
    std::sort(list.begin(), list.end(), [](auto* a, auto* b) { return a->start_ns < b->start_ns; });
    const StepProgram p = build_step_program(l.spec, l.plan, key.first, key.second + l.spec.warmup_steps);
    const std::vector<const ProgramOp*> planned = p.lane(ss::Lane::compute);
    bool same = planned.size() == list.size();
    for (size_t i = 0; same && i < list.size(); ++i) {
      const auto id = static_cast<size_t>(list[i]->name_id);
      same = id < names.size() && names[id] == planned[i]->name;
    }
    if (!same) {
      ++out.skipped_rank_steps;
      continue;
    }
    for (size_t i = 0; i < list.size(); ++i) {
      const ProgramOp& op = *planned[i];
      Sample s{kMemory, static_cast<double>(op.bytes), 0.0, session};
      if (op.flops > 0) s = {kDense, static_cast<double>(op.flops), 0.0, session, op.dense_work};
      else if (op.category == ss::OpCategory::lookup) s.cls = kLookup;
      else if (op.category == ss::OpCategory::optimizer && op.rows > 0) s.cls = kTbeBackward;
      s.work = static_cast<int>(op.work);
      s.items = static_cast<double>(op.work_items);
      s.work2 = static_cast<int>(op.work2);
      s.items2 = static_cast<double>(op.work2_items);
      auto& d = durations[{key.first, place_in_run(l.spec, key.second + l.spec.warmup_steps), i}];
      std::vector<double> busy = std::move(d.first.busy);  // summed over the steps, ns
      const std::vector<double>& here = busy_of[list[i]];
      if (busy.size() < here.size()) busy.resize(here.size(), 0.0);
      for (size_t k = 0; k < here.size(); ++k) busy[k] += here[k];
      d.first = s;
      d.first.busy = std::move(busy);
      d.second.push_back(list[i]->end_ns - list[i]->start_ns);
    }
    // the gaps where a thread waited to be woken by the other (cost/handoff.h)
    auto spans = [&](std::vector<const ss::OpRecord*>& v) {
      std::sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->start_ns < b->start_ns; });
      std::vector<MeasuredSpan> measured;
      for (const auto* o : v)
        measured.push_back({static_cast<size_t>(o->name_id) < names.size() ? names[static_cast<size_t>(o->name_id)] : "",
                            o->start_ns, o->end_ns});
      return measured;
    };
    const auto start = step_start.find(key);
    if (start == step_start.end()) continue;
    if (const auto g = handoff_gaps(p, spans(list), spans(comm_ops[key]), start->second))
      for (const HandoffGap& h : *g)
        gaps[{key.first, place_in_run(l.spec, key.second + l.spec.warmup_steps), h.op}].push_back(h.gap_ns);
  }
  for (auto& [key, v] : gaps) out.handoffs.emplace_back(session, mean_ns(v));
  // one sample per (rank, place in the run, op): the median over its steps, robust to the
  // scheduling outliers of rank threads sharing cores
  for (auto& [key, d] : durations) {
    Sample s = d.first;
    s.t = static_cast<double>(median(d.second));
    double total = 0;  // the busy times as shares
    for (double x : s.busy) total += x;
    if (total > 0)
      for (double& x : s.busy) x /= total;
    else
      s.busy.clear();
    out.compute.push_back(s);
  }
  // every member of every collective: its transfer time after the last member arrived
  std::map<std::pair<std::string, uint64_t>, std::vector<ss::CollectiveRecord>> by_call;
  for (auto& c : reader.collectives())
    if (c.step >= 0) by_call[{c.group, c.sequence}].push_back(std::move(c));
  // one sample per (rank, place in the run, collective name, its occurrence in the step):
  // the bytes' median and the times' mean over the steps (mean_ns)
  std::map<std::tuple<int, int, std::string, int>,
           std::tuple<bool, std::vector<int64_t>, std::vector<int64_t>, std::vector<std::vector<int64_t>>>>
      calls;
  std::map<std::tuple<int, int64_t, std::string>, int> occurrence;
  for (const auto& [key, members] : by_call) {
    // the simulator's collective lasts its largest member's time for every member (exec/simulated/:
    // all leave at the last arrival + the longest member's cost), so every member's sample is the
    // call's time - the last member's end after the last arrival - with the largest member's
    // bytes. (Until 2026-12-04 each member's own end was used: the median member, which under
    // load left 0.8 ms after the last arrival of a tw4 output all-to-all whose last member left
    // after 5.5 ms; the next collective waits for that last member.)
    if (cal_untimed_call(members)) continue;
    int64_t last = 0, largest = 0, call_end = 0;
    std::vector<int64_t> member_bytes;  // sorted: for processor sharing (cost/shared_cores.h)
    for (const auto& m : members) {
      last = std::max(last, m.start_ns);
      call_end = std::max(call_end, m.end_ns);
      largest = std::max({largest, m.bytes_sent, m.bytes_received});
      member_bytes.push_back(std::max(m.bytes_sent, m.bytes_received));
    }
    std::sort(member_bytes.begin(), member_bytes.end());
    bool spans = false;
    for (int32_t peer : members[0].peers) spans = spans || peer / l.local != members[0].peers[0] / l.local;
    for (const auto& m : members) {
      const int k = occurrence[{m.rank, m.step, m.name}]++;
      auto& [sp, xs, ts, ms] = calls[{m.rank, place_in_run(l.spec, m.step + l.spec.warmup_steps), m.name, k}];
      sp = spans;
      xs.push_back(largest);
      ts.push_back(call_end - last);
      ms.push_back(member_bytes);
    }
  }
  for (auto& [key, c] : calls) {
    // the members' bytes: per position in the sorted lists, the median over the steps (a call
    // whose member count changed between steps keeps none: the largest member's form)
    const auto& lists = std::get<3>(c);
    std::vector<double> members;
    bool same = true;
    for (const auto& v : lists) same = same && v.size() == lists.front().size();
    if (same && !lists.empty())
      for (size_t j = 0; j < lists.front().size(); ++j) {
        std::vector<int64_t> at;
        for (const auto& v : lists) at.push_back(v[j]);
        members.push_back(static_cast<double>(median(at)));
      }
    out.comm.push_back({session, std::get<0>(c), static_cast<double>(median(std::get<1>(c))),
                        mean_ns(std::get<2>(c)), std::move(members)});
  }
  return sd;
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "this machine";
  return buf;
}

}  // namespace embedscope::engine::calib

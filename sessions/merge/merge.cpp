#include "embedscope/sessions/merge/merge.h"
#include "embedscope/sessions/model/did_not_end.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embedscope/sessions/analysis/gpu_sharing.h"
#include "embedscope/sessions/importers/common/clock_align.h"
#include "embedscope/sessions/importers/common/import_problems.h"
#include "embedscope/sessions/merge/merged_load.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::sessions {

namespace {
namespace si = importers;
using nlohmann::json;

int64_t meta_int(const SessionReader& r, const char* key, int64_t fallback) {
  const std::string v = r.meta(key);
  if (v.empty()) return fallback;
  try {
    return std::stoll(v);
  } catch (const std::exception&) {
    return fallback;
  }
}

/// The recorded time of session time 0 of an input: import_origin_ns, else wall_anchor_unix_ns
/// (on rank 0's wall clock: plus clock_offset_to_rank0_ns where that offset is larger than its
/// uncertainty, i.e. was measured to be there), else 0.
int64_t time_base(const SessionReader& r) {
  if (!r.meta(meta::kImportOriginNs).empty()) return meta_int(r, meta::kImportOriginNs, 0);
  const int64_t wall = meta_int(r, meta::kWallAnchorUnixNs, 0);
  const int64_t offset = meta_int(r, meta::kClockOffsetToRank0Ns, 0);
  const int64_t uncertainty = meta_int(r, meta::kClockOffsetUncertaintyNs, 0);
  return wall + (std::llabs(offset) > uncertainty ? offset : 0);
}

int64_t floor_us(int64_t ns) { return ns >= 0 ? ns / 1000 * 1000 : -((-ns + 999) / 1000) * 1000; }

/// A metadata number, or nullopt when absent or not a number.
std::optional<double> meta_double(const SessionReader& r, const char* key) {
  const std::string v = r.meta(key);
  if (v.empty()) return std::nullopt;
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (end == v.c_str() || *end != '\0') return std::nullopt;
  return d;
}

/// The merged session's load keys from every input's (merged_load.h): written only when every
/// input recorded cpu_self_cores and cpu_other_cores (the runnable threads when every input has
/// both of them); else none (a load that leaves a process out would not be the run's).
void write_merged_load(const std::vector<std::unique_ptr<SessionReader>>& readers, SessionWriter& w) {
  std::vector<ProcessLoad> parts;
  for (const auto& r : readers) {
    const auto self = meta_double(*r, meta::kCpuSelfCores), other = meta_double(*r, meta::kCpuOtherCores);
    if (!self || !other || *self < 0 || *other < 0) return;
    ProcessLoad p;
    const auto ranks = r->ranks();  // the host its ranks ran on (the writer's, without ranks)
    p.host = ranks.empty() ? r->meta(meta::kHost) : ranks.front().host;
    p.self_cores = *self;
    p.other_cores = *other;
    const auto own = meta_double(*r, meta::kCpuOwnRunnable), others = meta_double(*r, meta::kCpuOtherRunnable);
    if (own && others && *own >= 0 && *others >= 0) p.own_runnable = *own, p.other_runnable = *others;
    parts.push_back(p);
  }
  const MergedLoad m = merge_process_load(parts);
  w.set_metadata(meta::kCpuSelfCores, fmt::format("{:.3f}", m.self_cores));
  w.set_metadata(meta::kCpuOtherCores, fmt::format("{:.3f}", m.other_cores));
  if (m.own_runnable && m.other_runnable) {
    w.set_metadata(meta::kCpuOwnRunnable, fmt::format("{:.3f}", *m.own_runnable));
    w.set_metadata(meta::kCpuOtherRunnable, fmt::format("{:.3f}", *m.other_runnable));
  }
  w.set_metadata(meta::kCpuLoadMerged,
                 json{{"processes", m.processes},
                      {"hosts", m.hosts},
                      {"rule", "per host: self = the sum of its processes' self cores; other = the mean of their "
                               "(self + other) less that self (the sibling processes out of each one's other load); "
                               "summed over the hosts; runnable threads alike"}}
                     .dump());
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  return std::filesystem::equivalent(a, b, ec);
}
}  // namespace

std::string merge_table_storage_json(const std::vector<std::string>& inputs) {
  static const std::set<std::string> kSum{"master_copy_bytes", "hash_collisions", "hot_ids",     "cache_hits",
                                          "cache_misses",      "rows_fetched",    "bytes_h2d",   "bytes_d2h",
                                          "prefetched_rows",   "prefetch_bytes_h2d"};
  static const std::set<std::string> kMax{"max_abs_error", "relative_error"};
  json out;
  for (const std::string& text : inputs) {
    const json in = json::parse(text, nullptr, false);
    if (!in.is_array()) continue;
    if (out.is_null()) {
      out = in;
      continue;
    }
    for (size_t t = 0; t < in.size() && t < out.size(); ++t) {
      if (!in[t].is_object() || !out[t].is_object()) continue;
      for (auto& [key, v] : out[t].items()) {
        if (!in[t].contains(key)) continue;
        const json& w = in[t][key];
        if (v.is_array() && w.is_array()) {  // per rank: each input holds its own ranks
          if (v.size() < w.size()) v.insert(v.end(), w.size() - v.size(), 0);
          for (size_t r = 0; r < w.size(); ++r)
            if (v[r].is_number() && w[r].is_number())
              v[r] = v[r].is_number_integer() && w[r].is_number_integer() ? json(v[r].get<int64_t>() + w[r].get<int64_t>())
                                                                          : json(v[r].get<double>() + w[r].get<double>());
        } else if (v.is_number() && w.is_number()) {
          if (kSum.count(key))
            v = v.is_number_integer() && w.is_number_integer() ? json(v.get<int64_t>() + w.get<int64_t>())
                                                               : json(v.get<double>() + w.get<double>());
          else if (kMax.count(key))
            v = std::max(v.get<double>(), w.get<double>());
        }
      }
    }
  }
  return out.is_null() ? std::string() : out.dump();
}

MergeSummary merge_sessions(const std::vector<std::string>& inputs, const std::string& output, const MergeOptions& opt) {
  if (opt.align != "none" && opt.align != "collectives")
    throw SessionError(fmt::format("--align {}: not a method (none or collectives)", opt.align));
  if (inputs.size() < 2) throw SessionError("merge: give two or more sessions to merge");
  for (const auto& in : inputs)
    if (same_file(in, output))
      throw SessionError(fmt::format("{}: the output is one of the inputs; write the merged session elsewhere (-o)", output));
  for (size_t i = 0; i < inputs.size(); ++i)  // tester37 #20: said as "rank 0 is also in x.db"
    for (size_t j = i + 1; j < inputs.size(); ++j)
      if (same_file(inputs[i], inputs[j]))
        throw SessionError(fmt::format("{}: given twice (as {} and {}); name each session once", inputs[j], inputs[i],
                                       inputs[j]));
  struct stat sb {};
  if (lstat(output.c_str(), &sb) == 0 && !opt.overwrite)
    throw SessionError(fmt::format("{}: already exists; choose another name (-o) or allow overwriting it "
                                   "(embedscope merge --force-overwrite)", output));
  std::vector<std::unique_ptr<SessionReader>> readers;  // alive until written: op names point into them
  std::map<int32_t, std::string> owner;
  const std::string format0 = [&] {
    readers.push_back(std::make_unique<SessionReader>(inputs[0]));
    return readers[0]->meta(meta::kImportFormat);
  }();
  for (size_t i = 1; i < inputs.size(); ++i) {
    readers.push_back(std::make_unique<SessionReader>(inputs[i]));
    if (readers[i]->meta(meta::kImportFormat) != format0)
      throw SessionError(fmt::format("{}: {} but {} is {}; merge sessions of one kind at a time", inputs[i],
                                     readers[i]->meta(meta::kImportFormat, "not imported"), inputs[0],
                                     format0.empty() ? std::string("not imported") : format0));
  }
  // a simulated rank's times come from the cost model: beside measured ranks they would read as
  // one run's (tester33 D1)
  const auto kind = [](const SessionReader& r) { return r.meta(meta::kSimulated, "0") == "1" ? "simulated" : "measured"; };
  for (size_t i = 1; i < readers.size(); ++i)
    if (std::string(kind(*readers[i])) != kind(*readers[0]))
      throw SessionError(fmt::format("{}: {} but {} is {}; merge sessions of one kind at a time", inputs[i],
                                     kind(*readers[i]), inputs[0], kind(*readers[0])));
  // rank sessions of one rank-per-process run share its run id and digest (workload and plan):
  // merging another run's ranks would give one run's metadata over the other's data (tester36 D1)
  for (const char* key : {meta::kRunId, meta::kRunDigest})
    for (size_t i = 1; i < readers.size(); ++i) {
      const std::string mine = readers[i]->meta(key), first = readers[0]->meta(key);
      if (mine != first)
        throw SessionError(fmt::format("{}: {} {} but {} has {}: the ranks of different runs; merge the rank "
                                       "sessions of one run", inputs[i], key, mine.empty() ? "(none)" : mine,
                                       inputs[0], first.empty() ? "(none)" : first));
    }
  // an import that numbered its rank itself (a trace without distributedInfo.rank: problem no_rank)
  auto assigned = [](const SessionReader& r) {
    for (const auto& p : r.import_stats())
      if (p.name == "no_rank") return true;
    return false;
  };
  std::map<int32_t, size_t> owner_index;
  for (size_t i = 0; i < readers.size(); ++i)
    for (const auto& ri : readers[i]->ranks()) {
      auto [it, fresh] = owner.try_emplace(ri.rank, inputs[i]);
      owner_index.try_emplace(ri.rank, i);
      if (!fresh)
        throw SessionError(fmt::format(
            "{}: rank {} is also in {}; each rank may come from one session only{}", inputs[i], ri.rank, it->second,
            format0 == "torch_memory_snapshot"
                ? " (memory snapshots imported one by one are each rank 0: import them together, embedscope import "
                  "a.pickle b.pickle ..., to make them ranks 0..N-1)"
            : assigned(*readers[i]) || assigned(*readers[owner_index[ri.rank]])
                ? " (the rank was assigned at import, not recorded: the trace has no distributedInfo.rank; import the "
                  "traces together, embedscope import r0.json r1.json ... or DIR, to number them 0..N-1)"
                : ""));
    }
  // --- the records of every rank, on each input's recorded clock minus one common origin
  int64_t first = std::numeric_limits<int64_t>::max();
  std::vector<std::vector<si::RankRecords>> recs(readers.size());
  // what merge copies besides the ranks' records: counters as they are, memory events and
  // snapshots moved as their rank's ops are
  struct PerRank {
    std::vector<LoadCounter> load;
    std::vector<MemoryCounter> memory;
    std::vector<MemoryEvent> events;
    std::vector<MemorySnapshot> snapshots;
    std::vector<IdHistogramBucket> histogram;
    std::vector<ShardRecord> shards;
    std::vector<FlightRecord> flight;
    std::vector<RebalanceRecord> rebalances;
    std::vector<PlanChangeRecord> plan_changes;
  };
  std::vector<PerRank> extras(readers.size());
  si::ImportProblems problems;
  std::map<std::string, ImportStat> stats;
  std::vector<std::string> stat_order;
  for (size_t i = 0; i < readers.size(); ++i) {
    const SessionReader& r = *readers[i];
    std::map<int32_t, si::RankRecords> by_rank;
    for (const auto& ri : r.ranks()) by_rank[ri.rank].info = ri, by_rank[ri.rank].rank = ri.rank, by_rank[ri.rank].file = inputs[i];
    auto rank = [&](int32_t k) -> si::RankRecords& {
      auto& x = by_rank[k];
      if (x.file.empty()) x.rank = k, x.file = inputs[i], x.info.rank = k;
      return x;
    };
    for (const auto& l : r.lanes()) rank(l.rank).lanes.push_back(l);
    for (const auto& s : r.steps()) rank(s.rank).steps.push_back(s);
    for (const auto& c : r.collectives()) rank(c.rank).collectives.push_back(c);
    for (const auto& o : r.all_ops()) {
      OpEvent e;
      e.rank = o.rank;
      e.lane = static_cast<Lane>(o.lane);
      e.category = o.category;
      e.name = r.name(o.name_id).c_str();
      e.step = o.step;
      e.start_ns = o.start_ns;
      e.end_ns = o.end_ns;
      e.bytes = o.bytes;
      e.correlation = o.correlation;
      rank(o.rank).ops.push_back(e);
    }
    const int64_t base = time_base(r);
    for (auto& [k, rr] : by_rank) {
      for (const auto& o : rr.ops)  // the valid events' (as import's origin): ops that did not end are left out
        if (!did_not_end(o.start_ns, o.end_ns, o.name)) first = std::min(first, base + o.start_ns);
      for (const auto& s : rr.steps) first = std::min(first, base + s.start_ns);
      recs[i].push_back(std::move(rr));
    }
    for (const auto& s : r.import_stats()) {
      auto [it, fresh] = stats.try_emplace(s.name, s);
      if (fresh) stat_order.push_back(s.name);
      else it->second.count += s.count;
    }
    PerRank& extra = extras[i];
    extra.load = r.load();
    extra.memory = r.memory_counters();
    extra.events = r.memory_events();
    extra.snapshots = r.memory_snapshots();
    // the origin is the earliest event of any kind, as Perfetto's trace bounds and PyTorch's
    // memory viz take the first event: a rank's set-up allocations (before its first op or
    // step) stay at times >= 0 instead of before the session's start (tester36 D18)
    for (const auto& ev : extra.events) first = std::min(first, base + ev.time_ns);
    for (const auto& sn : extra.snapshots) first = std::min(first, base + sn.time_ns);
    if (r.has_id_histogram()) extra.histogram = r.id_histogram();
    if (r.has_shards_table()) extra.shards = r.shards();
    extra.flight = r.flight_records();
    extra.rebalances = r.rebalances();
    extra.plan_changes = r.plan_changes();
    std::vector<std::string> left;
    if (!r.memory_timeline().empty()) left.push_back("memory timeline");
    if (!left.empty()) {
      std::string what;
      for (const auto& w : left) what += (what.empty() ? "" : ", ") + w;
      problems.add("not_merged", si::Severity::info, {inputs[i], -1},
                   fmt::format("{}: {} not merged (merge takes ranks, lanes, ops, steps, collectives, load and memory "
                               "counters, memory events and snapshots, id histograms, flight recorder dumps, live rebalances and the plan's rows)", inputs[i], what));
    }
  }
  int64_t origin = first == std::numeric_limits<int64_t>::max() ? time_base(*readers[0]) : floor_us(first);
  std::vector<si::RankRecords> all;
  json merged_from = json::array();
  for (size_t i = 0; i < readers.size(); ++i) {
    const int64_t shift = time_base(*readers[i]) - origin;
    std::vector<int32_t> rs;
    for (auto& rr : recs[i]) {
      si::shift_rank(rr, shift);
      rs.push_back(rr.rank);
      all.push_back(std::move(rr));
    }
    merged_from.push_back({{"file", inputs[i]}, {"ranks", rs}, {"shift_ns", shift}, {"ended", readers[i]->status()}});
  }
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  // ranks of different inputs on one device name share that GPU only when their hosts say so: the
  // rule a directory import applies to its trace files (tester62b F10: two traces on cuda:0 read
  // "2 GPUs" imported together and "sharing 1 GPU" merged)
  {
    std::vector<RankDeviceSource> devices;
    for (const auto& rr : all) devices.push_back({rr.rank, rr.file, rr.info.host, rr.info.device});
    separate_gpus_of_files(devices);
    for (size_t i = 0; i < all.size(); ++i) all[i].info.device = devices[i].device;
  }
  MergeSummary sum;
  sum.files = inputs;
  si::ClockAlignment alignment;
  // a time of each rank (its first step or op) before the alignment moves it
  auto probe = [](const si::RankRecords& rr) -> std::optional<int64_t> {
    if (!rr.steps.empty()) return rr.steps.front().start_ns;
    if (!rr.ops.empty()) return rr.ops.front().start_ns;
    return std::nullopt;
  };
  std::map<int32_t, std::optional<int64_t>> before;
  for (const auto& rr : all) before[rr.rank] = probe(rr);
  if (opt.align == "collectives") {
    alignment = si::align_ranks(all, origin, problems);
    sum.alignment_json = si::alignment_json(alignment);
    sum.alignment_text = si::alignment_text(alignment);
    // ranks that share no collective keep their clocks: different jobs stay disjoint (tester45 F13)
    std::vector<si::RankSpan> spans;
    for (const auto& rr : all) spans.push_back(si::rank_span(rr));
    si::check_time_ranges_overlap(spans, problems, true);
    const bool one_run = !readers[0]->meta(meta::kRunId).empty();
    if (!opt.allow_disjoint && !one_run)
      if (const std::string why = si::disjoint_refusal(problems.records(), "--allow-disjoint to merge them anyway");
          !why.empty())
        throw SessionError(why);
  } else {
    si::check_wall_clock_agreement(all, problems);
    std::vector<si::RankSpan> spans;  // ranks of different runs (tester37 #15)
    for (const auto& rr : all) spans.push_back(si::rank_span(rr));
    si::check_time_ranges_overlap(spans, problems);
    // ranks of different jobs are refused as `import` refuses them (tester42 F12), before
    // anything is written; the rank sessions of one run (the same run_id, checked above: what
    // `launch` merges) are one job whatever their clocks say (the problem is kept)
    const bool one_run = !readers[0]->meta(meta::kRunId).empty();
    if (!opt.allow_disjoint && !one_run)
      if (const std::string why = si::disjoint_refusal(problems.records(), "--allow-disjoint to merge them anyway");
          !why.empty())
        throw SessionError(why);
  }
  std::map<int32_t, int64_t> moved;  // ns the alignment added to each rank's times
  for (const auto& rr : all)
    if (auto b = before[rr.rank], a = probe(rr); a && b) moved[rr.rank] = *a - *b;
  // --- write
  SessionWriter w(output, opt.overwrite);
  static const std::set<std::string> kWriterKeys{meta::kFormat,    meta::kEnded,      meta::kEndMessage,
                                                 meta::kWriterPid, meta::kWriterHost, meta::kSqliteVersion};
  // the load keys are the run's, from every process's (merged_load.h), not the first one's
  static const std::set<std::string> kLoadKeys{meta::kCpuSelfCores, meta::kCpuOtherCores, meta::kCpuOwnRunnable,
                                               meta::kCpuOtherRunnable, meta::kCpuLoadMerged};
  for (const auto& [k, v] : readers[0]->metadata())
    if (!kWriterKeys.count(k) && !kLoadKeys.count(k)) w.set_metadata(k, v);
  write_merged_load(readers, w);
  {  // each process recorded the tables' storage of its own ranks: all of them
    std::vector<std::string> storage;
    for (const auto& r : readers) storage.push_back(r->meta(meta::kTableStorageJson));
    if (const std::string merged = merge_table_storage_json(storage); !merged.empty())
      w.set_metadata(meta::kTableStorageJson, merged);
  }
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
  for (const auto& rr : all) {
    si::write_rank(rr, w, lo, hi);
    sum.ranks.push_back(rr.rank);
    sum.ops += static_cast<int64_t>(rr.ops.size());
  }
  // counters, memory history and id histograms of every input; the plan's rows once, when
  // every input that has them has the same (the ranks of one run)
  bool same_shards = true;
  const std::vector<ShardRecord>* shards = nullptr;
  auto shard_key = [](const ShardRecord& x) {
    return std::tie(x.table, x.table_name, x.sharding_type, x.node, x.shard_index, x.rank, x.row_offset, x.num_rows,
                    x.col_offset, x.num_cols, x.planned_bytes);
  };
  for (size_t i = 0; i < extras.size(); ++i) {
    PerRank& e = extras[i];
    const int64_t shift = merged_from[i]["shift_ns"].get<int64_t>();
    auto delta = [&](int32_t rank) {
      auto it = moved.find(rank);
      return shift + (it == moved.end() ? 0 : it->second);
    };
    for (const auto& l : e.load) w.add_load(l);
    for (const auto& m : e.memory) w.add_memory(m);
    for (auto& ev : e.events) ev.time_ns += delta(ev.rank);
    if (!e.events.empty()) w.add_memory_events(e.events);
    for (auto& sn : e.snapshots) {
      sn.time_ns += delta(sn.rank);
      w.add_snapshot(std::move(sn));
    }
    if (!e.histogram.empty()) w.add_id_histogram(e.histogram);
    for (auto& f : e.flight) {  // the dumps' times move with their rank's ops
      const int64_t d = delta(f.rank);
      f.dump_time_ns += d;
      f.time_created_ns += d;
      if (f.time_started_ns >= 0) f.time_started_ns += d;
      if (f.time_completed_ns >= 0) f.time_completed_ns += d;
    }
    if (!e.flight.empty()) w.add_flight_records(std::move(e.flight));
    if (e.shards.empty()) continue;
    if (!shards) {
      shards = &e.shards;
    } else if (!std::equal(shards->begin(), shards->end(), e.shards.begin(), e.shards.end(),
                           [&](const ShardRecord& a, const ShardRecord& b) { return shard_key(a) == shard_key(b); })) {
      same_shards = false;
    }
  }
  if (shards && same_shards) w.add_shards(*shards);
  // live rebalances: the ranks of one run made the same ones (one rank per process: each input
  // holds its own time); each once, from the earliest rank's start, taking the slowest rank's time
  std::vector<RebalanceRecord> rebalances;
  const std::vector<PlanChangeRecord>* changes = nullptr;
  bool same_rebalances = true;
  for (size_t i = 0; i < extras.size(); ++i) {
    const auto& mine = extras[i].rebalances;
    if (mine.empty()) continue;
    const int64_t shift = merged_from[i]["shift_ns"].get<int64_t>();
    if (rebalances.empty()) {
      rebalances = mine;
      for (auto& rb : rebalances) rb.start_ns += shift;
      changes = &extras[i].plan_changes;
      continue;
    }
    if (mine.size() != rebalances.size() || extras[i].plan_changes.size() != changes->size()) {
      same_rebalances = false;
      break;
    }
    for (size_t k = 0; k < mine.size(); ++k) {
      if (mine[k].step != rebalances[k].step || mine[k].moves != rebalances[k].moves) same_rebalances = false;
      rebalances[k].start_ns = std::min(rebalances[k].start_ns, mine[k].start_ns + shift);  // as merge_rebalances
      rebalances[k].duration_ns = std::max(rebalances[k].duration_ns, mine[k].duration_ns);
    }
  }
  if (!rebalances.empty() && same_rebalances) w.add_rebalances(rebalances, *changes);
  if (!same_rebalances)
    problems.add("not_merged", si::Severity::info, {inputs[0], -1},
                 "the inputs' live rebalances differ (steps or moves); none merged");
  if (shards && !same_shards) {
    problems.add("not_merged", si::Severity::info, {inputs[0], -1}, "the inputs' sharding plan rows differ; none merged");
  }
  int64_t world = static_cast<int64_t>(all.size()), steps = 0;
  json sources = json::array();
  std::set<std::string> producers;
  std::string ended = "complete", message;
  for (size_t i = 0; i < readers.size(); ++i) {
    const SessionReader& r = *readers[i];
    world = std::max(world, meta_int(r, meta::kWorldSize, 0));
    steps = std::max(steps, meta_int(r, meta::kSteps, 0));
    const json src = json::parse(r.meta(meta::kImportSources, "[]"), nullptr, false);
    if (src.is_array() && !src.empty())
      for (const auto& s : src) sources.push_back(s);
    else
      sources.push_back({{"file", inputs[i]}, {"ranks", merged_from[i]["ranks"]}});
    if (!r.meta(meta::kImportProducer).empty()) producers.insert(r.meta(meta::kImportProducer));
    if (r.status() != "complete" && ended == "complete") {  // the first input that did not complete says how
      ended = r.status();
      const std::string m = r.meta(meta::kEndMessage, "");
      message = m.empty() ? std::string() : fmt::format("{}: {}", inputs[i], m);  // a cancelled run has none (tester35 D9)
    }
  }
  if (world > 0 && world < static_cast<int64_t>(all.size())) world = static_cast<int64_t>(all.size());
  w.set_metadata(meta::kWorldSize, std::to_string(world));
  w.set_metadata(meta::kSteps, std::to_string(steps));
  w.set_metadata(meta::kMergedFromJson, merged_from.dump());
  if (!format0.empty()) {
    std::string producer;
    for (const auto& p : producers) producer += (producer.empty() ? "" : " | ") + p;
    w.set_metadata(meta::kImportProducer, producer);
    w.set_metadata(meta::kImportSources, sources.dump());
    w.set_metadata(meta::kImportOriginNs, std::to_string(origin));
  }
  w.set_metadata(meta::kImportAlign, opt.align);
  if (opt.align == "collectives") w.set_metadata(meta::kImportAlignJson, sum.alignment_json);
  // wall time of the merged time 0, from the first input that has one (its time 0 moved by its shift)
  for (size_t i = 0; i < readers.size(); ++i) {
    const int64_t wall = meta_int(*readers[i], meta::kWallAnchorUnixNs, -1);
    if (wall >= 0 && !readers[i]->meta(meta::kWallAnchorUnixNs).empty()) {
      w.set_metadata(meta::kWallAnchorUnixNs, std::to_string(wall - merged_from[i]["shift_ns"].get<int64_t>()));
      break;
    }
  }
  std::vector<ImportStat> out_stats;
  for (const auto& n : stat_order) out_stats.push_back(stats[n]);
  for (const auto& s : problems.records()) out_stats.push_back(s);
  w.add_import_stats(out_stats);
  w.close(ended, message);
  return sum;
}

}  // namespace embedscope::sessions

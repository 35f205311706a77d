#include "embedscope/sessions/exporters/export.h"
#include "embedscope/sessions/exporters/kineto_export.h"  // all_reduce_counts
#include "embedscope/sessions/analysis/stragglers.h"  // straggler, straggler_text
#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/model/did_not_end.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/op_stream.h"
#include "exporters/exported_run_keys.h"
#include "exporters/record_param_comms.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

namespace embedscope::sessions {

std::string ns_to_us(int64_t ns) {
  const char* sign = ns < 0 ? "-" : "";
  const uint64_t a = ns < 0 ? static_cast<uint64_t>(-(ns + 1)) + 1 : static_cast<uint64_t>(ns);
  return fmt::format("{}{}.{:03}", sign, a / 1000, a % 1000);
}

namespace {
constexpr auto kReplace = nlohmann::json::error_handler_t::replace;  // names may not be UTF-8
std::string quoted(const std::string& s) { return nlohmann::json(s).dump(-1, ' ', false, kReplace); }

/// The integer after `prefix` in `s` ("stream 7 (cuda:0 X)", "stream ") -> 7; -1 if none.
int64_t number_after(const std::string& s, const std::string& prefix) {
  const size_t at = s.find(prefix);
  if (at == std::string::npos) return -1;
  size_t i = at + prefix.size(), digits = 0;
  int64_t n = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9' && digits < 9) n = n * 10 + (s[i++] - '0'), ++digits;
  return digits ? n : -1;
}
}  // namespace

std::map<std::pair<int32_t, int32_t>, ChromeStreamId> chrome_stream_ids(const SessionReader& session) {
  std::map<int32_t, std::string> device_of;
  for (const auto& r : session.ranks()) device_of[r.rank] = r.device;
  std::map<std::pair<int32_t, int32_t>, ChromeStreamId> out;
  std::map<int32_t, std::set<int64_t>> taken;  // each rank's stream numbers so far
  for (const auto& l : session.lanes()) {
    if (l.kind != "stream") continue;
    ChromeStreamId id;
    id.stream = l.name.rfind("stream ", 0) == 0 ? number_after(l.name, "stream ") : -1;
    if (id.stream < 0) id.stream = l.lane + 1;  // > 0, as the Kineto export numbers them
    while (!taken[l.rank].insert(id.stream).second) ++id.stream;
    id.device = number_after(l.name, "cuda:");
    if (id.device < 0) id.device = number_after(device_of[l.rank], "cuda:");
    if (id.device < 0) id.device = 0;
    out[{l.rank, l.lane}] = id;
  }
  return out;
}

std::string chrome_gpu_cat(OpCategory category, const std::string& name) {
  if (category != OpCategory::memcpy) return "kernel";
  const bool memset = name.rfind("Memset", 0) == 0 || name.rfind("memset", 0) == 0;
  return memset ? "gpu_memset" : "gpu_memcpy";
}

std::string chrome_distributed_info(const SessionReader& session) {
  const int64_t world = std::atoll(session.meta(meta::kWorldSize, "0").c_str());
  if (world <= 0) return "";
  nlohmann::json d{{"world_size", world}};
  if (session.meta(meta::kImported, "0") == "1") {
    if (const std::string b = session.meta(meta::kImportBackend, ""); !b.empty()) d["backend"] = b;
    // the importer's producer line names the NCCL version ("...; NCCL 2.17.1; ...")
    const std::string producer = session.meta(meta::kImportProducer, "");
    if (const size_t at = producer.find("; NCCL "); at != std::string::npos) {
      const size_t from = at + 7, to = producer.find(';', from);
      std::string v = producer.substr(from, to == std::string::npos ? std::string::npos : to - from);
      if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
      if (!v.empty()) d["nccl_version"] = v;
    }
  }
  return d.dump(-1, ' ', false, kReplace);
}

void export_chrome_trace(const SessionReader& session, std::ostream& out) {
  // "embedscope": the run's pipeline, planned steps and end in flat keys, as the Kineto export has
  // them, which `embedscope import` records so that its `stats` counts the run's steps as this
  // session's do (tester53 F3); "metadata" is the session's, as it is
  nlohmann::json info{{"exporter", "embedscope export --format chrome"}};
  add_exported_run_keys(session, info);
  out << "{\"displayTimeUnit\":\"ns\",\"metadata\":" << nlohmann::json(session.metadata()).dump(-1, ' ', false, kReplace)
      << ",\n\"embedscope\":" << info.dump(-1, ' ', false, kReplace) << ",\n";
  // the world size (and an imported trace's backend and NCCL version) as Kineto's distributedInfo:
  // a re-import's world is the session's, not the ranks the file holds (each process "rank N"
  // gives its rank), so that compare finds the two alike
  if (const std::string dist = chrome_distributed_info(session); !dist.empty()) out << "\"distributedInfo\":" << dist << ",\n";
  out << "\"traceEvents\":[\n";
  bool first = true;
  auto emit = [&](const std::string& ev) {
    out << (first ? "" : ",\n") << ev;
    first = false;
  };
  const bool simulated = session.meta(meta::kSimulated, "0") == "1";
  const bool imported = session.meta(meta::kImported, "0") == "1";
  std::map<int32_t, bool> seen_rank;
  // each rank's GPU device as the session names it ("NVIDIA H100 (cuda:0)"), and its memory
  std::map<int32_t, RankInfo> rank_info;
  for (auto& r : session.ranks()) rank_info[r.rank] = std::move(r);
  // An imported trace's GPU stream lanes (kind `stream`): each op as Kineto writes a GPU event
  // (chrome_stream_ids), with its launch's correlation. An Embedscope run's streams stay threads
  // named as streams: their comm ops carry their collective's sequence, which a re-import's
  // kernel figures would read as launches that are not there (export.h).
  const std::map<std::pair<int32_t, int32_t>, ChromeStreamId> streams =
      imported ? chrome_stream_ids(session) : std::map<std::pair<int32_t, int32_t>, ChromeStreamId>{};
  // a cuda run's synchronization waits (lane kind `sync`): Kineto's category for them, cuda_sync,
  // not their op category (other) (tester38)
  std::set<std::pair<int32_t, int32_t>> sync_lanes;
  // an imported trace's GPU annotations (lane kind gpu_annotation): Kineto's gpu_user_annotation
  std::set<std::pair<int32_t, int32_t>> gpu_annotation_lanes;
  for (const auto& l : session.lanes()) {
    if (l.kind == "sync") sync_lanes.insert({l.rank, l.lane});
    if (l.kind == "gpu_annotation" && imported) gpu_annotation_lanes.insert({l.rank, l.lane});
    if (!seen_rank[l.rank]) {
      emit(fmt::format(R"({{"ph":"M","pid":{},"name":"process_name","args":{{"name":"rank {}{}"}}}})", l.rank, l.rank,
                       simulated ? " (simulated)" : ""));
      emit(fmt::format(R"({{"ph":"M","pid":{},"name":"process_sort_index","args":{{"sort_index":{}}}}})", l.rank, l.rank));
      // the rank's GPU (Perfetto shows process labels beside the process's name); `import` reads it
      // back as the rank's device
      if (auto ri = rank_info.find(l.rank); ri != rank_info.end() && !ri->second.device.empty())
        emit(fmt::format(R"({{"ph":"M","pid":{},"name":"process_labels","args":{{"labels":{},"embedscope device memory":{}}}}})",
                         l.rank, quoted(std::string(ri->second.device)), ri->second.memory_capacity_bytes));
      seen_rank[l.rank] = true;
    }
    // a stream lane written as a thread says so ("embedscope lane kind"): `import` names it
    const bool stream_as_thread = l.kind == "stream" && !imported;
    emit(fmt::format(R"({{"ph":"M","pid":{},"tid":{},"name":"thread_name","args":{{"name":{}{}}}}})", l.rank, l.lane,
                     quoted(l.name), stream_as_thread ? R"(,"embedscope lane kind":"stream")" : ""));
  }
  // each name quoted once (a JSON string: escapes, invalid UTF-8 replaced), not once per op
  std::vector<std::string> quoted_name(session.strings().size());
  auto name_of = [&](int32_t id) -> const std::string& {
    if (id < 0 || static_cast<size_t>(id) >= quoted_name.size()) {
      static const std::string unknown = quoted(session.name(-1));
      return unknown;
    }
    std::string& q = quoted_name[static_cast<size_t>(id)];
    if (q.empty()) q = quoted(session.name(id));
    return q;
  };
  // ops that did not end (model/did_not_end.h): a "B" without its "E", which Perfetto and
  // chrome://tracing show as "Did not end", under the event's own name (what `import` reads back)
  std::vector<int8_t> unfinished_name(session.strings().size(), -1);  // -1 not checked, 0 no, 1 yes
  auto marked = [&](int32_t id) {
    if (id < 0 || static_cast<size_t>(id) >= unfinished_name.size()) return false;
    int8_t& m = unfinished_name[static_cast<size_t>(id)];
    if (m < 0) m = is_did_not_end_name(session.name(id)) ? 1 : 0;
    return m == 1;
  };
  // each rank's comm ops by lane, in start order: the flows below start and end inside one
  // (Perfetto binds a flow event to the slice of its thread that encloses it)
  std::map<int32_t, std::map<int32_t, std::vector<std::pair<int64_t, int64_t>>>> comm_spans;
  for_each_lane_ops(session, [&](std::vector<OpRecord>& lane) {  // one lane at a time (op_stream.h)
    const auto stream = streams.find({lane.front().rank, lane.front().lane});
    for (const auto& o : lane) {
      if (o.category == OpCategory::comm && o.end_ns > o.start_ns)
        comm_spans[o.rank][o.lane].push_back({o.start_ns, o.end_ns});
      // a GPU op: Kineto's cat and args (device, stream, correlation) with the session's category;
      // a host op: its category as cat. An imported trace's correlations are its launches' (as
      // Kineto's "correlation"), an Embedscope run's a comm op's collective sequence ("sequence").
      std::string cat = sync_lanes.count({o.rank, o.lane}) ? "cuda_sync" : to_string(o.category);
      std::string args;
      if (gpu_annotation_lanes.count({o.rank, o.lane})) {
        cat = "gpu_user_annotation";
        args = fmt::format(R"("embedscope category":"{}",)", to_string(o.category));
      } else if (imported && stream == streams.end() && o.correlation && o.category != OpCategory::comm) {
        // an imported trace's launch or other CUDA runtime call (a host op with its kernel's
        // correlation): Kineto's cuda_runtime, not a host op (a comm op's correlation is a CPU
        // rank's collective sequence, kineto trace_builder.cpp)
        cat = "cuda_runtime";
        args = fmt::format(R"("embedscope category":"{}",)", to_string(o.category));
      }
      if (stream != streams.end()) {
        cat = chrome_gpu_cat(o.category, session.name(o.name_id));
        args = fmt::format(R"("device":{},"stream":{},"embedscope category":"{}",)", stream->second.device,
                           stream->second.stream, to_string(o.category));
      }
      if (o.start_ns == o.end_ns && marked(o.name_id)) {
        emit(fmt::format(R"({{"ph":"B","pid":{},"tid":{},"name":{},"cat":"{}","ts":{},"args":{{{}"step":{},"did_not_end":true}}}})",
                         o.rank, o.lane, quoted(std::string(without_did_not_end(session.name(o.name_id)))), cat,
                         ns_to_us(o.start_ns), args, o.step));
        continue;
      }
      args += fmt::format(R"("step":{})", o.step);
      if (o.bytes) args += fmt::format(R"(,"bytes":{})", o.bytes);
      if (o.correlation) args += fmt::format(R"(,"{}":{})", imported ? "correlation" : "sequence", o.correlation);
      emit(fmt::format(R"({{"ph":"X","pid":{},"tid":{},"name":{},"cat":"{}","ts":{},"dur":{},"args":{{{}}}}})", o.rank,
                       o.lane, name_of(o.name_id), cat, ns_to_us(o.start_ns), ns_to_us(o.end_ns - o.start_ns), args));
    }
  });
  // each rank's steps as Kineto writes them, `ProfilerStep#N` spans (cat user_annotation), on a
  // row of their own (tid 256: lanes are 0..255) so that they never cross the lanes' slices;
  // `embedscope import` reads them back as the ranks' steps, with each process named "rank N" as
  // its rank (tester42 F28: the round trip gave one rank and 0 steps)
  {
    std::set<int32_t> step_rows;
    for (const auto& s : session.steps()) {
      if (s.end_ns < s.start_ns) continue;
      if (step_rows.insert(s.rank).second) {
        if (!seen_rank[s.rank]) {
          emit(fmt::format(R"({{"ph":"M","pid":{},"name":"process_name","args":{{"name":"rank {}{}"}}}})", s.rank, s.rank,
                           simulated ? " (simulated)" : ""));
          seen_rank[s.rank] = true;
        }
        emit(fmt::format(R"({{"ph":"M","pid":{},"tid":256,"name":"thread_name","args":{{"name":"steps"}}}})", s.rank));
      }
      emit(fmt::format(R"({{"ph":"X","pid":{},"tid":256,"name":"ProfilerStep#{}","cat":"user_annotation","ts":{},"dur":{}}})",
                       s.rank, s.step, ns_to_us(s.start_ns), ns_to_us(s.end_ns - s.start_ns)));
    }
  }
  // counters at the start of each step
  // An imported trace has neither a loss nor the memory a run's steps record, and a simulation
  // trains nothing: no such counters, which Perfetto would draw as measured zeros (tester37 #13).
  std::map<std::pair<int64_t, int32_t>, int64_t> step_start;
  for (const auto& s : session.steps()) {
    step_start[{s.step, s.rank}] = s.start_ns;
    if (imported) continue;
    if (!simulated)
      emit(fmt::format(R"({{"ph":"C","pid":{},"name":"loss","ts":{},"args":{{"loss":{}}}}})", s.rank,
                       ns_to_us(s.start_ns), s.loss));
    emit(fmt::format(R"({{"ph":"C","pid":{},"name":"memory","ts":{},"args":{{"in_use_bytes":{},"peak_bytes":{}}}}})",
                     s.rank, ns_to_us(s.end_ns), s.memory_in_use_bytes, s.memory_peak_bytes));
  }
  std::map<std::pair<int64_t, int32_t>, int64_t> ids;
  for (const auto& c : session.load()) ids[{c.step, c.rank}] += c.ids;
  for (const auto& [key, n] : ids)
    if (auto it = step_start.find(key); it != step_start.end())
      emit(fmt::format(R"({{"ph":"C","pid":{},"name":"ids looked up","ts":{},"args":{{"ids":{}}}}})", key.second,
                       ns_to_us(it->second), n));
  // an imported memory snapshot's allocator counters after every trace entry (memory_timeline):
  // one counter per rank, allocated / reserved / active bytes (Perfetto draws a track each)
  for (const auto& p : session.memory_timeline()) {
    if (!seen_rank[p.rank]) {  // a snapshot's ranks have no lanes: name their processes here
      emit(fmt::format(R"({{"ph":"M","pid":{},"name":"process_name","args":{{"name":"rank {}"}}}})", p.rank, p.rank));
      emit(fmt::format(R"({{"ph":"M","pid":{},"name":"process_sort_index","args":{{"sort_index":{}}}}})", p.rank, p.rank));
      seen_rank[p.rank] = true;
    }
    emit(fmt::format(
        R"({{"ph":"C","pid":{},"name":"device memory","ts":{},"args":{{"allocated":{},"reserved":{},"active":{}}}}})",
        p.rank, ns_to_us(p.time_ns), p.allocated, p.reserved, p.active));
  }
  // flows: one arrow from the first rank to enter a collective to each other member
  std::map<std::pair<std::string, uint64_t>, std::vector<const CollectiveRecord*>> by_seq;
  const auto colls = session.collectives();
  const bool bytes_unknown = collective_bytes_unknown(session);  // 0 B there is unknown: no counts written
  for (const auto& c : colls) by_seq[{c.group, c.sequence}].push_back(&c);
  for (auto& [rank, lanes] : comm_spans)
    for (auto& [lane, v] : lanes) std::sort(v.begin(), v.end());
  // the lane of rank `rank` whose comm op holds time t (the shortest such op: a collective's
  // kernel rather than the host span that launched it); lane 1, the engine's comm lane, when none
  // does. tester37 #6: an imported trace's flows sat on tid 1, the compute stream, where no slice
  // held them, so Perfetto dropped the arrows.
  auto lane_at = [&](int32_t rank, int64_t t) {
    int32_t best = 1;
    int64_t best_len = INT64_MAX;
    auto r = comm_spans.find(rank);
    if (r == comm_spans.end()) return best;
    for (const auto& [lane, v] : r->second) {
      auto it = std::upper_bound(v.begin(), v.end(), std::pair<int64_t, int64_t>{t, INT64_MAX});
      // ops on a lane rarely overlap: the last few that started at or before t
      for (int k = 0; k < 4 && it != v.begin(); ++k) {
        --it;
        if (it->second >= t && it->second - it->first < best_len) best = lane, best_len = it->second - it->first;
      }
    }
    return best;
  };
  // each collective as PyTorch's record_param_comms span with its arguments (as the Kineto
  // export writes them), inside the comm op that ran it: Perfetto shows a collective's op, dtype,
  // counts, group and sequence, and `import` reads the records back with their bytes (tester52
  // F12: they came back as none, every collective 0 B); an all-reduce's counts from its group's
  // every member's bytes, as the Kineto export's (one rank's ring bytes can fit a count one short)
  const auto ar_counts = all_reduce_counts(colls);
  for (const auto& c : colls) {
    int32_t tid = -1;
    int64_t best_len = INT64_MAX;
    if (auto r = comm_spans.find(c.rank); r != comm_spans.end())
      for (const auto& [lane, v] : r->second) {
        auto it = std::upper_bound(v.begin(), v.end(), std::pair<int64_t, int64_t>{c.start_ns, INT64_MAX});
        for (int k = 0; k < 4 && it != v.begin(); ++k) {
          --it;
          if (it->second >= c.end_ns && it->second - it->first < best_len) tid = lane, best_len = it->second - it->first;
        }
      }
    if (tid < 0) tid = lane_at(c.rank, c.start_ns);
    const auto known = ar_counts.find({c.group, c.sequence});
    nlohmann::json args =
        record_param_comms_args(c, c.rank, bytes_unknown, known != ar_counts.end() ? known->second : -1);
    args["embedscope collective"] = c.name;
    args["step"] = c.step;
    emit(fmt::format(R"({{"ph":"X","pid":{},"tid":{},"name":"record_param_comms","cat":"comm","ts":{},"dur":{},"args":{}}})",
                     c.rank, tid, ns_to_us(c.start_ns), ns_to_us(c.end_ns - c.start_ns),
                     args.dump(-1, ' ', false, kReplace)));
  }
  uint64_t flow_id = 1;
  for (const auto& [key, members] : by_seq) {
    if (members.size() < 2) continue;
    const CollectiveRecord* src = members[0];
    for (const auto* m : members)
      if (m->start_ns < src->start_ns) src = m;
    for (const auto* m : members) {
      if (m == src) continue;
      const std::string name = quoted(m->name);
      const int64_t end = m->end_ns - 1 > m->start_ns ? m->end_ns - 1 : m->start_ns;
      emit(fmt::format(R"({{"ph":"s","id":{},"pid":{},"tid":{},"ts":{},"name":{},"cat":"collective"}})", flow_id,
                       src->rank, lane_at(src->rank, src->start_ns), ns_to_us(src->start_ns), name));
      emit(fmt::format(R"({{"ph":"f","bp":"e","id":{},"pid":{},"tid":{},"ts":{},"name":{},"cat":"collective"}})", flow_id,
                       m->rank, lane_at(m->rank, end), ns_to_us(end), name));
      ++flow_id;
    }
  }
  out << "\n]}\n";
}

const std::vector<std::string>& csv_export_files() {
  static const std::vector<std::string> names{"events.csv", "steps.csv",       "ranks.csv", "load.csv",
                                              "collectives.csv", "collective_times.csv", "peer_waits.csv",
                                              "session.csv", "memory.csv"};
  return names;
}

std::vector<std::string> export_csv(const SessionReader& session, const RunStats& stats, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw SessionError(fmt::format("{}: cannot create directory: {}", dir, ec.message()));
  std::vector<std::string> written;
  auto open = [&](const char* name) {
    const std::string path = (std::filesystem::path(dir) / name).string();
    std::ofstream f(path);
    if (!f) throw SessionError(fmt::format("{}: cannot write: {}", path, std::strerror(errno)));
    written.push_back(path);
    return f;
  };
  auto csv = [](const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
  };
  {
    auto f = open("events.csv");
    f << "rank,lane,category,name,step,start_ns,end_ns,dur_ns,bytes,sequence\n";
    std::map<std::pair<int32_t, int32_t>, std::string> lane_names;
    for (const auto& l : session.lanes()) lane_names[{l.rank, l.lane}] = l.name;
    for_each_lane_ops(session, [&](std::vector<OpRecord>& lane) {
      const std::string lane_name = csv(lane_names[{lane.front().rank, lane.front().lane}]);
      for (const auto& o : lane)
        f << fmt::format("{},{},{},{},{},{},{},{},{},{}\n", o.rank, lane_name, to_string(o.category),
                         csv(session.name(o.name_id)), o.step, o.start_ns, o.end_ns, o.end_ns - o.start_ns, o.bytes,
                         o.correlation);
    });
  }
  std::string cat_header;
  for (int c = 0; c < kNumCategories; ++c) cat_header += fmt::format(",cat_{}_ns", to_string(static_cast<OpCategory>(c)));
  {
    auto f = open("steps.csv");
    std::map<int64_t, double> loss;
    for (const auto& s : session.steps()) loss[s.step] = s.loss;
    f << "step,rank,loss,window_ns,compute_ns,comm_ns,overlap_ns,exposed_comm_ns,idle_ns" << cat_header << "\n";
    for (const auto& t : stats.per_step)
      f << fmt::format("{},{},{},{},{},{},{},{},{},{}\n", t.step, t.rank, loss[t.step], t.window_ns, t.compute_ns,
                       t.comm_ns, t.overlap_ns, t.exposed_comm_ns, t.idle_ns, fmt::join(t.by_category_ns, ","));
  }
  {
    auto f = open("ranks.csv");
    f << "rank,compute_ns,comm_ns,overlap_ns,exposed_comm_ns,idle_ns,overlap_pct,ids_looked_up,lookup_ns,bytes_sent,"
         "bytes_received" << cat_header << "\n";
    for (const auto& r : stats.ranks)
      f << fmt::format("{},{},{},{},{},{},{:.3f},{},{},{},{},{}\n", r.rank, r.compute_ns, r.comm_ns, r.overlap_ns,
                       r.exposed_comm_ns, r.idle_ns, r.overlap_pct, r.ids_looked_up, r.lookup_ns, r.bytes_sent,
                       r.bytes_received, fmt::join(r.by_category_ns, ","));
  }
  {
    auto f = open("load.csv");
    f << "step,rank,table_index,shard,ids,unique_ids,bytes_in,bytes_out,lookup_ns\n";
    for (const auto& c : session.load())
      f << fmt::format("{},{},{},{},{},{},{},{},{}\n", c.step, c.rank, c.table, c.shard, c.ids, c.unique_ids, c.bytes_in,
                       c.bytes_out, c.lookup_ns);
  }
  {
    auto f = open("collectives.csv");
    f << "rank,op,name,group,sequence,dtype,step,start_ns,end_ns,bytes_sent,bytes_received,peers,send_elements,"
         "recv_elements\n";
    for (const auto& c : session.collectives())
      f << fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", c.rank, c.op, csv(c.name), c.group, c.sequence,
                       c.dtype, c.step, c.start_ns, c.end_ns, c.bytes_sent, c.bytes_received,
                       csv(fmt::format("{}", fmt::join(c.peers, " "))), csv(fmt::format("{}", fmt::join(c.send_elements, " "))),
                       csv(fmt::format("{}", fmt::join(c.recv_elements, " "))));
  }
  {
    // the per-collective table `stats` prints (RunStats::collectives), summed over the ranks and
    // the counted steps: also for a trace whose collectives have no record (a Gloo trace's gloo:*
    // calls: collectives.csv holds none of them); bytes empty where unknown
    const bool unknown = collective_bytes_unknown(session);
    const auto bytes = [&](int64_t b) { return unknown && b == 0 ? std::string() : std::to_string(b); };
    auto f = open("collective_times.csv");
    f << "name,counted_steps,count,bytes_sent,bytes_received,time_ns,exposed_ns,wait_ns\n";
    for (const auto& c : stats.collectives) {
      f << fmt::format("{},{},{},{},{},{},{},{}\n", csv(session.name(c.name_id)), stats.counted_steps(), c.count,
                       bytes(c.bytes_sent), bytes(c.bytes_received), c.time_ns, c.exposed_ns, c.wait_ns);
      if (c.check_count > 0)  // its split checks, as stats' NAME/split_check line (time in NAME's op)
        f << fmt::format("{},{},{},{},{},,,\n", csv(session.name(c.name_id) + "/split_check"), stats.counted_steps(),
                         c.check_count, c.check_bytes_sent, c.check_bytes_received);
    }
  }
  {
    // the waiting for peers, per rank, `stats` prints under the collectives (RunStats::peer_waits,
    // analysis/stragglers.h) - its sums over the counted steps (a whole trace: the trace), the
    // straggler marked 1; no row where no collective ran on two ranks or more (stats says nothing)
    auto f = open("peer_waits.csv");
    f << "rank,counted_steps,collectives,last_arrivals,waited_ns,caused_wait_ns,straggler\n";
    const auto straggler_rank = straggler(stats.peer_waits);
    const int64_t steps = stats.whole_trace ? 1 : stats.counted_steps();
    if (!straggler_text(stats.peer_waits, std::max<int64_t>(1, steps)).empty())
      for (const auto& r : stats.peer_waits)
        f << fmt::format("{},{},{},{},{},{},{}\n", r.rank, steps, r.collectives, r.last_arrivals, r.waited_ns,
                         r.caused_wait_ns, straggler_rank && straggler_rank->rank == r.rank ? 1 : 0);
  }
  {
    // what the files describe: a measured, simulated or imported session (tester33 D9: a
    // simulated session's CSVs said nothing of it)
    auto f = open("session.csv");
    f << "key,value\n";
    for (const char* key : {meta::kWorkloadName, meta::kBackend, meta::kWorldSize, meta::kEnded})
      f << key << "," << csv(session.meta(key, "")) << "\n";
    for (const char* flag : {meta::kSimulated, meta::kImported}) f << flag << "," << session.meta(flag, "0") << "\n";
  }
  if (const auto timeline = session.memory_timeline(); !timeline.empty()) {
    // an imported memory snapshot: the allocator's counters after every trace entry, with the
    // entry's action (memory_events of the rank, in order)
    std::map<int32_t, std::vector<std::string>> actions;
    for (auto& e : session.memory_events()) actions[e.rank].push_back(std::move(e.action));
    auto f = open("memory.csv");
    f << "rank,entry,action,time_ns,allocated_bytes,reserved_bytes,active_bytes,largest_free_block_bytes,"
         "external_fragmentation,memviz_fragmentation\n";
    for (const auto& p : timeline) {
      const auto& a = actions[p.rank];
      f << fmt::format("{},{},{},{},{},{},{},{},{:.6f},{:.6f}\n", p.rank, p.entry,
                       p.entry >= 0 && static_cast<size_t>(p.entry) < a.size() ? csv(a[static_cast<size_t>(p.entry)]) : "",
                       p.time_ns, p.allocated, p.reserved, p.active, p.largest_free_block, p.external_fragmentation,
                       p.memviz_fragmentation);
    }
  }
  return written;
}

}  // namespace embedscope::sessions

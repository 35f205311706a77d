#include "importers/kineto_json/rank_processes.h"

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include <fmt/format.h>

namespace embedscope::sessions::importers::kineto {

int32_t rank_of_process_name(const std::string& name) {
  static const std::string kRank = "rank ";
  if (name.compare(0, kRank.size(), kRank) != 0) return -1;
  size_t i = kRank.size(), digits = 0;
  int64_t n = 0;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9' && digits < 10) n = n * 10 + (name[i++] - '0'), ++digits;
  if (digits == 0 || n > INT32_MAX) return -1;
  const std::string rest = name.substr(i);
  return rest.empty() || rest == " (simulated)" ? static_cast<int32_t>(n) : -1;
}

std::vector<RankTrace> split_rank_processes(RankTrace&& tr, ImportProblems& problems) {
  std::vector<RankTrace> one;
  if (tr.rank_known || tr.lanes.empty()) {
    one.push_back(std::move(tr));
    return one;
  }
  // each lane's rank from its process's name; one lane of an unnamed process: not an export
  std::map<std::string, int32_t> rank_of_pid;
  std::set<int32_t> ranks;
  for (const auto& d : tr.lanes) {
    if (rank_of_pid.count(d.pid)) continue;
    auto it = tr.process_names.find(d.pid);
    const int32_t r = it == tr.process_names.end() ? -1 : rank_of_process_name(it->second);
    if (r < 0 || !ranks.insert(r).second) {
      one.push_back(std::move(tr));
      return one;
    }
    rank_of_pid[d.pid] = r;
  }
  std::vector<size_t> events_on(tr.lanes.size(), 0), steps_on(tr.lanes.size(), 0);
  for (const auto& e : tr.events) ++events_on[e.lane];
  for (const auto& s : tr.steps) ++steps_on[s.lane];
  std::map<int32_t, RankTrace> parts;
  std::vector<uint32_t> new_lane(tr.lanes.size(), UINT32_MAX);
  for (const int32_t r : ranks) {
    RankTrace& p = parts[r];
    p.file = tr.file;
    p.file_bytes = tr.file_bytes;
    p.text_bytes = tr.text_bytes;
    p.sources = tr.sources;
    p.backend = tr.backend;
    p.rank = r;
    p.rank_known = true;
    p.categories_from_cat = true;
    p.world_size = tr.world_size;
    p.producer = tr.producer.empty() ? std::string("Chrome trace with processes named 'rank N'") : tr.producer;
    p.base_time_ns = tr.base_time_ns;
    p.devices = tr.devices;
    p.device_memory = tr.device_memory;
    p.thread_names = tr.thread_names;
    p.process_names = tr.process_names;
    p.annotation_names = tr.annotation_names;
    p.exported_run_state = tr.exported_run_state;
    p.exported_run = tr.exported_run;
  }
  // each rank's GPU as the export named it (process_labels), and its stream lanes' names
  for (const auto& [pid, r] : rank_of_pid)
    if (auto it = tr.process_labels.find(pid); it != tr.process_labels.end()) {
      parts[r].device_label = it->second.first;
      parts[r].device_label_memory = it->second.second;
    }
  // A collective record's span drawn inside its comm kernel (on the GPU stream's tid) is parsed
  // onto a thread of that tid: a lane that holds only such spans joins the stream lane drawn there
  // (the spans are records, not ops: trace_builder.cpp), or the session would gain an empty lane.
  std::vector<size_t> records_on(tr.lanes.size(), 0);
  for (const auto& e : tr.events)
    if (e.comm_param >= 0 && !tr.comm_params[static_cast<size_t>(e.comm_param)].engine_name.empty()) ++records_on[e.lane];
  std::map<std::pair<std::string, std::string>, uint32_t> stream_on_track;  // (pid, tid) -> stream lane
  for (uint32_t i = 0; i < tr.lanes.size(); ++i)
    if (tr.lanes[i].kind == "stream" && !tr.lanes[i].track_tid.empty())
      stream_on_track.try_emplace({tr.lanes[i].pid, tr.lanes[i].track_tid}, i);
  std::vector<uint32_t> joins(tr.lanes.size(), UINT32_MAX);
  for (uint32_t i = 0; i < tr.lanes.size(); ++i)
    if (auto it = stream_on_track.find({tr.lanes[i].pid, tr.lanes[i].tid});
        tr.lanes[i].kind == "thread" && events_on[i] > 0 && records_on[i] == events_on[i] && steps_on[i] == 0 &&
        it != stream_on_track.end())
      joins[i] = it->second;
  for (uint32_t i = 0; i < tr.lanes.size(); ++i) {
    if (events_on[i] == 0 && steps_on[i] > 0) continue;  // the step row: its spans are the steps
    if (joins[i] != UINT32_MAX) continue;
    RankTrace& p = parts[rank_of_pid[tr.lanes[i].pid]];
    new_lane[i] = static_cast<uint32_t>(p.lanes.size());
    const auto& d = tr.lanes[i];
    p.lane_index[d.kind + '\x1f' + d.pid + '\x1f' + d.tid] = new_lane[i];
    p.lanes.push_back(d);
    // the lane's name in the export (the session's: "thread 1 (pid 1)", "stream 7 (cuda:0 A100)")
    const std::string& track = d.kind == "stream" ? d.track_tid : d.tid;
    if (d.kind != "gpu_annotation" && !track.empty())
      if (auto it = tr.thread_names.find(d.pid + "/" + track); it != tr.thread_names.end() && !it->second.empty())
        p.lanes.back().label = it->second;
  }
  for (uint32_t i = 0; i < tr.lanes.size(); ++i)
    if (joins[i] != UINT32_MAX) new_lane[i] = new_lane[joins[i]];
  for (auto& e : tr.events) {
    RankTrace& p = parts[rank_of_pid[tr.lanes[e.lane].pid]];
    e.lane = new_lane[e.lane];
    if (e.comm_param >= 0) {
      p.comm_params.push_back(std::move(tr.comm_params[static_cast<size_t>(e.comm_param)]));
      e.comm_param = static_cast<int32_t>(p.comm_params.size() - 1);
    }
    p.events.push_back(e);
  }
  for (auto s : tr.steps) {
    RankTrace& p = parts[rank_of_pid[tr.lanes[s.lane].pid]];
    s.lane = new_lane[s.lane] == UINT32_MAX ? 0 : new_lane[s.lane];
    p.steps.push_back(s);
  }
  std::string list;
  for (const int32_t r : ranks) list += (list.empty() ? "" : ", ") + std::to_string(r);
  problems.add("ranks_from_process_names", Severity::info, {tr.file, -1},
               fmt::format("{} has no distributedInfo.rank and {} process{} named 'rank N' (as `embedscope export "
                           "--format chrome` writes them): imported as rank{} {}",
                           tr.file, ranks.size(), ranks.size() == 1 ? "" : "es", ranks.size() == 1 ? "" : "s", list));
  if (!tr.streams_as_threads.empty())  // not carried: an Embedscope run's streams
    problems.add("streams_as_threads", Severity::info, {tr.file, -1},
                 fmt::format("{} has {} GPU stream lane(s) of an Embedscope run written as threads (first: {}): they "
                             "come back as host threads, so overlap and exposed communication are thread level and "
                             "there is no GPU kernels block; `embedscope export --format kineto` carries them as "
                             "streams",
                             tr.file, tr.streams_as_threads.size(), tr.streams_as_threads.front()),
                 static_cast<int64_t>(tr.streams_as_threads.size()));
  if (tr.sync_on_thread)  // not carried: a cuda run's sync lane (kind sync) comes back as a thread
    problems.add("sync_lane_as_thread", Severity::info, {tr.file, -1},
                 fmt::format("{} has {} cuda_sync event(s) without args.stream (a cuda run's synchronization lane, "
                             "as `embedscope export --format chrome` writes it): kept on a host thread lane, not a "
                             "GPU stream; waits on no stream count in no GPU figure, as in the run",
                             tr.file, tr.sync_on_thread),
                 tr.sync_on_thread);
  std::vector<RankTrace> out;
  for (auto& [r, p] : parts) out.push_back(std::move(p));
  return out;
}

}  // namespace embedscope::sessions::importers::kineto

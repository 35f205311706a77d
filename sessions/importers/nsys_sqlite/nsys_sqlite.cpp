#include "embedscope/sessions/importers/nsys_sqlite/nsys_sqlite.h"

#include <sys/stat.h>

#include <cstdint>
#include <algorithm>
#include <limits>
#include <set>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embedscope/sessions/importers/common/import_problems.h"
#include "embedscope/sessions/importers/common/kernel_classes.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "importers/common/lane_checks.h"
#include "importers/nsys_sqlite/capture.h"

namespace embedscope::sessions::importers {

namespace {
constexpr int kMaxLanes = 256;  // ops.lane_key = rank * 256 + lane
const std::string kSqliteMagic("SQLite format 3\0", 16);

bool is_export(const nsys::Database& db) {
  if (!db.has_column("META_DATA_EXPORT", "name") || !db.has_column("META_DATA_EXPORT", "value")) return false;
  return db.scalar("SELECT count(*) FROM META_DATA_EXPORT WHERE name = 'EXPORT_SCHEMA_VERSION'") > 0;
}

/// One rank: the events of one process of one capture.
struct RankBuild {
  int32_t rank = 0;
  const nsys::Capture* capture = nullptr;
  int64_t process = -1;
  std::vector<const nsys::Event*> events;
  std::vector<nsys::Capture::Step> steps;
};

std::string process_label(const nsys::Capture& c, int64_t process) {
  if (process < 0) return "unknown process";
  auto it = c.process_names.find(process);
  return it != c.process_names.end() && !it->second.empty() ? fmt::format("pid {} {}", nsys::pid_of(process), it->second)
                                                           : fmt::format("pid {}", nsys::pid_of(process));
}

std::string device_label(const nsys::Capture& c, int64_t device) {
  auto it = c.gpus.find(device);
  return it != c.gpus.end() && !it->second.name.empty() ? fmt::format("cuda:{} {}", device, it->second.name)
                                                       : fmt::format("cuda:{}", device);
}

/// Lanes of a rank: its threads by tid (runtime and driver calls), under each thread its NVTX
/// push/pop ranges on a lane of their own (kind "annotation", named "thread T (name) NVTX", as
/// Nsight Systems draws an NVTX row under the thread: tester42 F24, a 392.9 ms range hid the
/// runtime calls it enclosed), the NVTX start/end ranges (kind "annotation"), its streams by
/// (device, stream); returns each event's lane number.
std::vector<int32_t> write_lanes(const RankBuild& rb, SessionWriter& w, ImportProblems& problems) {
  enum Kind { thread = 0, start_end = 1, stream = 2 };
  // (kind, a, b, nvtx) -> lane; nvtx 1: the NVTX push/pop ranges of thread (a, b), right after it
  std::map<std::tuple<int, int64_t, int64_t, int>, int32_t> lanes;
  auto key_of = [](const nsys::Event& e) {
    if (nsys::on_gpu(e.kind)) return std::make_tuple(int{stream}, e.device, e.stream, 0);
    if (e.kind == nsys::EventKind::nvtx_start_end) return std::make_tuple(int{start_end}, int64_t{0}, int64_t{0}, 0);
    return std::make_tuple(int{thread}, e.thread < 0 ? int64_t{-1} : nsys::tid_of(e.thread), e.thread,
                           e.kind == nsys::EventKind::nvtx_push_pop ? 1 : 0);
  };
  for (const auto* e : rb.events) lanes.emplace(key_of(*e), 0);
  const nsys::Capture& c = *rb.capture;
  int32_t no = 0;
  for (auto& [k, lane] : lanes) {
    const auto [kind, a, b, nvtx] = k;
    lane = std::min(no, kMaxLanes - 1);
    if (no < kMaxLanes - 1 || (no == kMaxLanes - 1 && lanes.size() == kMaxLanes)) {
      std::string name;
      if (kind == stream) name = fmt::format("stream {} ({})", b, device_label(c, a));
      else if (kind == start_end) name = fmt::format("NVTX start/end ranges ({})", process_label(c, rb.process));
      else {
        auto t = c.thread_names.find(b);
        name = b < 0 ? std::string("unknown thread")
                     : fmt::format("thread {} ({})", a, t != c.thread_names.end() ? t->second : process_label(c, rb.process));
        if (nvtx) name += " NVTX";
      }
      w.add_lane({rb.rank, lane, name, kind == stream ? "stream" : kind == start_end || nvtx ? "annotation" : "thread"});
    } else if (no == kMaxLanes - 1) {
      w.add_lane({rb.rank, lane, "more lanes (merged)", "thread"});
      problems.add("too_many_lanes", Severity::error, {c.file, -1},
                   fmt::format("rank {} has {} threads, NVTX rows and streams; a session holds 256 lanes per rank, "
                               "lanes from the 256th on are drawn on one merged lane", rb.rank, lanes.size()));
    }
    ++no;
  }
  std::vector<int32_t> out;
  out.reserve(rb.events.size());
  for (const auto* e : rb.events) out.push_back(lanes.at(key_of(*e)));
  return out;
}

const char* count_key(nsys::EventKind k) {
  switch (k) {
    case nsys::EventKind::kernel: return "kernels";
    case nsys::EventKind::memcpy: return "memcpy";
    case nsys::EventKind::memset: return "memset";
    case nsys::EventKind::sync: return "synchronization";
    case nsys::EventKind::runtime: return "runtime_calls";
    default: return "nvtx_ranges";
  }
}

ImportSummary import_captures(std::vector<nsys::Capture>& caps, const Interner& names, ImportProblems& problems,
                              SessionWriter& w, const ImportOptions& opt) {
  ImportSummary summary;
  summary.format = "nsys_sqlite";
  // --- ranks: the processes of each capture, in file order then by process id
  std::vector<RankBuild> ranks;
  // a capture that is another's copy (same host, session start in Unix ns, processes and events: one report
  // exported or copied twice) is not a second process: left out and said, as Kineto's
  // duplicate_rank is (tester37 #20: two copies imported as ranks 0 and 1)
  auto signature = [](const nsys::Capture& c) {
    std::set<int64_t> processes;
    for (const auto& e : c.events) processes.insert(e.process);
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (const auto& e : c.events) lo = std::min(lo, e.start), hi = std::max(hi, e.end);
    return std::make_tuple(c.host, c.epoch_ns, processes, c.events.size(), lo, hi);
  };
  std::vector<bool> copy_of_earlier(caps.size(), false);
  for (size_t i = 1; i < caps.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (!copy_of_earlier[j] && caps[i].epoch_ns >= 0 && !caps[i].events.empty() && signature(caps[i]) == signature(caps[j])) {
        copy_of_earlier[i] = true;
        problems.add("duplicate_capture", Severity::data_loss, {caps[i].file, -1},
                     fmt::format("{} and {} hold the same capture (host, session start, processes and events); {} was "
                                 "not imported",
                                 caps[j].file, caps[i].file, caps[i].file));
        break;
      }
  for (size_t ci = 0; ci < caps.size(); ++ci) {
    if (copy_of_earlier[ci]) continue;
    const auto& c = caps[ci];
    std::map<int64_t, RankBuild> by_process;
    for (const auto& e : c.events) by_process[e.process].events.push_back(&e);
    for (const auto& s : c.steps) by_process[s.process].steps.push_back(s);
    for (auto& [p, rb] : by_process) {
      rb.rank = static_cast<int32_t>(ranks.size());
      rb.capture = &c;
      rb.process = p;
      ranks.push_back(std::move(rb));
    }
  }
  // --- one clock: Unix ns (utcEpochNs + export ns), session time 0 at the earliest event
  auto abs_ns = [](const nsys::Capture& c, int64_t t) { return (c.epoch_ns >= 0 ? c.epoch_ns : 0) + t; };
  int64_t origin = std::numeric_limits<int64_t>::max();
  for (const auto& rb : ranks) {
    for (const auto* e : rb.events)  // the valid events' (those that did not end are left out)
      if (!e->unfinished) origin = std::min(origin, abs_ns(*rb.capture, e->start));
    for (const auto& s : rb.steps) origin = std::min(origin, abs_ns(*rb.capture, s.start));
  }
  if (origin == std::numeric_limits<int64_t>::max()) origin = caps.empty() || caps.front().epoch_ns < 0 ? 0 : caps.front().epoch_ns;
  summary.origin_ns = origin;
  int64_t t_lo = std::numeric_limits<int64_t>::max(), t_hi = std::numeric_limits<int64_t>::min();
  std::set<std::string> gpu_names;
  int64_t max_steps = 0;
  for (auto& rb : ranks) {
    const nsys::Capture& c = *rb.capture;
    summary.ranks.push_back(rb.rank);
    if (opt.progress) opt.progress(fmt::format("writing rank {} ({}, {} events)", rb.rank, process_label(c, rb.process), rb.events.size()));
    const std::vector<int32_t> lane_no = write_lanes(rb, w, problems);
    // --- the rank's devices
    std::set<int64_t> devices;
    for (const auto* e : rb.events)
      if (nsys::on_gpu(e->kind)) devices.insert(e->device);
    RankInfo ri;
    ri.rank = rb.rank;
    ri.host = c.host;
    for (int64_t d : devices) {
      auto g = c.gpus.find(d);
      const std::string n = g != c.gpus.end() && !g->second.name.empty() ? g->second.name : "GPU";
      ri.device += fmt::format("{}{} (cuda:{})", ri.device.empty() ? "" : ", ", n, d);
      if (g != c.gpus.end() && ri.memory_capacity_bytes == 0) ri.memory_capacity_bytes = g->second.memory_bytes;
      gpu_names.insert(n);
    }
    if (ri.device.empty()) ri.device = fmt::format("{} (imported, no GPU activity)", process_label(c, rb.process));
    w.add_rank(ri);
    if (devices.size() > 1)
      problems.add("process_with_several_devices", Severity::info, {c.file, -1},
                   fmt::format("rank {} ({}) ran on {} devices: one rank per process, the streams of every device are "
                               "its lanes", rb.rank, process_label(c, rb.process), devices.size()));
    // --- steps: NVTX ProfilerStep#N ranges
    std::sort(rb.steps.begin(), rb.steps.end(), [](const auto& a, const auto& b) { return a.start < b.start; });
    for (const auto& s : rb.steps) {
      StepMetric m;
      m.step = s.number;
      m.rank = rb.rank;
      m.start_ns = abs_ns(c, s.start) - origin;
      m.end_ns = abs_ns(c, s.end) - origin;
      w.add_step(m);
    }
    summary.events["steps"] += static_cast<int64_t>(rb.steps.size());
    max_steps = std::max<int64_t>(max_steps, static_cast<int64_t>(rb.steps.size()));
    auto step_of = [&](int64_t t) -> int64_t {
      auto it = std::upper_bound(rb.steps.begin(), rb.steps.end(), t, [](int64_t v, const auto& s) { return v < s.start; });
      if (it == rb.steps.begin()) return -1;
      --it;
      return t < it->end ? it->number : -1;
    };
    std::unordered_map<uint64_t, const nsys::Event*> launch;
    for (const auto* e : rb.events)
      if (e->kind == nsys::EventKind::runtime && e->correlation) launch.try_emplace(e->correlation, e);
    // --- ops; a collective record per NCCL kernel, from its name (the export has no arguments)
    std::vector<OpEvent> ops;
    ops.reserve(rb.events.size());
    std::map<std::string, uint64_t> next_seq;  // by group: the kernel's device and stream
    int64_t collectives = 0;
    for (size_t i = 0; i < rb.events.size(); ++i) {
      const nsys::Event& e = *rb.events[i];
      OpEvent o;
      o.rank = rb.rank;
      o.lane = static_cast<Lane>(lane_no[i]);
      const std::string& nm = names.text(e.name);
      o.name = nm.c_str();
      o.start_ns = abs_ns(c, e.start) - origin;
      o.end_ns = abs_ns(c, e.end) - origin;
      o.correlation = e.correlation;
      if (nsys::on_gpu(e.kind)) {
        const bool copy = e.kind == nsys::EventKind::memcpy || e.kind == nsys::EventKind::memset;
        o.category = gpu_op_category(nm, copy);
        if (copy) o.bytes = e.bytes;
        auto l = e.correlation ? launch.find(e.correlation) : launch.end();
        o.step = l != launch.end() ? step_of(l->second->start) : -1;
        if (e.kind == nsys::EventKind::kernel && !e.unfinished) {
          const NcclKernel nk = nccl_kernel(nm);
          if (!nk.op.empty()) {
            CollectiveRecord cr;
            cr.rank = rb.rank;
            cr.op = nk.op;
            cr.name = nm.substr(0, nm.find('('));
            cr.group = fmt::format("cuda:{} stream {}", e.device, e.stream);
            cr.sequence = next_seq[cr.group]++;
            cr.dtype = nk.dtype;
            cr.step = o.step;
            cr.start_ns = o.start_ns;
            cr.end_ns = o.end_ns;
            w.add_collective(std::move(cr));
            ++collectives;
          }
        }
      } else {
        o.category = host_op_category(nm);
        o.step = step_of(e.start);
      }
      ops.push_back(o);
      if (e.unfinished) {  // counted apart from its kind, out of the time range
        ++summary.events["did_not_end"];
        continue;
      }
      ++summary.events[count_key(e.kind)];
      t_lo = std::min(t_lo, o.start_ns);
      t_hi = std::max(t_hi, o.end_ns);
    }
    if (collectives > 0) {
      summary.events["collectives"] += collectives;
      problems.add("collective_args_not_captured", Severity::info, {c.file, -1},
                   fmt::format("rank {}: {} collectives taken from NCCL kernel names (operation, element type, stream "
                               "as the group); their bytes and peers are not in an Nsight export", rb.rank, collectives),
                   collectives);
    }
    sort_and_check_overlaps(ops, problems, c.file);
    for (size_t i = 0; i < ops.size(); i += 100000) {
      std::vector<OpEvent> batch(ops.begin() + static_cast<std::ptrdiff_t>(i),
                                 ops.begin() + static_cast<std::ptrdiff_t>(std::min(ops.size(), i + 100000)));
      w.add_ops(batch);
    }
  }
  summary.start_ns = t_lo == std::numeric_limits<int64_t>::max() ? 0 : t_lo;
  summary.end_ns = t_hi == std::numeric_limits<int64_t>::min() ? 0 : t_hi;
  // --- metadata
  nlohmann::json sources = nlohmann::json::array();
  std::set<std::string> producers;
  for (size_t ci = 0; ci < caps.size(); ++ci) {
    const auto& c = caps[ci];
    std::vector<int32_t> rs;
    for (const auto& rb : ranks)
      if (rb.capture == &c) rs.push_back(rb.rank);
    sources.push_back({{"file", c.file}, {"bytes", c.file_bytes}, {"uncompressed_bytes", c.file_bytes}, {"ranks", rs}});
    if (copy_of_earlier[ci]) continue;  // read, not imported
    producers.insert(c.producer);
    summary.files.push_back(c.file);
  }
  std::string producer;
  for (const auto& p : producers) producer += (producer.empty() ? "" : " | ") + p;
  std::string gpus;
  for (const auto& g : gpu_names) gpus += (gpus.empty() ? "" : ", ") + g;
  w.set_metadata(meta::kImported, "1");
  w.set_metadata(meta::kImportFormat, "nsys_sqlite");
  w.set_metadata(meta::kImportProducer, producer);
  w.set_metadata(meta::kImportSources, sources.dump());
  w.set_metadata(meta::kImportAlign, opt.align);
  w.set_metadata(meta::kImportOriginNs, std::to_string(origin));
  w.set_metadata(meta::kSimulated, "0");
  w.set_metadata(meta::kBackend, "imported");
  w.set_metadata(meta::kWorldSize, std::to_string(ranks.size()));
  w.set_metadata(meta::kSteps, std::to_string(max_steps));
  w.set_metadata(meta::kGpuNames, gpus);
  if (!caps.empty() && !caps.front().host.empty()) w.set_metadata(meta::kHost, caps.front().host);
  const bool anchored = std::all_of(caps.begin(), caps.end(), [](const auto& c) { return c.epoch_ns >= 0; });
  if (anchored) {
    w.set_metadata(meta::kClock, fmt::format("Unix ns (Nsight TARGET_INFO_SESSION_START_TIME.utcEpochNs + the export's "
                                             "ns), ns since {}", origin));
    w.set_metadata(meta::kWallAnchorUnixNs, std::to_string(origin));
  } else {
    w.set_metadata(meta::kClock, fmt::format("the export's own ns, ns since its {} ns", origin));
  }
  summary.problems = problems.records();
  w.add_import_stats(summary.problems);
  return summary;
}

void check_align(const ImportOptions& opt) {
  if (opt.align != "none")
    throw ImportError(fmt::format("--align {}: Nsight exports are imported with 'none' only (each file's absolute "
                                  "time, one global minimum)", opt.align));
}

// Captures with TARGET_INFO_SESSION_START_TIME are on Unix ns, those without on their own
// export ns: there is no common time between the two kinds (Nsight Systems' multi-report view
// lines reports up by that session start time; Perfetto needs a shared clock the same way), so
// an import of both is refused rather than drawn on one axis decades wide.
void check_one_clock(const std::vector<nsys::Capture>& caps) {
  const auto anchored = std::find_if(caps.begin(), caps.end(), [](const auto& c) { return c.epoch_ns >= 0; });
  const auto loose = std::find_if(caps.begin(), caps.end(), [](const auto& c) { return c.epoch_ns < 0; });
  if (anchored == caps.end() || loose == caps.end()) return;
  throw ImportError(fmt::format(
      "{}: has no session start time (TARGET_INFO_SESSION_START_TIME.utcEpochNs), so its times are its own ns since "
      "the capture began, while {} has one (Unix ns): the two cannot be put on one time axis; import them as separate "
      "sessions (or re-export the first with an Nsight Systems that writes TARGET_INFO_SESSION_START_TIME)",
      loose->file, anchored->file));
}

nsys::Capture read_one(const nsys::Database& db, Interner& names, ImportProblems& problems) {
  if (!is_export(db))
    throw ImportError(fmt::format("{}: an SQLite database without META_DATA_EXPORT.EXPORT_SCHEMA_VERSION: not an Nsight "
                                  "Systems export", db.name()));
  return nsys::read_capture(db, names, problems);
}
}  // namespace

bool probe_nsys_sqlite(const std::string& path, std::string_view head) {
  if (head.substr(0, kSqliteMagic.size()) != kSqliteMagic) return false;
  try {
    return is_export(nsys::Database::open_file(path));
  } catch (const std::exception&) {
    return false;
  }
}

std::string sqlite_file_damage(const std::string& path) {
  try {
    const nsys::Database db = nsys::Database::open_file(path);
    const int64_t bad = db.scalar("SELECT count(*) FROM pragma_quick_check WHERE quick_check <> 'ok'");
    return bad > 0 ? fmt::format("PRAGMA quick_check found {} problem(s)", bad) : std::string();
  } catch (const std::exception& e) {
    return e.what();
  }
}

ImportSummary import_nsys_sqlite(const std::vector<std::string>& files, SessionWriter& w, const ImportOptions& opt) {
  check_align(opt);
  Interner names;
  ImportProblems problems;
  std::vector<nsys::Capture> caps;
  for (size_t i = 0; i < files.size(); ++i) {
    if (opt.progress) opt.progress(fmt::format("reading {} ({}/{})", files[i], i + 1, files.size()));
    auto named = opt.source_names.find(files[i]);
    const nsys::Database db = nsys::Database::open_file(files[i], named != opt.source_names.end() ? named->second : "");
    caps.push_back(read_one(db, names, problems));
    struct stat sb {};
    if (stat(files[i].c_str(), &sb) == 0) caps.back().file_bytes = static_cast<int64_t>(sb.st_size);
    if (opt.progress) opt.progress(fmt::format("read {}: {} events", files[i], caps.back().events.size()));
  }
  check_one_clock(caps);
  return import_captures(caps, names, problems, w, opt);
}

ImportSummary import_nsys_sqlite_buffer(std::string_view bytes, const std::string& name, SessionWriter& w,
                                        const ImportOptions& opt) {
  check_align(opt);
  Interner names;
  ImportProblems problems;
  std::vector<nsys::Capture> caps;
  const nsys::Database db = nsys::Database::open_buffer(bytes, name);
  caps.push_back(read_one(db, names, problems));
  caps.back().file_bytes = static_cast<int64_t>(bytes.size());
  return import_captures(caps, names, problems, w, opt);
}

}  // namespace embedscope::sessions::importers

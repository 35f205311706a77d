#include "embedscope/sessions/importers/kineto_json/kineto_json.h"

#include <algorithm>
#include <limits>
#include <map>
#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embedscope/sessions/analysis/gpu_sharing.h"
#include "embedscope/sessions/importers/common/import_problems.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "importers/kineto_json/event_parser.h"
#include "importers/kineto_json/exported_run.h"
#include "importers/kineto_json/process_windows.h"
#include "importers/kineto_json/rank_processes.h"
#include "importers/kineto_json/trace_builder.h"

namespace embedscope::sessions::importers {

bool probe_kineto_json(std::string_view head) {
  size_t i = 0;
  if (head.substr(0, 3) == "\xEF\xBB\xBF") i = 3;
  while (i < head.size() && (head[i] == ' ' || head[i] == '\n' || head[i] == '\r' || head[i] == '\t')) ++i;
  if (i >= head.size()) return false;
  if (head[i] == '{') return head.find("\"traceEvents\"") != std::string_view::npos || head.find("\"ph\"") != std::string_view::npos ||
                             head.find("\"schemaVersion\"") != std::string_view::npos;
  if (head[i] == '[') {
    // torch's own export of a profile that recorded nothing is "[]" (testerB F9): a trace with no
    // events, as {"traceEvents": []}
    size_t j = i + 1;
    while (j < head.size() && (head[j] == ' ' || head[j] == '\n' || head[j] == '\r' || head[j] == '\t')) ++j;
    if (j < head.size() && head[j] == ']') return head.find_first_not_of(" \n\r\t", j + 1) == std::string_view::npos;
    return head.find("\"ph\"") != std::string_view::npos;
  }
  return false;
}

namespace {
/// A rank's parsed events and collective args, once its records are built: their memory goes
/// back while the other ranks are built (steps, lanes and metadata stay).
void release_events(kineto::RankTrace& r) {
  std::vector<kineto::Event>().swap(r.events);
  std::vector<kineto::CommParams>().swap(r.comm_params);
}

/// testerB F5: ranks read from different files of which some count their ts from their own
/// profiler's start (process_windows.h has_clock_epoch) sit on clocks that nothing relates: with
/// --align none they are put on one axis only by where each trace starts. Says so (error
/// unrelated_clocks, naming those files) with what their collectives show of it, in place of
/// check_wall_clock_agreement's clock_disagreement (which blames a wall clock they do not have).
/// Returns whether it said so.
bool check_unrelated_clocks(const std::vector<kineto::RankTrace>& kept, const std::vector<bool>& epoch,
                            const std::vector<RankRecords>& clocks, ImportProblems& problems) {
  std::set<std::string> files;
  std::string without;
  size_t n_without = 0;
  for (size_t i = 0; i < kept.size(); ++i) {
    files.insert(kept[i].file);
    if (epoch[i]) continue;
    without += (without.empty() ? "" : ", ") + fmt::format("rank {} ({})", kept[i].rank, kept[i].file);
    ++n_without;
  }
  if (files.size() < 2 || without.empty()) return false;
  const ClockAlignment a = align_by_collectives(clocks);
  std::string seen;
  for (const auto& [r, off] : a.offset_ns) {
    auto m = a.matches.find(r);
    if (r == a.reference_rank || m == a.matches.end()) continue;
    seen += fmt::format("{}rank {} {:+.3f} ms from rank {} (median of {} collective end(s))", seen.empty() ? "" : ", ", r,
                        static_cast<double>(off) / 1e6, a.reference_rank, m->second);
  }
  problems.add("unrelated_clocks", Severity::error, {kept.front().file, -1},
               fmt::format("{} {} from {} own profiler start (no baseTimeNanoseconds, no absolute ts): the ranks' "
                           "clocks are unrelated, and --align none puts them on one axis only by where each trace "
                           "starts{}; --align collectives puts them on one clock by their collectives{}",
                           without, n_without == 1 ? "counts its ts" : "count their ts", n_without == 1 ? "its" : "each one's",
                           seen.empty() ? std::string() : "; on that axis their matching collectives end apart: " + seen,
                           problems.count("collectives_by_order") ? " (matched by name and order: the n-th gloo:* call "
                                                                    "of each operation on each rank)"
                                                                  : ""));
  return true;
}
}  // namespace

namespace {
/// A trace of an NCCL job (distributedInfo backend nccl, an op named nccl*, or record_param_comms
/// spans in a trace that names no backend) that holds no GPU event (no kernel, memcpy, memset on a
/// stream) and was not cut short (the cut says so itself): info problem no_gpu_events naming the
/// files and the likely cause, the profiler run without its CUDA activity. Its figures are the
/// host threads' (thread-level overlap, no HTA kernel block), which nothing else says.
void say_no_gpu_events(const std::vector<kineto::RankTrace>& kept, const Interner& names, ImportProblems& problems) {
  std::vector<bool> nccl_name(names.size(), false), param_name(names.size(), false);
  for (uint32_t id = 0; id < names.size(); ++id) {
    const std::string& n = names.text(id);
    nccl_name[id] = n.compare(0, 4, "nccl") == 0 || n.find("ncclKernel") != std::string::npos ||
                    n.find("ProcessGroupNCCL") != std::string::npos;
    param_name[id] = n == "record_param_comms";
  }
  std::string files, why;
  int64_t count = 0;
  for (const auto& r : kept) {
    if (r.cut || r.events.empty() ||
        std::any_of(r.events.begin(), r.events.end(), [](const kineto::Event& e) { return kineto::on_stream(e.kind); }))
      continue;
    bool nccl_op = false, params = false;
    for (const auto& e : r.events) nccl_op = nccl_op || nccl_name[e.name], params = params || param_name[e.name];
    std::string reason = r.backend == "nccl" ? "distributedInfo.backend nccl"
                         : nccl_op           ? "NCCL ops"
                         : params && r.backend.empty() && !r.categories_from_cat ? "record_param_comms spans"
                                                                                  : "";
    if (reason.empty()) continue;
    if (count++ == 0) why = reason;
    if (count <= 4) files += fmt::format("{}{} (rank {})", files.empty() ? "" : ", ", r.file, r.rank);
  }
  if (count == 0) return;
  if (count > 4) files += fmt::format(" and {} more", count - 4);
  problems.add("no_gpu_events", Severity::info, {kept.front().file, -1},
               fmt::format("{}: {} but no GPU (kernel) events were recorded (no kernel, memcpy or memset on a CUDA "
                           "stream): overlap, communication and idle are host-thread level (the host spans, not the "
                           "GPU kernels) and there is no GPU kernels (HTA) block. Likely cause: the profiler ran "
                           "without its CUDA activity (torch.profiler.profile(activities=[ProfilerActivity.CPU, "
                           "ProfilerActivity.CUDA]) records both)",
                           files, why),
               count);
}
}  // namespace

ImportSummary import_kineto_json(const std::vector<std::string>& files, SessionWriter& w, const ImportOptions& opt) {
  if (opt.align != "none" && opt.align != "collectives")
    throw ImportError(fmt::format("--align {}: not a method (none: each rank as recorded, shifted by one global "
                                  "minimum; collectives: one offset per rank from the ends of matching collectives)",
                                  opt.align));
  ImportSummary summary;
  summary.format = "kineto_json";
  {  // one file named twice (or a file and its directory) would be two ranks of one trace
    std::map<std::string, std::string> seen;
    for (const auto& f : files) {
      std::error_code ec;
      const auto canon = std::filesystem::weakly_canonical(f, ec);
      auto [it, fresh] = seen.try_emplace(ec ? f : canon.string(), f);
      if (!fresh)
        throw ImportError(fmt::format("{}: given twice ({} and {}); each trace is one rank: name it once", f,
                                      it->second, f));
    }
  }
  ImportProblems problems;
  Interner names;
  std::vector<kineto::RankTrace> ranks;
  int64_t bytes_done = 0, disk_total = 0, disk_done = 0;
  std::vector<int64_t> disk(files.size(), 0);  // sizes on disk: the weights of the files' progress
  for (size_t i = 0; i < files.size(); ++i) {
    std::error_code ec;
    const auto n = std::filesystem::file_size(files[i], ec);
    disk[i] = ec ? 0 : static_cast<int64_t>(n);
    disk_total += disk[i];
  }
  for (size_t i = 0; i < files.size(); ++i) {
    check_cancelled(opt);
    if (opt.progress) opt.progress(fmt::format("reading {} ({}/{})", files[i], i + 1, files.size()));
    size_t file_events = 0;
    try {
      // an Embedscope export holds every rank as a process named "rank N" (tester42 F28)
      for (auto& part : kineto::split_rank_processes(kineto::parse_trace_file(files[i], names, problems), problems)) {
        file_events += part.events.size();
        ranks.push_back(std::move(part));
      }
    } catch (const std::runtime_error& e) {
      throw ImportError(e.what());
    }
    bytes_done += ranks.back().text_bytes;
    disk_done += disk[i];
    if (opt.fraction)
      opt.fraction(0.8 * (disk_total > 0 ? static_cast<double>(disk_done) / static_cast<double>(disk_total)
                                         : static_cast<double>(i + 1) / static_cast<double>(files.size())));
    if (opt.progress)
      opt.progress(fmt::format("read {}: {} events, {:.1f} MB of JSON so far", files[i], file_events,
                               static_cast<double>(bytes_done) / 1e6));
  }
  // the files of one process's successive profiling windows are one rank (testerB F2)
  kineto::join_process_windows(ranks, names, problems);
  // Ranks: distributedInfo.rank; a file without it takes the lowest free rank; a second file of
  // a rank is left out, naming both (found in a directory), or refused (both named one by one:
  // tester45 F12.11).
  std::map<int32_t, size_t> owner;
  std::vector<kineto::RankTrace> kept;
  for (size_t i = 0; i < ranks.size(); ++i)
    if (ranks[i].rank_known) {
      auto [it, fresh] = owner.try_emplace(ranks[i].rank, i);
      if (!fresh) {
        const std::string& first = ranks[it->second].file;
        if (first != ranks[i].file && opt.named_files.count(first) && opt.named_files.count(ranks[i].file))
          throw ImportError(fmt::format("{} and {} both claim rank {} (distributedInfo.rank): two traces of one rank "
                                        "(a re-run, or another job?) are not one session; import them apart, or "
                                        "name only the one to keep",
                                        first, ranks[i].file, ranks[i].rank));
        problems.add("duplicate_rank", Severity::data_loss, {ranks[i].file, -1},
                     fmt::format("{} and {} both claim rank {} (distributedInfo.rank); {} was not imported",
                                 ranks[it->second].file, ranks[i].file, ranks[i].rank, ranks[i].file));
        ranks[i].events.clear();
        ranks[i].steps.clear();
        ranks[i].rank = -1;
      }
    }
  for (auto& r : ranks) {
    if (r.rank_known) continue;
    int32_t free_rank = 0;
    while (owner.count(free_rank)) ++free_rank;
    owner[free_rank] = 0;
    r.rank = free_rank;
    if (!r.rank_bad)  // an invalid rank was said by bad_rank ("imported as the lowest free rank")
      problems.add("no_rank", Severity::info, {r.file, -1},
                   fmt::format("{} has no distributedInfo.rank: imported as rank {} (the lowest free rank)", r.file,
                               free_rank));
  }
  nlohmann::json sources = nlohmann::json::array();
  std::set<std::string> producers;
  int64_t world = 0, base_time = -1;
  for (auto& r : ranks) {
    for (const auto& f : r.sources)
      sources.push_back({{"file", f.file}, {"bytes", f.file_bytes}, {"uncompressed_bytes", f.text_bytes},
                         {"rank", r.rank}});
    if (r.rank < 0) continue;
    // a trace without schemaVersion whose distributedInfo names a backend or NCCL version (an
    // Embedscope Chrome export's): its producer line without the leading "; "
    if (!r.producer.empty()) producers.insert(r.producer.rfind("; ", 0) == 0 ? r.producer.substr(2) : r.producer);
    if (r.world_size > 0 && r.rank >= r.world_size)  // the session's world grows to hold it
      problems.add("rank_outside_world", Severity::error, {r.file, -1},
                   fmt::format("{}: distributedInfo.rank {} is not below its world_size {}: the session's world is "
                               "made large enough to hold it",
                               r.file, r.rank, r.world_size));
    world = std::max(world, r.world_size);
    if (r.base_time_ns >= 0 && base_time < 0) base_time = r.base_time_ns;
    // the files imported: a duplicate rank's is not (tester37 #15); a file of several ranks once
    for (const auto& f : r.sources)
      if (std::find(summary.files.begin(), summary.files.end(), f.file) == summary.files.end()) summary.files.push_back(f.file);
    kineto::check_steps(r, problems);
    kept.push_back(std::move(r));
  }
  std::sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  say_no_gpu_events(kept, names, problems);
  int64_t origin = kineto::session_origin_ns(kept);
  std::vector<bool> epoch;  // each rank's clock has an epoch (read before its events are released)
  std::string backend;      // the process groups' backend (metadata import_backend)
  {
    std::vector<bool> gloo_name(names.size(), false);
    for (uint32_t id = 0; id < names.size(); ++id) gloo_name[id] = names.text(id).compare(0, 5, "gloo:") == 0;
    bool gloo_calls = false;
    for (const auto& r : kept) {
      epoch.push_back(kineto::has_clock_epoch(r));
      if (backend.empty()) backend = r.backend;
      for (const auto& e : r.events) gloo_calls = gloo_calls || gloo_name[e.name];
    }
    if (backend.empty() && gloo_calls) backend = "gloo";
  }
  // Ranks of different files on one device ran on different hosts (a trace names no host; HTA
  // assumes a GPU per rank, NCCL refuses two ranks of a communicator on one GPU): their devices
  // say whose host, or `stats` would read "2 ranks sharing 1 GPU". The rule `merge` applies too
  // (gpu_sharing.h separate_gpus_of_files); build_rank names a rank's device as here.
  std::map<int32_t, std::string> device_of_rank;  // the ranks whose device the rule renamed
  {
    std::vector<RankDeviceSource> devices;
    for (const auto& r : kept) {
      std::string dev = r.device_label;
      if (const kineto::RankDevice d = kineto::rank_device(r); dev.empty() && d.id >= 0)
        dev = fmt::format("{} (cuda:{})", d.name, d.id);
      devices.push_back({r.rank, r.file, "", dev});
    }
    const std::vector<RankDeviceSource> before = devices;
    separate_gpus_of_files(devices);
    for (size_t i = 0; i < devices.size(); ++i)
      if (devices[i].device != before[i].device) device_of_rank[devices[i].rank] = devices[i].device;
  }
  auto build = [&](const kineto::RankTrace& r) {
    RankRecords rec = kineto::build_rank(r, names, origin, problems, summary);
    if (auto it = device_of_rank.find(r.rank); it != device_of_rank.end()) rec.info.device = it->second;
    return rec;
  };
  check_cancelled(opt);
  if (opt.progress) opt.progress(fmt::format("writing {} rank(s)", kept.size()));
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
  if (opt.align == "collectives") {
    std::vector<RankRecords> recs;
    for (auto& r : kept) {
      check_cancelled(opt);
      recs.push_back(build(r));
      release_events(r);
    }
    const ClockAlignment a = align_ranks(recs, origin, problems);
    // ranks that share no collective keep their clocks: traces of different jobs are as
    // disjoint after the alignment as before it (tester45 F13)
    std::vector<RankSpan> spans;
    for (const auto& rec : recs) spans.push_back(rank_span(rec));
    check_time_ranges_overlap(spans, problems, true);
    for (const auto& rec : recs) write_rank(rec, w, lo, hi);
    summary.alignment_json = alignment_json(a);
    summary.alignment_text = alignment_text(a);
    if (problems.count("collectives_by_order"))  // testerB F5: the legacy profiler's gloo:* calls
      summary.alignment_text +=
          "  collectives matched by name and order: the traces number none (no record_param_comms), so the n-th "
          "gloo:* call of each operation (all_reduce, all_to_all, ...) on each rank is taken as one collective\n";
    w.set_metadata(meta::kImportAlignJson, summary.alignment_json);
  } else {
    std::vector<RankRecords> clocks;  // each rank's collectives only: are the recorded clocks one clock?
    std::vector<RankSpan> spans;      // each rank's time range: do the ranks run at the same time?
    for (auto& r : kept) {
      check_cancelled(opt);
      RankRecords rec = build(r);
      write_rank(rec, w, lo, hi);
      spans.push_back(rank_span(rec));
      RankRecords clock;  // the collectives are all clock alignment needs
      clock.rank = rec.rank;
      clock.file = rec.file;
      clock.collectives = std::move(rec.collectives);
      clocks.push_back(std::move(clock));
      release_events(r);
    }
    // A rank whose file was cut short lost the collectives after the cut (a Kineto trace's GPU
    // events, its NCCL kernels, come last): matched by order against another rank's whole list,
    // its few survivors pair with the wrong ones and read as a clock off by a step. Its clock is
    // left out of the check, which says so (info clock_check_skips_cut).
    std::vector<RankRecords> whole_clocks;
    std::vector<kineto::RankTrace> whole;  // the uncut ranks' metadata for check_unrelated_clocks
    std::vector<bool> whole_epoch;
    std::string cut_ranks;
    for (size_t i = 0; i < kept.size(); ++i) {
      const bool cut = kept[i].cut || !kept[i].earlier_window_cuts.empty();
      if (cut) {
        cut_ranks += fmt::format("{}rank {} ({})", cut_ranks.empty() ? "" : ", ", kept[i].rank, kept[i].file);
        continue;
      }
      whole_clocks.push_back(std::move(clocks[i]));
      whole.push_back(kineto::RankTrace{});
      whole.back().rank = kept[i].rank;
      whole.back().file = kept[i].file;
      whole_epoch.push_back(epoch[i]);
    }
    if (!cut_ranks.empty() && kept.size() > 1)
      problems.add("clock_check_skips_cut", Severity::info, {kept.front().file, -1},
                   fmt::format("{} {} cut short: {} collectives after the cut are lost, so {} clock is not compared "
                               "with the other ranks' (no clock_disagreement from a cut trace)",
                               cut_ranks, cut_ranks.find(", rank") == std::string::npos ? "was" : "were",
                               cut_ranks.find(", rank") == std::string::npos ? "its" : "their",
                               cut_ranks.find(", rank") == std::string::npos ? "its" : "their"));
    if (whole_clocks.size() > 1 && !check_unrelated_clocks(whole, whole_epoch, whole_clocks, problems))
      check_wall_clock_agreement(whole_clocks, problems);
    check_time_ranges_overlap(spans, problems);
  }
  summary.origin_ns = origin;
  summary.start_ns = lo == std::numeric_limits<int64_t>::max() ? 0 : lo;
  summary.end_ns = hi == std::numeric_limits<int64_t>::min() ? 0 : hi;
  std::string producer;
  for (const auto& p : producers) producer += (producer.empty() ? "" : " | ") + p;
  w.set_metadata(meta::kImported, "1");
  w.set_metadata(meta::kImportFormat, "kineto_json");
  w.set_metadata(meta::kImportProducer, producer.empty() ? "unknown (no schemaVersion)" : producer);
  // replace: a file name is any bytes, not always UTF-8 (plain dump() throws type_error 316)
  w.set_metadata(meta::kImportSources, sources.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  {  // record_function ranges: off the critical path (tester37 #16)
    std::set<std::string> annotations;
    for (const auto& r : kept)
      for (uint32_t id : r.annotation_names) annotations.insert(names.text(id));
    if (!annotations.empty())
      w.set_metadata(meta::kImportAnnotationNames,
                     nlohmann::json(annotations).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  w.set_metadata(meta::kImportAlign, opt.align);
  if (!backend.empty()) w.set_metadata(meta::kImportBackend, backend);
  w.set_metadata(meta::kImportOriginNs, std::to_string(origin));
  w.set_metadata(meta::kSimulated, "0");
  w.set_metadata(meta::kBackend, "imported");
  w.set_metadata(meta::kWorldSize, std::to_string(std::max<int64_t>(world, kept.empty() ? 0 : kept.back().rank + 1)));
  w.set_metadata(meta::kClock, fmt::format("the trace's own clock (Kineto ts x 1000), ns since its ts {} ns", origin));
  if (base_time >= 0)  // Kineto: ts is relative to baseTimeNanoseconds (Unix ns)
    w.set_metadata(meta::kWallAnchorUnixNs, std::to_string(base_time + origin));
  int64_t steps = 0;
  for (const auto& r : kept) steps = std::max<int64_t>(steps, static_cast<int64_t>(r.steps.size()));
  w.set_metadata(meta::kSteps, std::to_string(steps));
  // an Embedscope export's run: its pipeline, planned steps and end, so that `stats` counts its
  // steps as the run's own did (tester53 F3)
  kineto::record_exported_run(kept, problems, w);
  summary.problems = problems.records();
  w.add_import_stats(summary.problems);
  if (opt.fraction) opt.fraction(1.0);
  return summary;
}

}  // namespace embedscope::sessions::importers

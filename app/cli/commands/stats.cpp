// `embedscope stats`: step time, overlap, exposed communication, load imbalance, memory, the
// critical path and the collectives of a session (text or --json).

#include <algorithm>
#include <filesystem>
#include <string_view>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "embedscope/engine/workload/lm_spec.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/sessions/store/end_mark.h"
#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/analysis/table_storage.h"
#include "embedscope/sessions/analysis/gpu_kernels.h"
#include "embedscope/sessions/analysis/gpu_run.h"  // gpu_busy_text, gpu_trace_loss_text
#include "embedscope/sessions/analysis/gpu_sharing.h"
#include "embedscope/sessions/analysis/kernel_name.h"
#include "embedscope/sessions/analysis/rebalance_effect.h"
#include "embedscope/sessions/analysis/run_end.h"  // ended_text
#include "embedscope/sessions/model/held_out_key.h"
#include "embedscope/sessions/model/hot_row_replica.h"
#include "embedscope/engine/workload/json_kind.h"
#include "embedscope/engine/workload/session_rate.h"  // throughput_of
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/model/units.h"  // format_duration
#include "embedscope/sessions/store/session.h"
#include "embedscope/sessions/analysis/flight_recorder.h"
#include "embedscope/sessions/importers/importer.h"
#include "embedscope/sessions/model/unit_ladder.h"  // format_rate
#include "output/flight_recorder_text.h"
#include "output/gpu_kernels_text.h"
#include "output/memory_text.h"
#include "output/step_notes_text.h"
#include "output/output.h"
#include "output/rebalance_text.h"
#include "stats_tables.h"
#include "embedscope/sessions/analysis/kernel_breakdown.h"

namespace embedscope::cli {

namespace es = embedscope::engine;
namespace ss = embedscope::sessions;
namespace si = embedscope::sessions::importers;
using nlohmann::json;

namespace {
// What a JSON file that is no session is, from its first 64 KiB, when embedscope wrote it or reads
// it elsewhere: a scaling study (`scaling --json`), a hardware profile (resources/hardware,
// `calibrate -o`), a sharding plan (`plan --json`'s "tables" with "sharding_type"s), a
// workload; "" otherwise (tester45 F12.10: "import it first" for a scaling study, which import
// then refused).
std::string embedscope_json_kind(const std::string& file) {
  switch (es::json_file_kind(file)) {  // engine/workload/json_kind.h: one recognition with --simulate's
    case es::JsonFileKind::scaling_study:
      return std::string(es::json_file_kind_name(es::JsonFileKind::scaling_study)) +
             ": its table is what scaling printed, its plots the workbench's (embedscope-ui " + file + ")";
    case es::JsonFileKind::hardware_profile:
      return "a hardware profile: give it to --simulate (embedscope run --simulate " + file + " ...)";
    case es::JsonFileKind::sharding_plan:
      return "a sharding plan: give it to --plan (embedscope run WORKLOAD --plan " + file + ")";
    case es::JsonFileKind::workload:
      return "a workload: run it (embedscope run " + file + ") to make a session";
    case es::JsonFileKind::none: break;
  }
  return "";
}

// What `import` would read `file` as, by its content (importers/importer.h detect, a memory
// snapshot's pickle bytes) or, for an Nsight Systems report, which import exports with nsys, by
// its name: "its content is PyTorch profiler (Kineto) Chrome-trace JSON (.json, .json.gz)"; ""
// when import reads none of it (then nothing is guessed).
std::string importable_kind(const std::string& file) {
  if (is_memory_snapshot_file(file)) return "its content is a PyTorch CUDA memory snapshot";
  if (file.ends_with(".nsys-rep")) return "an Nsight Systems report (by its name)";
  try {
    return std::string("its content is ") + si::detect(file).description;
  } catch (const si::ImportError&) {
    return "";
  }
}
}  // namespace

std::unique_ptr<ss::SessionReader> open_for_stats(const std::string& file, std::string_view command) {
  try {
    return std::make_unique<ss::SessionReader>(file);
  } catch (const ss::SessionError& e) {
    const std::string what = e.what();
    // the -wal is beside it but damaged before the metadata's commit (tester47 F11)
    if (what.find("no metadata table") != std::string::npos) {
      if (const ss::WalScan wal = ss::scan_wal(file); wal.unread_bytes > 0)
        throw ss::SessionError(what + "; its -wal file is there but damaged: " + ss::describe_unread_wal(file, wal));
      // an SQLite database an importer reads (an Nsight Systems export): what it is and how to
      // make a session of it, as for a Kineto trace, not SQLite's "no metadata table"
      // the importers' look at it (an SQLite connection) leaves no empty -wal and -shm beside it (F10)
      const bool had_wal = std::filesystem::exists(file + "-wal"), had_shm = std::filesystem::exists(file + "-shm");
      const std::string kind = importable_kind(file);
      std::error_code ec;
      if (!had_wal && std::filesystem::file_size(file + "-wal", ec) == 0 && !ec) {
        std::filesystem::remove(file + "-wal", ec);
        if (!had_shm) std::filesystem::remove(file + "-shm", ec);
      }
      if (!kind.empty())
        throw ss::SessionError(fmt::format("{}: an SQLite database but not a session: {}; {} reads sessions (.db): "
                                           "import it first: embedscope import {}",
                                           file, kind, command, file));
    }
    if (what.find("not an SQLite database") == std::string::npos) throw;
    if (const std::string kind = embedscope_json_kind(file); !kind.empty())
      throw ss::SessionError(
          fmt::format("{}: not an SQLite database (not a session): {}; {} reads sessions (.db)", file, kind, command));
    if (const std::string kind = importable_kind(file); !kind.empty())
      throw ss::SessionError(fmt::format("{}; {}: import it first: embedscope import {}", what, kind, file));
    throw ss::SessionError(fmt::format("{}: not a session (not an SQLite database), nor a file embedscope import reads "
                                       "(PyTorch profiler traces, Nsight Systems exports and reports, PyTorch CUDA memory "
                                       "snapshots); {} reads the sessions (.db) that run, import, merge and launch write",
                                       file, command));
  }
}

namespace {

// The `imported` line's sources (meta import_sources_json: [{"file", "rank" or "ranks", "bytes",
// "uncompressed_bytes"}]) as text, tester48 F14.3: "nccl_data.json.gz (rank 0; 3.1 MiB, 9.4 MiB
// uncompressed)", one per file joined by ", "; the stored text where it is not such an array.
std::string stats_import_sources_text(const std::string& stored) {
  const json j = json::parse(stored, nullptr, false);
  if (!j.is_array()) return stored;
  std::vector<std::string> out;
  for (const auto& f : j) {
    if (!f.is_object()) return stored;
    std::vector<std::string> parts;
    if (f.contains("rank") && f["rank"].is_number_integer()) {
      parts.push_back(fmt::format("rank {}", f["rank"].get<int64_t>()));
    } else if (f.contains("ranks") && f["ranks"].is_array()) {
      std::vector<int32_t> ranks;
      for (const auto& r : f["ranks"])
        if (r.is_number_integer()) ranks.push_back(r.get<int32_t>());
      if (!ranks.empty()) parts.push_back(fmt::format("rank{} {}", ranks.size() == 1 ? "" : "s", ss::rank_list(ranks)));
    }
    const int64_t bytes = f.value("bytes", int64_t{-1}), raw = f.value("uncompressed_bytes", int64_t{-1});
    if (bytes >= 0)
      parts.push_back(raw > bytes ? fmt::format("{}, {} uncompressed", es::format_bytes(bytes), es::format_bytes(raw))
                                  : es::format_bytes(bytes));
    out.push_back(fmt::format("{}{}", f.value("file", std::string("?")),
                              parts.empty() ? std::string() : fmt::format(" ({})", fmt::join(parts, "; "))));
  }
  return out.empty() ? std::string("no source files recorded") : fmt::format("{}", fmt::join(out, ", "));
}

// t[key] formatted with `f`, or "-" where it is null or absent (a simulated session's error,
// collision and hot-id figures: table_storage_json(.., measured = false)); `per` divides it
// (a per-step figure) unless 0.
std::string figure_or_dash(const json& t, const char* key, const char* f, double per = 0) {
  const auto it = t.find(key);
  if (it == t.end() || !it->is_number()) return "-";
  const double v = it->get<double>();
  return fmt::format(fmt::runtime(f), per > 0 ? v / per : v);
}

// What a step holds: {samples_per_step, "samples"}, or for an lm_embedding workload its tokens
// (micro batch x sequence, times the ranks unless vocab_parallel splits the table, not the batch).
std::pair<int64_t, std::string> step_size(const std::string& workload_json, int64_t samples_per_step) {
  const json wj = json::parse(workload_json, nullptr, false);
  if (wj.is_object() && es::is_lm_workload(wj)) try {
      const es::LmWorkloadSpec lm = es::parse_stored_lm_workload(wj, "workload_json");
      return {lm.tokens_per_step(), "tokens"};
    } catch (const std::exception&) {
    }
  return {samples_per_step, "samples"};
}

// The hot-row replication block (table_storage_json's hot_rows, hot_ids, hot_all_reduce_bytes;
// workload sharding.tables.NAME.hot_rows): one line per table with hot rows - rows replicated,
// ids a measured step kept off the input all-to-all (all ranks), and the bytes of each step's
// all-reduce of their gradients. "" when no table has any (and for older files). Where hot_ids
// is null (a simulated session: table_storage_json(.., measured = false)) the ids are the
// replicas' load counters, which `replica_ids` reads when first needed (table index -> ids over
// the measured steps, sessions::hot_row_replica_ids; retest49 R4), "-" when the session has none
// (older files).
std::string hot_rows_text(const std::string& meta, int64_t steps,
                          const std::function<std::map<int32_t, int64_t>()>& replica_ids) {
  const json tables = json::parse(meta, nullptr, false);
  if (!tables.is_array()) return "";
  std::string out;
  std::optional<std::map<int32_t, int64_t>> counted;  // the replicas' load counters, read once
  for (size_t i = 0; i < tables.size(); ++i) {
    const json& t = tables[i];
    const int64_t rows = t.value("hot_rows", int64_t{0});
    if (rows <= 0) continue;
    if (out.empty())
      out = "\nhot rows (replicated on every rank, trained data-parallel): ids a step kept off the input all-to-all, "
            "all-reduce a step\n";
    std::string ids = figure_or_dash(t, "hot_ids", "{:.1f}", static_cast<double>(steps));
    if (ids == "-" && steps > 0) {
      if (!counted) counted = replica_ids();
      if (const auto c = counted->find(static_cast<int32_t>(i)); c != counted->end())
        ids = fmt::format("{:.1f}", static_cast<double>(c->second) / static_cast<double>(steps));
    }
    out += fmt::format("  {:<20} {:>8} rows {:>12} ids/step {:>12}/step\n", t.value("table", ""), rows, ids,
                       es::format_bytes(t.value("hot_all_reduce_bytes", int64_t{0})));
  }
  return out;
}

int cmd_stats(const std::string& file, bool as_json, bool keep_last_step, int64_t top) {
  // a killed run's session lives in FILE.db + FILE.db-wal: the first reader that may write folds
  // it into FILE.db, only where no writer is alive (tester41 #11)
  // a -wal with bytes SQLite cannot read (damaged, cut short: tester47 F11) is kept as FILE.db-wal.damaged
  ss::WalScan wal;
  std::string kept, not_folded;
  if (ss::checkpoint_abandoned_session(file, &not_folded, &wal, &kept)) {
    if (kept.empty())
      std::cerr << "the run that wrote " << file << " was killed; its -wal file was checkpointed into " << file
                << ", which is now the whole session\n";
    else
      std::cerr << "the run that wrote " << file << " was killed; " << ss::describe_unread_wal(file, wal)
                << ".\nWhat SQLite reads of it (" << wal.committed_frames << " frames) was checkpointed into " << file
                << "; the whole -wal is kept as " << kept << ": the session may lack steps that were recorded\n";
  } else {
    if (wal.present && wal.unread_bytes > 0) std::cerr << ss::describe_unread_wal(file, wal) << "\n";
    // a killed run's -wal that could have been folded back but not now: say why (it is read as it is)
    if (not_folded.rfind("another program", 0) == 0)
      std::cerr << "the run that wrote " << file << " was killed; its -wal file could not be checkpointed into " << file
                << " now: " << not_folded << "; the session is read with it, and a later stats folds it back\n";
  }
  const auto opened = open_for_stats(file);
  const ss::SessionReader& session = *opened;
  const ss::RunStats st = ss::analyze(session);
  const auto kernels = ss::gpu_kernel_figures(session, {keep_last_step});
  // HTA's get_gpu_kernel_breakdown over the same GPU events (tester60c F6)
  const ss::KernelBreakdown breakdown = ss::gpu_kernel_breakdown(session, {keep_last_step});
  const auto problems = session.import_stats();
  const bool imported = session.meta("imported") == "1";
  // tester51 F11: an Embedscope session's figures are exact ns; HTA reads its kineto export
  // rounded to whole us, so the figures HTA gives on the export are said beside them
  const auto on_export = kernels.empty() || imported || kernels.front().microsecond_rounding
                             ? std::vector<ss::RankKernelFigures>{}
                             : ss::gpu_kernel_figures(session, {keep_last_step, true});
  // a trace whose collectives carry no arguments (Kineto without record_param_comms args, every
  // Nsight export) or no bytes at all (a Gloo trace's gloo:* calls): 0 bytes there is unknown, not
  // "moved nothing" (tester37 #13)
  const bool bytes_unknown = ss::collective_bytes_unknown(session);
  const auto bytes_or_null = [&](int64_t b) { return bytes_unknown && b == 0 ? json() : json(b); };
  // no rank communicated: overlap is n/a (text) / null (JSON), not 0 %
  const bool any_comm = std::any_of(st.ranks.begin(), st.ranks.end(), [](const auto& r) { return r.comm_ns > 0; });
  const auto bytes_text = [&](int64_t b) { return bytes_unknown && b == 0 ? std::string("unknown") : es::format_bytes(b); };
  // a rank's: unknown only where it communicated (a rank with no comm op moved 0 B)
  const auto rank_bytes_or_null = [&](const ss::RankStats& r, int64_t b) { return r.comm_ns > 0 ? bytes_or_null(b) : json(b); };
  const auto rank_bytes_text = [&](const ss::RankStats& r, int64_t b) {
    return r.comm_ns > 0 ? bytes_text(b) : es::format_bytes(b);
  };
  const auto unfinished = imported ? ss::did_not_end_ops(session) : std::vector<ss::DidNotEndOp>{};
  // the allocator history (imported memory snapshots, or a run that ended before its first step)
  const bool memory_only = st.steps == 0 && !session.memory_events().empty();
  const auto memory = memory_only || session.meta("import_format") == "torch_memory_snapshot"
                          ? ss::analyze_memory(session)
                          : std::vector<ss::RankMemoryAnalysis>{};
  const ss::FlightAnalysis flight = ss::analyze_flight_records(session);
  if (as_json) {
    json j{{"session", file},
           {"ended", st.ended},
           {"simulated", st.simulated},
           {"workload", session.meta("workload_name")},
           {"world_size", std::max<size_t>(static_cast<size_t>(st.world_size), st.ranks.size())},
           {"untraced_ranks", st.untraced_ranks},
           {"steps", st.steps},
           {"pipeline", session.meta("pipeline", "base")},
           {"qcomms", {{"forward_precision", session.meta("qcomms_forward_precision", "fp32")},
                       {"backward_precision", session.meta("qcomms_backward_precision", "fp32")}}},
           {"network", json::parse(session.meta("network_json", "{}"), nullptr, false)},
           {"samples_per_step", st.samples_per_step},
           {"step_time_ns", {{"mean", st.step_time_ns.mean}, {"p50", st.step_time_ns.p50}, {"p99", st.step_time_ns.p99},
                             {"min", st.step_time_ns.min}, {"max", st.step_time_ns.max}}},
           // null when unknown: no samples per step (an imported trace) or no measured step
           {"samples_per_s", st.samples_per_step > 0 && st.steps > 0 ? json(st.samples_per_s) : json()},
           {"drain_steps", st.drain_steps},
           // null with no communication (n/a, not 0 %)
           {"overlap_pct", any_comm ? json(st.overlap_pct) : json()},
           {"exposed_comm_ns", st.exposed_comm_ns},
           // null without load counters (an imported trace): not measured, not balanced
           {"imbalance", {{"lookups_max_over_mean", st.has_load ? json(st.lookups_max_over_mean) : json()},
                          {"lookups_max_over_mean_per_step", st.has_load ? json(st.lookups_max_over_mean_per_step) : json()},
                          {"lookup_time_max_over_mean", st.lookup_time_max_over_mean ? json(*st.lookup_time_max_over_mean)
                                                                                     : json(nullptr)},
                          // false: an imported trace, whose imbalance is in peer_waits (tester60c F2)
                          {"load_counters", st.has_load}}},
           {"loss", st.loss},
           // null where no memory was recorded, as the text's "none recorded" and compare --json
           // (snap54, tester54 F9: an imported trace's 0)
           {"peak_allocated_bytes", st.has_memory ? json(st.peak_allocated_bytes) : json()},
           {"peak_reserved_bytes", st.has_memory ? json(st.peak_reserved_bytes) : json()},
           {"tracer_overhead_ns", std::strtoll(session.meta("tracer_overhead_ns", "0").c_str(), nullptr, 10)},
           {"dropped_records", std::strtoll(session.meta("dropped_records", "0").c_str(), nullptr, 10)},
           {"ranks", json::array()},
           {"rebalances", json::array()}};
    // the throughput in the session's own unit, as the text and `compare --json` give it (tester52
    // F6: an lm_embedding session's samples_per_s is sequences/s, its text tokens/s): samples/s
    // for a DLRM run, tokens/s for an lm_embedding one (then also tokens_per_step and
    // tokens_per_s, as `run --json` names them), null for an imported trace
    const ss::SessionRate rate = es::throughput_of(session, st);
    const bool measured = st.steps > 0 && !rate.unit.empty();
    j["throughput_per_s"] = measured ? json(rate.per_s) : json();
    j["throughput_unit"] = rate.unit.empty() ? json() : json(rate.unit + "/s");
    if (rate.unit == "tokens") {
      j["tokens_per_step"] = rate.per_step;
      j["tokens_per_s"] = measured ? json(rate.per_s) : json();
    }
    if (!st.rank_step_counts.empty()) {  // a killed rank's shorter session (tester49 F14)
      j["imbalance"]["through_step"] = st.common_last_step;
      j["rank_steps"] = json::array();
      for (const auto& h : st.rank_step_counts)
        j["rank_steps"].push_back({{"rank", h.rank}, {"steps", h.steps}, {"last_step", h.last_step}});
    }
    if (st.steps == 0) {  // no measured step: no figure, not zeros (tester38 #17: a crashed run's 0 ns, 1.00 imbalance)
      j["step_time_ns"] = nullptr;
      j["samples_per_s"] = nullptr;
      if (!st.whole_trace) {  // a no-step trace's are over the whole trace
        j["overlap_pct"] = nullptr;
        j["exposed_comm_ns"] = nullptr;
      }
      j["imbalance"] = nullptr;
    }
    j["whole_trace"] = st.whole_trace;
    j["whole_trace_cut"] = st.whole_trace_cut;  // the cut left no profiler step complete
    if (st.whole_trace) {
      j["top_ops"] = json::array();
      for (const auto& o : st.top_ops)
        j["top_ops"].push_back({{"name", session.name(o.name_id)}, {"category", ss::to_string(o.category)},
                                {"self_ns", o.self_ns}, {"count", o.count}});
    }
    for (const auto& e : ss::rebalance_effects(session)) {
      const auto& r = e.rebalance;
      // refused: one {table, reason} a move (older files' "; "-joined text is cut the same way);
      // figures that do not exist (no step after it, nothing moved to amortise) are null
      json o = rebalance_json(r);
      auto ns_or_null = [](int64_t ns) { return ns < 0 ? json() : json(ns); };
      o["step_p50_before_ns"] = ns_or_null(e.step_p50_before_ns);
      o["step_p50_after_ns"] = ns_or_null(e.step_p50_after_ns);
      o["step_steps_before"] = {e.before_first, e.before_last};  // the steps of each median (tester60b F1)
      o["step_steps_after"] = {e.after_first, e.after_last};
      o["amortised_after_steps"] = e.amortised_after_steps < 0 ? json() : json(e.amortised_after_steps);
      o["step_slower_after"] = !ss::rebalance_slowdown_text(e).empty();  // tester42 F8
      j["rebalances"].push_back(std::move(o));
    }
    j["plan_changes"] = json::array();
    for (const auto& c : session.plan_changes())
      j["plan_changes"].push_back({{"step", c.step}, {"table", c.table_name}, {"shard_index", c.shard_index},
                                   {"from_rank", c.from_rank}, {"to_rank", c.to_rank}, {"from_type", c.from_type},
                                   {"to_type", c.to_type}, {"row_offset", c.row_offset}, {"num_rows", c.num_rows},
                                   {"col_offset", c.col_offset}, {"num_cols", c.num_cols},
                                   {"bytes", c.bytes}});
    // per rank: the hash collisions of its own batches (0 where no table is hashed; null where the
    // session does not hold them per rank: older files, simulated runs)
    const auto collisions = ss::rank_hash_collisions(session.meta(ss::meta::kTableStorageJson, "[]"));
    for (const auto& r : st.ranks) {
      json cats = json::object();
      for (int c = 0; c < ss::kNumCategories; ++c)
        cats[ss::to_string(static_cast<ss::OpCategory>(c))] = r.by_category_ns[static_cast<size_t>(c)];
      j["ranks"].push_back({{"rank", r.rank}, {"compute_ns", r.compute_ns}, {"comm_ns", r.comm_ns},
                            {"overlap_ns", r.overlap_ns}, {"exposed_comm_ns", r.exposed_comm_ns}, {"idle_ns", r.idle_ns},
                            {"overlap_pct", r.comm_ns > 0 ? json(r.overlap_pct) : json()}, {"ids_looked_up", r.ids_looked_up},
                            {"lookup_ns", r.lookup_ns}, {"bytes_sent", rank_bytes_or_null(r, r.bytes_sent)},
                            {"bytes_received", rank_bytes_or_null(r, r.bytes_received)}, {"by_category_ns", cats},
                            {"peak_allocated_bytes", st.has_memory ? json(r.peak_allocated_bytes) : json()},
                            {"peak_reserved_bytes", st.has_memory ? json(r.peak_reserved_bytes) : json()},
                            {"fragmentation", st.has_memory ? json(r.fragmentation) : json()},
                            {"memviz_fragmentation", st.has_memory && r.memviz_fragmentation ? json(*r.memviz_fragmentation) : json()},
                            {"window_ns", r.window_ns}});
      j["ranks"].back()["hash_collisions"] =
          !collisions ? json()
                      : json(static_cast<size_t>(r.rank) < collisions->size() ? (*collisions)[static_cast<size_t>(r.rank)] : 0);
      if (st.stream_ranks) j["ranks"].back()["gpu_busy_pct"] = r.gpu_busy_pct;
      if (st.stream_ranks && !imported) {
        j["ranks"].back()["host_comm_ns"] = r.host_comm_ns;
        j["ranks"].back()["host_exposed_comm_ns"] = r.host_exposed_comm_ns;
      }
    }
    const auto name_of = [&](int32_t id) { return id < 0 ? std::string("(gap: untraced)") : session.name(id); };
    j["critical_path"] = {{"total_ns", st.critical_path_ns}, {"ops", json::array()}};
    for (const auto& e : st.critical_path)
      j["critical_path"]["ops"].push_back({{"name", name_of(e.name_id)}, {"category", e.name_id < 0 ? "gap" : ss::to_string(e.category)},
                                           {"ns", e.ns}, {"share", e.share}, {"top_rank", e.top_rank},
                                           {"steps_bounded", e.steps_bounded}});
    j["collectives"] = json::array();
    for (const auto& c : st.collectives)
      j["collectives"].push_back({{"name", name_of(c.name_id)}, {"count", c.count}, {"bytes_sent", bytes_or_null(c.bytes_sent)},
                                  {"bytes_received", bytes_or_null(c.bytes_received)},
                                  // the ops' bytes: sent + received + the split checks' (docs/output.md: kept for older readers)
                                  {"bytes", bytes_or_null(c.bytes)},
                                  {"time_ns", c.time_ns},
                                  {"exposed_ns", c.exposed_ns}, {"wait_ns", c.wait_ns},
                                  // tester51 F4: its split checks, whose bytes are not in bytes_sent / received
                                  {"split_check", c.check_count == 0
                                                      ? json(nullptr)
                                                      : json{{"name", name_of(c.name_id) + "/split_check"},
                                                             {"count", c.check_count},
                                                             {"bytes_sent", c.check_bytes_sent},
                                                             {"bytes_received", c.check_bytes_received}}}});
    if (!session.meta("end_message").empty()) j["end_message"] = session.meta("end_message");
    j["tables"] = json::parse(session.meta(ss::meta::kTableStorageJson, "[]"), nullptr, false);
    // a simulated session's hot_ids (null in its metadata: table_storage_json(.., measured =
    // false)) are its replicas' load counters over the measured steps, the figure the text's
    // hot-rows block divides by the steps (hot_rows_text; sim51: the text said 46.0 ids/step where
    // the JSON said null); a table without such counters (an older file) keeps null
    if (j["tables"].is_array()) {
      std::optional<std::map<int32_t, int64_t>> counted;  // read once, when first needed
      for (size_t i = 0; i < j["tables"].size(); ++i) {
        json& t = j["tables"][i];
        if (!t.is_object() || t.value("hot_rows", int64_t{0}) <= 0 || !t.contains("hot_ids") || !t["hot_ids"].is_null() ||
            st.steps <= 0)
          continue;
        if (!counted) counted = ss::hot_row_replica_ids(session.load(), st.steps);
        if (const auto c = counted->find(static_cast<int32_t>(i)); c != counted->end()) t["hot_ids"] = c->second;
      }
    }
    // the held-out evaluation as the run recorded it (null: none asked for, or an older file)
    j["held_out"] = json::parse(session.meta(ss::meta::kHeldOutJson, "null"), nullptr, false);
    j["overlap_definition"] = ss::overlap_definition(st);
    // which ranks ran on which GPU (tester38 #11): [] for ranks on no GPU
    j["gpus"] = json::array();
    for (const auto& d : ss::device_gpu_busy(session, st)) {
      // the device's memory where the session recorded it (an imported trace's deviceProperties
      // totalGlobalMem); a cuda run records each rank's arena (devices.memory_bytes, capped at the
      // GPU's free memory), not the device's: `rank_memory_bytes` (ux41 #11: 4 GiB read as the H200's)
      int64_t device_memory = 0;
      json arenas = json::array();
      for (const auto& r : session.ranks())
        if (r.device == d.device) {
          device_memory = std::max(device_memory, r.memory_capacity_bytes);
          arenas.push_back({{"rank", r.rank}, {"bytes", r.memory_capacity_bytes}});
        }
      j["gpus"].push_back({{"device", d.device},
                           {"ranks", d.ranks},
                           {"memory_capacity_bytes", imported && device_memory > 0 ? json(device_memory) : json()},
                           {"rank_memory_bytes", imported ? json() : arenas},
                           {"busy_pct", d.window_ns > 0 ? json(d.busy_pct) : json()}});
    }
    const std::string on_gpus = ss::gpus_text(session.ranks());
    j["gpus_text"] = on_gpus.empty() ? json() : json(on_gpus.substr(1));  // "sharing 1 GPU (NVIDIA H200 (cuda:0))"
    if (!session.meta(ss::meta::kCuptiRecords).empty())
      j["gpu_trace"] = {{"dropped_records", std::atoll(session.meta(ss::meta::kCuptiDroppedRecords, "0").c_str())},
                        {"launches_dropped", std::atoll(session.meta(ss::meta::kCuptiLaunchesDropped, "0").c_str())},
                        {"device_rank_fallbacks",
                         std::atoll(session.meta(ss::meta::kCuptiDeviceRankFallbacks, "0").c_str())}};
    if (!kernels.empty()) j["gpu_kernels"] = gpu_kernels_json(kernels, keep_last_step, on_export);
    if (breakdown.events > 0) j["gpu_kernel_breakdown"] = kernel_breakdown_json(breakdown, session);
    // each rank's waits for its peers and the straggler (tester60c F2), over the counted steps
    j["peer_waits"] = peer_waits_json(st, st.whole_trace ? 1 : st.counted_steps());
    if (!memory.empty()) j["memory"] = memory_json(memory);
    if (!flight.empty()) j["flight_recorder"] = flight_recorder_json(flight);
    if (imported) {
      j["imported"] = {{"format", session.meta("import_format")}, {"producer", session.meta("import_producer")},
                       {"sources", json::parse(session.meta("import_sources_json", "[]"), nullptr, false)}};
      j["import_problems"] = import_problems_json(problems);
      j["trace_cut"] = !ss::trace_cut_text(session).empty();  // tester48 F7: GPU figures without a verdict
      j["did_not_end"] = did_not_end_json(unfinished);
      // an import of an Embedscope export: the exported run's pipeline, planned steps and end;
      // "ended" above is the import's own (tester53 F3); null for any other import
      j["exported_run"] = st.exported_run_ended.empty()
                              ? json()
                              : json{{"pipeline", st.pipeline.empty() ? std::string("base") : st.pipeline},
                                     {"planned_steps", st.exported_run_planned_steps > 0 ? json(st.exported_run_planned_steps) : json()},
                                     {"ended", st.exported_run_ended},
                                     {"ended_text", ss::ended_text(st, st.exported_run_ended)},
                                     {"end_message", st.exported_run_end_message}};
    }
    std::cout << dump(j) << "\n";
    return 0;
  }
  // how it ended, with where it stopped (ux41 #9: "(crashed, measured)" above "0 measured steps");
  // "measured" only where a step was (a simulation says SIMULATED whatever its steps)
  const std::string kind = imported ? "IMPORTED from " + session.meta("import_format")
                           : st.simulated ? std::string("SIMULATED")
                           : st.steps > 0 ? std::string("measured")
                                          : std::string();
  // an imported memory snapshot: "complete" is the import's; where the recorded program ran out
  // of memory, that is how it ended (tester42 F25)
  std::string ended = ss::ended_text(st);
  const std::string recorded_oom_text = ss::recorded_oom_text(session, memory);  // compare and the Summary too
  const bool recorded_oom = imported && !recorded_oom_text.empty();
  if (recorded_oom) ended = recorded_oom_text;
  std::cout << fmt::format("session      {} ({}{})\n", file, ended, kind.empty() ? "" : (recorded_oom ? "; " : ", ") + kind);
  if (imported) {
    std::cout << fmt::format("imported     {}; {}\n", session.meta("import_producer"),
                             stats_import_sources_text(session.meta("import_sources_json", "[]")));
    std::cout << "import problems\n" << import_problems_text(problems);
    std::cout << did_not_end_text(unfinished);
    // an Embedscope export's run: how it ended, not the import (tester53 F3)
    if (const std::string t = ss::exported_run_text(st); !t.empty()) std::cout << fmt::format("source run   {}\n", t);
  }
  // the kernel heading names warm-up steps only where the run had some (ux41 #9)
  const std::string kernel_text =
      gpu_kernels_text(kernels, keep_last_step,
                       imported ? -1 : std::strtoll(session.meta(ss::meta::kWarmupSteps, "-1").c_str(), nullptr, 10),
                       on_export) +
      kernel_breakdown_text(breakdown, session, top);
  if (!session.meta("end_message").empty()) std::cout << fmt::format("             {}\n", session.meta("end_message"));
  const auto per_step = step_size(session.meta("workload_json"), st.samples_per_step);
  if (imported)  // a trace has no workload: its ranks (world size as the trace says) and profiler steps
    // the GPUs its deviceProperties name (tester39), as a run's workload line says them
    std::cout << fmt::format("trace        world size {}, {} profiler steps{}{}\n", std::max<size_t>(static_cast<size_t>(st.world_size), st.ranks.size()), st.steps,
                             ss::gpus_text(session.ranks()).empty() ? std::string() : "; ranks" + ss::gpus_text(session.ranks()),
                             st.untraced_ranks.empty()
                                 ? std::string()
                                 : fmt::format("; rank{} {} without a trace in this session (left out of the figures below)",
                                               st.untraced_ranks.size() == 1 ? "" : "s", ss::rank_list(st.untraced_ranks)));
  else
    std::cout << fmt::format("workload     {} on {} {} rank{}, {}{}\n",
                             session.meta("workload_name"), st.ranks.size(), session.meta("backend"),
                             (st.ranks.size() == 1 ? std::string() : std::string("s")) + ss::gpus_text(session.ranks()),
                             st.steps > 0 ? fmt::format("{} measured step{} of {} {}", st.steps, st.steps == 1 ? "" : "s",
                                                        per_step.first, per_step.second)
                                          : fmt::format("no measured step completed (steps of {} {})", per_step.first,
                                                        per_step.second),
                             st.untraced_ranks.empty()
                                 ? std::string()
                                 : fmt::format("; rank{} {} of the world of {} not in this session ({})",
                                               st.untraced_ranks.size() == 1 ? "" : "s",
                                               ss::rank_list(st.untraced_ranks), st.world_size,
                                               // a run's session whose world_size names more ranks than it
                                               // holds: damaged or edited (tester54 F3)
                                               session.meta(ss::meta::kProcessRank).empty()
                                                   ? fmt::format("the metadata world_size counts {0}, but the session "
                                                                 "holds no record of {0}; left out of the figures below",
                                                                 st.untraced_ranks.size() == 1 ? "it" : "them")
                                                   : std::string("each process wrote its own; merge them for the whole run")));
  if (!session.meta("workload_json").empty()) try {  // the workload as run: pipeline, comm precisions, network
    const json wj = json::parse(session.meta("workload_json"));
    if (es::is_lm_workload(wj)) {  // issue 19: no pipeline; its shape and sharding
      const es::LmWorkloadSpec lm = es::parse_stored_lm_workload(wj, file + ": workload_json");
      // "(N rows with padding)" only where the vocabulary was padded (tester43 F19: said of 128256 = V)
      const std::string padded = lm.padded_vocab_size() == lm.vocab_size
                                     ? std::string("not padded")
                                     : fmt::format("{} rows with padding", lm.padded_vocab_size());
      std::cout << fmt::format("model        lm_embedding {} x {} ({}), {}, {}, sequence {}; {}{}\n",
                               lm.vocab_size, lm.hidden_size, padded, es::to_string(lm.data_type),
                               lm.tie_word_embeddings ? "tied" : "untied", lm.sequence_length, es::to_string(lm.sharding),
                               lm.sequence_parallel ? " + sequence_parallel" : "");
    } else {
      std::cout << pipeline_text(es::parse_workload(wj, file + ": workload_json"));
    }
  } catch (const std::exception& e) {
    std::cout << fmt::format("pipeline     {} (the stored workload is unreadable: {})\n", session.meta("pipeline", "base"),
                             e.what());
  }
  if (!flight.empty()) std::cout << "\n" << flight_recorder_text(flight);
  if (st.steps == 0 && !memory.empty()) {  // a memory snapshot: its allocator history is what there is
    std::cout << "\n" << memory_text(memory);
    if (!kernel_text.empty()) std::cout << "\n" << kernel_text;
    return 0;
  }
  if (st.steps == 0 && session.meta("import_format") == "torch_memory_snapshot") {
    // a dump without the history (tester37 #8): its segments at the dump are what there is
    std::cout << "\nmemory       no trace entries: memory history was not recorded (call "
                 "torch.cuda.memory._record_memory_history() before the workload); at the dump:\n";
    std::cout << fmt::format("{:<5} {:>12} {:>9} {:>12} {:>19} {:>14}\n", "rank", "reserved", "segments", "allocated",
                             "largest free block", "fragmentation");
    for (const auto& c : session.memory_counters())
      std::cout << fmt::format("{:<5} {:>12} {:>9} {:>12} {:>19} {:>13.1f}%\n", c.rank, es::format_bytes(c.reserved),
                               c.segments, es::format_bytes(c.allocated), es::format_bytes(c.largest_free_block),
                               100 * c.external_fragmentation);
    return 0;
  }
  if (st.steps == 0 && !st.whole_trace) {
    std::cout << (imported ? "no profiler steps in the trace (no ProfilerStep#N spans): no step times, thread-level "
                             "overlap or critical path\n"
                           : "no measured steps: nothing to analyse (" + ss::ended_text(st) + ")\n");
    if (!kernel_text.empty()) std::cout << "\n" << kernel_text;
    return 0;
  }
  if (st.whole_trace) {
    std::cout << whole_trace_text(st);
  } else {
    // steps under 10 us (a schema-v1 session's 700 ns) read "0.00 ms" in ms: the workbench's unit
    // ladder then, "700 ns" (format_duration; tester60a F9)
    const bool sub_10us = st.step_time_ns.max < 10'000;
    const auto step_ms = [&](double ns) { return sub_10us ? ss::format_duration(std::llround(ns)) : ms(ns); };
    std::cout << fmt::format("step time    mean {}  p50 {}  p99 {}\n", step_ms(st.step_time_ns.mean),
                             step_ms(st.step_time_ns.p50), step_ms(st.step_time_ns.p99));
    std::cout << ss::drain_steps_text(st.pipeline, st.steps, st.drain_steps, st.all_drain);
    std::cout << cold_step_text(session, st);
  }
  // a whole trace is one "step" of the figures below
  const int64_t counted = st.whole_trace ? 1 : st.counted_steps();
  if (!imported)
    std::cout << fmt::format("throughput   {} {}/s\n",
                             ss::format_rate(st.step_time_ns.mean > 0 ? static_cast<double>(per_step.first) /
                                                                            (st.step_time_ns.mean * 1e-9)
                                                                      : 0.0),
                             per_step.second);
  if (!any_comm)
    std::cout << fmt::format("overlap      n/a (no communication; {})\n", ss::overlap_definition(st));
  else
    std::cout << fmt::format("overlap      {:.1f}% of communication ran while the rank computed ({}); exposed "
                             "communication {} per rank{}\n",
                             st.overlap_pct, ss::overlap_definition(st), ms(st.exposed_comm_ns),
                             st.whole_trace ? std::string(" (the whole trace)")
                                            : fmt::format(" ({} per step)", ms(st.exposed_comm_ns / counted)));
  std::cout << ss::gpu_run_text(session, st);
  if (imported)  // a trace has kernels and collectives, not the ids each rank looked up (tester60c F2: not "none")
    std::cout << "imbalance    " << no_load_imbalance_text(st) << "\n";
  else
    std::cout << fmt::format("imbalance    ids looked up max/mean {:.2f} a step (each step's max/mean, mean over the "
                             "steps; {:.2f} of the run's totals); lookup time {}\n",
                             st.lookups_max_over_mean_per_step, st.lookups_max_over_mean,
                             st.lookup_time_max_over_mean ? fmt::format("max/mean {:.2f}", *st.lookup_time_max_over_mean)
                                                          : std::string("not recorded (no rank's load counters hold a lookup time)"));
  std::cout << straggler_line(st, counted) << "\n";  // who kept the others waiting in collectives (tester60c F2)
  std::cout << ss::unequal_rank_steps_text(st);  // a killed rank's shorter session (tester49 F14)
  std::cout << rebalances_text(ss::rebalance_effects(session), session.plan_changes());
  std::cout << fmt::format("{:<5} {:>11} {:>11} {:>13} {:>11} {:>9} {:>14} {:>12} {:>14}\n", "rank", "compute", "comm",
                           "exposed comm", "idle", "overlap", "ids looked up", "bytes sent", "bytes received");
  for (const auto& r : st.ranks)
    std::cout << fmt::format("{:<5} {:>11} {:>11} {:>13} {:>11} {:>9} {:>14} {:>12} {:>14}\n", r.rank,
                             ms(r.compute_ns), ms(r.comm_ns), ms(r.exposed_comm_ns), ms(r.idle_ns),
                             r.comm_ns > 0 ? fmt::format("{:.1f}%", r.overlap_pct) : std::string("n/a"),
                             r.ids_looked_up, rank_bytes_text(r, r.bytes_sent), rank_bytes_text(r, r.bytes_received));
  if (st.drain_steps > 0)  // tester48 F4: the same steps for the counts as for the times
    std::cout << fmt::format("(the {} counted steps: the drain steps' lookups and bytes are left out as their times are)\n",
                             st.counted_steps());
  if (!kernel_text.empty()) std::cout << "\n" << kernel_text;
  if (const std::string h = held_out_text(json::parse(session.meta(ss::meta::kHeldOutJson, "null"), nullptr, false));
      !h.empty())
    std::cout << "\n" << h;
  std::cout << table_storage_text(session.meta(ss::meta::kTableStorageJson, "[]"), st.steps);
  if (const std::string host = host_placement_text(json::parse(session.meta(ss::meta::kTableStorageJson, "[]"), nullptr, false), st.steps);
      !host.empty())
    std::cout << "\ntables in host memory (cache hit rate, rows and bytes moved per measured step):\n" << host;
  std::cout << hot_rows_text(session.meta(ss::meta::kTableStorageJson, "[]"), st.steps,
                             [&] { return ss::hot_row_replica_ids(session.load(), st.steps); });
  if (const std::string none = hot_rows_none_text(session.meta(ss::meta::kWorkloadJson, ""),
                                                  session.meta(ss::meta::kTableStorageJson, "[]"), st.world_size);
      !none.empty())
    std::cout << "\n" << none;
  if (!st.has_memory) {  // a trace: no allocator counters (0 B would read as measured; tester37 D8)
    std::cout << (imported ? "\nmemory       none recorded (a trace has no allocator counters; a PyTorch memory snapshot does)\n"
                           : "\nmemory       none recorded (the run ended before its first memory counters)\n");
  } else {
    // each figure says when it was taken (tester41 #7: three unlabelled "fragmentation" figures)
    std::cout << fmt::format("\n{:<5} {:>16} {:>16} {:>23} {:>24}\n", "rank", "peak allocated", "peak reserved",
                             "frag. worst step end", "memviz lowest step end");
    for (const auto& r : st.ranks)
      std::cout << fmt::format("{:<5} {:>16} {:>16} {:>22.1f}% {:>24}\n", r.rank, es::format_bytes(r.peak_allocated_bytes),
                               es::format_bytes(r.peak_reserved_bytes), 100 * r.fragmentation,
                               r.memviz_fragmentation ? fmt::format("{:.3f}", *r.memviz_fragmentation) : std::string("-"));
    std::cout << "  frag.: 1 - largest free block / free bytes in the reserved segments, in %, the largest at the end "
                 "of any step (warm-up included); memviz: PyTorch MemoryViz's calculate_fragmentation, sum of squared "
                 "free gaps / (sum of segment sizes)^2, 1 = the free memory in one piece, toward 0 = scattered, the "
                 "lowest at the end of a step with free memory (-: none had)\n";
  }
  // a GPU run's categories are its streams' (the host threads' spans are in `host` above and the
  // critical path below; tester40 #4: the dense part's host time fell 6x while this rose)
  // summed over ranks and steps, and per rank and step (tester41 #10: the sums read as a step time)
  const int64_t rank_steps = std::max<int64_t>(1, counted * static_cast<int64_t>(st.ranks.size()));
  std::cout << (st.whole_trace
                    ? fmt::format("\ntime by op category (union per category on each rank): summed over {} rank{} "
                                  "over the whole trace, and per rank\n",
                                  st.ranks.size(), st.ranks.size() == 1 ? "" : "s")
                    : fmt::format("\ntime by op category (union per category on each rank{}): summed over {} rank{} x {} "
                                  "{}step{}, and per rank and step\n",
                                  st.stream_ranks && !imported ? ", GPU streams" : "", st.ranks.size(),
                                  st.ranks.size() == 1 ? "" : "s", counted, st.drain_steps > 0 ? "counted " : "measured ",
                                  counted == 1 ? "" : "s"));
  for (int c = 0; c < ss::kNumCategories; ++c) {
    int64_t total = 0;
    for (const auto& r : st.ranks) total += r.by_category_ns[static_cast<size_t>(c)];
    if (total > 0)
      std::cout << fmt::format("  {:<10} {:>12} {:>12}\n", ss::to_string(static_cast<ss::OpCategory>(c)), ms(total),
                               ss::format_duration(total / rank_steps));
  }
  if (st.whole_trace) std::cout << top_ops_text(session, st);  // what took the time, by op name
  std::cout << (st.whole_trace ? fmt::format("\ncritical path: what bounded the whole trace (dependencies inferred), {}\n",
                                             ms(st.critical_path_ns))
                               : fmt::format("\ncritical path: what bounded the steps (dependencies inferred), {} over {} step{}\n",
                                             ms(st.critical_path_ns), counted, counted == 1 ? "" : "s"));
  // the name columns as wide as their longest name (28 at least): grad_dist/low_rank_b_all_reduce
  // and the like must not push their row's figures out of line; an imported kernel's C++ name
  // (1,646 characters in trace_diff_test: tester34 D20) is cut in its middle at kMaxName, whole
  // in --json
  constexpr size_t kMaxName = 72;
  // the short names Nsight shows (tester38 #8: cut in its middle, a kernel lost its function name),
  // told apart where two kernels would read the same (tester40 #10)
  std::map<int32_t, std::string> short_of;
  {
    std::vector<int32_t> ids;
    for (const auto& e : st.critical_path)
      if (e.name_id >= 0) ids.push_back(e.name_id);
    for (const auto& c : st.collectives) ids.push_back(c.name_id);
    std::vector<std::string> whole;
    for (int32_t id : ids) whole.push_back(session.name(id));
    const auto shorts = ss::distinct_short_kernel_names(whole);
    for (size_t i = 0; i < ids.size(); ++i) short_of[ids[i]] = shorts[i];
  }
  const auto shown = [&](int32_t id) {
    const std::string& n = short_of.at(id);
    if (n.size() <= kMaxName) return n;
    return n.substr(0, kMaxName / 2 - 2) + "..." + n.substr(n.size() - (kMaxName - kMaxName / 2 - 1));
  };
  size_t w = 28;
  for (size_t i = 0; i < st.critical_path.size() && (top <= 0 || static_cast<int64_t>(i) < top); ++i)  // the rows shown
    if (st.critical_path[i].name_id >= 0) w = std::max(w, shown(st.critical_path[i].name_id).size());
  for (const auto& c : st.collectives)
    w = std::max(w, shown(c.name_id).size() + (c.check_count > 0 ? std::string_view("/split_check").size() : 0));
  std::cout << fmt::format("  {:<{}} {:<10} {:>11} {:>7} {:>9} {:>14}\n", "op", w, "category", "on path", "share",
                           "top rank", "steps bounded");
  // the top rows by share, the rest in one line (tester60c F7: 244 rows of a real trace); --json has all
  std::cout << critical_path_rows_text(
      st, [&](int32_t id) { return id < 0 ? std::string("(gap: untraced)") : shown(id); }, w, top);
  if (!st.collectives.empty()) {
    std::cout << (st.stream_ranks && !imported
                      ? "\ncollectives, per step (summed over ranks; the host threads' spans: the GPU copies and "
                        "kernels that carried them are in the GPU figures)\n"
                      : st.whole_trace ? "\ncollectives, over the whole trace (summed over ranks)\n"
                                       : "\ncollectives, per step (summed over ranks)\n");
    // tester49 F7: what the ranks sent (the rank table's "bytes sent"), the received apart; not their sum
    std::cout << "  (bytes sent: what the ranks put on the wire to their peers, as the rank table's; a ring "
                 "all-reduce of B bytes on n ranks sends 2(n-1)/n x B per rank, B itself at n = 2; in whole "
                 "elements, 2(n-1) x B over the ranks)\n";
    // tester51 F4: the check's bytes were in its collective's, its count was not
    if (std::any_of(st.collectives.begin(), st.collectives.end(), [](const auto& c) { return c.check_count > 0; }))
      std::cout << "  (NAME/split_check: Embedscope's all-gather of the split sizes before each all-to-all and "
                   "reduce-scatter, not run by TorchRec; its count and bytes are its own, not in NAME's row above "
                   "it; its time is in NAME's op: -)\n";
    std::cout << fmt::format("  {:<{}} {:>7} {:>12} {:>14} {:>11} {:>11} {:>17}\n", "name", w, "count", "bytes sent",
                             "bytes received", "time", "exposed", "waiting for peers");
    for (const auto& c : st.collectives) {
      std::cout << fmt::format("  {:<{}} {:>7.1f} {:>12} {:>14} {:>11} {:>11} {:>17}\n", shown(c.name_id), w,
                               static_cast<double>(c.count) / static_cast<double>(counted),
                               bytes_text(c.bytes_sent / counted), bytes_text(c.bytes_received / counted),
                               ms(c.time_ns / counted),
                               ms(c.exposed_ns / counted), ms(c.wait_ns / counted));
      if (c.check_count > 0)
        std::cout << fmt::format("  {:<{}} {:>7.1f} {:>12} {:>14} {:>11} {:>11} {:>17}\n", shown(c.name_id) + "/split_check",
                                 w, static_cast<double>(c.check_count) / static_cast<double>(counted),
                                 bytes_text(c.check_bytes_sent / counted), bytes_text(c.check_bytes_received / counted), "-",
                                 "-", "-");
    }
  }
  std::cout << peer_waits_text(st, counted);
  return 0;
}

struct StatsState {
  std::string file;
  bool json = false;
  bool keep_last_step = false;
  int64_t top = kStatsTopRows;
};

}  // namespace

Command add_stats_command(CLI::App& app) {
  auto s = std::make_shared<StatsState>();
  auto* stats = app.add_subcommand("stats", "Step time, overlap, exposed communication and load imbalance of a session");
  stats->add_option("session", s->file, "Session file (.db)")->required();
  stats->add_flag("--json", s->json, "Print the figures as one JSON object on stdout");
  stats->add_flag("--keep-last-step", s->keep_last_step,
                  "GPU kernel figures: keep the last profiler step (HTA drops it by default)");
  stats->add_option("--top", s->top,
                    "Rows of the critical path and of the GPU kernel breakdown shown, most time first; 0: all "
                    "(--json has every row)")
      ->default_val(kStatsTopRows)
      ->check(CLI::NonNegativeNumber);
  return {stats, [s] { return cmd_stats(s->file, s->json, s->keep_last_step, s->top); }, [s] { return s->json; }};
}

}  // namespace embedscope::cli

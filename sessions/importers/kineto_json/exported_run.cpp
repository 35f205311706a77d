#include "importers/kineto_json/exported_run.h"

#include <algorithm>
#include <array>
#include <cstdint>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embedscope/sessions/model/metadata_keys.h"

namespace embedscope::sessions::importers::kineto {

namespace {
constexpr std::array<std::string_view, 3> kPipelines{"base", "sparse_dist", "semi_sync"};
constexpr std::array<std::string_view, 8> kEnds{"running", "complete", "cancelled",   "crashed",
                                                "oom",     "hang",     "bad_input", "write_failed"};
constexpr int64_t kMaxPlannedSteps = int64_t{1} << 53;
constexpr const char* kAsForeign =
    "the trace is imported without the exported run's pipeline, planned steps and end, as a foreign trace "
    "(every profiler step counted, as a complete run's)";

bool one_of(std::string_view v, const auto& names) { return std::find(names.begin(), names.end(), v) != names.end(); }

/// `v` as compact JSON, cut to 60 characters (a hand-edited value may be long).
std::string shown(const nlohmann::json& v) {
  std::string t = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (t.size() > 60) t = t.substr(0, 57) + "...";
  return t;
}

/// "pipeline semi_sync, 4 planned steps, ended crashed (message)": one file's keys in words.
std::string keys_text(const ExportedRunKeys& k) {
  return fmt::format("pipeline {}, {}, ended {}{}", k.pipeline,
                     k.planned_steps > 0 ? fmt::format("{} planned steps", k.planned_steps) : std::string("planned steps unknown"),
                     k.ended, k.end_message.empty() ? "" : fmt::format(" ({})", k.end_message));
}
}  // namespace

void read_exported_run(std::string_view raw, const Where& where, const std::string& at, RankTrace& tr,
                       ImportProblems& problems) {
  const auto v = nlohmann::json::parse(raw.begin(), raw.end(), nullptr, false);
  if (!v.is_object()) return;  // not an Embedscope export's object
  const auto ex = v.find("exporter");
  if (ex == v.end() || !ex->is_string() || ex->get_ref<const std::string&>().rfind("embedscope export", 0) != 0) return;
  if (!v.contains("pipeline") && !v.contains("planned_steps") && !v.contains("ended") && !v.contains("end_message"))
    return;  // an export written before these keys: as before
  ExportedRunKeys k;
  bool bad = false;
  auto problem = [&](const char* key, const std::string& what) {
    bad = true;
    problems.add("bad_exported_run_key", Severity::error, where,
                 fmt::format("\"embedscope.{}\" of the Embedscope export at {} {}: {}", key, at, what, kAsForeign));
  };
  if (const auto p = v.find("pipeline"); p == v.end())
    problem("pipeline", "is missing (the exported run's pipeline: base, sparse_dist or semi_sync)");
  else if (!p->is_string() || !one_of(p->get_ref<const std::string&>(), kPipelines))
    problem("pipeline", fmt::format("is {}, not a pipeline (base, sparse_dist or semi_sync)", shown(*p)));
  else
    k.pipeline = p->get<std::string>();
  if (const auto s = v.find("planned_steps"); s != v.end()) {
    const bool in_range = (s->is_number_unsigned() && s->get<uint64_t>() >= 1 &&
                           s->get<uint64_t>() <= static_cast<uint64_t>(kMaxPlannedSteps)) ||
                          (s->is_number_integer() && !s->is_number_unsigned() && s->get<int64_t>() >= 1);
    if (!in_range)
      problem("planned_steps", fmt::format("is {}, not an integer in [1, 2^53] (the exported run's planned measured steps)",
                                           shown(*s)));
    else
      k.planned_steps = s->get<int64_t>();
  }
  if (const auto e = v.find("ended"); e == v.end())
    problem("ended", "is missing (how the exported run ended: complete, crashed, ...)");
  else if (!e->is_string() || !one_of(e->get_ref<const std::string&>(), kEnds))
    problem("ended", fmt::format("is {}, not how a run ends (running, complete, cancelled, crashed, oom, hang, "
                                 "bad_input or write_failed)",
                                 shown(*e)));
  else
    k.ended = e->get<std::string>();
  if (const auto m = v.find("end_message"); m != v.end()) {
    if (!m->is_string())
      problem("end_message", fmt::format("is {}, not a string (the exported run's end message)", shown(*m)));
    else
      k.end_message = m->get<std::string>();
  }
  tr.exported_run_state = bad ? ExportedRunState::bad : ExportedRunState::keys;
  tr.exported_run = bad ? ExportedRunKeys{} : std::move(k);
}

bool record_exported_run(const std::vector<RankTrace>& kept, ImportProblems& problems, SessionWriter& w) {
  const RankTrace* with = nullptr;  // the first rank whose file carries valid keys
  const RankTrace* without = nullptr;
  for (const auto& r : kept) {
    if (r.exported_run_state == ExportedRunState::bad) return false;  // said by bad_exported_run_key
    if (r.exported_run_state == ExportedRunState::none) {
      if (!without) without = &r;
      continue;
    }
    if (!with) {
      with = &r;
    } else if (!(r.exported_run == with->exported_run)) {
      problems.add("exported_run_mismatch", Severity::error, {r.file, -1},
                   fmt::format("{} (rank {}) and {} (rank {}) are exports of different runs: {} vs {}; {}", with->file,
                               with->rank, r.file, r.rank, keys_text(with->exported_run), keys_text(r.exported_run),
                               kAsForeign));
      return false;
    }
  }
  if (!with) return false;  // no Embedscope export with the keys: a foreign trace
  if (without) {
    problems.add("exported_run_mismatch", Severity::error, {without->file, -1},
                 fmt::format("{} (rank {}) carries an Embedscope export's run ({}) but {} (rank {}) does not; {}",
                             with->file, with->rank, keys_text(with->exported_run), without->file, without->rank,
                             kAsForeign));
    return false;
  }
  const ExportedRunKeys& k = with->exported_run;
  w.set_metadata(meta::kPipeline, k.pipeline);
  if (k.planned_steps > 0) w.set_metadata(meta::kExportedRunPlannedSteps, std::to_string(k.planned_steps));
  w.set_metadata(meta::kExportedRunEnded, k.ended);
  if (!k.end_message.empty()) w.set_metadata(meta::kExportedRunEndMessage, k.end_message);
  return true;
}

}  // namespace embedscope::sessions::importers::kineto

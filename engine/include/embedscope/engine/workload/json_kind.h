#pragma once
// What one of Embedscope's own JSON files is, told from its first 64 KiB: a scaling study
// (`embedscope scaling --json`), a hardware profile (resources/hardware, `calibrate -o`), a
// sharding plan (`plan --json`), a workload (resources/workloads, an lm_embedding workload).
// One recognition for the commands that get such a file where another kind belongs: `stats`
// (a JSON file is no session) and `--simulate FILE` (tester46 F12: a scaling study given as a
// profile got "/batch_size_per_gpu: unknown key").

#include <string>

namespace embedscope::engine {

enum class JsonFileKind { none, scaling_study, hardware_profile, sharding_plan, workload };

/// The kind of `file` from its first 64 KiB (gunzipped when gzip): a scaling study starts with
/// the key "batch_size_per_gpu"; a profile has a "gpu" object; a plan a non-empty "tables" array
/// whose first entry has "sharding_type"; a workload "model": "lm_embedding", or "tables" and
/// "devices". JsonFileKind::none for anything else, for a file whose first 64 KiB are not a
/// whole JSON object (other than a scaling study), and for a file that cannot be read. Never throws.
JsonFileKind json_file_kind(const std::string& file);

/// The kind as a noun phrase for messages: "a scaling study (embedscope scaling --json)",
/// "a hardware profile", "a sharding plan (embedscope plan --json)", "a workload"; "" for none.
const char* json_file_kind_name(JsonFileKind kind);

}  // namespace embedscope::engine

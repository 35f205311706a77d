#pragma once
// What the Nsight importer reads from one export before it becomes ranks and lanes: the
// events with their times in the export's own ns, the processes, threads and GPUs, the
// producer and the capture's absolute start.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "embedscope/sessions/importers/common/import_problems.h"
#include "importers/common/interner.h"
#include "importers/nsys_sqlite/database.h"

namespace embedscope::sessions::importers::nsys {

/// The EXPORT_SCHEMA_VERSION this importer was written against and checked on.
inline constexpr const char* kKnownSchemaVersion = "3.16.1";

enum class EventKind : uint8_t {
  kernel,          ///< CUPTI_ACTIVITY_KIND_KERNEL
  memcpy,          ///< CUPTI_ACTIVITY_KIND_MEMCPY
  memset,          ///< CUPTI_ACTIVITY_KIND_MEMSET
  sync,            ///< CUPTI_ACTIVITY_KIND_SYNCHRONIZATION
  runtime,         ///< CUPTI_ACTIVITY_KIND_RUNTIME (runtime and driver API calls)
  nvtx_push_pop,   ///< NVTX_EVENTS push/pop range: nests on its thread
  nvtx_start_end   ///< NVTX_EVENTS start/end range: may overlap anything, may end on another thread
};

inline bool on_gpu(EventKind k) { return k <= EventKind::sync; }

/// The process of a serialized GlobalId (globalPid or globalTid): the id without its 24 thread
/// bits, so processes of different hosts / VMs stay distinct. Nsight's own scripts split a
/// globalTid as pid = (globalTid >> 24) & 0xFFFFFF, tid = globalTid & 0xFFFFFF.
inline int64_t process_key(int64_t global_id) { return global_id >> 24; }
inline int64_t pid_of(int64_t key) { return key & 0xFFFFFF; }
inline int64_t tid_of(int64_t global_tid) { return global_tid & 0xFFFFFF; }

struct Event {
  int64_t start = 0, end = 0;   ///< ns on the export's clock
  int64_t process = -1;         ///< process_key(); -1 when the row has no globalPid / globalTid
  int64_t thread = -1;          ///< host events: globalTid (-1 none)
  int64_t device = -1, stream = -1;  ///< GPU events: deviceId, streamId
  uint64_t correlation = 0;     ///< correlationId (0 none)
  int64_t bytes = 0;            ///< memcpy / memset bytes
  uint32_t name = 0;            ///< Interner id
  EventKind kind = EventKind::kernel;
  /// Did not end (its end before its start, an NVTX range without an end): `end` == `start`, the
  /// name marked did_not_end_name (model/did_not_end.h); no step, no collective, left out of the
  /// time range.
  bool unfinished = false;
};

struct Capture {
  std::string file;
  int64_t file_bytes = 0;
  std::string producer;         ///< "NVIDIA Nsight Systems 2024.6.2.25; EXPORT_SCHEMA_VERSION 3.16.1"
  std::string schema_version;   ///< EXPORT_SCHEMA_VERSION ("" absent)
  int64_t epoch_ns = -1;        ///< TARGET_INFO_SESSION_START_TIME.utcEpochNs: Unix ns of export time 0; -1 absent
  std::string host;             ///< TARGET_INFO_SYSTEM_ENV Hostname, else META_DATA_EXPORT EXPORT_HOST
  struct Gpu {
    std::string name;
    int64_t memory_bytes = 0;
  };
  std::map<int64_t, Gpu> gpus;                     ///< TARGET_INFO_GPU by device id
  std::map<int64_t, std::string> process_names;    ///< by process_key
  std::map<int64_t, std::string> thread_names;     ///< by globalTid
  std::vector<Event> events;
  struct Step {
    int64_t process = -1, number = 0, start = 0, end = 0;
  };
  std::vector<Step> steps;      ///< NVTX ranges named ProfilerStep#N
};

/// Reads every table the importer knows from `db`. Absent tables and columns, rows with a
/// negative duration and unfinished NVTX ranges are counted in `problems`, never thrown (the
/// latter two are kept as events that did not end: Event::unfinished);
/// SQLite failures throw ImportError (Database::each).
Capture read_capture(const Database& db, Interner& names, ImportProblems& problems);

}  // namespace embedscope::sessions::importers::nsys

#include "importers/nsys_sqlite/capture.h"

#include <algorithm>
#include <cctype>
#include <unordered_map>

#include <fmt/format.h>

#include "embedscope/sessions/model/did_not_end.h"

namespace embedscope::sessions::importers::nsys {

namespace {

/// Times beyond this (2^61 ns, 73 years) are refused, so that epoch + time and their
/// differences never overflow int64.
constexpr int64_t kMaxAbsNs = int64_t{1} << 61;

/// A column the importer reads: required ones make the table unreadable when absent; optional
/// ones read as NULL.
struct Col {
  const char* name;
  bool required;
};

/// Reads the tables of one export; the `missing` list feeds the missing_column problem and
/// the unknown-version warning.
class Reader {
 public:
  Reader(const Database& db, Interner& names, ImportProblems& problems) : db_(db), names_(names), problems_(problems) {}

  Capture run();

 private:
  /// "SELECT a, b, NULL, ... FROM table", or "" when the table is absent or a required column
  /// is missing (counted).
  std::string select(const std::string& table, const std::vector<Col>& cols, const std::string& what_absent);
  uint32_t string_id(int64_t id);
  void read_meta(Capture& c);
  void read_strings_and_enums();
  void read_targets(Capture& c);
  void read_gpu(Capture& c, const std::string& table, EventKind kind);
  void read_runtime(Capture& c);
  void read_nvtx(Capture& c);
  /// False (counted as bad_timestamp) for times beyond +-2^61 ns; an end before the start is
  /// counted as negative_duration and makes `e` an event that did not end (end = start,
  /// unfinished; its name is marked by mark_unfinished once it has one).
  bool valid_span(Event& e, const std::string& table, int64_t row);
  /// False (counted as bad_timestamp, data_loss: the row is skipped) when the start (column 0)
  /// or the end (column 1; NULL allowed where `end_may_be_null`) is not an INTEGER cell (text,
  /// a fraction, a blob: it would read as 0), or the start is negative (Nsight's times count
  /// from the capture's start, so nothing starts before it). tester46 F2: such a start made one
  /// kernel 770 ms or 6.2 s long, with no problem recorded.
  bool integer_times(const Row& r, const std::string& table, int64_t row, bool end_may_be_null = false);
  /// False (counted as bad_stream, data_loss: the row is skipped) when a GPU row's deviceId
  /// (column 2) or streamId (column 3) is not an INTEGER cell: read as 0 it put the row on a
  /// device / stream the capture does not have (tester48 F11).
  bool integer_stream(const Row& r, const std::string& table, int64_t row);
  /// The name of an event that did not end, marked with did_not_end_name; others unchanged.
  void mark_unfinished(Event& e) {
    if (e.unfinished) e.name = names_.id(did_not_end_name(names_.text(e.name)));
  }

  const Database& db_;
  Interner& names_;
  ImportProblems& problems_;
  std::unordered_map<int64_t, std::string> strings_;
  std::unordered_map<int64_t, uint32_t> interned_;
  std::map<int64_t, std::string> copy_kinds_, mem_kinds_, sync_types_;
  std::map<std::string, int64_t> event_types_;
 public:
  std::vector<std::string> missing;  ///< "TABLE" or "TABLE.column"
};

std::string Reader::select(const std::string& table, const std::vector<Col>& cols, const std::string& what_absent) {
  if (!db_.has_table(table)) {
    if (!what_absent.empty())
      problems_.add(fmt::format("no_{}", what_absent), Severity::info, {db_.name(), -1},
                    fmt::format("no {} in capture ({} absent)", what_absent == "nvtx" ? std::string("NVTX") : what_absent, table));
    return "";
  }
  std::string list;
  for (const Col& c : cols) {
    const bool has = db_.has_column(table, c.name);
    if (!has) {
      missing.push_back(fmt::format("{}.{}", table, c.name));
      if (c.required) {
        const int64_t rows = db_.scalar(fmt::format("SELECT count(*) FROM \"{}\"", table));
        problems_.add_with("missing_required_column", Severity::data_loss, {db_.name(), -1}, [&] {
          return fmt::format("{} has no column '{}': its {} row(s) were not imported", table, c.name, rows);
        }, rows);
        return "";
      }
    }
    list += (list.empty() ? "" : ", ") + (has ? fmt::format("\"{}\"", c.name) : std::string("NULL"));
  }
  return fmt::format("SELECT {} FROM \"{}\"", list, table);
}

uint32_t Reader::string_id(int64_t id) {
  if (auto it = interned_.find(id); it != interned_.end()) return it->second;
  auto s = strings_.find(id);
  uint32_t v;
  if (s != strings_.end()) {
    v = names_.id(s->second);
  } else {
    problems_.add_with("unknown_string_id", Severity::error, {db_.name(), -1},
                       [&] { return fmt::format("StringIds has no id {}: the name reads 'string {}'", id, id); });
    v = names_.id(fmt::format("string {}", id));
  }
  interned_.emplace(id, v);
  return v;
}

bool Reader::integer_times(const Row& r, const std::string& table, int64_t row, bool end_may_be_null) {
  for (int col : {0, 1}) {
    const int type = r.type(col);
    if (type == SQLITE_INTEGER || (col == 1 && end_may_be_null && type == SQLITE_NULL)) continue;
    const char* what = type == SQLITE_TEXT    ? "text"
                       : type == SQLITE_FLOAT ? "a fraction"
                       : type == SQLITE_BLOB  ? "a blob"
                                              : "NULL";
    problems_.add_with("bad_timestamp", Severity::data_loss, {db_.name(), -1}, [&] {
      return fmt::format("{} row {}: {} '{}' is {}, not an integer of ns, skipped", table, row,
                         col == 0 ? "start" : "end", type == SQLITE_BLOB ? std::string("...") : r.text(col), what);
    });
    return false;
  }
  if (const int64_t start = r.i(0); start < 0) {
    problems_.add_with("bad_timestamp", Severity::data_loss, {db_.name(), -1}, [&] {
      return fmt::format("{} row {}: start {} ns is before the capture's start (Nsight's times count from it), skipped",
                         table, row, start);
    });
    return false;
  }
  return true;
}

bool Reader::integer_stream(const Row& r, const std::string& table, int64_t row) {
  for (int col : {2, 3}) {
    const int type = r.type(col);
    if (type == SQLITE_INTEGER) continue;
    const char* what = type == SQLITE_TEXT    ? "text"
                       : type == SQLITE_FLOAT ? "a fraction"
                       : type == SQLITE_BLOB  ? "a blob"
                                              : "NULL";
    problems_.add_with("bad_stream", Severity::data_loss, {db_.name(), -1}, [&] {
      return fmt::format("{} row {}: {} '{}' is {}, not an integer, skipped", table, row,
                         col == 2 ? "deviceId" : "streamId", type == SQLITE_BLOB ? std::string("...") : r.text(col), what);
    });
    return false;
  }
  return true;
}

bool Reader::valid_span(Event& e, const std::string& table, int64_t row) {
  const int64_t start = e.start, end = e.end;
  if (start < -kMaxAbsNs || start > kMaxAbsNs || end < -kMaxAbsNs || end > kMaxAbsNs) {
    problems_.add_with("bad_timestamp", Severity::data_loss, {db_.name(), -1}, [&] {
      return fmt::format("{} row {}: start {} / end {} ns is beyond +-2^61 ns (73 years), skipped", table, row, start, end);
    });
    return false;
  }
  if (end >= start) return true;
  problems_.add_with("negative_duration", Severity::error, {db_.name(), -1}, [&] {
    return fmt::format("{} row {}: end {} before start {} (unfinished), kept as a zero-length op marked \"(did not "
                       "end)\"; the time range comes from valid events", table, row, end, start);
  });
  e.end = e.start;
  e.unfinished = true;
  return true;
}

void Reader::read_meta(Capture& c) {
  std::map<std::string, std::string> meta;
  db_.each("SELECT name, value FROM META_DATA_EXPORT", [&](const Row& r) { meta.emplace(r.text(0), r.text(1)); });
  c.schema_version = meta["EXPORT_SCHEMA_VERSION"];
  const std::string product = meta.count("EXPORT_PRODUCT_NAME") ? meta["EXPORT_PRODUCT_NAME"] : "Nsight Systems";
  c.producer = fmt::format("{} {}; EXPORT_SCHEMA_VERSION {}", product, meta["EXPORT_PRODUCT_VERSION"], c.schema_version);
  c.host = meta["EXPORT_HOST"];
}

void Reader::read_strings_and_enums() {
  if (db_.has_column("StringIds", "id") && db_.has_column("StringIds", "value"))
    db_.each("SELECT id, value FROM StringIds", [&](const Row& r) { strings_.emplace(r.i(0), r.text(1)); });
  else
    missing.push_back("StringIds");
  auto read_enum = [&](const std::string& table, std::map<int64_t, std::string>& out, int col) {
    if (db_.has_column(table, "id") && db_.has_column(table, col == 1 ? "name" : "label"))
      db_.each(fmt::format("SELECT id, {} FROM {}", col == 1 ? "name" : "label", table),
               [&](const Row& r) { out[r.i(0)] = r.text(1); });
  };
  // Nsight's values (2024.6) where the export has no enum table.
  copy_kinds_ = {{0, "CUDA_MEMCPY_KIND_UNKNOWN"}, {1, "CUDA_MEMCPY_KIND_HTOD"}, {2, "CUDA_MEMCPY_KIND_DTOH"},
                 {3, "CUDA_MEMCPY_KIND_HTOA"},    {4, "CUDA_MEMCPY_KIND_ATOH"}, {5, "CUDA_MEMCPY_KIND_ATOA"},
                 {6, "CUDA_MEMCPY_KIND_ATOD"},    {7, "CUDA_MEMCPY_KIND_DTOA"}, {8, "CUDA_MEMCPY_KIND_DTOD"},
                 {9, "CUDA_MEMCPY_KIND_HTOH"},    {10, "CUDA_MEMCPY_KIND_PTOP"}};
  mem_kinds_ = {{0, "Pageable"}, {1, "Pinned"}, {2, "Device"}, {3, "Array"}, {4, "Managed"}, {5, "Device Static"},
                {6, "Managed Static"}, {7, "Unknown"}};
  sync_types_ = {{0, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN"},
                 {1, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE"},
                 {2, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT"},
                 {3, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE"},
                 {4, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE"}};
  event_types_ = {{"NvtxMark", 34}, {"NvtxPushPopRange", 59}, {"NvtxStartEndRange", 60}, {"NvtxtMark", 65},
                  {"NvtxtPushPopRange", 70}, {"NvtxtStartEndRange", 71}};
  read_enum("ENUM_CUDA_MEMCPY_OPER", copy_kinds_, 1);
  read_enum("ENUM_CUDA_MEM_KIND", mem_kinds_, 2);
  read_enum("ENUM_CUPTI_SYNC_TYPE", sync_types_, 1);
  if (db_.has_column("ENUM_NSYS_EVENT_TYPE", "id") && db_.has_column("ENUM_NSYS_EVENT_TYPE", "name"))
    db_.each("SELECT id, name FROM ENUM_NSYS_EVENT_TYPE", [&](const Row& r) {
      if (event_types_.count(r.text(1))) event_types_[r.text(1)] = r.i(0);
    });
}

void Reader::read_targets(Capture& c) {
  if (db_.has_column("TARGET_INFO_SESSION_START_TIME", "utcEpochNs")) {
    db_.each("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME", [&](const Row& r) {
      if (c.epoch_ns < 0 && !r.null(0) && r.i(0) >= 0 && r.i(0) <= kMaxAbsNs) c.epoch_ns = r.i(0);
    });
  }
  if (c.epoch_ns < 0)
    problems_.add("no_session_start_time", Severity::info, {db_.name(), -1},
                  "TARGET_INFO_SESSION_START_TIME.utcEpochNs absent (or not a Unix time in ns): times are the export's "
                  "own ns, the session has no wall-clock anchor");
  if (db_.has_column("TARGET_INFO_SYSTEM_ENV", "name") && db_.has_column("TARGET_INFO_SYSTEM_ENV", "value"))
    db_.each("SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname' LIMIT 1",
             [&](const Row& r) { c.host = r.text(0); });
  const std::string gpu = select("TARGET_INFO_GPU", {{"id", true}, {"name", false}, {"totalMemory", false}}, "");
  if (!gpu.empty())
    db_.each(gpu, [&](const Row& r) { c.gpus.try_emplace(r.i(0), Capture::Gpu{r.text(1), r.i(2)}); });
  else if (!db_.has_table("TARGET_INFO_GPU"))
    missing.push_back("TARGET_INFO_GPU");
  const std::string proc = select("PROCESSES", {{"globalPid", true}, {"name", false}}, "");
  if (!proc.empty())
    db_.each(proc, [&](const Row& r) { c.process_names.try_emplace(process_key(r.i(0)), r.text(1)); });
  const std::string thr = select("ThreadNames", {{"globalTid", true}, {"nameId", true}}, "");
  if (!thr.empty())
    db_.each(thr, [&](const Row& r) { c.thread_names.try_emplace(r.i(0), names_.text(string_id(r.i(1)))); });
}

/// "CUDA_MEMCPY_KIND_DTOH" -> "DtoH" (Kineto's spelling of a copy's direction).
std::string copy_direction(const std::string& enum_name) {
  std::string s = enum_name;
  if (auto p = s.find("KIND_"); p != std::string::npos) s = s.substr(p + 5);
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s.compare(i, 2, "TO") == 0 && i > 0 && i + 2 < s.size()) out += "to", ++i;
    else out += s[i];
  }
  return out;
}

/// CUPTI's synchronization type -> Kineto's name of the record.
std::string sync_name(const std::string& enum_name) {
  if (enum_name.find("EVENT_SYNCHRONIZE") != std::string::npos) return "Event Sync";
  if (enum_name.find("STREAM_WAIT_EVENT") != std::string::npos) return "Stream Wait Event";
  if (enum_name.find("STREAM_SYNCHRONIZE") != std::string::npos) return "Stream Sync";
  if (enum_name.find("CONTEXT_SYNCHRONIZE") != std::string::npos) return "Context Sync";
  return "Unknown Sync";
}

void Reader::read_gpu(Capture& c, const std::string& table, EventKind kind) {
  std::vector<Col> cols{{"start", true}, {"end", true}, {"deviceId", true}, {"streamId", true},
                        {"correlationId", false}, {"globalPid", false}};
  const char* absent = kind == EventKind::kernel ? "kernels" : kind == EventKind::memcpy ? "memcpy"
                       : kind == EventKind::memset ? "memset" : "synchronization";
  if (kind == EventKind::kernel) {
    // The demangled name, as Kineto and the Nsight timeline show it; the short name where absent.
    const bool demangled = db_.has_column(table, "demangledName");
    cols.push_back({demangled ? "demangledName" : "shortName", true});
    if (!demangled && db_.has_table(table)) missing.push_back(table + ".demangledName");
  } else if (kind == EventKind::memcpy) {
    cols.insert(cols.end(), {{"bytes", false}, {"copyKind", false}, {"srcKind", false}, {"dstKind", false}});
  } else if (kind == EventKind::memset) {
    cols.insert(cols.end(), {{"bytes", false}, {"memKind", false}});
  } else {
    cols.push_back({"syncType", false});
  }
  const std::string sql = select(table, cols, absent);
  if (sql.empty()) return;
  int64_t row = 0;
  db_.each(sql + " ORDER BY rowid", [&](const Row& r) {
    ++row;
    if (!integer_times(r, table, row) || !integer_stream(r, table, row)) return;
    Event e;
    e.start = r.i(0);
    e.end = r.i(1);
    if (!valid_span(e, table, row)) return;
    e.kind = kind;
    e.device = r.i(2);
    e.stream = r.i(3);
    e.correlation = static_cast<uint64_t>(r.i(4));
    e.process = r.null(5) ? -1 : process_key(r.i(5));
    if (kind == EventKind::kernel) {
      e.name = string_id(r.i(6));
    } else if (kind == EventKind::memcpy) {
      e.bytes = r.i(6);
      auto kind_name = [&](const std::map<int64_t, std::string>& m, int col) {
        auto it = r.null(col) ? m.end() : m.find(r.i(col));
        return it == m.end() ? std::string("Unknown") : it->second;
      };
      e.name = names_.id(fmt::format("Memcpy {} ({} -> {})", copy_direction(kind_name(copy_kinds_, 7)),
                                     kind_name(mem_kinds_, 8), kind_name(mem_kinds_, 9)));
    } else if (kind == EventKind::memset) {
      e.bytes = r.i(6);
      auto it = r.null(7) ? mem_kinds_.end() : mem_kinds_.find(r.i(7));
      e.name = names_.id(fmt::format("Memset ({})", it == mem_kinds_.end() ? std::string("Unknown") : it->second));
    } else {
      auto it = r.null(6) ? sync_types_.end() : sync_types_.find(r.i(6));
      e.name = names_.id(sync_name(it == sync_types_.end() ? std::string() : it->second));
    }
    mark_unfinished(e);
    c.events.push_back(e);
  });
}

void Reader::read_runtime(Capture& c) {
  const std::string table = "CUPTI_ACTIVITY_KIND_RUNTIME";
  const std::string sql = select(table, {{"start", true}, {"end", true}, {"nameId", true}, {"globalTid", false},
                                         {"correlationId", false}}, "runtime");
  if (sql.empty()) return;
  int64_t row = 0;
  db_.each(sql + " ORDER BY rowid", [&](const Row& r) {
    ++row;
    if (!integer_times(r, table, row)) return;
    Event e;
    e.start = r.i(0);
    e.end = r.i(1);
    if (!valid_span(e, table, row)) return;
    e.kind = EventKind::runtime;
    e.name = string_id(r.i(2));
    e.thread = r.null(3) ? -1 : r.i(3);
    e.process = r.null(3) ? -1 : process_key(r.i(3));
    e.correlation = static_cast<uint64_t>(r.i(4));
    mark_unfinished(e);
    c.events.push_back(e);
  });
}

void Reader::read_nvtx(Capture& c) {
  const std::string table = "NVTX_EVENTS";
  const std::string sql = select(table, {{"start", true}, {"end", false}, {"eventType", true}, {"text", false},
                                         {"textId", false}, {"globalTid", false}}, "nvtx");
  if (sql.empty()) return;
  const int64_t push_pop = event_types_["NvtxPushPopRange"], start_end = event_types_["NvtxStartEndRange"];
  const int64_t t_push_pop = event_types_["NvtxtPushPopRange"], t_start_end = event_types_["NvtxtStartEndRange"];
  const int64_t mark = event_types_["NvtxMark"], t_mark = event_types_["NvtxtMark"];
  static const std::string kStep = "ProfilerStep#";
  int64_t row = 0;
  db_.each(sql + " ORDER BY rowid", [&](const Row& r) {
    ++row;
    const int64_t type = r.i(2);
    if (type == mark || type == t_mark) {
      problems_.add("nvtx_marks_not_stored", Severity::info, {db_.name(), -1},
                    "NVTX marks (instants) are counted, not stored: a session holds spans");
      return;
    }
    if (type != push_pop && type != start_end && type != t_push_pop && type != t_start_end) return;  // domains, categories, names
    if (!integer_times(r, table, row, true)) return;
    Event e;
    e.start = r.i(0);
    if (r.null(1)) {
      problems_.add_with("unfinished_nvtx_range", Severity::error, {db_.name(), -1}, [&] {
        return fmt::format("NVTX_EVENTS row {}: a range without an end (never popped or ended), kept as a zero-length op "
                           "marked \"(did not end)\"; the time range comes from valid events", row);
      });
      e.end = e.start;
      e.unfinished = true;
    } else {
      e.end = r.i(1);
    }
    if (!valid_span(e, table, row)) return;
    e.kind = type == push_pop || type == t_push_pop ? EventKind::nvtx_push_pop : EventKind::nvtx_start_end;
    e.thread = r.null(5) ? -1 : r.i(5);
    e.process = r.null(5) ? -1 : process_key(r.i(5));
    std::string text = r.text(3);
    if (r.null(3)) text = r.null(4) ? std::string("(unnamed NVTX range)") : names_.text(string_id(r.i(4)));
    if (!e.unfinished && text.compare(0, kStep.size(), kStep) == 0 && text.size() > kStep.size() &&
        std::all_of(text.begin() + static_cast<std::ptrdiff_t>(kStep.size()), text.end(),
                    [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); }) &&
        text.size() - kStep.size() < 18) {
      c.steps.push_back({e.process, std::stoll(text.substr(kStep.size())), e.start, e.end});
      return;
    }
    e.name = names_.id(e.unfinished ? did_not_end_name(text) : text);
    c.events.push_back(e);
  });
}

Capture Reader::run() {
  Capture c;
  c.file = db_.name();
  read_meta(c);
  read_strings_and_enums();
  read_targets(c);
  read_gpu(c, "CUPTI_ACTIVITY_KIND_KERNEL", EventKind::kernel);
  read_gpu(c, "CUPTI_ACTIVITY_KIND_MEMCPY", EventKind::memcpy);
  read_gpu(c, "CUPTI_ACTIVITY_KIND_MEMSET", EventKind::memset);
  read_gpu(c, "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", EventKind::sync);
  read_runtime(c);
  read_nvtx(c);
  std::vector<std::string> cols;
  for (const auto& m : missing)
    if (m.find('.') != std::string::npos) cols.push_back(m);
  if (!cols.empty()) {
    std::string list;
    for (const auto& m : cols) list += (list.empty() ? "" : ", ") + m;
    problems_.add("missing_column", Severity::error, {db_.name(), -1},
                  fmt::format("columns this importer reads are absent (read as NULL, or the table skipped where "
                              "missing_required_column says so): {}", list),
                  static_cast<int64_t>(cols.size()));
  }
  if (c.schema_version != kKnownSchemaVersion) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
    problems_.add("unknown_schema_version", Severity::info, {db_.name(), -1},
                  fmt::format("EXPORT_SCHEMA_VERSION {} is not {} (the version this importer was written against); "
                              "tables and columns were read by name; missing: {}",
                              c.schema_version.empty() ? std::string("(empty)") : c.schema_version, kKnownSchemaVersion,
                              list.empty() ? std::string("none") : list));
  }
  return c;
}

}  // namespace

Capture read_capture(const Database& db, Interner& names, ImportProblems& problems) {
  return Reader(db, names, problems).run();
}

}  // namespace embedscope::sessions::importers::nsys

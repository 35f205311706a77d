#include "embedscope/sessions/importers/importer.h"

#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "embedscope/sessions/importers/kineto_json/kineto_json.h"
#include "embedscope/sessions/importers/nsys_sqlite/nsys_sqlite.h"
#include "embedscope/sessions/importers/torch_memory_snapshot/import.h"
#include "embedscope/sessions/importers/torch_memory_snapshot/pickle.h"
#include "importers/common/input_file.h"
#include "store/held_files.h"

namespace embedscope::sessions::importers {

namespace fs = std::filesystem;

namespace {
bool probe_kineto_file(const std::string&, std::string_view head) { return probe_kineto_json(head); }
}  // namespace

const std::vector<Importer>& all_importers() {
  static const std::vector<Importer> v{
      {"kineto_json", "PyTorch profiler (Kineto) Chrome-trace JSON (.json, .json.gz)", &probe_kineto_file,
       &import_kineto_json},
      {"nsys_sqlite", "Nsight Systems SQLite exports (nsys export --type sqlite)", &probe_nsys_sqlite,
       &import_nsys_sqlite}};
  return v;
}

namespace {
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

namespace {
// The SQLite files named .db (embedscope sessions) directly in `dir`, sorted.
std::vector<std::string> session_files_in(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().string();
    if (!ends_with(name, ".db") || !e.is_regular_file(ec)) continue;
    // a descriptor a live writer of this process would lose its SQLite locks to is kept (held_files.h)
    if (sessions::detail::read_file_prefix(name, 16) == std::string("SQLite format 3\0", 16)) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}
}  // namespace

std::vector<std::string> expand_inputs(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const auto& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<std::string> found;
      for (const auto& e : fs::directory_iterator(p, ec)) {
        const std::string name = e.path().string();
        if (e.is_regular_file() && (ends_with(name, ".json") || ends_with(name, ".json.gz") || ends_with(name, ".sqlite") ||
                                    ends_with(name, ".pickle") || ends_with(name, ".pickle.gz")))
          found.push_back(name);
      }
      if (found.empty()) {
        // a folder of sessions (what `scaling -o DIR` writes): say what it holds (tester46 F19)
        if (const std::vector<std::string> dbs = session_files_in(p); !dbs.empty())
          throw ImportError(fmt::format("{} holds {} session{} (.db), not traces to import: open them by name "
                                        "(embedscope-ui {}{}; embedscope stats {})",
                                        p, dbs.size(), dbs.size() == 1 ? "" : "s", dbs.front(),
                                        dbs.size() > 1 ? " ..., or embedscope-ui --compare " + dbs[0] + " " + dbs[1] : "",
                                        dbs.front()));
        throw ImportError(fmt::format("{}: a directory without .json, .json.gz, .sqlite, .pickle or .pickle.gz files", p));
      }
      std::sort(found.begin(), found.end());
      for (const std::string& f : found)
        if (::access(f.c_str(), R_OK) != 0) throw ImportError(fmt::format("{}: cannot open: {}", f, std::strerror(errno)));
      out.insert(out.end(), found.begin(), found.end());
    } else if (fs::exists(p, ec)) {
      // a file this process may not read said as such (was read as empty: "the file is empty (3
      // bytes): nothing to import")
      if (::access(p.c_str(), R_OK) != 0) throw ImportError(fmt::format("{}: cannot open: {}", p, std::strerror(errno)));
      out.push_back(p);
    } else if (ec && ec != std::errc::no_such_file_or_directory) {  // a symbolic link loop, no permission on a folder
      throw ImportError(fmt::format("{}: cannot open: {}", p, ec.message()));
    } else {
      throw ImportError(fmt::format("{}: no such file or directory", p));
    }
  }
  return out;
}

std::string directory_rank_hint(const std::string& dir) {
  return fmt::format("; every .pickle / .pickle.gz file of a directory ({}) is imported as one rank: remove it from "
                     "there, or import the snapshots by name",
                     dir);
}

torch_snapshot::MemorySnapshotFile load_rank_snapshot(const std::string& file,
                                                      const std::map<std::string, std::string>& directory_of) {
  try {
    return torch_snapshot::load_snapshot(file);
  } catch (const torch_snapshot::SnapshotError& e) {
    const auto dir = directory_of.find(file);
    if (dir == directory_of.end()) throw;
    throw torch_snapshot::SnapshotError(e.what() + directory_rank_hint(dir->second));
  }
}

namespace {
// What is wrong with a file whose start cannot be told (gzip that inflates to too little, an
// SQLite file with a damaged header page): "" for a file that is whole. detect() refuses such a
// file with this reason; select_inputs() counts it as a damaged file of a directory (tester45
// F12.6: damage, not a config.json, is what deserves more than info).
std::string damage_of(const std::string& path, const std::string& head) {
  if (head.compare(0, 16, std::string("SQLite format 3\0", 16)) == 0) {
    if (const std::string damage = sqlite_file_damage(path); !damage.empty())
      return fmt::format("{}: the SQLite file is truncated or corrupt ({}); nothing imported", path, damage);
    return "";
  }
  if (is_gzip_file(path))  // too little of it inflates to tell its format (tester45 F5: "not a format")
    if (const InputText in = read_input(path); !in.gzip_error.empty())
      return fmt::format("{}: gzip data cut short or damaged after {} uncompressed bytes ({}); no event imported", path,
                         in.size, in.gzip_error);
  return "";
}

// tester43 F22: a directory's .pickle / .pickle.gz files are its ranks (docs/sessions.md), so one that is
// not a snapshot of a protocol the reader takes is refused, as a truncated one is, rather than
// left out with the rank missing. Throws ImportError "FILE: not a PyTorch memory snapshot (...)".
bool gzipped(const std::string& f) {
  const std::string raw = sessions::detail::read_file_prefix(f, 2);
  return raw.size() == 2 && pickle::is_gzip(raw);
}

void refuse_non_snapshot_pickle(const std::string& f, const std::string& dir) {
  const std::string head = read_head(f, 2);  // gunzipped when gzip
  if (pickle::is_pickle(head)) return;
  const std::string where = directory_rank_hint(dir);
  if (const int protocol = pickle::old_pickle_protocol(head); protocol >= 0)
    throw ImportError(pickle::old_pickle_message(f, protocol) + where);
  std::string starts;
  for (unsigned char c : head) starts += fmt::format(" 0x{:02x}", c);
  throw ImportError(fmt::format("{}: not a PyTorch memory snapshot ({}){}", f,
                                head.empty() ? std::string("empty or unreadable")
                                             : fmt::format("a pickle starts with byte 0x80 and a protocol 2-5; this "
                                                           "file{} starts{}", gzipped(f) ? ", gunzipped," : "", starts),
                                where));
}
}  // namespace

InputFiles select_inputs(const std::vector<std::string>& paths) {
  InputFiles out;
  // two kinds of left-out files: what is no trace at all (a config.json: info), and what could not
  // be read far enough to tell (a damaged .json.gz, a corrupt SQLite file: data_loss, as it may
  // have been a rank's trace)
  struct Skipped {
    std::string first, reason;
    int64_t count = 0;
    void add(const std::string& f, std::string why) {
      if (count++ > 0) return;
      first = f;
      reason = std::move(why);
      if (reason.rfind(f + ": ", 0) == 0) reason.erase(0, f.size() + 2);  // the source names it
    }
  } not_a_trace, damaged;
  for (const auto& p : paths) {
    std::error_code ec;
    const std::vector<std::string> found = expand_inputs({p});
    if (!fs::is_directory(p, ec)) {
      out.files.insert(out.files.end(), found.begin(), found.end());
      out.named.insert(found.begin(), found.end());
      continue;
    }
    std::string reason;
    size_t kept = 0;
    for (const auto& f : found) {
      if (ends_with(f, ".pickle") || ends_with(f, ".pickle.gz")) refuse_non_snapshot_pickle(f, p);
      try {
        if (!pickle::is_pickle(read_head(f, 2))) detect(f);
        out.files.push_back(f);
        out.directory_of[f] = p;
        ++kept;
      } catch (const ImportError& e) {
        if (reason.empty()) reason = e.what();
        (damage_of(f, read_head(f, 16)).empty() ? not_a_trace : damaged).add(f, e.what());
      }
    }
    if (kept == 0) throw ImportError(reason);  // nothing in the directory is a trace
  }
  if (not_a_trace.count > 0)
    out.skipped.push_back({"skipped_not_a_trace", "info", not_a_trace.count, not_a_trace.first, -1,
                           fmt::format("{}; left out of the import of its directory (import the traces by name to "
                                       "see it refused)",
                                       not_a_trace.reason)});
  if (damaged.count > 0)
    out.skipped.push_back({"skipped_damaged_file", "data_loss", damaged.count, damaged.first, -1,
                           fmt::format("{}; left out of the import of its directory: if it was a rank's trace, that "
                                       "rank is missing",
                                       damaged.reason)});
  return out;
}

std::string mixed_snapshot_inputs_message(const std::string& other, size_t count, const std::string& snapshot) {
  return fmt::format("{}: not a PyTorch memory snapshot, among {} files of which {} is; snapshots and traces are "
                     "imported apart: the snapshots (one per rank) by name or in a directory of their own, the traces "
                     "by naming their files (or with the .pickle files moved out of the directory)",
                     other, count, snapshot);
}

std::string read_head(const std::string& path, size_t max_bytes) {
  // a plain file (a session among them) is read with a descriptor that a live writer of this
  // process keeps its SQLite locks through (held_files.h); a gzip one (never a session) with zlib
  if (std::string raw = sessions::detail::read_file_prefix(path, max_bytes); !pickle::is_gzip(raw)) return raw;
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) return "";
  std::string out(max_bytes, '\0');
  const int n = gzread(f, out.data(), static_cast<unsigned>(max_bytes));
  gzclose(f);
  out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return out;
}

void check_cancelled(const ImportOptions& options) {
  if (options.cancelled && options.cancelled()) throw ImportCancelled();
}

ImportSummary import_paths(const std::vector<std::string>& paths, SessionWriter& writer, const ImportOptions& given) {
  const InputFiles selected = select_inputs(paths);
  ImportOptions options = given;
  options.named_files = selected.named;
  const std::vector<std::string>& files = selected.files;
  check_cancelled(options);
  auto is_snapshot = [](const std::string& f) { return pickle::is_pickle(read_head(f, 2)); };
  if (std::any_of(files.begin(), files.end(), is_snapshot)) {
    if (auto other = std::find_if_not(files.begin(), files.end(), is_snapshot); other != files.end())
      throw ImportError(
          mixed_snapshot_inputs_message(*other, files.size(), *std::find_if(files.begin(), files.end(), is_snapshot)));
    std::vector<torch_snapshot::MemorySnapshotFile> snaps;
    snaps.reserve(files.size());
    for (const auto& f : files) {
      if (options.progress) options.progress("reading " + f);
      snaps.push_back(load_rank_snapshot(f, selected.directory_of));
      check_cancelled(options);
    }
    std::vector<torch_snapshot::SnapshotInput> inputs;
    for (size_t k = 0; k < files.size(); ++k) inputs.push_back({&snaps[k], files[k]});
    if (options.fraction) options.fraction(0.8);
    const auto sum = torch_snapshot::import_torch_memory_snapshots(inputs, writer);
    if (options.fraction) options.fraction(1.0);
    ImportSummary out;
    out.format = "torch_memory_snapshot";
    out.files = files;
    for (int64_t d = 0; d < sum.devices; ++d) out.ranks.push_back(static_cast<int32_t>(d));
    out.events = {{"trace_entries", sum.trace_entries}, {"segments", sum.segments}, {"blocks", sum.blocks}};
    out.problems = sum.import_stats;
    return out;
  }
  const Importer& importer = detect(files.front());
  for (const auto& f : files)
    if (&detect(f) != &importer)
      throw ImportError(fmt::format("{}: a {} file among {} files; import one format at a time", f, detect(f).format,
                                    importer.format));
  ImportSummary sum = importer.run(files, writer, options);
  if (!selected.skipped.empty()) {  // the directories' other files: stored beside the importer's problems
    writer.add_import_stats(selected.skipped);
    sum.problems.insert(sum.problems.end(), selected.skipped.begin(), selected.skipped.end());
  }
  refuse_empty_trace(sum);
  return sum;
}

void refuse_empty_trace(const ImportSummary& summary) {
  if (summary.format == "torch_memory_snapshot") return;
  for (const auto& [kind, n] : summary.events)
    if (n > 0) return;
  std::string files;
  for (const auto& f : summary.files) files += (files.empty() ? "" : ", ") + f;
  std::string why = "the trace has no events";
  for (const auto& p : summary.problems)
    if (p.severity == "data_loss") {
      why = p.example;
      break;
    }
  throw ImportError(fmt::format("{}: no event imported ({}); no session written", files, why));
}

const Importer& detect(const std::string& path) {
  const std::string head = read_head(path);
  for (const auto& imp : all_importers())
    if (imp.probe(path, head)) return imp;
  if (head.compare(0, 16, std::string("SQLite format 3\0", 16)) == 0) {
    if (const std::string damage = damage_of(path, head); !damage.empty()) throw ImportError(damage);
    throw ImportError(fmt::format("{}: an SQLite database that is not an Nsight Systems export (no "
                                  "META_DATA_EXPORT.EXPORT_SCHEMA_VERSION); an Embedscope session opens as it is "
                                  "(embedscope stats FILE)", path));
  }
  if (!head.empty() && static_cast<unsigned char>(head[0]) == 0x80)
    throw ImportError(fmt::format("{}: a Python pickle that is not a PyTorch memory snapshot (those are pickle protocol 2 to 5)", path));
  if (const int protocol = pickle::old_pickle_protocol(head); protocol >= 0)
    throw ImportError(pickle::old_pickle_message(path, protocol));
  if (const std::string damage = damage_of(path, head); !damage.empty()) throw ImportError(damage);  // gzip
  // nothing in it (tester46 F7: a profiler killed before it wrote got the list of formats)
  if (head.size() < (1 << 16) && head.find_first_not_of(" \t\r\n") == std::string::npos) {
    std::error_code ec;
    const auto bytes = fs::file_size(path, ec);
    const std::string size = ec ? std::string("?") : fmt::format("{}", bytes);
    throw ImportError(head.empty()
                          ? fmt::format("{}: the file is empty ({} bytes{}): nothing to import", path, size,
                                        is_gzip_file(path) ? ", nothing once gunzipped" : "")
                          : fmt::format("{}: the file holds only blanks ({} bytes): nothing to import", path, size));
  }
  if (ends_with(path, ".nsys-rep"))
    throw ImportError(fmt::format("{}: an Nsight Systems report; export it first with `{}` and import the .sqlite file",
                                  path, nsys_export_command(path)));
  std::string formats;
  for (const auto& imp : all_importers()) formats += (formats.empty() ? "" : "; ") + std::string(imp.description);
  formats += "; PyTorch CUDA memory snapshots (torch.cuda.memory._dump_snapshot: .pickle, .pickle.gz)";
  throw ImportError(fmt::format("{}: not a format embedscope import reads (it reads {})", path, formats));
}

}  // namespace embedscope::sessions::importers

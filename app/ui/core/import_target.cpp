#include "core/import_target.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/importers/importer.h"
#include "embedscope/sessions/importers/nsys_sqlite/nsys_sqlite.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::ui {

namespace fs = std::filesystem;

std::string import_stem(const std::string& source) {
  std::string base = source;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  base = fs::path(base).filename().string();
  for (const char* ext : {".gz", ".json", ".pt.trace", ".trace", ".pickle", ".pkl", ".sqlite"}) {
    const std::string e = ext;
    if (base.size() > e.size() && base.compare(base.size() - e.size(), e.size(), e) == 0) base.resize(base.size() - e.size());
  }
  return base.empty() ? std::string("imported") : base;
}

namespace {
// The same file whatever its spelling ("t.json", "./t.json", "/abs/t.json", through a link).
std::string canonical_name(const std::string& f) {
  std::error_code ec;
  const fs::path c = fs::weakly_canonical(fs::absolute(f), ec);
  return (ec ? fs::absolute(f).lexically_normal() : c).string();
}

// The session at `path` is a complete import of exactly `files`: each recorded with its absolute
// path (the workbench imports absolute paths; a relative one does not say which folder it was
// in, tester39 F12), its size on disk unchanged and not written after the session was.
bool same_import(const std::string& path, const std::vector<std::string>& files) {
  try {
    const sessions::SessionReader s(path);
    if (s.status() != "complete" || s.meta(sessions::meta::kImported) != "1") return false;
    const auto sources = nlohmann::json::parse(s.meta(sessions::meta::kImportSources, "[]"));
    std::map<std::string, int64_t> recorded;
    for (const auto& src : sources) {
      if (!src.is_object() || !src.contains("file") || !src["file"].is_string()) return false;
      const std::string file = src["file"].get<std::string>();
      if (!fs::path(file).is_absolute()) return false;
      recorded[canonical_name(file)] = src.value("bytes", int64_t{-1});
    }
    if (recorded.size() != files.size()) return false;
    std::error_code ec;
    const auto imported_at = fs::last_write_time(path, ec);
    if (ec) return false;
    for (const auto& f : files) {
      auto it = recorded.find(canonical_name(f));
      const auto size = fs::file_size(f, ec);
      if (it == recorded.end() || ec || (it->second >= 0 && it->second != static_cast<int64_t>(size))) return false;
      if (fs::last_write_time(f, ec) > imported_at || ec) return false;  // changed since (same size or not)
    }
    return true;
  } catch (const std::exception&) {
    return false;
  }
}
}  // namespace

namespace {
// `folder` takes new files: access() says so and its mode has a write bit. Root passes access()
// on any folder, so a deliberately read-only one (mode 555: a shared data set) would collect .db
// files (tester37 #19); its mode bits say what was meant.
bool folder_writable(const fs::path& folder) {
  if (access(folder.c_str(), W_OK) != 0) return false;
  struct stat sb {};
  return stat(folder.c_str(), &sb) == 0 && (sb.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH)) != 0;
}
}  // namespace

ImportTarget import_target(const std::vector<std::string>& sources, const std::string& cache_dir) {
  ImportTarget t;
  if (sources.empty()) throw std::runtime_error("no trace to import");
  std::string first = sources.front();
  while (first.size() > 1 && first.back() == '/') first.pop_back();
  fs::path folder = fs::absolute(first).parent_path();
  if (!folder_writable(folder)) {
    folder = cache_dir;
    t.in_cache = true;
    std::error_code ec;
    fs::create_directories(folder, ec);
    if (ec || access(folder.c_str(), W_OK) != 0)
      throw std::runtime_error(folder.string() + ": cannot create the folder for imported sessions (" + ec.message() + ")");
  }
  std::vector<std::string> files;
  try {
    files = sessions::importers::expand_inputs(sources);
  } catch (const std::exception&) {  // the import itself reports it
  }
  const std::string stem = import_stem(first);
  for (int n = 1;; ++n) {
    const fs::path p = folder / (n == 1 ? stem + ".db" : stem + "-" + std::to_string(n) + ".db");
    std::error_code ec;
    if (!fs::exists(p, ec)) {
      t.path = p.string();
      return t;
    }
    if (!files.empty() && same_import(p.string(), files)) {
      t.path = p.string();
      t.reuse = true;
      return t;
    }
  }
}

ReportFolder headless_report_folder(const std::string& input, const std::string& imported_session, const std::string& cwd,
                                    const std::string& cache_dir) {
  ReportFolder r;
  if (!imported_session.empty()) {
    const fs::path s(imported_session);
    r.path = (s.parent_path() / (s.stem().string() + "-report")).string();
    const fs::path source = fs::absolute(input).lexically_normal();
    fs::path source_folder = source.filename().empty() ? source.parent_path().parent_path() : source.parent_path();
    if (fs::absolute(s).parent_path().lexically_normal() != source_folder.lexically_normal())
      r.why = "beside the imported session: " + source_folder.string() + " is not writable";
    return r;
  }
  std::string in = input;
  while (in.size() > 1 && in.back() == '/') in.pop_back();
  const fs::path p(in);
  const std::string name = p.stem().string() + "-report";
  const fs::path folder = fs::absolute(p).parent_path();
  if (folder_writable(folder)) {
    r.path = p.parent_path().empty() ? name : (p.parent_path() / name).string();
    return r;
  }
  if (folder_writable(cwd)) {
    r.path = name;
    r.why = "in the current folder: " + folder.string() + " is not writable";
    return r;
  }
  r.path = (fs::path(cache_dir) / name).string();
  r.why = "in the cache folder: neither " + folder.string() + " nor the current folder is writable";
  return r;
}

bool is_nsys_export(const std::string& path) {
  return sessions::importers::probe_nsys_sqlite(path, sessions::importers::read_head(path, 16));
}

}  // namespace embedscope::ui

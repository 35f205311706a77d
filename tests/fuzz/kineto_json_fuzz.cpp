// libFuzzer target: the Kineto (PyTorch profiler) Chrome-trace JSON importer
// (sessions/importers/kineto_json) on arbitrary trace files, plain or gzip.
// Input: the bytes of one rank's trace file. The target writes them to a temp .json, imports
// it into a temp session (as `embedscope import` does: SessionWriter, import, close) and reads
// the session back. Bad content is counted as import problems and never throws (kineto_json.h);
// ImportError (a file that cannot be read at all) and SessionError are the only errors allowed.
// Seeds: tests/data/traces/**.
#include "embedscope/sessions/importers/kineto_json/kineto_json.h"
#include "embedscope/sessions/store/session.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace ss = embedscope::sessions;
  namespace si = embedscope::sessions::importers;
  if (size > (size_t{1} << 20)) return -1;
  embedscope::fuzz::TempFile trace("kineto_json", ".json", data, size);
  const std::string db = embedscope::fuzz::TempFile::make_path("kineto_json", ".db");
  try {
    {
      ss::SessionWriter writer(db, /*overwrite=*/true);
      (void)si::import_kineto_json({trace.path()}, writer, si::ImportOptions{});
      writer.close("complete");
    }
    const ss::SessionReader r(db);
    (void)r.all_ops();
    (void)r.collectives();
    (void)r.steps();
    (void)r.import_stats();
  } catch (const si::ImportError&) {
  } catch (const ss::SessionError&) {
  }
  embedscope::fuzz::TempFile::remove(db);
  return 0;
}

// libFuzzer target: the Nsight Systems SQLite-export importer (sessions/importers/nsys_sqlite)
// on arbitrary database files.
// Input: the bytes of one export. The target imports them in place (import_nsys_sqlite_buffer,
// sqlite3_deserialize, read-only) into a temp session, as `embedscope import` does
// (SessionWriter, import, close), and reads the session back. A file SQLite cannot read, or one
// without the tables the importer needs, is an ImportError; SessionError is the only other
// error allowed.
// Seeds: tests/data/fuzz/nsys_sqlite/ (fixture.sqlite: the importer tests' fixture of
// tests/sessions/importers/nsys_fixture.h, page size 512 so it is small).
#include <string_view>

#include "embedscope/sessions/importers/nsys_sqlite/nsys_sqlite.h"
#include "embedscope/sessions/store/session.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace ss = embedscope::sessions;
  namespace si = embedscope::sessions::importers;
  if (size > (size_t{1} << 20)) return -1;
  const std::string db = embedscope::fuzz::TempFile::make_path("nsys_sqlite", ".db");
  try {
    {
      ss::SessionWriter writer(db, /*overwrite=*/true);
      (void)si::import_nsys_sqlite_buffer(std::string_view(reinterpret_cast<const char*>(data), size),
                                          "fuzz.sqlite", writer, si::ImportOptions{});
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

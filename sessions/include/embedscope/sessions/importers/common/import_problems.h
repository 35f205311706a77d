#pragma once
// Import problems, counted rather than thrown away (the model: Perfetto trace_processor's stats
// table). An importer never aborts on bad input it can step over: it counts the problem under a
// stable name, keeps the first example (the file, the byte offset of the event in the
// uncompressed text, and a line:column where known) and goes on. The counts are stored in the
// session's `import_stats` table (schema 5) and printed by `embedscope import` and `stats`.

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "embedscope/sessions/model/events.h"

namespace embedscope::sessions::importers {

/// How bad a problem is: info (nothing lost: a note on the input, e.g. counters not stored),
/// error (input that breaks the format but was repaired or kept: a negative duration, an
/// overlapping span), data_loss (events that could not be imported: a truncated file, an event
/// skipped for bad UTF-8).
enum class Severity : uint8_t { info, error, data_loss };

/// "info", "error", "data_loss".
const char* to_string(Severity s);

/// Where a problem was first seen: a file and a byte offset in its uncompressed text (-1 none).
struct Where {
  std::string source;
  int64_t byte_offset = -1;
};

/// 1-based line and column of byte `offset` in `text` (columns count bytes). Cost O(offset).
std::pair<int64_t, int64_t> line_column(const char* text, size_t size, size_t offset);

/// The problems of one import, by name. Not thread-safe (one importer thread).
class ImportProblems {
 public:
  /// Counts `n` occurrences of `name`; the first call per name keeps `severity`, `where` and
  /// `example` (a short text: what was wrong, with line:column when known).
  void add(const std::string& name, Severity severity, const Where& where, const std::string& example, int64_t n = 1);
  /// As add(), building the example only for the first occurrence (`make_example()` returns a
  /// std::string): a file with a million bad events costs one message, not a million.
  template <class F>
  void add_with(const std::string& name, Severity severity, const Where& where, F&& make_example, int64_t n = 1) {
    auto it = by_name_.find(name);
    if (it != by_name_.end()) it->second.count += n;
    else add(name, severity, where, make_example(), n);
  }
  /// Occurrences of `name` so far (0 when never seen).
  int64_t count(const std::string& name) const;
  /// Every problem as session records, ordered by name.
  std::vector<ImportStat> records() const;
  bool empty() const { return by_name_.empty(); }

 private:
  std::map<std::string, ImportStat> by_name_;
};

}  // namespace embedscope::sessions::importers

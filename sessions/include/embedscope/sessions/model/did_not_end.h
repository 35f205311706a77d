#pragma once
// The mark of an imported event that the profiler never saw end (schema/IMPORTED.md, "Imported
// sessions"): a Kineto "X" event with a negative "dur" (-1, or an end at 0: ts + dur = 0), a "B"
// without its "E". Perfetto keeps such a slice and shows it as "Did not end"; the importer keeps
// it too, as a zero-length op at its start (start_ns == end_ns) whose name is the event's name
// followed by kDidNotEndSuffix:
//
//   {"ph": "X", "name": "aten::mm", "ts": 25, "dur": -25}  ->  op "aten::mm (did not end)", [25 us, 25 us)
//
// A zero-length op adds nothing to busy time, overlap or any union of intervals; the importers'
// time range (ImportSummary::start_ns / end_ns), HTA's kernel figures and the workbench's extent
// leave these ops out, so the time range is the valid events'. The mark needs no column of its
// own: the reader, `stats`, `export` and the workbench see it in the op's name and duration, and
// SQL finds it with `WHERE name LIKE '% (did not end)' AND dur_ns = 0` on op_view.

#include <cstring>
#include <string>
#include <string_view>

namespace embedscope::sessions {

/// What follows the event's own name in the name of an op that did not end.
inline constexpr std::string_view kDidNotEndSuffix = " (did not end)";

/// The op name of an event named `name` that did not end: `name` + kDidNotEndSuffix.
inline std::string did_not_end_name(std::string_view name) {
  std::string s(name);
  s += kDidNotEndSuffix;
  return s;
}

/// True for the name of an op marked as not ended (it ends in kDidNotEndSuffix).
inline bool is_did_not_end_name(std::string_view name) {
  return name.size() >= kDidNotEndSuffix.size() && name.substr(name.size() - kDidNotEndSuffix.size()) == kDidNotEndSuffix;
}

/// True for an op that did not end: zero length (`start_ns == end_ns`) and a name marked with
/// kDidNotEndSuffix. `name` is the op's name (OpEvent::name, or SessionReader::name(name_id));
/// a null `name` is not marked. O(1) for ops of nonzero length (the name is not read).
inline bool did_not_end(int64_t start_ns, int64_t end_ns, const char* name) {
  return start_ns == end_ns && name && is_did_not_end_name(std::string_view(name, std::strlen(name)));
}
/// As above, for a name given as a string (SessionReader::name).
inline bool did_not_end(int64_t start_ns, int64_t end_ns, std::string_view name) {
  return start_ns == end_ns && is_did_not_end_name(name);
}

/// The event's own name: `name` without kDidNotEndSuffix (unchanged when it has none).
inline std::string_view without_did_not_end(std::string_view name) {
  return is_did_not_end_name(name) ? name.substr(0, name.size() - kDidNotEndSuffix.size()) : name;
}

}  // namespace embedscope::sessions

#include "embedscope/sessions/importers/common/import_problems.h"

#include <algorithm>
#include <cstring>

namespace embedscope::sessions::importers {

const char* to_string(Severity s) {
  switch (s) {
    case Severity::info: return "info";
    case Severity::error: return "error";
    case Severity::data_loss: return "data_loss";
  }
  return "error";
}

std::pair<int64_t, int64_t> line_column(const char* text, size_t size, size_t offset) {
  offset = std::min(offset, size);
  int64_t line = 1;
  size_t line_start = 0;
  for (const char* p = text; (p = static_cast<const char*>(std::memchr(p, '\n', offset - static_cast<size_t>(p - text)))) != nullptr;) {
    ++line;
    ++p;
    line_start = static_cast<size_t>(p - text);
    if (line_start >= offset) break;
  }
  return {line, static_cast<int64_t>(offset - line_start) + 1};
}

void ImportProblems::add(const std::string& name, Severity severity, const Where& where, const std::string& example,
                         int64_t n) {
  auto [it, inserted] = by_name_.try_emplace(name);
  ImportStat& s = it->second;
  if (inserted) {
    s.name = name;
    s.severity = to_string(severity);
    s.source = where.source;
    s.byte_offset = where.byte_offset;
    s.example = example;
  }
  s.count += n;
}

int64_t ImportProblems::count(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? 0 : it->second.count;
}

std::vector<ImportStat> ImportProblems::records() const {
  std::vector<ImportStat> out;
  for (const auto& [n, s] : by_name_) out.push_back(s);
  return out;
}

}  // namespace embedscope::sessions::importers

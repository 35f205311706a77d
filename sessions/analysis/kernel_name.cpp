#include "embedscope/sessions/analysis/kernel_name.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <vector>

namespace embedscope::sessions {

namespace {
constexpr const char* kAnon = "(anonymous namespace)";
constexpr char kAnonMark = '\x01';  // stands for kAnon while the brackets are matched

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(' ');
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(' ') - b + 1);
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The part of a signature before its parameter list (return type and qualified name with
// templates; "(anonymous namespace)" as kAnonMark), or "" when `name` is no signature.
std::string signature_head(const std::string& name) {
  std::string s = trim(name);
  for (size_t at; (at = s.find(kAnon)) != std::string::npos;) s.replace(at, std::char_traits<char>::length(kAnon), 1, kAnonMark);
  for (const char* q : {" const", " volatile", " &&", " &"})  // a member function's qualifiers
    if (ends_with(s, q)) s = trim(s.substr(0, s.size() - std::char_traits<char>::length(q)));
  if (s.empty() || s.back() != ')') return "";
  // the parameter list: the bracket group that ends the name
  size_t open = std::string::npos;
  int depth = 0;
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] == ')') ++depth;
    if (s[i] == '(' && --depth == 0) {
      open = i;
      break;
    }
  }
  if (open == std::string::npos || open == 0 || s[open - 1] == ' ') return "";
  return s.substr(0, open);
}

// The template argument list of the function itself ("<...>" ending the head), or "".
std::string function_template_args(const std::string& name) {
  std::string head = signature_head(name);
  if (head.empty() || head.back() != '>') return "";
  int depth = 0;
  for (size_t i = head.size(); i-- > 0;) {
    if (head[i] == '>') ++depth;
    if (head[i] == '<' && --depth == 0) {
      std::string args = head.substr(i);
      for (size_t at; (at = args.find(kAnonMark)) != std::string::npos;) args.replace(at, 1, kAnon);
      return args;
    }
  }
  return "";
}
}  // namespace

std::string short_kernel_name(const std::string& name) {
  const std::string head = signature_head(name);  // return type and qualified name with templates
  if (head.empty()) return name;
  // drop template argument lists (any depth) and find the return type's end: the last space
  // outside template arguments
  std::string bare;
  int depth = 0;
  for (char c : head) {
    if (c == '<') {
      ++depth;
    } else if (c == '>') {
      if (--depth < 0) return name;
    } else if (depth == 0) {
      bare += c;
    }
  }
  if (depth != 0) return name;
  if (const size_t sp = bare.rfind(' '); sp != std::string::npos) bare = bare.substr(sp + 1);
  // split into scopes; "(anonymous namespace)" back in its place
  std::vector<std::string> scopes;
  for (size_t from = 0;;) {
    const size_t sep = bare.find("::", from);
    scopes.push_back(bare.substr(from, sep == std::string::npos ? std::string::npos : sep - from));
    if (sep == std::string::npos) break;
    from = sep + 2;
  }
  for (auto& sc : scopes) {
    if (sc.empty()) return name;
    if (sc == std::string(1, kAnonMark)) sc = kAnon;
  }
  if (scopes.back() == kAnon) return name;
  if (scopes.size() <= 2) return scopes.size() == 1 ? scopes[0] : scopes[0] + "::" + scopes[1];
  return scopes.front() + "::...::" + scopes.back();
}

std::vector<std::string> distinct_short_kernel_names(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  out.reserve(names.size());
  for (const auto& n : names) out.push_back(short_kernel_name(n));
  // per short name, the different whole names that read as it, in order of first appearance
  std::map<std::string, std::vector<std::string>> readers;
  for (size_t i = 0; i < names.size(); ++i) {
    auto& v = readers[out[i]];
    if (std::find(v.begin(), v.end(), names[i]) == v.end()) v.push_back(names[i]);
  }
  for (auto& [short_name, whole] : readers) {
    if (whole.size() < 2) continue;
    // with the function's template arguments, unless two of them still read the same
    std::map<std::string, int> uses;
    std::vector<std::string> longer;
    for (const auto& w : whole) longer.push_back(short_name + function_template_args(w));
    for (const auto& l : longer) ++uses[l];
    for (size_t k = 0; k < whole.size(); ++k) {
      const std::string shown = uses[longer[k]] > 1 ? fmt::format("{} #{}", short_name, k + 1) : longer[k];
      for (size_t i = 0; i < names.size(); ++i)
        if (names[i] == whole[k]) out[i] = shown;
    }
  }
  return out;
}

}  // namespace embedscope::sessions

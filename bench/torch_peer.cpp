#include "torch_peer.h"

#include <cstdio>
#include <cstdlib>
#include <map>

#include <sys/wait.h>

#include <nlohmann/json.hpp>

#ifndef EMBEDSCOPE_TORCH_PEER_SCRIPT
#define EMBEDSCOPE_TORCH_PEER_SCRIPT "bench/torch_embedding_bag.py"
#endif
#ifndef EMBEDSCOPE_TORCH_PYTHON
#define EMBEDSCOPE_TORCH_PYTHON "/usr/bin/python3"
#endif

namespace embedscope::bench {

namespace {
std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? v : fallback;
}
}  // namespace

PeerResult run_torch_peer(const Shape& s, int64_t n_unique, const std::string& device) {
  // Built with += (GCC 12 warns falsely, -Wrestrict, on `"literal" + std::string`).
  std::string cmd = "'";
  cmd += env_or("EMBEDSCOPE_TORCH_PYTHON", EMBEDSCOPE_TORCH_PYTHON);
  cmd += "' '";
  cmd += env_or("EMBEDSCOPE_TORCH_PEER", EMBEDSCOPE_TORCH_PEER_SCRIPT);
  cmd += "'";
  cmd += " --rows " + std::to_string(s.rows);
  cmd += " --dim " + std::to_string(s.dim);
  cmd += " --bag " + std::to_string(s.bag);
  cmd += " --batch " + std::to_string(s.batch);
  cmd += " --seed " + std::to_string(kSeed);
  cmd += " --device " + device;
  PeerResult r;
  std::fflush(nullptr);
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) {
    r.note = "torch peer not run: popen failed for: " + cmd;
    return r;
  }
  // The JSON is the last non-empty line of stdout (torch may print warnings before it).
  std::string line, last_line;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, pipe) != nullptr) {
    line += buf;
    if (line.back() != '\n') continue;  // a line longer than buf
    if (line.size() > 1) last_line = line;
    line.clear();
  }
  if (!line.empty()) last_line = line;
  const int status = pclose(pipe);
  const auto j = nlohmann::json::parse(last_line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.note = "torch peer skipped: no JSON from `" + cmd + "` (exit code " + std::to_string(code) + ")";
    return r;
  }
  if (j.contains("error")) {
    r.note = "torch peer skipped: " + j["error"].get<std::string>();
    return r;
  }
  r.forward_GBps = j.at("forward_GBps").get<double>();
  r.backward_GBps = j.at("backward_GBps").get<double>();
  if (j.value("n_unique", int64_t{-1}) != n_unique)
    r.note = "warning: torch peer saw " + std::to_string(j.value("n_unique", int64_t{-1})) +
             " unique ids, we have " + std::to_string(n_unique);
  return r;
}

const PeerResult& torch_peer_once(int shape_index, int64_t n_unique, const std::string& device) {
  static std::map<int, PeerResult> cache;
  auto it = cache.find(shape_index);
  if (it == cache.end()) {
    const Shape& s = kShapes[shape_index];
    it = cache.emplace(shape_index, run_torch_peer(s, n_unique, device)).first;
    if (!it->second.note.empty()) std::fprintf(stderr, "[%s] %s\n", s.name().c_str(), it->second.note.c_str());
  }
  return it->second;
}

void report_vs_torch(benchmark::State& state, double ours_GBps, std::optional<double> torch_GBps,
                     const std::string& note) {
  if (torch_GBps && *torch_GBps > 0) {
    state.counters["torch_GBps"] = *torch_GBps;
    state.counters["ratio_vs_torch"] = ours_GBps / *torch_GBps;
  } else {
    state.SetLabel(note.empty() ? "no torch peer" : "no torch peer (see stderr)");
  }
}

}  // namespace embedscope::bench

// The other load of a measured run in runnable threads (exec/runnable_sampler.h).
#include "embedscope/engine/exec/runnable_sampler.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace embedscope::engine {

namespace {

std::string read_all(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

int procs_running_in(const std::string& proc_stat_text) {
  std::istringstream in(proc_stat_text);
  std::string line;
  const std::string key = "procs_running ";
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) {
      const std::string rest = line.substr(key.size());
      if (rest.empty() || rest.find_first_not_of("0123456789") != std::string::npos) return -1;
      try {
        return std::stoi(rest);
      } catch (const std::exception&) {
        return -1;
      }
    }
  return -1;
}

char task_state_in(const std::string& task_stat_text) {
  const size_t close = task_stat_text.rfind(") ");
  if (close == std::string::npos || close + 2 >= task_stat_text.size()) return '?';
  const char c = task_stat_text[close + 2];
  return c >= 'A' && c <= 'Z' ? c : '?';
}

RunnableSampler::RunnableSampler(std::chrono::milliseconds period) : period_(period) {
  thread_ = std::thread([this] {
    while (!stop_.load()) {
      sample();
      const auto until = std::chrono::steady_clock::now() + period_;
      while (!stop_.load() && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(period_, std::chrono::milliseconds(5)));
    }
  });
}

RunnableSampler::~RunnableSampler() { stop(); }

void RunnableSampler::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void RunnableSampler::sample() {
  std::error_code ec;
  int own = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec))
    own += task_state_in(read_all(task.path().string() + "/stat")) == 'R';
  const int all = procs_running_in(read_all("/proc/stat"));
  if (ec || all < 0) return;
  sum_other_ += std::max(0, all - own);
  sum_own_ += own;
  ++samples_;
}

}  // namespace embedscope::engine

#include "embedscope/engine/exec/launch/rank_env.h"

#include <cstdlib>
#include <vector>

#include <fmt/format.h>

#include "embedscope/engine/workload/spec_error.h"

namespace embedscope::engine::launch {

namespace {
struct Names {
  const char* launcher;
  const char* rank;
  const char* size;
  const char* local_rank;
  const char* local_size;
  const char* node;
};
constexpr Names kLaunchers[] = {
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
     nullptr},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "SLURM_NODEID"},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK"},
};
constexpr const char* kOther[] = {"OMPI_MCA_ess_base_jobid", "SLURM_JOB_ID", "SLURM_STEP_ID", "TORCHELASTIC_RUN_ID"};

const std::string* find(const std::map<std::string, std::string>& env, const char* name) {
  if (!name) return nullptr;
  auto it = env.find(name);
  return it == env.end() ? nullptr : &it->second;
}

int number(const std::map<std::string, std::string>& env, const char* name, int min) {
  const std::string* v = find(env, name);
  if (!v) return -1;
  size_t used = 0;
  long long n = -1;
  try {
    n = std::stoll(*v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != v->size() || n < min || n > 1'000'000)
    throw SpecError(fmt::format("{}={}: not a whole number >= {}", name, *v, min));
  return static_cast<int>(n);
}

LaunchEnv read(const std::map<std::string, std::string>& env, const Names& n) {
  LaunchEnv e;
  e.launcher = n.launcher;
  e.rank = number(env, n.rank, 0);
  e.world_size = number(env, n.size, 1);
  if (e.world_size < 0)
    throw SpecError(fmt::format("{} is set ({} rank) but {} is not: the world size is unknown", n.rank, n.launcher, n.size));
  if (e.rank >= e.world_size)
    throw SpecError(fmt::format("{}={} is not below {}={}", n.rank, e.rank, n.size, e.world_size));
  e.world_size = std::max(e.world_size, 0);
  e.local_rank = number(env, n.local_rank, 0);
  e.local_world_size = std::max(0, number(env, n.local_size, 1));
  e.node = number(env, n.node, 0);
  if (std::string(n.launcher) == "Open MPI") {
    if (const auto* j = find(env, "OMPI_MCA_ess_base_jobid")) e.run_id = "ompi-" + *j;
  } else if (std::string(n.launcher) == "Slurm") {
    if (const auto* j = find(env, "SLURM_JOB_ID")) {
      e.run_id = "slurm-" + *j;
      if (const auto* s = find(env, "SLURM_STEP_ID")) e.run_id += "." + *s;
    }
  } else if (const auto* j = find(env, "TORCHELASTIC_RUN_ID")) {
    e.run_id = "torchrun-" + *j;
  }
  return e;
}
}  // namespace

std::optional<LaunchEnv> launch_from_environment(const std::map<std::string, std::string>& env) {
  std::vector<std::pair<LaunchEnv, const Names*>> found;
  for (const Names& n : kLaunchers)
    if (find(env, n.rank)) found.emplace_back(read(env, n), &n);
  if (found.empty()) return std::nullopt;
  const auto& [first, fn] = found.front();
  for (size_t i = 1; i < found.size(); ++i) {
    const auto& [other, on] = found[i];
    if (other.rank != first.rank)
      throw SpecError(fmt::format("{}={} but {}={}: the {} and {} ranks disagree; unset one", fn->rank, first.rank, on->rank,
                                  other.rank, first.launcher, other.launcher));
    if (other.world_size != first.world_size)
      throw SpecError(fmt::format("{}={} but {}={}: the {} and {} world sizes disagree; unset one", fn->size,
                                  first.world_size, on->size, other.world_size, first.launcher, other.launcher));
  }
  return first;
}

std::map<std::string, std::string> launcher_environment() {
  std::map<std::string, std::string> env;
  auto take = [&](const char* name) {
    if (!name) return;
    if (const char* v = std::getenv(name)) env[name] = v;
  };
  for (const Names& n : kLaunchers) {
    take(n.rank), take(n.size), take(n.local_rank), take(n.local_size), take(n.node);
  }
  for (const char* n : kOther) take(n);
  return env;
}

}  // namespace embedscope::engine::launch

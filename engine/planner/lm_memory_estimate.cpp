// estimate_lm_memory (planner/lm_memory_estimate.h).

#include "embedscope/engine/planner/lm_memory_estimate.h"

#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embedscope/sessions/model/units.h"

namespace embedscope::engine {

std::vector<LmMemoryEstimate> estimate_lm_memory(const LmWorkloadSpec& s) {
  constexpr int64_t f32 = 4;
  const int p = s.world_size;
  const int64_t V = s.padded_vocab_size(), H = s.hidden_size, T = s.tokens_per_micro_batch(), L = s.body_layers;
  const bool rw = s.sharding == LmSharding::row_wise;
  const bool dp = s.sharding == LmSharding::data_parallel;
  const int64_t Tl = s.sequence_parallel ? T / p : T;
  const int64_t Tc = rw ? T * p : T;
  std::vector<LmMemoryEstimate> out;
  for (int r = 0; r < p; ++r) {
    LmMemoryEstimate e;
    e.rank = r;
    e.rows = dp ? VocabRange{0, V} : vocab_range(V, p, r);
    const int64_t rowb = e.rows.size() * H * f32;
    e.table_bytes = rowb;
    e.output_projection_bytes = s.tie_word_embeddings ? 0 : rowb;
    e.read_copy_bytes = s.data_type == LmDataType::fp32 ? 0 : rowb;
    e.gradient_bytes = e.table_bytes + e.output_projection_bytes;
    e.body_bytes = L * (H * H + H) * f32 * 2;
    // adam: two fp32 moments of every parameter (E, O, the body); sgd none
    e.optimizer_state_bytes =
        s.optimizer == LmOptimizer::adam ? 2 * (e.table_bytes + e.output_projection_bytes + e.body_bytes / 2) : 0;
    e.logits_bytes = Tc * e.rows.size() * f32;
    const int64_t lookup = rw ? 2 * T * H * f32 : T * H * f32;  // rows received + sent, or the partial sum
    const int64_t gathered = (rw || s.sequence_parallel) ? Tc * H * f32 : 0;
    e.activation_bytes = (2 * L + 1) * Tl * H * f32 + lookup + gathered + Tc * H * f32;
    out.push_back(e);
  }
  return out;
}

nlohmann::json to_json(const std::vector<LmMemoryEstimate>& est) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const LmMemoryEstimate& e : est)
    ranks.push_back({{"rank", e.rank},
                     {"row_begin", e.rows.begin},
                     {"row_end", e.rows.end},
                     {"table_bytes", e.table_bytes},
                     {"output_projection_bytes", e.output_projection_bytes},
                     {"read_copy_bytes", e.read_copy_bytes},
                     {"gradient_bytes", e.gradient_bytes},
                     {"optimizer_state_bytes", e.optimizer_state_bytes},
                     {"body_bytes", e.body_bytes},
                     {"logits_bytes", e.logits_bytes},
                     {"activation_bytes", e.activation_bytes},
                     {"total_bytes", e.total()}});
  return {{"ranks", ranks}};
}

int64_t lm_machine_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
}

std::string lm_memory_refusal(const std::vector<LmMemoryEstimate>& est, const HostMemory& machine) {
  int64_t need = 0;
  std::string each;
  for (const auto& e : est) {
    need += e.total();
    each += fmt::format("{}rank {} {}{}", each.empty() ? "" : ", ", e.rank, each.empty() ? "needs " : "",
                        sessions::format_bytes(e.total()));
  }
  if (fits_host_memory(need, machine)) return "";
  return fmt::format("/devices: the cpu backend runs all {} ranks of this lm_embedding workload as threads of this "
                     "process: {} (planner/lm_memory_estimate.h), {} in all, but this machine has {}; use fewer "
                     "ranks, a smaller vocab_size, hidden_size or micro batch, or --simulate PROFILE",
                     est.size(), each, sessions::format_bytes(need), host_memory_text(machine));
}

}  // namespace embedscope::engine

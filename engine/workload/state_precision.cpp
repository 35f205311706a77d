// Warnings for fp16 optimizer state (workload/state_precision.h).
#include "embedscope/engine/workload/state_precision.h"

#include <fmt/format.h>

namespace embedscope::engine {

std::vector<std::string> state_precision_warnings(const WorkloadSpec& spec) {
  std::vector<std::string> out;
  if (spec.optimizer.type == OptimizerType::sgd) return out;
  int first = -1;
  std::string names;
  int count = 0;
  for (size_t i = 0; i < spec.tables.size(); ++i) {
    const TableSpec& t = spec.tables[i];
    if (t.optimizer_state_type != OptimizerStateType::fp16) continue;
    if (first < 0) first = static_cast<int>(i);
    names += fmt::format("{}\"{}\"", names.empty() ? "" : ", ", t.name);
    ++count;
  }
  if (first < 0) return out;
  const std::string head = fmt::format("/tables/{}/optimizer_state_type: fp16 ({} {}) with /optimizer/type {}: ", first,
                                       count == 1 ? "table" : "tables", names,
                                       spec.optimizer.type == OptimizerType::adam ? "adam" : "rowwise_adagrad");
  if (spec.optimizer.type == OptimizerType::rowwise_adagrad)
    out.push_back(head +
                  "the state, a row's running sum of mean g^2, falls under fp16's smallest normal (6.1e-5) for g below "
                  "~7.8e-3 and rounds to 0 for g below ~1.7e-4 (gradients of a batch-mean loss are ~1e-4..1e-3), so a "
                  "row loses its adagrad history and steps by about the learning rate again; bf16 keeps fp32's range");
  else
    out.push_back(head +
                  "momentum2 = 0.001 g^2 falls under fp16's smallest normal (6.1e-5) for g below ~0.25 and loses "
                  "precision; bf16 keeps fp32's range");
  return out;
}

}  // namespace embedscope::engine

#include "embedscope/sessions/importers/common/kernel_classes.h"

namespace embedscope::sessions::importers {

namespace {
bool starts(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool has(std::string_view s, std::string_view p) { return s.find(p) != std::string_view::npos; }

bool is_comm(std::string_view n) { return starts(n, "nccl") || starts(n, "hip") || starts(n, "hccl") || has(n, "ncclKernel"); }
bool is_memory(std::string_view n) {
  return starts(n, "Memcpy") || starts(n, "hipMemcpy") || starts(n, "Memset") || starts(n, "hipMemset") || starts(n, "dma");
}
bool not_compute(std::string_view n) {
  return starts(n, "nccl") || has(n, "Memcpy") || has(n, "Memset") || has(n, "dma") || has(n, "Sync") ||
         starts(n, "Stream Wait Event") || (starts(n, "cuda") && n.find("LaunchKernel", 4) != std::string_view::npos) ||
         starts(n, "runFunction") || starts(n, "hip") || starts(n, "job_exe") || starts(n, "packet") ||
         starts(n, "pe_exe") || starts(n, "cpum_exe_subgraph") || starts(n, "hccl") ||
         starts(n, "collective_subgraph_execution");
}
}  // namespace

const char* to_string(KernelClass k) {
  switch (k) {
    case KernelClass::communication: return "communication";
    case KernelClass::memory: return "memory";
    case KernelClass::computation: return "computation";
    case KernelClass::other: return "other";
  }
  return "other";
}

KernelClass kernel_class(std::string_view n) {
  if (is_comm(n)) return KernelClass::communication;
  if (is_memory(n)) return KernelClass::memory;
  if (!not_compute(n)) return KernelClass::computation;
  return KernelClass::other;
}

namespace {
bool embedding_category(std::string_view n, OpCategory& out) {
  if (has(n, "embedding") && has(n, "forward")) return out = OpCategory::lookup, true;
  if (has(n, "embedding") && has(n, "backward")) return out = OpCategory::optimizer, true;
  if (has(n, "permute") || has(n, "bucketize")) return out = OpCategory::input, true;
  return false;
}
}  // namespace

OpCategory gpu_op_category(std::string_view name, bool is_copy) {
  const KernelClass k = kernel_class(name);
  if (k == KernelClass::communication) return OpCategory::comm;
  if (is_copy || k == KernelClass::memory) return OpCategory::memcpy;
  OpCategory c{};
  if (embedding_category(name, c)) return c;
  return k == KernelClass::computation ? OpCategory::dense : OpCategory::other;
}

OpCategory host_op_category(std::string_view n) {
  if (n == "record_param_comms" || starts(n, "nccl:") || starts(n, "c10d::") || starts(n, "ProcessGroup"))
    return OpCategory::comm;
  if (has(n, "Memcpy") || has(n, "Memset")) return OpCategory::memcpy;
  OpCategory c{};
  if (embedding_category(n, c)) return c;
  return OpCategory::other;
}

}  // namespace embedscope::sessions::importers

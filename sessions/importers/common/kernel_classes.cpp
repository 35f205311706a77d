#include "embedscope/sessions/importers/common/kernel_classes.h"

#include <algorithm>
#include <utility>

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
// FBGEMM's table-batched embedding (TBE) and TorchRec's helpers, by the names their kernels and
// ops have in pytorch/FBGEMM fbgemm_gpu (checked against the trace_diff_test trace of HTA;
// tester50 F6: 37.5 ms of them were dense beside 27.5 ms of lookup kernels):
//   input      permute_2D_lengths_kernel, permute_indices_weights_kernel, permute_pooled_embs_kernel
//              (fbgemm::permute_sparse_features / permute_pooled_embs), bucketize kernels, and
//              recat_copy_async_kernel (fbgemm::recat_embedding_grad_output_mixed_D_batch: the
//              pooled embeddings' gradient regrouped at the all-to-all,
//              include/fbgemm_gpu/layout_transform_ops.cuh)
//   optimizer  the TBE backward (names with "embedding" and "backward", FBGEMM fuses the optimizer
//              into it, incl. ..._find_long_segments), linearize_index_kernel (and its host op
//              transpose_embedding_input, src/split_embeddings_utils/transpose_embedding_input.cu:
//              the ids linearized and radix-sorted before the backward),
//              split_embedding_codegen_grad_indice_weights_kernel (the per-sample weights'
//              gradient of a weighted TBE), and the autograd node of the lookup
//              (CppNode<SplitLookupFunction_*>: every kernel its backward launches)
//   lookup     the TBE forward (names with "embedding" and "forward"), bounds_check_indices_kernel
//              (fbgemm::bounds_check_indices, FBGEMM's embedding_bounds_check*.cu, run by the TBE
//              forward on its ids) and _offsets_range_cuda_kernel (fbgemm::offsets_range,
//              the position-weighted features' offsets before the lookup)
//
// PyTorch's own embedding ops (nn.Embedding / nn.EmbeddingBag without FBGEMM) compute the
// rows' gradient only; the update is the optimizer's step, a separate op. So ATen's ops
// (aten::embedding, aten::embedding_bag, aten::_embedding_bag and their _backward /
// _dense_backward / _sparse_backward, aten::native_functions.yaml), their autograd nodes
// (EmbeddingBackward0, EmbeddingBagBackward0, also inside "autograd::engine::evaluate_function:
// ...") and ATen's CUDA kernels (at::native's EmbeddingBag_updateOutputKernel_*,
// embedding_backward_feature_kernel, ...) are lookup - the lookup and its backward, as an
// lm_embedding run's "embedding_backward" op is - not optimizer; PyTorch's optimizers'
// record_function ranges "Optimizer.step#SGD.step" and "Optimizer.zero_grad#SGD.zero_grad"
// (torch/optim/optimizer.py) are optimizer (tester's torch 1.13 traces: 7.72 ms of
// aten::_embedding_bag_backward read as optimizer, the optimizer's steps as other).
bool torch_embedding_category(std::string_view n, OpCategory& out) {
  if (starts(n, "aten::embedding") || starts(n, "aten::_embedding") || has(n, "EmbeddingBackward") ||
      has(n, "EmbeddingBagBackward") || (has(n, "at::native") && (has(n, "mbedding"))))
    return out = OpCategory::lookup, true;
  if (starts(n, "Optimizer.step#") || starts(n, "Optimizer.zero_grad#")) return out = OpCategory::optimizer, true;
  return false;
}

bool embedding_category(std::string_view n, OpCategory& out) {
  if (torch_embedding_category(n, out)) return true;
  if (has(n, "embedding") && has(n, "forward")) return out = OpCategory::lookup, true;
  if (has(n, "embedding") && has(n, "backward")) return out = OpCategory::optimizer, true;
  if (has(n, "permute") || has(n, "bucketize") || has(n, "recat_")) return out = OpCategory::input, true;
  if (has(n, "linearize_index") || has(n, "transpose_embedding_input") || has(n, "grad_indice_weights") ||
      has(n, "CppNode<SplitLookupFunction"))
    return out = OpCategory::optimizer, true;
  if (has(n, "bounds_check_indices") || has(n, "offsets_range") || starts(n, "SplitLookupFunction"))
    return out = OpCategory::lookup, true;
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
  if (n == "record_param_comms" || starts(n, "nccl:") || starts(n, "gloo:") || starts(n, "c10d::") ||
      starts(n, "ProcessGroup"))
    return OpCategory::comm;
  if (has(n, "Memcpy") || has(n, "Memset")) return OpCategory::memcpy;
  OpCategory c{};
  if (embedding_category(n, c)) return c;
  return OpCategory::other;
}

NcclKernel nccl_kernel(std::string_view name) {
  NcclKernel k;
  if (!starts(name, "nccl")) return k;
  const std::string_view base = name.substr(0, name.find('('));
  // Longest names first: "AllReduce" and "ReduceScatter" both hold "Reduce".
  static constexpr std::pair<std::string_view, std::string_view> kOps[] = {
      {"AllReduce", "all_reduce"}, {"ReduceScatter", "reduce_scatter"}, {"AllGather", "all_gather"},
      {"Broadcast", "broadcast"},  {"SendRecv", "send_recv"},           {"Send", "send_recv"},
      {"Recv", "send_recv"},       {"Reduce", "reduce"}};
  for (const auto& [token, op] : kOps)
    if (has(base, token)) {
      k.op = op;
      break;
    }
  // Only reductions are typed: the others move bytes (older names say int8_t for them).
  if (k.op != "all_reduce" && k.op != "reduce_scatter" && k.op != "reduce") return k;
  static constexpr std::pair<std::string_view, std::string_view> kTypes[] = {
      {"f32", "float32"},   {"float", "float32"},  {"f16", "float16"},    {"half", "float16"},
      {"bf16", "bfloat16"}, {"bfloat16", "bfloat16"}, {"f64", "float64"}, {"double", "float64"},
      {"f8e4m3", "float8_e4m3"}, {"f8e5m2", "float8_e5m2"}, {"i8", "int8"}, {"int8", "int8"},
      {"u8", "uint8"},      {"uint8", "uint8"},    {"i32", "int32"},      {"int32", "int32"},
      {"u32", "uint32"},    {"uint32", "uint32"},  {"i64", "int64"},      {"int64", "int64"},
      {"u64", "uint64"},    {"uint64", "uint64"}};  // "int8_t" is the tokens "int8" and "t"
  for (size_t p = 0; p <= base.size();) {  // the '_'-separated tokens of the name
    const size_t e = std::min(base.find('_', p), base.size());
    const std::string_view tok = base.substr(p, e - p);
    for (const auto& [t, dtype] : kTypes)
      if (tok == t) k.dtype = dtype;
    if (!k.dtype.empty()) break;
    p = e + 1;
  }
  return k;
}

}  // namespace embedscope::sessions::importers

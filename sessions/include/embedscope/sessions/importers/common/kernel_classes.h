#pragma once
// How GPU kernels are classified, by name, as Holistic Trace Analysis does it
// (facebookresearch/HolisticTraceAnalysis hta/common/types.py at f4d0062, `get_kernel_type` in
// hta/utils/utils.py), and the session op category an imported op gets.
//
//   communication  re.match("(^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*)")   (covers ncclDevKernel_*)
//   memory         re.match("(^(hip)?Memcpy)|(^(hip)?Memset)|(^dma)")
//   computation    everything that does NOT re.match "(^nccl)|(.*Memcpy)|(.*Memset)|(.*dma)|(^.*Sync)|
//                  (^Stream Wait Event)|(cuda.*LaunchKernel)|(^runFunction)|(^hip)|(^job_exe)|(^packet)|
//                  (^pe_exe)|(^cpum_exe_subgraph)|(^hccl)|(^collective_subgraph_execution)"
//   other          the rest (sync records such as "Event Sync", "Stream Wait Event")
// re.match anchors at the start only: ".*Memcpy" is "contains Memcpy".

#include <string>
#include <string_view>

#include "embedscope/sessions/model/events.h"

namespace embedscope::sessions::importers {

enum class KernelClass : uint8_t { communication, memory, computation, other };

/// "communication", "memory", "computation", "other".
const char* to_string(KernelClass k);

/// HTA's class of a GPU event by its name (first matching rule above).
KernelClass kernel_class(std::string_view name);

/// The session category of an imported GPU op (stream lane): comm for communication kernels;
/// memcpy for memory kernels and copies / memsets; by FBGEMM's / TorchRec's kernel names
/// (tester50 F6; kernel_classes.cpp lists their sources): lookup for the TBE forward ("embedding"
/// and "forward"), bounds_check_indices and offsets_range; optimizer for the TBE backward
/// ("embedding" and "backward": FBGEMM fuses the optimizer update into it), linearize_index /
/// transpose_embedding_input and grad_indice_weights; input for permute / bucketize / recat_;
/// other for sync records (HTA class other); dense for the remaining compute kernels. (The Kineto
/// importer then gives a dense one launched inside a TBE / TorchRec host op that op's category.)
/// Before those: ATen's own embedding kernels (names with "at::native" and "mbedding":
/// EmbeddingBag_updateOutputKernel_*, embedding_backward_feature_kernel) are lookup - PyTorch's
/// embedding backward computes the rows' gradient, the optimizer's step updates them apart.
OpCategory gpu_op_category(std::string_view name, bool is_copy);

/// The session category of an imported host op (thread lane): comm for record_param_comms,
/// `nccl:*`, `c10d::*` and ProcessGroup calls; memcpy for host calls named *Memcpy* / *Memset*;
/// lookup / optimizer / input by the same name rules as kernels, plus SplitLookupFunction_* (the
/// lookup's forward op) and its autograd node CppNode<SplitLookupFunction_*> (optimizer); lookup
/// for ATen's embedding ops forward and backward (aten::embedding*, aten::_embedding_bag*, the
/// autograd nodes EmbeddingBackward0 / EmbeddingBagBackward0: nn.Embedding(Bag)'s backward makes
/// the gradient, no update); optimizer for PyTorch's Optimizer.step#* / Optimizer.zero_grad#*
/// ranges; other
/// for the rest (host ops,
/// runtime calls, Python frames).
OpCategory host_op_category(std::string_view name);

/// What an NCCL kernel's name says of its collective, for captures that record kernels but not
/// the collective's arguments (Nsight Systems exports). Names as NCCL writes them:
///   >= 2.19  ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)
///   <  2.19  ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)
///   older    ncclAllReduceRingLLKernel_sum_f32(...)
struct NcclKernel {
  /// all_reduce, reduce_scatter, all_gather, broadcast, reduce, or send_recv (NCCL's grouped
  /// sends and receives: an all-to-all or point-to-point, which the kernel does not tell apart);
  /// "" when the name is not an NCCL collective kernel.
  std::string op;
  /// float32, float16, bfloat16, float64, float8_e4m3, float8_e5m2, int8, uint8, int32, uint32,
  /// int64, uint64 for reductions (all_reduce, reduce_scatter, reduce) whose name carries the
  /// element type; "" otherwise (the other kernels move bytes: older names say int8_t for them).
  std::string dtype;
};
NcclKernel nccl_kernel(std::string_view name);

}  // namespace embedscope::sessions::importers

#pragma once
// Short names of demangled C++ kernel names, as Nsight Systems' "short names" show them
// (tester38 #8: a name cut in the middle lost exactly the function name): the workbench's tables
// and tooltips and `embedscope stats` show them.

#include <string>
#include <vector>

namespace embedscope::sessions {

/// The short form of a demangled C++ function signature: the return type, the parameter list
/// and every template argument list dropped, the qualified function name kept; a name of more
/// than two scopes keeps its first and last ("cub::...::DeviceRadixSortOnesweepKernel"):
///   "void cub::CUB_300001_SM_800_900::DeviceRadixSortOnesweepKernel<cub::...>(int*, ...)"
///                                          -> "cub::...::DeviceRadixSortOnesweepKernel"
///   "void embedscope::engine::cuda::(anonymous namespace)::tbe_update_kernel<float>(OptArgs)"
///                                          -> "embedscope::...::tbe_update_kernel"
///   "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
///                                          -> "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
///   "void ns::foo<float>(float*) const"    -> "ns::foo"
/// A name that is no signature (no parameter list at its end, a space before its "(", brackets
/// that do not balance), e.g. "memcpy_dtoh", "output_dist/all_to_all",
/// "Memcpy HtoD (Pageable -> Device)", is returned unchanged. Never throws. Cost: O(length).
std::string short_kernel_name(const std::string& name);

/// The names of one table's rows, each as short_kernel_name, except where different whole names
/// would read the same (tester40 #10: two cuBLAS kernels, "gemv2T_kernel_val<int, int, float, ...,
/// 128, 16, 4, 4, false, false, ...>" and "<..., 128, 16, 2, 2, ...>", were both "gemv2T_kernel_val"):
/// those keep their function's template argument list ("cutlass::Kernel2<cutlass_80_simt_sgemm_
/// 32x128_8x5_tn_align1>"), or where that still reads the same (they differ only in their
/// parameters or return type, or have no template arguments) they are numbered in order of first
/// appearance ("ns::f #1", "ns::f #2"). Equal whole names get equal short ones. out[i] is
/// names[i]'s; never throws (but std::bad_alloc). Cost: O(total length + n log n).
std::vector<std::string> distinct_short_kernel_names(const std::vector<std::string>& names);

}  // namespace embedscope::sessions

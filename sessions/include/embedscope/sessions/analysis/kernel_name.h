#pragma once
// Short names of demangled C++ kernel names, as Nsight Systems' "short names" show them
// (tester38 #8: a name cut in the middle lost exactly the function name): the workbench's tables
// and tooltips and `embedscope stats` show them.

#include <string>

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

}  // namespace embedscope::ui

// HTA's kernel figures (analysis/gpu_kernels.h) on hand-computed spans and on the imported
// fixture tests/data/traces/hta_small (two ranks, three profiler steps).
#include <gtest/gtest.h>

#include <cmath>

#include "embedscope/sessions/analysis/gpu_kernels.h"
#include "../importers/import_test_support.h"

using namespace embedscope::sessions;
using namespace embedscope::sessions::testing;
using importers::KernelClass;

TEST(GpuKernels, HtaKernelClasses) {
  using importers::kernel_class;
  EXPECT_EQ(kernel_class("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"), KernelClass::communication);
  EXPECT_EQ(kernel_class("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"), KernelClass::communication);
  EXPECT_EQ(kernel_class("void foo::ncclKernel_x()"), KernelClass::communication);
  EXPECT_EQ(kernel_class("Memcpy DtoD (Device -> Device)"), KernelClass::memory);
  EXPECT_EQ(kernel_class("Memset (Device)"), KernelClass::memory);
  EXPECT_EQ(kernel_class("void at::native::vectorized_elementwise_kernel<4>()"), KernelClass::computation);
  EXPECT_EQ(kernel_class("Event Sync"), KernelClass::other);
  EXPECT_EQ(kernel_class("Stream Wait Event"), KernelClass::other);
  EXPECT_EQ(kernel_class("my_dmaKernel"), KernelClass::other);  // HTA's (.*dma): not compute, not memory
}

// The collective an NCCL kernel's name says, in the names of NCCL 2.19+, 2.1x and older.
TEST(GpuKernels, NcclKernelNamesGiveTheCollective) {
  using importers::nccl_kernel;
  auto op_dtype = [](std::string_view n) {
    const auto k = nccl_kernel(n);
    return k.op + "/" + k.dtype;
  };
  EXPECT_EQ(op_dtype("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"), "all_reduce/float32");
  EXPECT_EQ(op_dtype("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
            "reduce_scatter/bfloat16");
  EXPECT_EQ(op_dtype("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"), "all_gather/");
  EXPECT_EQ(op_dtype("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"), "send_recv/");
  EXPECT_EQ(op_dtype("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"), "all_reduce/float32");
  EXPECT_EQ(op_dtype("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"), "send_recv/");
  EXPECT_EQ(op_dtype("ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"), "broadcast/");  // bytes
  EXPECT_EQ(op_dtype("ncclKernel_Reduce_RING_LL_Sum___nv_bfloat16(ncclDevComm*)"), "reduce/bfloat16");
  EXPECT_EQ(op_dtype("ncclAllReduceRingLLKernel_sum_f16(CollectiveArgs)"), "all_reduce/float16");
  EXPECT_EQ(op_dtype("ncclKernel_ReduceScatter_RING_LL_Sum_int64_t(ncclDevComm*)"), "reduce_scatter/int64");
  EXPECT_EQ(op_dtype("ncclDevKernel_AllReduce_Sum_f8e4m3_RING_LL(ncclDevKernelArgsStorage<4096ul>)"), "all_reduce/float8_e4m3");
  EXPECT_EQ(op_dtype("void at::native::reduce_kernel<512, 1>()"), "/");  // not NCCL
  EXPECT_EQ(op_dtype("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)"), "/");  // NCCL, no collective named
}

TEST(GpuKernels, HandComputedFigures) {
  // compute [0,10) [5,20) -> [0,20); comm [15,30); memory [40,45); idle: span 0..45 minus 35.
  std::vector<GpuSpan> s{{0, 10, KernelClass::computation}, {5, 20, KernelClass::computation},
                         {15, 30, KernelClass::communication}, {40, 45, KernelClass::memory}};
  const auto f = kernel_figures(s);
  EXPECT_EQ(f.kernel_time_ns, 45);
  EXPECT_EQ(f.idle_ns, 10);
  EXPECT_EQ(f.compute_ns, 20);
  EXPECT_EQ(f.non_compute_ns, 15);
  EXPECT_EQ(f.comm_ns, 15);
  EXPECT_EQ(f.overlap_ns, 5);
  EXPECT_DOUBLE_EQ(f.overlap_pct, 100.0 / 3.0);
  EXPECT_TRUE(f.has_comm);
  const auto none = kernel_figures({{0, 10, KernelClass::computation}});
  EXPECT_FALSE(none.has_comm);
  EXPECT_EQ(none.overlap_pct, 0.0);  // never NaN
}

TEST(GpuKernels, HtaRoundingToWholeMicroseconds) {
  // [ceil(ts), floor(ts + dur)] in us: 1000.5 + 0.3 -> [1001, 1000], a negative span, as in HTA.
  const GpuSpan a = hta_round(1000500, 1000800, KernelClass::computation);
  EXPECT_EQ(a.start, 1001000);
  EXPECT_EQ(a.end, 1000000);
  // float64: 4458676522690.655 + 0.345 is 4458676522690.999... or 691.0; HTA floors what float64 gives.
  const GpuSpan b = hta_round(4458676522690655, 4458676522691000, KernelClass::computation);
  EXPECT_EQ(b.start, 4458676522691000);
  const double sum = 4458676522690.655 + 0.345;
  EXPECT_EQ(b.end, static_cast<int64_t>(std::floor(sum)) * 1000);
  // Merge keeps HTA's arithmetic: a negative span inside a group adds nothing.
  const auto m = hta_merge({{0, 10000, KernelClass::computation}, {1000, 0, KernelClass::computation}});
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].end, 10000);
}

TEST(GpuKernels, ImportedFixtureDropsTheLastStepAsHtaDoes) {
  import_into({trace_fixture("hta_small")}, "gpu_kernels.db");
  const SessionReader r(scratch_db("gpu_kernels.db"));
  auto f = gpu_kernel_figures(r);
  ASSERT_EQ(f.size(), 2u);
  // rank 0: gemm [20,60) nccl [40,90) memcpy [120,130) elementwise [130,150) sendrecv [140,170);
  // the gemm launched at 210 us (step 3, the last) is dropped.
  EXPECT_EQ(f[0].rank, 0);
  EXPECT_EQ(f[0].gpu_events, 5);
  EXPECT_EQ(f[0].dropped_events, 1);
  EXPECT_TRUE(f[0].microsecond_rounding);
  EXPECT_EQ(f[0].kernel_time_ns, 150000);
  EXPECT_EQ(f[0].idle_ns, 30000);
  EXPECT_EQ(f[0].compute_ns, 60000);
  EXPECT_EQ(f[0].non_compute_ns, 60000);
  EXPECT_EQ(f[0].comm_ns, 80000);
  EXPECT_EQ(f[0].overlap_ns, 30000);
  EXPECT_DOUBLE_EQ(f[0].overlap_pct, 37.5);
  // rank 1: no NCCL kernels.
  EXPECT_EQ(f[1].rank, 1);
  EXPECT_FALSE(f[1].has_comm);
  EXPECT_EQ(f[1].kernel_time_ns, 130000);
  EXPECT_EQ(f[1].idle_ns, 60000);
  EXPECT_EQ(f[1].compute_ns, 60000);
  EXPECT_EQ(f[1].non_compute_ns, 10000);
  // Keeping the last step: the gemm [220,260) counts.
  f = gpu_kernel_figures(r, {true});
  EXPECT_EQ(f[0].gpu_events, 6);
  EXPECT_EQ(f[0].kernel_time_ns, 240000);
  EXPECT_EQ(f[0].idle_ns, 80000);
  EXPECT_EQ(f[0].compute_ns, 100000);
  EXPECT_EQ(f[0].non_compute_ns, 60000);
  EXPECT_DOUBLE_EQ(f[0].overlap_pct, 37.5);
}

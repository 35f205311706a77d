// Tester38 #8: kernel names shortened as Nsight Systems' short names, on the demangled names
// of the H200 session criteo_cuda4.db (its `strings` table), and left alone where no signature.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "core/kernel_name.h"
#include "embedscope/sessions/store/session.h"
#include "models/critical_path_model.h"
#include "models/range_totals_model.h"
#include "timeline/timeline_widget.h"

using embedscope::ui::short_kernel_name;

TEST(KernelName, DropsReturnTypeTemplatesAndParametersOfRealCudaNames) {
  EXPECT_EQ(short_kernel_name(
                "void cub::CUB_300001_SM_800_900::detail::radix_sort::DeviceRadixSortSingleTileKernel<cub::CUB_300001_SM_800_"
                "900::detail::radix::policy_hub<unsigned long, int, unsigned long long>::Policy1000, (cub::CUB_300001_SM_800_"
                "900::SortOrder)0, unsigned long, int, unsigned long long, cub::CUB_300001_SM_800_900::detail::identity_"
                "decomposer_t>(unsigned long const*, unsigned long*, int const*, int*, unsigned long long, int, int, "
                "cub::CUB_300001_SM_800_900::detail::identity_decomposer_t)"),
            "cub::...::DeviceRadixSortSingleTileKernel");
  EXPECT_EQ(short_kernel_name("void embedscope::engine::cuda::(anonymous namespace)::tbe_update_kernel<float>(embedscope::"
                              "engine::cuda::TbeTable const*, long const*, float*, embedscope::engine::cuda::(anonymous "
                              "namespace)::OptArgs)"),
            "embedscope::...::tbe_update_kernel");
  EXPECT_EQ(short_kernel_name("embedscope::engine::cuda::(anonymous namespace)::add_f32_kernel(long, float*, float const*)"),
            "embedscope::...::add_f32_kernel");
  EXPECT_EQ(short_kernel_name("std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, float, false, 7, "
                              "cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<float const>, float> >(cublasGemvParamsEx<"
                              "int, cublasGemvTensorStridedBatched<float const>, float>)"),
            "internal::...::kernel");
  EXPECT_EQ(short_kernel_name("void cutlass::Kernel2<cutlass_80_simt_sgemm_32x128_8x5_tn_align1>(cutlass_80_simt_sgemm_32x128_"
                              "8x5_tn_align1::Params)"),
            "cutlass::Kernel2");
  EXPECT_EQ(short_kernel_name("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  EXPECT_EQ(short_kernel_name("void at::native::foo<float>(float*) const"), "at::...::foo");
  EXPECT_EQ(short_kernel_name("void ns::foo<float>(float*)"), "ns::foo");
  EXPECT_EQ(short_kernel_name("void kernel(void (*)(int), int)"), "kernel");
}

TEST(KernelName, LeavesNamesThatAreNoSignatureAlone) {
  for (const std::string n : {"memcpy_dtoh", "output_dist/all_to_all", "Memcpy HtoD (Pageable -> Device)",
                              "autograd::engine::evaluate_function: MmBackward0", "aten::mm", "", "f(", "a<b(int)",
                              "void x::(anonymous namespace)(int)"})
    EXPECT_EQ(short_kernel_name(n), n) << n;
}

namespace {
const std::string kTbeUpdate =
    "void embedscope::engine::cuda::(anonymous namespace)::tbe_update_kernel<float>(embedscope::engine::cuda::TbeTable "
    "const*, long const*, float*, embedscope::engine::cuda::(anonymous namespace)::OptArgs)";
}  // namespace

TEST(KernelName, TablesAndTooltipsShowTheShortNameAndKeepTheWholeOne) {
  using namespace embedscope;
  const auto path = std::filesystem::temp_directory_path() / ("es_ui_kernelname_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  {
    sessions::SessionWriter w(path.string());
    w.set_metadata("world_size", "1");
    w.add_lane({0, 2, "gpu_compute", "stream"});
    w.add_ops({sessions::OpEvent{0, sessions::Lane::gpu_compute, sessions::OpCategory::optimizer, kTbeUpdate.c_str(), 0, 100,
                                 300, 0, 0}});
    w.add_step({0, 0, 0, 1000, 0.5, 0, 0});
    w.close("complete");
  }
  auto session = std::make_shared<const sessions::SessionReader>(path.string());
  const auto ops = session->lane_ops(0, 2);
  ASSERT_EQ(ops.size(), 1u);
  const int32_t id = ops[0].name_id;
  ASSERT_EQ(session->name(id), kTbeUpdate);
  sessions::RunStats stats;
  stats.critical_path.push_back({id, sessions::OpCategory::optimizer, 200, 1.0, 0, 1});
  stats.collectives.push_back({id, 1, 0, 200, 200, 0});
  stats.steps = 1;
  const QString shown = "embedscope::...::tbe_update_kernel", whole = QString::fromStdString(kTbeUpdate);
  ui::CriticalPathModel path_model(stats, *session);
  EXPECT_EQ(path_model.data(path_model.index(0, ui::CriticalPathModel::Op)).toString(), shown);
  EXPECT_EQ(path_model.data(path_model.index(0, ui::CriticalPathModel::Op), Qt::ToolTipRole).toString(), whole);
  ui::CollectiveTimesModel coll(stats, *session);
  EXPECT_EQ(coll.data(coll.index(0, ui::CollectiveTimesModel::Name)).toString(), shown);
  EXPECT_EQ(coll.data(coll.index(0, ui::CollectiveTimesModel::Name), Qt::ToolTipRole).toString(), whole);
  ui::RangeTotalsModel totals(session);
  totals.set_totals({{id, 0, 1, 200, 0}});
  EXPECT_EQ(totals.data(totals.index(0, ui::RangeTotalsModel::Name)).toString(), shown);
  EXPECT_EQ(totals.data(totals.index(0, ui::RangeTotalsModel::Name), Qt::ToolTipRole).toString(), whole);
  ui::TimelineWidget tw(session);
  const QString tip = tw.op_tooltip({0, 0});
  EXPECT_TRUE(tip.startsWith(shown + "\n")) << tip.toStdString();
  EXPECT_TRUE(tip.contains("\nfull name: " + whole)) << tip.toStdString();
  EXPECT_TRUE(tw.details({0, 0}).contains("<b>" + shown + "</b>")) << tw.details({0, 0}).toStdString();
  std::filesystem::remove(path);
}

// tester40 #10: two cuBLAS kernels of the H200 session both read "gemv2T_kernel_val" in the
// tables. Names a table shows together keep their function's template arguments where their
// short names collide, or are numbered where those collide too.
namespace {
const std::string kGemvA =
    "void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false, "
    "cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, "
    "cublasGemvTensorStridedBatched<float>, float> >(cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<float "
    "const>, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float>, float, float)";
const std::string kGemvB =
    "void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 2, 2, false, false, "
    "cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, "
    "cublasGemvTensorStridedBatched<float>, float> >(cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<float "
    "const>, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float>, float, float)";
const std::string kGemvTail =
    "<int, int, float, float, float, float, 128, 16, {}, {}, false, false, cublasGemvParamsEx<int, "
    "cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, "
    "cublasGemvTensorStridedBatched<float>, float> >";
std::string gemv_shown(int n) {
  std::string s = "gemv2T_kernel_val" + kGemvTail;
  for (int k = 0; k < 2; ++k) s.replace(s.find("{}"), 2, std::to_string(n));
  return s;
}
}  // namespace

TEST(DistinctShortKernelNames, CollidingNamesKeepTheirTemplateArgumentsOrAreNumbered) {
  using embedscope::ui::distinct_short_kernel_names;
  const auto out = distinct_short_kernel_names({kGemvA, "memcpy_dtoh", kGemvB, kGemvA, kTbeUpdate,
                                                "void ns::(anonymous namespace)::f(int)", "void ns::f(float)",
                                                "void ns::g<(anonymous namespace)::T>(int)", "void ns::g<U>(int)"});
  ASSERT_EQ(out.size(), 9u);
  EXPECT_EQ(out[0], gemv_shown(4));
  EXPECT_EQ(out[1], "memcpy_dtoh");
  EXPECT_EQ(out[2], gemv_shown(2));
  EXPECT_EQ(out[3], out[0]);                                  // the same kernel reads the same
  EXPECT_EQ(out[4], "embedscope::...::tbe_update_kernel");     // no collision: the plain short name
  EXPECT_EQ(out[5], "ns::...::f");                             // no collision: 3 scopes against 2
  EXPECT_EQ(out[6], "ns::f");
  EXPECT_EQ(out[7], "ns::g<(anonymous namespace)::T>");
  EXPECT_EQ(out[8], "ns::g<U>");
  // differing only in their parameters: numbered in order of first appearance
  EXPECT_EQ(distinct_short_kernel_names({"void ns::h(int)", "void ns::h(float)", "void ns::h(int)"}),
            (std::vector<std::string>{"ns::h #1", "ns::h #2", "ns::h #1"}));
  EXPECT_TRUE(distinct_short_kernel_names({}).empty());
}

TEST(DistinctShortKernelNames, TheWorkbenchTablesTellTwoCublasKernelsApart) {
  using namespace embedscope;
  const auto path = std::filesystem::temp_directory_path() / ("es_ui_kernelname2_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  {
    sessions::SessionWriter w(path.string());
    w.set_metadata("world_size", "1");
    w.add_lane({0, 2, "gpu_compute", "stream"});
    w.add_ops({sessions::OpEvent{0, sessions::Lane::gpu_compute, sessions::OpCategory::dense, kGemvA.c_str(), 0, 100, 300, 0, 0},
               sessions::OpEvent{0, sessions::Lane::gpu_compute, sessions::OpCategory::dense, kGemvB.c_str(), 0, 400, 500, 0, 0}});
    w.add_step({0, 0, 0, 1000, 0.5, 0, 0});
    w.close("complete");
  }
  auto session = std::make_shared<const sessions::SessionReader>(path.string());
  const auto ops = session->lane_ops(0, 2);
  ASSERT_EQ(ops.size(), 2u);
  const int32_t a = ops[0].name_id, b = ops[1].name_id;
  ASSERT_NE(a, b);
  sessions::RunStats stats;
  stats.critical_path.push_back({a, sessions::OpCategory::dense, 200, 0.6, 0, 1});
  stats.critical_path.push_back({b, sessions::OpCategory::dense, 100, 0.3, 0, 1});
  stats.steps = 1;
  ui::CriticalPathModel path_model(stats, *session);
  EXPECT_EQ(path_model.data(path_model.index(0, ui::CriticalPathModel::Op)).toString().toStdString(), gemv_shown(4));
  EXPECT_EQ(path_model.data(path_model.index(1, ui::CriticalPathModel::Op)).toString().toStdString(), gemv_shown(2));
  ui::RangeTotalsModel totals(session);
  totals.set_totals({{a, 0, 1, 200, 0}, {b, 0, 1, 100, 0}});
  EXPECT_EQ(totals.data(totals.index(0, ui::RangeTotalsModel::Name)).toString().toStdString(), gemv_shown(4));
  EXPECT_EQ(totals.data(totals.index(1, ui::RangeTotalsModel::Name)).toString().toStdString(), gemv_shown(2));
  totals.set_totals({{b, 0, 1, 100, 0}});  // alone in the range: its plain short name
  EXPECT_EQ(totals.data(totals.index(0, ui::RangeTotalsModel::Name)).toString(), QString("gemv2T_kernel_val"));
  std::filesystem::remove(path);
}

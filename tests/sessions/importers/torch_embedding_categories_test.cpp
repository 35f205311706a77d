// PyTorch's own embedding ops (nn.EmbeddingBag without FBGEMM) and optimizers by category: ATen's
// embedding forward and backward are lookup (the backward computes the rows' gradient; the
// update is the optimizer's step), Optimizer.step#* / Optimizer.zero_grad#* are optimizer, and
// FBGEMM's fused TBE backward (backward + update) stays optimizer.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/importers/common/kernel_classes.h"
#include "embedscope/sessions/store/session.h"
#include "import_test_support.h"

namespace {
using embedscope::sessions::OpCategory;
}  // namespace

TEST(TorchEmbeddingCategories, HostOpNames) {
  using embedscope::sessions::importers::host_op_category;
  const std::map<std::string, OpCategory> want = {
      // ATen (torch 1.13 traces of nn.EmbeddingBag / nn.Embedding)
      {"aten::embedding_bag", OpCategory::lookup},
      {"aten::_embedding_bag", OpCategory::lookup},
      {"aten::_embedding_bag_forward_only", OpCategory::lookup},
      {"aten::embedding", OpCategory::lookup},
      {"aten::_embedding_bag_backward", OpCategory::lookup},
      {"aten::_embedding_bag_dense_backward", OpCategory::lookup},
      {"aten::_embedding_bag_sparse_backward", OpCategory::lookup},
      {"aten::embedding_backward", OpCategory::lookup},
      {"aten::embedding_dense_backward", OpCategory::lookup},
      {"EmbeddingBagBackward0", OpCategory::lookup},
      {"autograd::engine::evaluate_function: EmbeddingBagBackward0", OpCategory::lookup},
      {"EmbeddingBackward0", OpCategory::lookup},
      // torch.optim's record_function ranges
      {"Optimizer.step#SGD.step", OpCategory::optimizer},
      {"Optimizer.zero_grad#SGD.zero_grad", OpCategory::optimizer},
      {"Optimizer.step#FusedAdam.step", OpCategory::optimizer},
      // FBGEMM's TBE: the backward fuses the update
      {"CppNode<SplitLookupFunction_sgd_Op>", OpCategory::optimizer},
      {"split_embedding_backward_codegen_sgd_unweighted_exact_cpu", OpCategory::optimizer},
      {"split_embedding_codegen_forward_unweighted_cuda", OpCategory::lookup},
      // the rest
      {"aten::mm", OpCategory::other},
      {"aten::add_", OpCategory::other},
      {"gloo:all_reduce", OpCategory::comm},
  };
  for (const auto& [name, cat] : want) EXPECT_EQ(host_op_category(name), cat) << name;
}

TEST(TorchEmbeddingCategories, KernelNames) {
  using embedscope::sessions::importers::gpu_op_category;
  // ATen's CUDA kernels of nn.EmbeddingBag: lookup; FBGEMM's fused backward: optimizer
  EXPECT_EQ(gpu_op_category("void at::native::(anonymous namespace)::embedding_backward_feature_kernel<float, float, long>"
                            "(long const*, float const*, float*, int, long, int)",
                            false),
            OpCategory::lookup);
  EXPECT_EQ(gpu_op_category("void at::native::(anonymous namespace)::EmbeddingBag_updateOutputKernel_sum_mean<float, long>"
                            "(long const*, long const*, float const*, float*, long*, long, long, long, long, float const*, "
                            "long, long)",
                            false),
            OpCategory::lookup);
  EXPECT_EQ(gpu_op_category("void split_embedding_backward_codegen_sgd_unweighted_kernel_cta_per_row_1<float, float, float, "
                            "5ul>(at::GenericPackedTensorAccessor<float, 2ul, at::RestrictPtrTraits, long>)",
                            false),
            OpCategory::optimizer);
  EXPECT_EQ(gpu_op_category("volta_sgemm_128x32_nt", false), OpCategory::dense);
}

// One profiler step [0, 100) us of a plain nn.EmbeddingBag model on one thread:
//   aten::embedding_bag [10, 30) > aten::_embedding_bag [12, 28); aten::mm [30, 40);
//   EmbeddingBagBackward0 [50, 70) > aten::_embedding_bag_backward [52, 68) >
//     aten::_embedding_bag_dense_backward [55, 65);
//   Optimizer.step#SGD.step [75, 90) > aten::add_ [76, 80)
// Time by category (union per category): lookup [10, 30) + [50, 70) = 40 us, optimizer 15 us,
// other aten::mm 10 + aten::add_ 4 = 14 us. (Before: lookup 0, optimizer [52, 68) = 16 us, other
// [10, 40) + [50, 70) + [75, 90) = 65 us.)
TEST(TorchEmbeddingCategories, StepTimeByCategoryOfAPlainEmbeddingBagModel) {
  namespace ss = embedscope::sessions;
  auto span = [](const std::string& cat, const std::string& name, int64_t ts, int64_t dur) {
    return nlohmann::json{{"ph", "X"}, {"cat", cat}, {"name", name}, {"pid", 1}, {"tid", 1}, {"ts", ts}, {"dur", dur}};
  };
  const nlohmann::json j{{"schemaVersion", 1},
                         {"traceEvents",
                          {span("user_annotation", "ProfilerStep#1", 0, 100), span("cpu_op", "aten::embedding_bag", 10, 20),
                           span("cpu_op", "aten::_embedding_bag", 12, 16), span("cpu_op", "aten::mm", 30, 10),
                           span("cpu_op", "EmbeddingBagBackward0", 50, 20),
                           span("cpu_op", "aten::_embedding_bag_backward", 52, 16),
                           span("cpu_op", "aten::_embedding_bag_dense_backward", 55, 10),
                           span("user_annotation", "Optimizer.step#SGD.step", 75, 15), span("cpu_op", "aten::add_", 76, 4)}}};
  const std::string p = (ss::testing::import_scratch() / "torch_emb_cats.json").string();
  std::ofstream(p) << j.dump();
  ss::testing::import_into({p}, "torch_emb_cats.db");
  const ss::SessionReader r(ss::testing::scratch_db("torch_emb_cats.db"));
  const ss::RunStats st = ss::analyze(r);
  ASSERT_EQ(st.ranks.size(), 1u);
  const auto& c = st.ranks[0].by_category_ns;
  EXPECT_EQ(c[static_cast<size_t>(OpCategory::lookup)], 40'000);
  EXPECT_EQ(c[static_cast<size_t>(OpCategory::optimizer)], 15'000);
  EXPECT_EQ(c[static_cast<size_t>(OpCategory::other)], 14'000);
}

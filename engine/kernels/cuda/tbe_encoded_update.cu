// The fused row optimizer on shards stored in reduced precision (apply_row_optimizer_encoded_cuda,
// cuda_kernels.h). CPU reference: apply_row_optimizer_encoded (kernels.h) with the codecs of
// quant/row_codec.h; the arithmetic is encoded_update_math.h's, which is that code operation by
// operation (tested on the host against it: tests/engine/quant/encoded_update_math_test.cpp).

#include <cmath>
#include <stdexcept>
#include <string>

#include "common.cuh"
#include "embedscope/engine/kernels/cuda_encoded_update.h"
#include "encoded_update_math.h"
#include "embedscope/engine/quant/row_codec.h"

namespace embedscope::engine::cuda {

namespace {

constexpr int kThreads = 128;

// One thread per row of the gradient: u < n, local row row_ids[u], gradient values[u * dim ..],
// its fp32 scratch scratch[u * dim ..], its error (nullable) row_errors[2 u ..].
__global__ void __launch_bounds__(kThreads)
    encoded_update_kernel(encoded::UpdateArgs a, uint8_t* __restrict__ rows, void* state1, void* state2,
                          const int64_t* __restrict__ row_ids, int64_t n, int64_t num_rows,
                          const float* __restrict__ values, float* __restrict__ scratch, float* __restrict__ row_errors) {
  const int64_t u = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (u >= n) return;
  const int64_t r = row_ids[u];
  if (r < 0 || r >= num_rows) return;
  encoded::update_row(a, rows, state1, state2, r, values + u * a.dim, scratch + u * a.dim,
                      row_errors ? row_errors + 2 * u : nullptr);
}

}  // namespace

void apply_row_optimizer_encoded_cuda(const OptimizerSpec& opt, int64_t iteration, TableDataType type, void* rows,
                                      int64_t num_rows, int64_t dim, OptimizerStateType state_type, void* state1,
                                      void* state2, const int64_t* row_ids, int64_t n, const float* values,
                                      const StochasticRoundingKey* sr, float* scratch, float* row_errors, void* stream) {
  if (dim <= 0 || num_rows < 0 || n < 0)
    throw std::invalid_argument("apply_row_optimizer_encoded_cuda: dim " + std::to_string(dim) + ", num_rows " +
                                std::to_string(num_rows) + ", n " + std::to_string(n) +
                                " (dim > 0, counts >= 0)");
  if (type == TableDataType::int4 && dim % 2 != 0)
    throw std::invalid_argument("apply_row_optimizer_encoded_cuda: int4 rows need an even dim, not " +
                                std::to_string(dim));
  if (opt.type == OptimizerType::rowwise_adagrad && state1 == nullptr)
    throw std::invalid_argument("apply_row_optimizer_encoded_cuda: rowwise_adagrad needs momentum1");
  if (opt.type == OptimizerType::adam && (state1 == nullptr || state2 == nullptr))
    throw std::invalid_argument("apply_row_optimizer_encoded_cuda: adam needs momentum1 and momentum2");
  if (opt.type == OptimizerType::adam && iteration < 1)
    throw std::invalid_argument("apply_row_optimizer_encoded_cuda: adam iteration " + std::to_string(iteration) +
                                " < 1");
  if (n == 0) return;
  encoded::UpdateArgs a;
  a.opt_type = static_cast<int32_t>(opt.type);
  a.data_type = static_cast<int32_t>(type);
  a.state_type = static_cast<int32_t>(state_type);
  a.stochastic = sr != nullptr && type != TableDataType::fp32 ? 1 : 0;
  a.lr = static_cast<float>(opt.learning_rate);
  a.eps = static_cast<float>(opt.eps);
  a.b1 = static_cast<float>(opt.beta1);
  a.b2 = static_cast<float>(opt.beta2);
  a.one_minus_b1 = 1.0f - a.b1;  // as update_row (kernels.cpp): in float
  a.one_minus_b2 = 1.0f - a.b2;
  a.c1 = 1.0f - static_cast<float>(std::pow(opt.beta1, iteration));
  a.c2 = 1.0f - static_cast<float>(std::pow(opt.beta2, iteration));
  a.dim = dim;
  a.row_bytes = row_bytes(type, dim);
  a.iteration = iteration;
  if (sr) {
    a.seed = sr->seed;
    a.table = sr->table;
    a.row_offset = sr->row_offset;
    a.col_offset = sr->col_offset;
  }
  const std::string shapes = std::string("type=") + enum_name(type) + " state=" + enum_name(state_type) +
                             " optimizer=" + to_string(opt.type) + " rows=" + std::to_string(num_rows) +
                             " dim=" + std::to_string(dim) + " n=" + std::to_string(n);
  detail::launch("tbe_encoded_update", shapes, launch_1d(n, kThreads, kThreads), detail::as_stream(stream),
                 encoded_update_kernel, a, static_cast<uint8_t*>(rows), state1, state2, row_ids, n, num_rows, values,
                 scratch, row_errors);
}

}  // namespace embedscope::engine::cuda

// Table-batched embedding kernels: forward pooled lookup and backward with the fused row
// optimizer (cuda_kernels.h). CPU references: pooled_lookup, accumulate_sparse_grad and
// apply_row_optimizer (kernels.h); the arithmetic below mirrors theirs operation by operation
// (explicit _rn intrinsics, so that nvcc does not contract a*b+c into an FMA the CPU code
// does not use).

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "common.cuh"
#include "sort_group.cuh"

namespace embedscope::engine::cuda {

using detail::check;
using detail::SortGroup;
using detail::from_float;
using detail::kFullMask;
using detail::kWarp;
using detail::to_float;

namespace {

constexpr int kWarpsPerBlock = 4;  // 128 threads per block, one warp per bag / per row
constexpr int kThreads = kWarpsPerBlock * kWarp;

// V elements of T loaded by one instruction (4, 8 or 16 bytes when V > 1).
template <class T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

// The scale of bag `bag` (t * B + b): bag_scale[bag] if given, else 1 (sum) or 1/len (mean;
// the threaded executor's mean_scale (exec/threaded/rank_input.cpp), 0 for an empty bag whose output is 0 anyway).
__device__ __forceinline__ float bag_scale_of(const float* bag_scale, int32_t pooling, const int64_t* offsets,
                                              int64_t bag) {
  if (bag_scale != nullptr) return bag_scale[bag];
  if (pooling == 0) return 1.0f;
  const int64_t len = offsets[bag + 1] - offsets[bag];
  return len > 0 ? __fdiv_rn(1.0f, static_cast<float>(len)) : 0.0f;
}

// ---- forward ---------------------------------------------------------------------------------

// One warp pools one bag over all its columns, V consecutive columns per lane per pass of
// 32 * V columns. ids are read 32 at a time (one per lane) and broadcast with shuffles; rows
// are loaded 8 at a time before they are added (memory-level parallelism), and added in id
// order.
template <class T, int V>
__device__ void pool_bag(const T* __restrict__ w, int64_t num_rows, int64_t dim, const int64_t* __restrict__ ids,
                         int64_t begin, int64_t end, float scale, float* __restrict__ out, int lane) {
  constexpr int kAhead = 8;
  for (int64_t c0 = 0; c0 < dim; c0 += static_cast<int64_t>(kWarp) * V) {
    const int64_t c = c0 + static_cast<int64_t>(lane) * V;
    const bool active = c < dim;  // dim % V == 0: the whole vector is inside the row
    float acc[V];
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] = 0.0f;
    for (int64_t i0 = begin; i0 < end; i0 += kWarp) {
      const int64_t rem = end - i0;
      const int n = rem < kWarp ? static_cast<int>(rem) : kWarp;
      const int64_t my_id = lane < n ? ids[i0 + lane] : -1;
      for (int j0 = 0; j0 < n; j0 += kAhead) {
        Vec<T, V> x[kAhead];
        bool ok[kAhead];
#pragma unroll
        for (int k = 0; k < kAhead; ++k) {
          const int64_t r = __shfl_sync(kFullMask, my_id, (j0 + k) & (kWarp - 1));
          ok[k] = active && j0 + k < n && r >= 0 && r < num_rows;
          if (ok[k]) x[k] = *reinterpret_cast<const Vec<T, V>*>(w + r * dim + c);
        }
#pragma unroll
        for (int k = 0; k < kAhead; ++k)
          if (ok[k]) {
#pragma unroll
            for (int v = 0; v < V; ++v) acc[v] = __fadd_rn(acc[v], to_float(x[k].v[v]));
          }
      }
    }
    if (active) {
#pragma unroll
      for (int v = 0; v < V; ++v) out[c + v] = scale == 1.0f ? acc[v] : __fmul_rn(acc[v], scale);
    }
  }
}

// Elements per lane for a table: the widest V (<= max_vec, a power of two) dividing dim and
// the table's weights offset (aligned loads), narrowed while half of it still covers the row
// in one pass (so that short rows keep every lane busy).
__device__ __forceinline__ int vec_width(int max_vec, int64_t dim, int64_t weights_offset) {
  int v = max_vec;
  while (v > 1 && (dim % v != 0 || weights_offset % v != 0)) v >>= 1;
  while (v > 1 && static_cast<int64_t>(kWarp) * (v / 2) >= dim) v >>= 1;
  return v;
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    tbe_forward_kernel(const TbeTable* __restrict__ tables, int64_t batch_size, int64_t num_bags,
                       const T* __restrict__ weights, int max_vec, const int64_t* __restrict__ ids,
                       const int64_t* __restrict__ offsets, const float* __restrict__ bag_scale,
                       float* __restrict__ out) {
  const int64_t bag = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  if (bag >= num_bags) return;  // whole warps leave together
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  const int64_t t = bag / batch_size, b = bag % batch_size;
  const TbeTable tab = tables[t];
  const int64_t begin = offsets[bag], end = offsets[bag + 1];
  const float scale = bag_scale_of(bag_scale, tab.pooling, offsets, bag);
  const T* w = weights + tab.weights_offset;
  float* o = out + tab.out_offset + b * tab.out_stride;
  constexpr int kMax = static_cast<int>(16 / sizeof(T));
  switch (vec_width(max_vec, tab.dim, tab.weights_offset)) {
    case 8:
      if constexpr (kMax >= 8) {
        pool_bag<T, 8>(w, tab.num_rows, tab.dim, ids, begin, end, scale, o, lane);
        break;
      }
      [[fallthrough]];
    case 4: pool_bag<T, 4>(w, tab.num_rows, tab.dim, ids, begin, end, scale, o, lane); break;
    case 2: pool_bag<T, 2>(w, tab.num_rows, tab.dim, ids, begin, end, scale, o, lane); break;
    default: pool_bag<T, 1>(w, tab.num_rows, tab.dim, ids, begin, end, scale, o, lane); break;
  }
}

// The widest load (elements, <= 16 bytes) that the base pointer's alignment allows.
int max_vec_of(const void* p, size_t elem) {
  int v = static_cast<int>(16 / elem);
  while (v > 1 && reinterpret_cast<uintptr_t>(p) % (static_cast<size_t>(v) * elem) != 0) v >>= 1;
  return v;
}

// The batch size of a call: `batch_size` when >= 0, else the plan's (cuda_kernels.h).
int64_t batch_of(const TbePlan& plan, int64_t batch_size, const char* kernel) {
  if (batch_size < -1)
    throw std::invalid_argument(std::string(kernel) + ": batch_size " + std::to_string(batch_size) + " < -1");
  const int64_t B = batch_size >= 0 ? batch_size : plan.batch_size();
  if (static_cast<int64_t>(plan.tables().size()) * B > INT32_MAX)
    throw std::invalid_argument(std::string(kernel) + ": " + std::to_string(plan.tables().size()) + " tables x " +
                                std::to_string(B) + " bags > 2^31 - 1");
  return B;
}

std::string shapes_of(const TbePlan& plan, int64_t B, int64_t num_ids = -1) {
  std::string s = "tables=" + std::to_string(plan.tables().size()) + " batch_size=" +
                  std::to_string(B) + " max_dim=" + std::to_string(plan.max_dim()) +
                  " precision=" + to_string(plan.precision());
  if (num_ids >= 0) s += " ids=" + std::to_string(num_ids);
  return s;
}

template <class T>
void forward_typed(const TbePlan& plan, int64_t B, const void* weights, const int64_t* ids, const int64_t* offsets,
                   const float* bag_scale, float* out, cudaStream_t stream) {
  const T* w = static_cast<const T*>(weights);
  const int64_t num_bags = static_cast<int64_t>(plan.tables().size()) * B;
  detail::launch("tbe_forward", shapes_of(plan, B), launch_1d(num_bags, kWarpsPerBlock, kThreads), stream,
                 tbe_forward_kernel<T>, plan.device_tables(), B, num_bags, w,
                 max_vec_of(w, sizeof(T)), ids, offsets, bag_scale, out);
}

// ---- backward ----------------------------------------------------------------------------------

// keys[p] = row_cumsum[t] + id (the row over all tables; total_rows, which sorts last and is
// skipped, for an id outside [0, num_rows)), pos[p] = p, bag_of[p] = bag, for the id at
// position p = i - offsets[0]. One warp per bag.
__global__ void __launch_bounds__(kThreads)
    tbe_linearize_kernel(const TbeTable* __restrict__ tables, const int64_t* __restrict__ row_cumsum,
                         int64_t total_rows, int64_t batch_size, int64_t num_bags, const int64_t* __restrict__ ids,
                         const int64_t* __restrict__ offsets, int64_t num_ids, uint64_t* __restrict__ keys,
                         int32_t* __restrict__ pos, int32_t* __restrict__ bag_of) {
  const int64_t bag = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  if (bag >= num_bags) return;
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  const int64_t t = bag / batch_size;
  const int64_t rows = tables[t].num_rows, base = row_cumsum[t], first = offsets[0];
  for (int64_t i = offsets[bag] + lane; i < offsets[bag + 1]; i += kWarp) {
    const int64_t p = i - first;
    if (p < 0 || p >= num_ids) continue;
    const int64_t id = ids[i];
    keys[p] = static_cast<uint64_t>(id >= 0 && id < rows ? base + id : total_rows);
    pos[p] = static_cast<int32_t>(p);
    bag_of[p] = static_cast<int32_t>(bag);
  }
}

struct OptArgs {
  int32_t type;  // OptimizerType
  float lr, eps, b1, b2, one_minus_b1, one_minus_b2, c1, c2;
};

// The gradient of column c of the row: sum over its occurrences in sorted (= id) order of
// scale * grad_out, as accumulate_sparse_grad (s * g rounded, then added).
__device__ __forceinline__ float row_grad(const TbeTable& tab, int64_t t, int64_t batch_size, int64_t c,
                                          const int32_t* __restrict__ sorted_pos, const int32_t* __restrict__ bag_of,
                                          int64_t start, int64_t count, const float* __restrict__ bag_scale,
                                          const int64_t* __restrict__ offsets, const float* __restrict__ grad_out) {
  float g = 0.0f;
  for (int64_t j = start; j < start + count; ++j) {
    const int64_t bag = bag_of[sorted_pos[j]];
    const int64_t b = bag - t * batch_size;
    const float s = bag_scale_of(bag_scale, tab.pooling, offsets, bag);
    g = __fadd_rn(g, __fmul_rn(s, grad_out[tab.out_offset + b * tab.out_stride + c]));
  }
  return g;
}

// Columns per lane whose gradients tbe_update_kernel keeps in registers: rows up to
// kWarp x kGradRegs = 256 columns are gathered once; wider rows recompute row_grad per use.
constexpr int kGradRegs = 8;

// The gradients of columns lane, lane + 32, ... (k < kGradRegs) of a row, into g[k]: the
// occurrences walked once (bag, scale read once each, not once per column and use), each column
// summed in the same order as row_grad, so bit for bit its values. Columns >= dim are left 0.
__device__ __forceinline__ void row_grads_to_registers(const TbeTable& tab, int64_t t, int64_t batch_size, int lane,
                                                       const int32_t* __restrict__ sorted_pos,
                                                       const int32_t* __restrict__ bag_of, int64_t start,
                                                       int64_t count, const float* __restrict__ bag_scale,
                                                       const int64_t* __restrict__ offsets,
                                                       const float* __restrict__ grad_out, float (&g)[kGradRegs]) {
#pragma unroll
  for (int k = 0; k < kGradRegs; ++k) g[k] = 0.0f;
  for (int64_t j = start; j < start + count; ++j) {
    const int64_t bag = bag_of[sorted_pos[j]];
    const int64_t b = bag - t * batch_size;
    const float s = bag_scale_of(bag_scale, tab.pooling, offsets, bag);
    const float* go = grad_out + tab.out_offset + b * tab.out_stride;
#pragma unroll
    for (int k = 0; k < kGradRegs; ++k) {
      const int64_t c = lane + k * kWarp;
      if (c < tab.dim) g[k] = __fadd_rn(g[k], __fmul_rn(s, go[c]));
    }
  }
}

// One warp per distinct row u < *num_runs: its gradient (row_grad) and the optimizer update of
// apply_row_optimizer, columns lane, lane + 32, ... The kernel is latency-bound (session 38's
// ncu on an H200: 175 of a 1M x 128 backward's 271 us, DRAM 13% busy), a chain of dependent
// loads per warp, so a row of at most kWarp x kGradRegs columns has its gradient gathered once
// into registers (rowwise_adagrad used it twice: the squared norm, then the step) and, for sgd
// and rowwise_adagrad, its weights and state loaded before the gather; a wider row computes
// row_grad per use. Same values either way, bit for bit.
template <class T>
__global__ void __launch_bounds__(kThreads)
    tbe_update_kernel(const TbeTable* __restrict__ tables, const int64_t* __restrict__ row_cumsum, int num_tables,
                      int64_t total_rows, int64_t batch_size, int64_t max_runs, const int32_t* __restrict__ num_runs,
                      const uint64_t* __restrict__ unique_keys, const int32_t* __restrict__ run_counts,
                      const int32_t* __restrict__ run_starts, const int32_t* __restrict__ sorted_pos,
                      const int32_t* __restrict__ bag_of, const float* __restrict__ bag_scale,
                      const int64_t* __restrict__ offsets, const float* __restrict__ grad_out, T* __restrict__ weights,
                      float* __restrict__ momentum1, float* __restrict__ momentum2, OptArgs opt) {
  const int64_t u = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  if (u >= max_runs || u >= *num_runs) return;
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  const int64_t key = static_cast<int64_t>(unique_keys[u]);
  if (key >= total_rows) return;  // ids outside their table
  // the table: the last t with row_cumsum[t] <= key (tables without rows share a cumsum)
  int lo = 0, hi = num_tables - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (row_cumsum[mid] <= key) lo = mid;
    else hi = mid - 1;
  }
  const int64_t t = lo;
  const TbeTable tab = tables[t];
  const int64_t row = key - row_cumsum[t];
  const int64_t start = run_starts[u], count = run_counts[u];
  T* w = weights + tab.weights_offset + row * tab.dim;
  const bool in_registers = tab.dim <= int64_t{kWarp} * kGradRegs;  // the same for the whole warp
  const auto type = static_cast<OptimizerType>(opt.type);
  if (in_registers && type != OptimizerType::adam) {
    // the row's weights (and its rowwise state) loaded before the gradient is gathered, so that
    // their loads overlap the gather's chain of dependent loads instead of following it
    float wv[kGradRegs], gr[kGradRegs];
#pragma unroll
    for (int k = 0; k < kGradRegs; ++k) {
      const int64_t c = lane + int64_t{k} * kWarp;
      wv[k] = c < tab.dim ? to_float(w[c]) : 0.0f;
    }
    float* m = type == OptimizerType::rowwise_adagrad ? momentum1 + tab.momentum1_offset + row : nullptr;
    const float m_before = m ? *m : 0.0f;
    row_grads_to_registers(tab, t, batch_size, lane, sorted_pos, bag_of, start, count, bag_scale, offsets, grad_out, gr);
    float step = opt.lr;  // sgd: w -= lr g
    if (m) {
      float sq = 0.0f;  // columns in the order of the general path below: lane, lane + 32, ...
#pragma unroll
      for (int k = 0; k < kGradRegs; ++k)
        if (lane + int64_t{k} * kWarp < tab.dim) sq = __fadd_rn(sq, __fmul_rn(gr[k], gr[k]));
#pragma unroll
      for (int d = kWarp / 2; d > 0; d /= 2) sq = __fadd_rn(sq, __shfl_xor_sync(kFullMask, sq, d));
      const float mv = __fadd_rn(m_before, __fdiv_rn(sq, static_cast<float>(tab.dim)));
      __syncwarp();
      if (lane == 0) *m = mv;
      step = __fdiv_rn(opt.lr, __fadd_rn(__fsqrt_rn(mv), opt.eps));
    }
#pragma unroll
    for (int k = 0; k < kGradRegs; ++k) {
      const int64_t c = lane + int64_t{k} * kWarp;
      if (c < tab.dim) w[c] = from_float<T>(__fsub_rn(wv[k], __fmul_rn(step, gr[k])));
    }
    return;
  }
  // rows wider than kWarp x kGradRegs columns, and adam: the gradient per use (row_grad), or
  // gathered once for adam's narrow rows
  float gr[kGradRegs];
  if (in_registers)
    row_grads_to_registers(tab, t, batch_size, lane, sorted_pos, bag_of, start, count, bag_scale, offsets, grad_out, gr);
  // column c = lane + k x kWarp
  auto grad = [&](int64_t c, int k) {
    if (in_registers) {
      float v = 0.0f;
#pragma unroll
      for (int q = 0; q < kGradRegs; ++q)
        if (q == k) v = gr[q];  // constant indices only: gr stays in registers
      return v;
    }
    return row_grad(tab, t, batch_size, c, sorted_pos, bag_of, start, count, bag_scale, offsets, grad_out);
  };
  switch (type) {
    case OptimizerType::sgd:
      for (int64_t c = lane; c < tab.dim; c += kWarp)
        w[c] = from_float<T>(__fsub_rn(to_float(w[c]), __fmul_rn(opt.lr, grad(c, 0))));
      break;
    case OptimizerType::rowwise_adagrad: {
      float sq = 0.0f;
      for (int64_t c = lane; c < tab.dim; c += kWarp) {
        const float g = grad(c, 0);
        sq = __fadd_rn(sq, __fmul_rn(g, g));
      }
#pragma unroll
      for (int d = kWarp / 2; d > 0; d /= 2) sq = __fadd_rn(sq, __shfl_xor_sync(kFullMask, sq, d));
      float* m = momentum1 + tab.momentum1_offset + row;
      const float mv = __fadd_rn(*m, __fdiv_rn(sq, static_cast<float>(tab.dim)));
      __syncwarp();
      if (lane == 0) *m = mv;
      const float step = __fdiv_rn(opt.lr, __fadd_rn(__fsqrt_rn(mv), opt.eps));
      for (int64_t c = lane; c < tab.dim; c += kWarp)
        w[c] = from_float<T>(__fsub_rn(to_float(w[c]), __fmul_rn(step, grad(c, 0))));
      break;
    }
    case OptimizerType::adam: {
      float* m1 = momentum1 + tab.momentum1_offset + row * tab.dim;
      float* m2 = momentum2 + tab.momentum2_offset + row * tab.dim;
      for (int64_t c = lane, k = 0; c < tab.dim; c += kWarp, ++k) {
        const float g = grad(c, static_cast<int>(k));  // k < kGradRegs whenever in_registers
        const float a = __fadd_rn(__fmul_rn(opt.b1, m1[c]), __fmul_rn(opt.one_minus_b1, g));
        const float v = __fadd_rn(__fmul_rn(opt.b2, m2[c]), __fmul_rn(__fmul_rn(opt.one_minus_b2, g), g));
        m1[c] = a;
        m2[c] = v;
        const float upd = __fdiv_rn(__fmul_rn(opt.lr, __fdiv_rn(a, opt.c1)),
                                    __fadd_rn(__fsqrt_rn(__fdiv_rn(v, opt.c2)), opt.eps));
        w[c] = from_float<T>(__fsub_rn(to_float(w[c]), upd));
      }
      break;
    }
  }
}

template <class T>
void backward_typed(const TbePlan& plan, int64_t B, void* weights, float* momentum1, float* momentum2,
                    const int64_t* ids, const int64_t* offsets, int64_t num_ids, const float* bag_scale,
                    const float* grad_out, const OptimizerSpec& spec, int64_t iteration, cudaStream_t stream,
                    GrowOnlyWorkspace* workspace) {
  const std::string shapes = shapes_of(plan, B, num_ids);
  const int64_t num_bags = static_cast<int64_t>(plan.tables().size()) * B;
  if (num_ids <= 0 || plan.tables().empty()) return;  // nothing to update
  SortGroup g(num_ids, static_cast<uint64_t>(plan.total_rows()), stream);  // keys are in [0, total_rows]
  // placed in the workspace, or a stream-ordered scratch block without one
  std::optional<detail::Scratch> scratch;
  char* base = nullptr;
  if (workspace) {
    base = static_cast<char*>(workspace->reserve(g.bytes()));
  } else {
    scratch.emplace(g.bytes(), stream);
    base = scratch->as<char>();
  }
  g.place(base);
  detail::launch("tbe_linearize", shapes, launch_1d(num_bags, kWarpsPerBlock, kThreads), stream,
                 tbe_linearize_kernel, plan.device_tables(), plan.device_row_cumsum(), plan.total_rows(),
                 B, num_bags, ids, offsets, num_ids, g.keys_in, g.pos_in, g.bag_of);
  g.sort_and_group(stream);

  OptArgs o{};
  o.type = static_cast<int32_t>(spec.type);
  o.lr = static_cast<float>(spec.learning_rate);
  o.eps = static_cast<float>(spec.eps);
  o.b1 = static_cast<float>(spec.beta1);
  o.b2 = static_cast<float>(spec.beta2);
  o.one_minus_b1 = 1.0f - o.b1;  // as apply_row_optimizer: in float
  o.one_minus_b2 = 1.0f - o.b2;
  o.c1 = 1.0f - static_cast<float>(std::pow(spec.beta1, iteration));
  o.c2 = 1.0f - static_cast<float>(std::pow(spec.beta2, iteration));
  detail::launch("tbe_update", shapes + " optimizer=" + to_string(spec.type),
                 launch_1d(num_ids, kWarpsPerBlock, kThreads), stream, tbe_update_kernel<T>, plan.device_tables(),
                 plan.device_row_cumsum(), static_cast<int>(plan.tables().size()), plan.total_rows(),
                 B, num_ids, g.num_runs, g.unique_keys, g.run_counts, g.run_starts, g.pos_out, g.bag_of,
                 bag_scale, offsets, grad_out, static_cast<T*>(weights), momentum1, momentum2, o);
}

}  // namespace

void tbe_forward(const TbePlan& plan, const void* weights, const int64_t* ids, const int64_t* offsets,
                 const float* bag_scale, float* out, void* stream, int64_t batch_size) {
  const cudaStream_t s = detail::as_stream(stream);
  const int64_t B = batch_of(plan, batch_size, "tbe_forward");
  switch (plan.precision()) {
    case WeightsPrecision::fp32: forward_typed<float>(plan, B, weights, ids, offsets, bag_scale, out, s); break;
    case WeightsPrecision::fp16: forward_typed<__half>(plan, B, weights, ids, offsets, bag_scale, out, s); break;
    case WeightsPrecision::bf16: forward_typed<__nv_bfloat16>(plan, B, weights, ids, offsets, bag_scale, out, s); break;
  }
}

void tbe_backward_update(const TbePlan& plan, void* weights, float* momentum1, float* momentum2, const int64_t* ids,
                         const int64_t* offsets, int64_t num_ids, const float* bag_scale, const float* grad_out,
                         const OptimizerSpec& opt, int64_t iteration, void* stream, GrowOnlyWorkspace* workspace,
                         int64_t batch_size) {
  const int64_t B = batch_of(plan, batch_size, "tbe_backward_update");
  if (num_ids < 0 || num_ids > INT32_MAX)
    throw std::invalid_argument("tbe_backward_update: num_ids " + std::to_string(num_ids) +
                                " outside [0, 2^31 - 1]");
  if (opt.type == OptimizerType::rowwise_adagrad && momentum1 == nullptr)
    throw std::invalid_argument("tbe_backward_update: rowwise_adagrad needs momentum1");
  if (opt.type == OptimizerType::adam && (momentum1 == nullptr || momentum2 == nullptr))
    throw std::invalid_argument("tbe_backward_update: adam needs momentum1 and momentum2");
  if (opt.type == OptimizerType::adam && iteration < 1)
    throw std::invalid_argument("tbe_backward_update: adam iteration " + std::to_string(iteration) + " < 1");
  const cudaStream_t s = detail::as_stream(stream);
  switch (plan.precision()) {
    case WeightsPrecision::fp32:
      backward_typed<float>(plan, B, weights, momentum1, momentum2, ids, offsets, num_ids, bag_scale, grad_out, opt,
                            iteration, s, workspace);
      break;
    case WeightsPrecision::fp16:
      backward_typed<__half>(plan, B, weights, momentum1, momentum2, ids, offsets, num_ids, bag_scale, grad_out, opt,
                             iteration, s, workspace);
      break;
    case WeightsPrecision::bf16:
      backward_typed<__nv_bfloat16>(plan, B, weights, momentum1, momentum2, ids, offsets, num_ids, bag_scale, grad_out,
                                    opt, iteration, s, workspace);
      break;
  }
}

}  // namespace embedscope::engine::cuda

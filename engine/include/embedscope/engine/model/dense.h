#pragma once
// The dense part of the model (replicated on every rank, as DDP does): DLRM's bottom MLP over
// the dense features, an interaction with the pooled embeddings (dot, cat, or DCN-v2 cross
// layers), a top MLP to one logit, and binary cross-entropy. Without a dense part
// ("dense": null) the logit is a fixed (untrained) random projection of the pooled
// embeddings, so only the embeddings learn.
//
// All parameters live in one flat fp32 vector (so gradients are all-reduced in one call).
// Matrix products use BLAS (OpenBLAS sgemm). On the cuda backend the dot / cat models are
// resident on the rank's device (make_resident, model/dense_device.h; dense_resident.cpp).
//
// dense.precision (spec.h DenseSpec; PyTorch AMP): tf32 / bf16 / fp16 round the inputs of every
// matrix product - each GEMM's two operands (the linear layers' forward and both backward
// products, the DCN-v2 cross layers' products) and the dot interaction's (x0 forward, x0 and dr
// backward: DLRM's torch.bmm) - to the precision (quant/dense_precision.h, round to nearest
// even) and then run the fp32 code on them: fp32 accumulation, fp32 outputs (autocast would also
// round a product's output to half precision; this emulation keeps it fp32), fp32 weights,
// gradients and SGD. fp32 calls sgemm on the buffers themselves, as before this option existed.
// The per-call device path (set_linear_ops' forward / backward / dot ops) and the resident path
// run fp32 only: both refuse another precision (std::logic_error; validate refuses it on cuda).

#include <cstdint>
#include <functional>
#include <span>
#include <utility>
#include <vector>

#include "embedscope/engine/model/dense_work.h"
#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine {

class DenseDevice;

/// Sizes of the dense part, computed without building it.
struct DenseSizes {
  int64_t num_params = 0;              ///< fp32 parameters (the same count of gradients)
  int64_t activation_floats_per_sample = 0;  ///< activations kept for backward, per sample (values, whatever their width)
};
/// feature_dims[f] is the embedding_dim of feature f.
DenseSizes dense_sizes(const WorkloadSpec& spec, const std::vector<int64_t>& feature_dims);

/// Bytes of the (host path's) activations block of a batch of B at the dense part's precision:
///   B x activation_floats_per_sample x w + (bf16 / fp16) 2 x num_params,
/// w = dense_activation_value_bytes(dense.precision) (4 fp32 / tf32, 2 bf16 / fp16), the second
/// term autocast's half-precision copies of the weights, held for the backward pass (the fp32
/// master weights and gradients are the "dense" block, 2 x num_params x 4, at every precision).
/// 0 without a dense part. Example: 10 values a sample, B 3, 100 parameters: fp32 120 B, bf16
/// 60 + 200 = 260 B.
int64_t dense_activation_bytes(const WorkloadSpec& spec, const DenseSizes& sizes, int64_t B);

/// One fully connected layer (nn.Linear, optionally followed by ReLU), row-major fp32:
///   y[B x out] = relu?(x[B x in] W^T + b), W: out x in, b: out.
/// The CPU reference of linear_forward_cuda (cuda_kernels.h). `precision` (dense.precision): x
/// and W rounded to it (quant/dense_precision.h) before the fp32 sgemm, the bias added in fp32;
/// fp32 (the default) passes x and W to sgemm as they are.
void linear_forward(int64_t B, int64_t in, int64_t out, const float* x, const float* w, const float* b, bool relu,
                    float* y, DensePrecision precision = DensePrecision::fp32);

/// Backward of linear_forward, given its input x and output y: zeroes dy where the ReLU was off
/// (y <= 0; in place, only with relu), then writes dw[out x in] = dy^T x, db[out] = the sum of
/// dy over the batch, and dx[B x in] = dy W when dx != nullptr. `precision`: each product's two
/// operands (dy and x, dy and W) rounded to it first (dy itself is left fp32); db sums that fp32
/// dy (no product: not rounded).
void linear_backward(int64_t B, int64_t in, int64_t out, const float* x, const float* w, const float* y, bool relu,
                     float* dy, float* dw, float* db, float* dx, DensePrecision precision = DensePrecision::fp32);

/// Binary cross-entropy with logits over a batch of B samples (torch.nn.BCEWithLogitsLoss,
/// mean reduction), forward and backward on the host: writes dlogits[i] = (sigmoid(logits[i]) -
/// labels[i]) / B and returns the mean loss (double; 0 for B == 0). logits, labels, dlogits: B
/// floats. Per element dense_core::bce_with_logits_term, the arithmetic bce_with_logits_cuda
/// (cuda_dense_ops.h) runs on the GPU; the sum in sample order.
double bce_with_logits(int64_t B, const float* logits, const float* labels, float* dlogits);

/// Plain SGD on n fp32 parameters on the host: params[i] -= lr * grad[i] (dense_core::sgd_update,
/// as sgd_step_cuda on the GPU, bit for bit).
void sgd_step(int64_t n, float lr, const float* grad, float* params);

/// DLRM's dot interaction on the host, forward: x0 is B rows of F + 1 entities of d0 floats
/// (bottom MLP output, then the F pooled embeddings), r gets B rows of d0 + (F + 1) F / 2 floats
/// (entity 0, then <e_a, e_b> for a = 1..F, b < a). dense_core::dot_forward_element per element,
/// as dot_interaction_forward_cuda (cuda_dense_ops.h) on the GPU, bit for bit.
void dot_interaction_forward(int64_t B, int64_t F, int64_t d0, const float* x0, float* r);

/// Backward of dot_interaction_forward: dx0 (B x (F + 1) d0, overwritten) from x0 and dr, the
/// gradient of r. dense_core::dot_backward_element per element (as the GPU's).
void dot_interaction_backward(int64_t B, int64_t F, int64_t d0, const float* x0, const float* dr, float* dx0);

/// DDP's gradient buckets (torch.distributed's compute_bucket_assignment_by_size): the tensors
/// (offset, count of fp32 values), taken in reverse order, are packed into buckets; a bucket is
/// closed once it holds >= bucket_cap_bytes. Returns the buckets as [begin, end) value ranges
/// in the order they become ready in the backward pass (last parameters first). Tensors must be
/// contiguous and in forward order. DDP's smaller first bucket (1 MiB) is not modelled.
std::vector<std::pair<int64_t, int64_t>> dense_buckets(const std::vector<std::pair<int64_t, int64_t>>& tensors,
                                                       int64_t bucket_cap_bytes);

/// Whether the dense part of `spec` can be resident on a device (DenseModel::make_resident): a
/// dense part with the dot or the cat interaction. DCN-v2 (its cross layers are host gemms) and
/// the fixed projection of "dense": null keep the per-call path (DenseModel::LinearOps).
bool dense_resident_supported(const WorkloadSpec& spec);

/// The floats per sample of the resident path's one activation block (DenseModel::
/// forward_backward_resident; the block is B times this), in this order, each region B x width:
/// the dense features (num_dense_features), each bottom layer's output, the interaction input x0
/// (d0 + sum of feature_dims), r (dot only: d0 + (F + 1) F / 2; cat reads x0), each top layer's
/// output (the last: the logits), the labels (1), two gradient buffers of P = the widest of r,
/// the bottom and top layers' outputs (the backward pass alternates between them), and d x0 (dot
/// only; cat's d x0 is d r). 0 when !dense_resident_supported(spec).
int64_t dense_resident_activation_floats_per_sample(const WorkloadSpec& spec, const std::vector<int64_t>& feature_dims);

class DenseModel {
 public:
  /// Builds and initialises the parameters from spec.seed (Xavier-uniform weights, zero
  /// biases; identical on every rank). feature_dims[f] is the embedding_dim of feature f.
  /// layout_only: the layers, offsets and param_tensors() only, no parameters (params() and
  /// grads() empty, forward_backward unusable): what the step program needs of the model,
  /// without initialising millions of parameters per program built.
  DenseModel(const WorkloadSpec& spec, std::vector<int64_t> feature_dims, bool layout_only = false);

  int64_t num_params() const { return num_params_; }
  std::vector<float>& params() { return params_; }
  const std::vector<float>& params() const { return params_; }
  /// Gradients of the last forward_backward (same layout as params()).
  std::vector<float>& grads() { return grads_; }

  /// Forward, loss and backward for a local batch of B samples.
  ///  dense_x: B x num_dense_features (ignored without a dense part)
  ///  pooled[f]: B x feature_dims[f] pooled embeddings of feature f
  ///  labels: B values in {0, 1}
  ///  d_pooled[f]: receives B x feature_dims[f], d(mean loss)/d(pooled)
  /// Overwrites grads() with d(mean loss)/d(params). Returns the mean BCE loss of the batch.
  /// on_grads_ready (may be empty) is called during the backward pass, after each layer's
  /// gradients are final, with the offset `ready_from` such that grads()[ready_from, end) are
  /// final (layers finish in reverse order, and parameters are laid out in forward order).
  double forward_backward(int64_t B, const float* dense_x, std::span<const float* const> pooled,
                          const float* labels, std::span<float* const> d_pooled,
                          const std::function<void(int64_t ready_from)>& on_grads_ready = {});
  /// The parameter tensors (offset, count) in params(), in forward order: per bottom layer its
  /// weight and bias, per DCN layer U, V, bias, per top layer weight and bias.
  std::vector<std::pair<int64_t, int64_t>> param_tensors() const;

  /// The BLAS GEMMs (sgemm, m n k as called) of one forward_backward on a batch of B, in call
  /// order. Per linear layer in -> out: forward y = x W^T (m B, n out, k in); backward dW = dy^T x
  /// (m out, n in, k B) and dX = dy W (m B, n in, k out), the latter not for the first bottom
  /// layer (no gradient into the dense features). Per DCN-v2 cross layer (input width D, low
  /// rank r): forward s = x V (B, r, D) and c = s U^T (B, D, r); backward dU = dc^T s (D, r, B),
  /// ds = dc U (B, r, D), dV = x^T ds (D, r, B), dx += ds V^T (B, D, r). The dot interaction is
  /// no GEMM here (per-element products, kernels/dense_core.h), cat none; no dense part: none.
  /// Works on a layout_only model. (From branch gemm43.)
  std::vector<GemmShape> gemms(int64_t B) const;

  /// The work of one forward_backward on a batch of B by kind (model/dense_work.h), counted from
  /// the layout as forward_backward does it (W = the interaction's input width, d0 = the bottom
  /// MLP's output, P = num_params()):
  ///  gemm_flops: the flops of gemms(B).
  ///  interaction_ops (dot only): B d0 (F + 1) F / 2 forward + B (F + 1) d0 F backward.
  ///  elementwise_ops, floats written outside the GEMMs: P (gradients zeroed) + 2B (logit and
  ///   its gradient allocated) + B x num_dense_features (the input copied); per linear layer
  ///   2 B out forward (output allocated, bias + ReLU) and, backward, B in (its dx allocated;
  ///   not for the first bottom layer) + out + B out (bias gradient zeroed and summed) + B out
  ///   (the ReLU mask; layers with ReLU); the interaction's input 2 B W (allocated, assembled),
  ///   its output B Wout allocated (Wout: the top MLP's input), d x0 B W allocated, its split
  ///   B W + B d0 (d z allocated); 3 B (logits copied, loss gradient, its copy). Then per
  ///   interaction: dot B Wout (r written) + B W (d x0 written); cat 2 B W (two copies); DCN-v2
  ///   (rank r, L layers) 2 B W (x0 and d x_L copied) + B W (d x0 += d x) + L (8 B W + 2 B r)
  ///   (per layer forward s, c, y allocated and c, y written; backward dc and ds allocated,
  ///   dc, d x0 and the bias gradient written).
  ///  dense.precision other than fp32 adds the inputs it rounds to elementwise_ops: m k + k n per
  ///   GEMM of gemms(B), and for dot B W forward + B W + B Wout backward.
  /// Empty without a dense part ("dense": null: the program's flops are 0 too). Example (tested):
  /// 4 dense features, bottom [8], dot with one 8-wide feature, top [1], B 2: gemm 364,
  /// interaction 2 x 8 x 1 + 2 x 2 x 8 x 1 = 48, elementwise 377 (summed in the test).
  DenseWork work(int64_t B) const;

  /// params -= lr * grad (plain SGD on the dense part). grad: num_params() host floats.
  /// Resident: grad copied into the device's gradients (one host-to-device copy) and the step
  /// run there (params() is then stale until sync_params_to_host).
  void sgd_step(float lr, const float* grad);

  /// Activation bytes for a batch of B (for memory accounting): dense_activation_bytes(spec,
  /// dense_sizes(...), B), B x dense_sizes(...).activation_floats_per_sample x 4 at fp32.
  int64_t activation_bytes(int64_t B) const;

  /// Makes the dense part resident on `device` (not null; outlives the model; calls from a
  /// thread bound to it): `device_params` is device memory of 2 x num_params() floats (the
  /// parameters, then the gradients; the rank's "dense" block), and the parameters are copied
  /// there now (one host-to-device copy). From then on forward_backward_resident and sgd_step
  /// run there, grads() holds only what download_grads fetched, and params() is current only
  /// after sync_params_to_host. Throws std::logic_error unless dense_resident_supported(spec).
  void make_resident(const DenseDevice* device, float* device_params);
  bool resident() const { return device_ != nullptr; }
  /// Floats of the activation block forward_backward_resident needs for a batch of B
  /// (B x dense_resident_activation_floats_per_sample).
  int64_t resident_activation_floats(int64_t B) const;
  /// forward_backward on the device: `device_activations` is device memory of
  /// resident_activation_floats(B) floats; dense_x, pooled, labels and d_pooled are host memory
  /// as forward_backward's. Per call exactly these cross: dense_x and labels in (one copy each),
  /// pooled[f] into x0's columns (one 2-D copy per feature), d_pooled[f] out of d x0's columns
  /// (one 2-D copy per feature, waited for), and the loss (one double, in the device's
  /// bce_loss). The gradients stay on the device: on_grads_ready(ready_from) is called as
  /// forward_backward's, and download_grads brings a range to grads(). The same operations in
  /// the same order as forward_backward, so on the host stand-in the results are bit-equal.
  /// `pooled_on_device` / `d_pooled_on_device` (empty: none; else one entry per feature): the
  /// features whose pooled[f] / d_pooled[f] are device memory instead (issue 14: the table_wise
  /// / column_wise dists on the device), copied device to device (not counted as crossing).
  /// Throws std::logic_error when not resident, or for a flag span of another size than pooled.
  double forward_backward_resident(int64_t B, float* device_activations, const float* dense_x,
                                   std::span<const float* const> pooled, const float* labels,
                                   std::span<float* const> d_pooled,
                                   const std::function<void(int64_t ready_from)>& on_grads_ready = {},
                                   std::span<const uint8_t> pooled_on_device = {},
                                   std::span<const uint8_t> d_pooled_on_device = {});
  /// Resident: grads()[lo, hi) from the device (one device-to-host copy, waited for); call it
  /// once the range is final (on_grads_ready). Not resident: nothing (grads() is the host's).
  void download_grads(int64_t lo, int64_t hi);
  /// Resident: params() brought current from the device (one device-to-host copy) if an SGD
  /// step changed them since; call it before the host reads params() (the rank does at the end
  /// of its run, on its bound thread). Not resident: nothing.
  void sync_params_to_host();

  /// Where the fully connected layers (bottom and top MLP), the loss and the SGD step run: by
  /// default the functions linear_forward / linear_backward / bce_with_logits / sgd_step above;
  /// the cuda executor runs them on the GPU (cuBLAS, bce_with_logits_cuda, sgd_step_cuda). Same
  /// arguments and contract (host pointers); an empty function keeps the host one. `loss`
  /// returns the mean loss; `sgd` gets num_params() parameters. The dot interaction likewise
  /// (dot_forward / dot_backward); cat (no arithmetic) and DCN stay here. The cuda executor
  /// uses this per-call path only where the dense part cannot be resident (DCN-v2, "dense":
  /// null); a dot / cat dense part is resident instead (make_resident).
  struct LinearOps {
    std::function<void(int64_t B, int64_t in, int64_t out, const float* x, const float* w, const float* b, bool relu,
                       float* y)>
        forward;
    std::function<void(int64_t B, int64_t in, int64_t out, const float* x, const float* w, const float* y, bool relu,
                       float* dy, float* dw, float* db, float* dx)>
        backward;
    std::function<double(int64_t B, const float* logits, const float* labels, float* dlogits)> loss;
    std::function<void(int64_t n, float lr, const float* grad, float* params)> sgd;
    /// The dot interaction (dot_interaction_forward / dot_interaction_backward's contract).
    std::function<void(int64_t B, int64_t F, int64_t d0, const float* x0, float* r)> dot_forward;
    std::function<void(int64_t B, int64_t F, int64_t d0, const float* x0, const float* dr, float* dx0)> dot_backward;
  };
  /// Throws std::logic_error when ops has forward, backward, dot_forward or dot_backward and the
  /// dense part's precision is not fp32 (those device paths compute in fp32; the loss and sgd
  /// ops are fp32 at every precision and always allowed).
  void set_linear_ops(LinearOps ops);

 private:
  struct Linear { int in, out; size_t w, b; bool relu; };
  void linear_forward(const Linear& l, int64_t B, const float* x, float* y) const;
  void linear_backward(const Linear& l, int64_t B, const float* x, const float* y, float* dy, float* dx);
  DensePrecision precision() const { return spec_.dense ? spec_.dense->precision : DensePrecision::fp32; }
  void sgd_step_resident(float lr, const float* grad);  // dense_resident.cpp

  const WorkloadSpec& spec_;
  std::vector<int64_t> dims_;
  std::vector<float> params_, grads_;
  int64_t num_params_ = 0;
  std::vector<Linear> bottom_, top_;
  struct Cross { size_t u, v, b; };  // DCN-v2 layer: x_{l+1} = x0 * (U (V^T x_l) + b) + x_l
  std::vector<Cross> cross_;
  int64_t inter_in_ = 0;   // width of the interaction's input (bottom output + embeddings)
  int64_t inter_out_ = 0;  // width of the top MLP input
  std::vector<float> fixed_projection_;  // no dense part: the fixed head (not a parameter)
  LinearOps ops_;                         // empty: the CPU functions
  const DenseDevice* device_ = nullptr;   // resident on it (make_resident)
  float* device_params_ = nullptr;        // its parameters, then its gradients (2 x num_params_)
  bool host_params_stale_ = false;        // an SGD step ran on the device since the last sync
};

}  // namespace embedscope::engine

// Dense layers with cuBLAS (cuda_kernels.h); CPU reference: linear_forward / linear_backward
// (dense.h). Row-major matrices are passed to column-major cuBLAS as their transposes:
//   y^T[out x B]  = W[out x in] x^T[in x B]     sgemm(T, N, out, B, in, w, in, x, in, y, out)
//   dw^T[in x out] = x^T[in x B] dy[B x out]    sgemm(N, T, in, out, B, x, in, dy, out, dw, in)
//   dx^T[in x B]  = W^T[in x out] dy^T[out x B] sgemm(N, N, in, B, out, w, in, dy, out, dx, in)

#include <cublas_v2.h>
#include <dlfcn.h>

#include <climits>
#include <string>

#include "common.cuh"

namespace embedscope::engine::cuda {

using detail::check;

namespace {

constexpr int kThreads = 256;

// cuBLAS is opened at the first Blas, not linked: loading libcublas (and its libcublasLt) at program
// start ran their initialisers in every process of the engine, 56 ms of CPU each (perf stat of an
// empty main linked with -lcublas against one without: 56.0 ms vs 0.2 ms; nearly all of it
// libcublasLt's constructors faulting in fresh pages), whether or not the process ever used a GPU:
// each test process of CI's 2,000 engine and UI tests and each CLI run of a CPU workload paid it
// (docs/ci-time.md). The entry points are those of the cuBLAS the build compiled against
// (CUBLAS_VER_MAJOR; dlsym's default version is the library's own), the types theirs (decltype).
struct CublasApi {
  decltype(&cublasCreate_v2) create;
  decltype(&cublasDestroy_v2) destroy;
  decltype(&cublasSetStream_v2) set_stream;
  decltype(&cublasSetMathMode) set_math_mode;
  decltype(&cublasSgemm_v2) sgemm;
  decltype(&cublasGetStatusName) status_name;
  decltype(&cublasGetStatusString) status_string;
};

#define EMBEDSCOPE_STR2(x) #x
#define EMBEDSCOPE_STR(x) EMBEDSCOPE_STR2(x)
constexpr const char* kCublasSoname = "libcublas.so." EMBEDSCOPE_STR(CUBLAS_VER_MAJOR);
#undef EMBEDSCOPE_STR
#undef EMBEDSCOPE_STR2

// The soname first (LD_LIBRARY_PATH, the executable's RUNPATH, ld.so.cache: where the linked
// libcudart is found), then the toolkit directory the build found (EMBEDSCOPE_CUDA_LIBRARY_DIR).
// Throws CudaError naming both attempts and dlerror's words when neither loads, or the missing symbol.
CublasApi load_cublas() {
  std::string tried = kCublasSoname;
  void* lib = dlopen(kCublasSoname, RTLD_NOW | RTLD_LOCAL);
  std::string why = lib == nullptr ? dlerror() : "";
#ifdef EMBEDSCOPE_CUDA_LIBRARY_DIR
  if (lib == nullptr) {
    const std::string path = std::string(EMBEDSCOPE_CUDA_LIBRARY_DIR) + "/" + kCublasSoname;
    lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      tried += " nor " + path;
      why += "; " + std::string(dlerror());
    }
  }
#endif
  if (lib == nullptr)
    throw CudaError("cuBLAS: cannot load " + tried + " (" + why +
                    "): put the CUDA toolkit's library directory on LD_LIBRARY_PATH");
  const auto sym = [&](const char* name) {
    void* f = dlsym(lib, name);
    if (f == nullptr) throw CudaError(std::string("cuBLAS: ") + kCublasSoname + " has no " + name);
    return f;
  };
  CublasApi api{};
  api.create = reinterpret_cast<decltype(api.create)>(sym("cublasCreate_v2"));
  api.destroy = reinterpret_cast<decltype(api.destroy)>(sym("cublasDestroy_v2"));
  api.set_stream = reinterpret_cast<decltype(api.set_stream)>(sym("cublasSetStream_v2"));
  api.set_math_mode = reinterpret_cast<decltype(api.set_math_mode)>(sym("cublasSetMathMode"));
  api.sgemm = reinterpret_cast<decltype(api.sgemm)>(sym("cublasSgemm_v2"));
  api.status_name = reinterpret_cast<decltype(api.status_name)>(sym("cublasGetStatusName"));
  api.status_string = reinterpret_cast<decltype(api.status_string)>(sym("cublasGetStatusString"));
  return api;  // the library stays loaded for the process's life
}

// Loaded once (thread-safe); a failed load throws and is tried again by the next Blas.
const CublasApi& cublas() {
  static const CublasApi api = load_cublas();
  return api;
}

void check_blas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw CudaError(std::string(what) + ": " + cublas().status_name(s) + ": " + cublas().status_string(s));
}

cublasHandle_t handle_of(const Blas& b) { return static_cast<cublasHandle_t>(b.handle()); }

__global__ void __launch_bounds__(kThreads) bias_relu_kernel(int64_t n, int64_t out, const float* __restrict__ b,
                                                             bool relu, float* __restrict__ y) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = __fadd_rn(y[i], b[i % out]);
  if (relu && v < 0) v = 0;
  y[i] = v;
}

__global__ void __launch_bounds__(kThreads) relu_mask_kernel(int64_t n, const float* __restrict__ y,
                                                             float* __restrict__ dy) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n && y[i] <= 0) dy[i] = 0;
}

// db[o] = sum over i in batch order of dy[i * out + o]; one thread per column (coalesced rows).
__global__ void __launch_bounds__(kThreads) bias_grad_kernel(int64_t B, int64_t out, const float* __restrict__ dy,
                                                             float* __restrict__ db) {
  const int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (o >= out) return;
  float s = 0.0f;
  for (int64_t i = 0; i < B; ++i) s = __fadd_rn(s, dy[i * out + o]);
  db[o] = s;
}

void check_sizes(const char* fn, int64_t B, int64_t in, int64_t out) {
  for (int64_t v : {B, in, out})
    if (v < 0 || v > INT_MAX)
      throw std::invalid_argument(std::string(fn) + ": sizes B=" + std::to_string(B) + " in=" + std::to_string(in) +
                                  " out=" + std::to_string(out) + " outside [0, 2^31 - 1]");
}

std::string shapes_of(int64_t B, int64_t in, int64_t out) {
  return "B=" + std::to_string(B) + " in=" + std::to_string(in) + " out=" + std::to_string(out);
}

}  // namespace

Blas::Blas(void* stream) : stream_(stream) {
  cublasHandle_t h = nullptr;
  check_blas(cublas().create(&h), "cublasCreate");
  handle_ = h;
  check_blas(cublas().set_stream(h, detail::as_stream(stream)), "cublasSetStream");
  check_blas(cublas().set_math_mode(h, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode");
}

Blas::~Blas() {
  if (handle_ != nullptr) cublas().destroy(static_cast<cublasHandle_t>(handle_));
}

void linear_forward_cuda(Blas& blas, int64_t B, int64_t in, int64_t out, const float* x, const float* w,
                         const float* b, bool relu, float* y) {
  check_sizes("linear_forward_cuda", B, in, out);
  if (B == 0 || out == 0) return;
  const float one = 1.0f, zero = 0.0f;
  check_blas(cublas().sgemm(handle_of(blas), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(out), static_cast<int>(B),
                            static_cast<int>(in), &one, w, static_cast<int>(in), x, static_cast<int>(in), &zero, y,
                            static_cast<int>(out)),
             "cublasSgemm (linear forward)");
  detail::launch("linear_bias_relu", shapes_of(B, in, out), launch_1d(B * out, kThreads, kThreads),
                 detail::as_stream(blas.stream()), bias_relu_kernel, B * out, out, b, relu, y);
}

void linear_backward_cuda(Blas& blas, int64_t B, int64_t in, int64_t out, const float* x, const float* w,
                          const float* y, bool relu, float* dy, float* dw, float* db, float* dx) {
  check_sizes("linear_backward_cuda", B, in, out);
  const cudaStream_t stream = detail::as_stream(blas.stream());
  const std::string shapes = shapes_of(B, in, out);
  if (B == 0) {  // no samples: zero gradients of the parameters, as the CPU BLAS with k = 0
    check(cudaMemsetAsync(dw, 0, static_cast<size_t>(out * in) * sizeof(float), stream), "cudaMemsetAsync (dw)");
    check(cudaMemsetAsync(db, 0, static_cast<size_t>(out) * sizeof(float), stream), "cudaMemsetAsync (db)");
    return;
  }
  if (relu)
    detail::launch("linear_relu_mask", shapes, launch_1d(B * out, kThreads, kThreads), stream, relu_mask_kernel,
                   B * out, y, dy);
  const float one = 1.0f, zero = 0.0f;
  if (out > 0 && in > 0)
    check_blas(cublas().sgemm(handle_of(blas), CUBLAS_OP_N, CUBLAS_OP_T, static_cast<int>(in), static_cast<int>(out),
                              static_cast<int>(B), &one, x, static_cast<int>(in), dy, static_cast<int>(out), &zero, dw,
                              static_cast<int>(in)),
               "cublasSgemm (linear backward, dw)");
  detail::launch("linear_bias_grad", shapes, launch_1d(out, kThreads, kThreads), stream, bias_grad_kernel, B, out, dy,
                 db);
  if (dx != nullptr && in > 0) {
    if (out == 0) {
      check(cudaMemsetAsync(dx, 0, static_cast<size_t>(B * in) * sizeof(float), stream), "cudaMemsetAsync (dx)");
      return;
    }
    check_blas(cublas().sgemm(handle_of(blas), CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(in), static_cast<int>(B),
                              static_cast<int>(out), &one, w, static_cast<int>(in), dy, static_cast<int>(out), &zero, dx,
                              static_cast<int>(in)),
               "cublasSgemm (linear backward, dx)");
  }
}

}  // namespace embedscope::engine::cuda

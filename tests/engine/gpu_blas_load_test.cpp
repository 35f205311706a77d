// cuBLAS is opened at the first cuda::Blas (engine/kernels/cuda/dense.cu, dlopen), not loaded
// with the program: libcublas and libcublasLt's start-up was 56 ms of CPU in every process that
// linked the engine, GPU or not (docs/ci-time.md). These check that the executable does not
// load it, and that the first handle does (with a device the handle is made; without one
// cublasCreate itself answers, through the opened library).

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "embedscope/engine/kernels/cuda_kernels.h"
#include "engine/gpu_test_support.h"

namespace {

// Whether /proc/self/maps has a mapping of libcublas or libcublasLt.
bool blasload_cublas_mapped() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find("/libcublas") != std::string::npos) return true;
  return false;
}

// Read while the program's static objects are constructed: after the loader has mapped every
// library the executable needs, before any test has made a Blas.
const bool kBlasloadMappedAtStart = blasload_cublas_mapped();

}  // namespace

TEST(GpuBlasLoad, CublasIsNotLoadedWithTheProgram) { EXPECT_FALSE(kBlasloadMappedAtStart); }

TEST(GpuBlasLoad, TheFirstHandleOpensCublas) {
  using embedscope::engine::cuda::Blas;
  const auto dc = embedscope::engine::cuda::device_count();
  if (dc.count > 0) {
    Blas blas;
    EXPECT_NE(blas.handle(), nullptr);
  } else {
    try {
      Blas blas;
      ADD_FAILURE() << "cublasCreate made a handle without a device";
    } catch (const embedscope::engine::cuda::CudaError& e) {
      // the status comes from the library (its name and words), not "cuBLAS: cannot load ..."
      EXPECT_EQ(std::string(e.what()).rfind("cublasCreate: CUBLAS_STATUS_", 0), 0u) << e.what();
    }
  }
  EXPECT_TRUE(blasload_cublas_mapped());
}

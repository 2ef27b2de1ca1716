// The busy kernel: its name starts with sparge_sparse_ so that the collector must attribute it to Sparse.
#include <cuda_runtime.h>

#include "busy_kernel.h"

namespace sparge::prof::fixtures {

namespace {
constexpr int kBlocks = 264;
constexpr int kThreads = 256;
}  // namespace

__global__ void sparge_sparse_test_busy(int64_t iterations, float* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  float a = 1.0f + 1e-7f * float(i), b = 0.999999f;
  for (int64_t k = 0; k < iterations; ++k)
    a = fmaf(a, b, 1e-7f);  // dependent: cannot be folded or overlapped
  out[i] = a;
}

int launchBusyKernel(CUstream_st* stream, int64_t iterations, float* out) {
  sparge_sparse_test_busy<<<kBlocks, kThreads, 0, stream>>>(iterations, out);
  return int(cudaGetLastError());
}

int64_t outputCount() {
  return int64_t(kBlocks) * kThreads;
}

}  // namespace sparge::prof::fixtures

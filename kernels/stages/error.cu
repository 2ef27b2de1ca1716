// Error of the sparse output against the fp32 reference, reduced on the GPU per (head, q-block) so that
// only a few doubles per block cross to the host.
#include <cuda_runtime.h>

#include "common/cuda_util.h"
#include "common/device_common.cuh"
#include "common/launch.h"

namespace sparge::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kSums = 8;

template <typename T>
__global__ void __launch_bounds__(kThreads)
    sparge_error_reduce(const T* __restrict__ o, const float* __restrict__ r, const int* __restrict__ heads,
                        int Hq, int Nq, int D, int BQ, double* __restrict__ sums) {
  __shared__ double red[kThreads / 32][kSums];
  const int i = blockIdx.x, hq = heads[blockIdx.y], b = blockIdx.z;
  const int bhq = b * Hq + hq;
  const int row0 = i * BQ, rows = min(BQ, Nq - row0);
  const size_t base = ((size_t)bhq * Nq + row0) * D;
  double acc[kSums] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int x = threadIdx.x; x < rows * D; x += kThreads) {
    double ov = Elem<T>::toF(o[base + x]);
    double rv = r[base + x];
    double df = ov - rv;
    acc[0] += fabs(df);
    acc[1] += fabs(rv);
    acc[2] += ov * rv;
    acc[3] += ov * ov;
    acc[4] += rv * rv;
    acc[5] += df * df;
    acc[6] += 1;
    // A non-finite reference (e.g. a softmax scale that overflows) makes the comparison meaningless too: the
    // head is flagged instead of showing the L1 0 / cos 1 that NaN sums would turn into.
    acc[7] += (isfinite(ov) && isfinite(rv)) ? 0 : 1;
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
  for (int k = 0; k < kSums; ++k) {
    double v = acc[k];
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    if (lane == 0) red[warp][k] = v;
  }
  __syncthreads();
  if (threadIdx.x < kSums) {
    double v = 0;
    for (int w = 0; w < kThreads / 32; ++w) v += red[w][threadIdx.x];
    sums[((size_t)bhq * gridDim.x + i) * kSums + threadIdx.x] = v;
  }
}

}  // namespace

void launchError(ElemType t, const Problem& p, const void* o, const float* oref, double* sums,
                 cudaStream_t s) {
  dim3 grid(p.nq, p.nHeads, p.B);
  if (t == ElemType::F16)
    sparge_error_reduce<__half>
        <<<grid, kThreads, 0, s>>>(static_cast<const __half*>(o), oref, p.heads, p.Hq, p.Nq, p.D, p.BQ, sums);
  else
    sparge_error_reduce<__nv_bfloat16><<<grid, kThreads, 0, s>>>(static_cast<const __nv_bfloat16*>(o), oref,
                                                                 p.heads, p.Hq, p.Nq, p.D, p.BQ, sums);
  checkLaunch("sparge_error_reduce");
}

}  // namespace sparge::cuda

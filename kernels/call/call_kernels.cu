// The whole call's small kernels: block flags from the rule, layout copies, head counters.
#include <cuda_runtime.h>

#include <algorithm>

#include "call/call_launch.h"
#include "common/cuda_util.h"

namespace sparge::cuda {
namespace {

__global__ void sparge_other_block_flags(const BlockRule rule, int nq, int nk, uint8_t* flags) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  if (x >= nq * nk) return;
  const int i = x / nk, j = x % nk;
  const bool valid = rule.valid(i, j);
  flags[x] = (valid ? kBlockValid : 0) | (rule.onDiagonal(i, j) ? kBlockOnDiagonal : 0);
}

// One thread per 8 elements (16 bytes).
__global__ void sparge_other_layout_copy(const uint16_t* src, Strides4 ss, uint16_t* dst, Strides4 ds, int H,
                                         int N, int D, int64_t chunks) {
  const int perRow = D / 8;
  for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < chunks;
       c += (int64_t)gridDim.x * blockDim.x) {
    const int64_t row = c / perRow;
    const int col = int(c % perRow) * 8;
    const int64_t n = row % N, bh = row / N, h = bh % H, b = bh / H;
    const uint4 v = *reinterpret_cast<const uint4*>(src + b * ss.batch + h * ss.head + n * ss.token + col);
    *reinterpret_cast<uint4*>(dst + b * ds.batch + h * ds.head + n * ds.token + col) = v;
  }
}

__device__ __forceinline__ long long blockSum(long long v, long long* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  long long s = 0;
  for (int w = 0; w < int(blockDim.x >> 5); ++w) s += red[w];
  __syncthreads();
  return s;
}

// One CTA per (b*Hq + hq).
__global__ void sparge_other_head_stats(const HeadStatsArgs a, int nq, int nk) {
  __shared__ long long red[8];
  const int bh = blockIdx.x;
  const size_t grid = (size_t)nq * nk;
  long long valid = 0, selected = 0, skipped = 0;
  for (size_t x = threadIdx.x; x < grid; x += blockDim.x) {
    valid += (a.flags[x] & kBlockValid) ? 1 : 0;
    if (a.pvSkipped) skipped += a.pvSkipped[bh * grid + x];
  }
  for (int i = threadIdx.x; i < nq; i += blockDim.x) selected += a.validCount[(size_t)bh * nq + i];
  valid = blockSum(valid, red);
  selected = blockSum(selected, red);
  skipped = blockSum(skipped, red);
  if (threadIdx.x == 0) {
    int64_t* out = a.stats + (size_t)bh * 5;
    out[0] = valid;
    out[1] = selected;
    out[2] = selected - skipped;
    out[3] = skipped;
    out[4] = a.emptyRows ? a.emptyRows[bh] : 0;
  }
}

}  // namespace

void launchBlockFlags(const BlockRule& rule, int nq, int nk, uint8_t* flags, cudaStream_t s) {
  const int n = nq * nk;
  sparge_other_block_flags<<<(n + 255) / 256, 256, 0, s>>>(rule, nq, nk, flags);
  checkLaunch("sparge_other_block_flags");
}

void launchLayoutCopy(const void* src, Strides4 srcStrides, void* dst, Strides4 dstStrides, int B, int H,
                      int N, int D, cudaStream_t s) {
  const int64_t chunks = int64_t(B) * H * N * (D / 8);
  const int grid = int(std::min<int64_t>((chunks + 255) / 256, 1 << 16));
  sparge_other_layout_copy<<<grid, 256, 0, s>>>(static_cast<const uint16_t*>(src), srcStrides,
                                                static_cast<uint16_t*>(dst), dstStrides, H, N, D, chunks);
  checkLaunch("sparge_other_layout_copy");
}

void launchHeadStats(const HeadStatsArgs& a, int BH, int nq, int nk, cudaStream_t s) {
  sparge_other_head_stats<<<BH, 256, 0, s>>>(a, nq, nk);
  checkLaunch("sparge_other_head_stats");
}

}  // namespace sparge::cuda

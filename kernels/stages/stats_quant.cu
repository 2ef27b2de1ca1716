// Stage 1's block statistics and the INT8 operands of the quantized numerics in one pass over Q or K: the
// tile of the geometry is both the pooling block and the quantization tile, so one CTA reads its rows once
// from memory for blockStatsPass (the same code as sparge_predict_block_stats, so the same bits; or its flag
// form, blockStatsPassSimFlag, where the caller reads the self-similarity only against negative θ), then
// quantizes them from L2 with the block's amax (the same arithmetic as sparge_quant_int8_tiles).
#include <cuda_runtime.h>

#include "call/call_launch.h"
#include "common/cuda_util.h"
#include "common/head_dim.h"
#include "stages/block_pass.cuh"

namespace sparge::cuda {
namespace {

// One CTA (4 warps) per (block, bh). int8 [BH][nb·BS][D] (rows past N zero), scale [BH][nb]. kQuant false:
// the statistics alone (only in the flag form; launchBlockStats has the other). kSimFlag: the self-similarity
// as blockStatsPassSimFlag writes it.
template <typename T, int NC, bool kQuant, bool kSimFlag>
__global__ void __launch_bounds__(128)
    sparge_predict_stats_quant(const T* __restrict__ x, int N, int BS, const T* __restrict__ km,
                               T* __restrict__ pooled, float* __restrict__ selfSim, int8_t* __restrict__ q8,
                               float* __restrict__ scale) {
  constexpr int D = NC * 32;
  const int blk = blockIdx.x, bh = blockIdx.y, nb = gridDim.x;
  const float amax = kSimFlag
                         ? blockStatsPassSimFlag<T, NC, kQuant>(x, N, BS, km, pooled, selfSim, blk, bh, nb)
                         : blockStatsPass<T, NC, kQuant>(x, N, BS, km, pooled, selfSim, blk, bh, nb);
  if constexpr (!kQuant) return;
  const float s = amax / 127.f + 1e-7f;
  const Quotient byScale(s);
  if (threadIdx.x == 0) scale[(size_t)bh * nb + blk] = s;
  const T* src = x + (size_t)bh * N * D;
  int8_t* dst = q8 + ((size_t)bh * nb + blk) * BS * D;
  // Chunks of 8 values (one 16-byte load, one 8-byte store), rows in order, kBatch chunks' loads in flight
  // before the first is used (one at a time, each waited a round trip to L2). A thread's chunks all start at
  // the same column (blockDim.x is a multiple of D / 8), so its 8 mean values are read once.
  static_assert(128 % (D / 8) == 0, "a thread's chunks share their columns");
  constexpr int kBatch = 4;
  const int col = (threadIdx.x % (D / 8)) * 8, chunks = BS * D / 8;
  uint4 kmRaw = make_uint4(0, 0, 0, 0);
  if (km) kmRaw = *reinterpret_cast<const uint4*>(km + (size_t)bh * D + col);
  for (int c0 = threadIdx.x; c0 < chunks; c0 += kBatch * blockDim.x) {
    uint4 raw[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int chunk = c0 + b * blockDim.x, row = blk * BS + chunk / (D / 8);
      raw[b] = make_uint4(0, 0, 0, 0);
      if (chunk < chunks && row < N) raw[b] = *reinterpret_cast<const uint4*>(src + (size_t)row * D + col);
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int chunk = c0 + b * blockDim.x, row = blk * BS + chunk / (D / 8);
      if (chunk >= chunks) break;
      float v[8] = {};  // rows past N quantize as zeros
      if (row < N) smoothRaw<T, 8>(raw[b], km ? reinterpret_cast<const T*>(&kmRaw) : nullptr, v);
      *reinterpret_cast<uint2*>(dst + (size_t)chunk * 8) = toInt8x8<T>(v, byScale);
    }
  }
}

template <typename T, bool kQuant, bool kSimFlag>
void blockPass(const void* x, int BH, int N, int D, int BS, const void* km, void* pooled, float* sim,
               int8_t* q8, float* scale, cudaStream_t s) {
  dim3 grid((N + BS - 1) / BS, BH);
  withHeadDim(D, "CUDA engine", [&](auto d) {
    sparge_predict_stats_quant<T, decltype(d)::value / 32, kQuant, kSimFlag><<<grid, 128, 0, s>>>(
        static_cast<const T*>(x), N, BS, static_cast<const T*>(km), static_cast<T*>(pooled), sim, q8, scale);
  });
  checkLaunch("sparge_predict_stats_quant");
}

template <typename T>
void blockPassOf(const void* x, int BH, int N, int D, int BS, const void* km, void* pooled, float* sim,
                 int8_t* q8, float* scale, SimUse use, cudaStream_t s) {
  const bool flag = use == SimUse::FlagBelowZero;
  if (q8 && flag)
    blockPass<T, true, true>(x, BH, N, D, BS, km, pooled, sim, q8, scale, s);
  else if (q8)
    blockPass<T, true, false>(x, BH, N, D, BS, km, pooled, sim, q8, scale, s);
  else
    blockPass<T, false, true>(x, BH, N, D, BS, km, pooled, sim, q8, scale, s);
}

}  // namespace

void launchBlockPass(ElemType t, const void* x, int BH, int N, int D, int BS, const void* km, void* pooled,
                     float* selfSim, int8_t* q8, float* scale, SimUse use, cudaStream_t s) {
  if (!q8 && use == SimUse::Value) return launchBlockStats(t, x, BH, N, D, BS, km, pooled, selfSim, s);
  if (t == ElemType::F16)
    blockPassOf<__half>(x, BH, N, D, BS, km, pooled, selfSim, q8, scale, use, s);
  else
    blockPassOf<__nv_bfloat16>(x, BH, N, D, BS, km, pooled, selfSim, q8, scale, use, s);
}

}  // namespace sparge::cuda

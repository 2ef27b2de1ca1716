// Operands of the quantized numerics, with SpargeAttn's scales and rounding (docs/method.md):
//   Q, K  INT8 per tile of the run's geometry (Q per BQ rows, K per BK rows after subtracting the
//         per-head token mean km in the input precision), scale = amax/127 + 1e-7,
//         q = trunc(x/scale + 0.5·sign(x/scale)) in fp32 (round half away from zero); rows past N are zero.
//   V     int8-fp16: fp16 (bf16 inputs are cast, as upstream does). int8-fp8: V cast to fp16, then per
//         channel scale = amax/2.25 over all tokens, v8 = e4m3_rn_satfinite(v · (2.25/amax)) (an all-zero
//         channel stores 0 with scale 0), laid out [B*Hkv][D][fp8VTokens(Nkv)] with keys contiguous per
//         channel and, inside every group of 16 keys, key perm[p] at position p (perm below) so that P
//         leaves the Q·Kᵀ accumulators in the register order the FP8 P·V MMA expects.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "attention/attention_params.cuh"
#include "common/cuda_util.h"
#include "common/device_common.cuh"
#include "common/head_dim.h"
#include "common/launch.h"
#include "stages/block_pass.cuh"

namespace sparge::cuda {
namespace {

using core::Numerics;

constexpr int kQuantThreads = 256;
constexpr float kFp8VRange = 2.25f;  // keeps an fp16-accumulated 64-key P·V block below 65504 upstream

size_t alignUp(size_t x) {
  return (x + 255) / 256 * 256;
}

// Workspace layout, shared by quantWorkspaceBytes and launchQuantize.
struct QuantLayout {
  size_t q8, qScale, k8, kScale, v, vScale, vAmax, total;

  QuantLayout(const Problem& p, Numerics n) {
    const size_t bhq = (size_t)p.B * p.Hq, bhk = (size_t)p.B * p.Hkv;
    size_t at = 0;
    auto take = [&at](size_t bytes) {
      const size_t here = at;
      at += alignUp(bytes);
      return here;
    };
    q8 = take(bhq * p.nq * p.BQ * p.D);
    qScale = take(bhq * p.nq * sizeof(float));
    k8 = take(bhk * p.nk * p.BK * p.D);
    kScale = take(bhk * p.nk * sizeof(float));
    v = vScale = vAmax = 0;
    if (n == Numerics::Int8Fp16) {
      v = take(bhk * p.Nkv * p.D * 2);  // fp16 copy of bf16 V (fp16 inputs are used in place)
    } else {
      v = take(bhk * p.D * fp8VTokens(p.Nkv));
      vScale = take(bhk * p.D * sizeof(float));
      vAmax = take(bhk * p.D * sizeof(float));
    }
    total = at;
  }
};

__device__ __forceinline__ float blockMax(float v, float* red) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  float m = 0.f;
#pragma unroll
  for (int w = 0; w < kQuantThreads / 32; ++w) m = fmaxf(m, red[w]);
  return m;
}

// One CTA per (tile, head): R rows x D of x (rows past n zero), INT8 with one scale. Each thread keeps its
// chunks of 8 values in registers between the amax pass and the rounding pass.
template <typename T, int D, int R>
__global__ void __launch_bounds__(kQuantThreads)
    sparge_quant_int8_tiles(const T* x, const T* km, int n, int8_t* out, float* scale) {
  constexpr int kChunks = R * D / 8;
  constexpr int kPerThread = (kChunks + kQuantThreads - 1) / kQuantThreads;
  __shared__ float red[kQuantThreads / 32];
  const int tile = blockIdx.x, bh = blockIdx.y, nTiles = gridDim.x;
  const T* src = x + (size_t)bh * n * D;
  const T* kmh = km ? km + (size_t)bh * D : nullptr;
  float v[kPerThread][8];
  float amax = 0.f;
#pragma unroll
  for (int c = 0; c < kPerThread; ++c) {
    const int chunk = threadIdx.x + c * kQuantThreads;
    const int row = tile * R + chunk / (D / 8), col = (chunk % (D / 8)) * 8;
    const bool ok = chunk < kChunks && row < n;
    uint4 raw = make_uint4(0, 0, 0, 0);
    if (ok) raw = *reinterpret_cast<const uint4*>(src + (size_t)row * D + col);
    const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      v[c][u] = ok ? smoothed(e[u], kmh, col + u) : 0.f;
      amax = fmaxf(amax, fabsf(v[c][u]));
    }
  }
  const float s = blockMax(amax, red) / 127.f + 1e-7f;
  const Quotient byScale(s);
  if (threadIdx.x == 0) scale[(size_t)bh * nTiles + tile] = s;
  int8_t* dst = out + ((size_t)bh * nTiles + tile) * R * D;
#pragma unroll
  for (int c = 0; c < kPerThread; ++c) {
    const int chunk = threadIdx.x + c * kQuantThreads;
    if (chunk >= kChunks) continue;
    *reinterpret_cast<uint2*>(dst + (size_t)chunk * 8) = toInt8x8<T>(v[c], byScale);
  }
}

// V as fp16, the precision upstream casts V to before any V quantization.
template <typename T>
__device__ __forceinline__ float vHalf(T x) {
  return __half2float(__float2half_rn(Elem<T>::toF(x)));
}

template <typename T>
__global__ void __launch_bounds__(kQuantThreads) sparge_quant_v_half(const T* v, size_t n, __half* out) {
  for (size_t x = blockIdx.x * (size_t)kQuantThreads + threadIdx.x; x < n;
       x += (size_t)gridDim.x * kQuantThreads)
    out[x] = __float2half_rn(Elem<T>::toF(v[x]));
}

// Per-channel amax of the fp16 V: grid (token slices, heads); amax >= 0, so the float's bits order as ints.
template <typename T, int D>
__global__ void __launch_bounds__(kQuantThreads) sparge_quant_v_amax(const T* v, int nKv, float* amax) {
  // 8 channels a thread (one 16-byte load a token), kRows tokens at a time; the maxima of the CTA's rows
  // meet in shared memory, so each channel takes one atomic a CTA. A maximum is exact in any order.
  constexpr int kLanes = D / 8, kRows = kQuantThreads / kLanes;
  __shared__ float part[kRows][D];
  const int bh = blockIdx.y, c0 = (threadIdx.x % kLanes) * 8, r = threadIdx.x / kLanes;
  const T* src = v + (size_t)bh * nKv * D;
  float m[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  for (int t = blockIdx.x * kRows + r; t < nKv; t += gridDim.x * kRows) {
    const uint4 raw = *reinterpret_cast<const uint4*>(src + (size_t)t * D + c0);
    const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int u = 0; u < 8; ++u) m[u] = fmaxf(m[u], fabsf(vHalf(e[u])));
  }
#pragma unroll
  for (int u = 0; u < 8; ++u) part[r][c0 + u] = m[u];
  __syncthreads();
  for (int d = threadIdx.x; d < D; d += kQuantThreads) {
    float x = 0.f;
    for (int i = 0; i < kRows; ++i) x = fmaxf(x, part[i][d]);
    atomicMax(reinterpret_cast<int*>(amax + (size_t)bh * D + d), __float_as_int(x));
  }
}

// Positions 4j .. 4j + 3 of a 16-key group hold keys 2j, 2j + 1, 8 + 2j and 9 + 2j (the order
// 0 1 8 9 2 3 10 11 4 5 12 13 6 7 14 15; see packPE4m3 in parts/online_softmax.cuh).
__device__ __forceinline__ int fp8VKeyAt(int p) {
  return (p & ~15) + 2 * ((p & 15) >> 2) + (p & 1) + 8 * ((p >> 1) & 1);
}

// Keys of one CTA of the V transpose: its fp32 tile [keys][D] stays within the 48 KB of static shared memory
// (64 keys up to D 128, 32 at D 256; fp8VTokens pads to a multiple of either).
constexpr int fp8VSliceKeys(int d) {
  return d > 128 ? 32 : 64;
}

// The V transpose's tile in shared memory: [kKeys][D] floats, each row's 16-byte quads permuted so that both
// of its accesses are free of bank conflicts. Rows fill with 16-byte stores, eight lanes a row: the quads
// 2l and 2l + 1 of lane l, whose bit 3 is folded into bit 0 so that the eight lanes' quads fall in eight
// different quads of 32 banks. The rounding pass reads one float a lane: a warp takes kGroups groups of 16
// positions (one lane per group) times 32 / kGroups consecutive channels, and XOR-ing the quad with the key's
// group spreads the groups over the banks those channels leave free.
template <int kKeys, int D>
struct VTile {
  static constexpr int kGroups = kKeys / 16;  // 16-position groups a warp reads at once
  static constexpr int kChannels = 32 / kGroups;
  __device__ __forceinline__ static int quad(int key, int q) {
    return q ^ ((key >> 4) * (8 / kGroups)) ^ ((q >> 3) & 1);
  }
  __device__ __forceinline__ static int at(int key, int d) {
    return key * D + 4 * quad(key, d >> 2) + (d & 3);
  }
};

// One CTA per (key slice, head): transposes to [D][keys], permutes, scales and rounds to e4m3.
template <typename T, int D>
__global__ void __launch_bounds__(kQuantThreads)
    sparge_quant_v_fp8(const T* v, int nKv, int nPad, const float* amax, uint8_t* out, float* vScale) {
  constexpr int kKeys = fp8VSliceKeys(D);
  using Tile = VTile<kKeys, D>;
  static_assert(kKeys % 16 == 0 && 8 % Tile::kGroups == 0, "whole permuted groups of 16 keys, 1-8 a warp");
  __shared__ __align__(16) float tile[kKeys * D];
  __shared__ float recp[D];  // per channel 2.25 / amax (0 for an all-zero channel), divided once a CTA
  const int bh = blockIdx.y, k0 = blockIdx.x * kKeys;
  const float* am = amax + (size_t)bh * D;
  for (int d = threadIdx.x; d < D; d += kQuantThreads) recp[d] = am[d] > 0.f ? kFp8VRange / am[d] : 0.f;
  const T* src = v + (size_t)bh * nKv * D;
  for (int x = threadIdx.x; x < kKeys * D / 8; x += kQuantThreads) {  // 16-byte loads, keys past nKv zero
    const int key = x / (D / 8), q = (x % (D / 8)) * 2;
    uint4 raw = make_uint4(0, 0, 0, 0);
    if (k0 + key < nKv) raw = *reinterpret_cast<const uint4*>(src + (size_t)(k0 + key) * D + 4 * q);
    const T* e = reinterpret_cast<const T*>(&raw);
    float4* row = reinterpret_cast<float4*>(tile + key * D);
    row[Tile::quad(key, q)] = make_float4(vHalf(e[0]), vHalf(e[1]), vHalf(e[2]), vHalf(e[3]));
    row[Tile::quad(key, q + 1)] = make_float4(vHalf(e[4]), vHalf(e[5]), vHalf(e[6]), vHalf(e[7]));
  }
  __syncthreads();
  uint8_t* dst = out + (size_t)bh * D * nPad + k0;
  // Each lane writes the 16 positions of one group of one channel (one 16-byte store).
  const int lane = threadIdx.x & 31, group = lane % Tile::kGroups;
  for (int d0 = (threadIdx.x >> 5) * Tile::kChannels; d0 < D; d0 += kQuantThreads / 32 * Tile::kChannels) {
    const int d = d0 + lane / Tile::kGroups;
    const float r = recp[d];
    uint32_t w[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int p = 16 * group + 4 * u;
      w[u] = packE4m3x4(tile[Tile::at(fp8VKeyAt(p), d)] * r, tile[Tile::at(fp8VKeyAt(p + 1), d)] * r,
                        tile[Tile::at(fp8VKeyAt(p + 2), d)] * r, tile[Tile::at(fp8VKeyAt(p + 3), d)] * r);
    }
    *reinterpret_cast<uint4*>(dst + (size_t)d * nPad + 16 * group) = make_uint4(w[0], w[1], w[2], w[3]);
  }
  if (blockIdx.x == 0)
    for (int d = threadIdx.x; d < D; d += kQuantThreads) vScale[(size_t)bh * D + d] = am[d] / kFp8VRange;
}

template <typename T, int D>
void launchQkTiles(const T* x, const T* km, int n, int bh, int tiles, int rows, int8_t* out, float* scale,
                   cudaStream_t s) {
  dim3 grid(tiles, bh);
  if (rows == 64)
    sparge_quant_int8_tiles<T, D, 64><<<grid, kQuantThreads, 0, s>>>(x, km, n, out, scale);
  else
    sparge_quant_int8_tiles<T, D, 128><<<grid, kQuantThreads, 0, s>>>(x, km, n, out, scale);
  checkLaunch("sparge_quant_int8_tiles");
}

// The operands' places in the workspace (QuantLayout), before anything is written there.
QuantOperands operandViews(const Problem& p, Numerics n, uint8_t* ws) {
  const QuantLayout L(p, n);
  QuantOperands o;
  o.q8 = reinterpret_cast<int8_t*>(ws + L.q8);
  o.qScale = reinterpret_cast<float*>(ws + L.qScale);
  o.k8 = reinterpret_cast<int8_t*>(ws + L.k8);
  o.kScale = reinterpret_cast<float*>(ws + L.kScale);
  o.v = ws + L.v;
  if (n == Numerics::Int8Fp8) o.vScale = reinterpret_cast<float*>(ws + L.vScale);
  return o;
}

template <typename T, int D>
void quantizeQk(const Problem& p, const T* q, const T* k, const T* km, const QuantOperands& o, cudaStream_t s) {
  launchQkTiles<T, D>(q, nullptr, p.Nq, p.B * p.Hq, p.nq, p.BQ, const_cast<int8_t*>(o.q8),
                      const_cast<float*>(o.qScale), s);
  launchQkTiles<T, D>(k, km, p.Nkv, p.B * p.Hkv, p.nk, p.BK, const_cast<int8_t*>(o.k8),
                      const_cast<float*>(o.kScale), s);
}

// V in the numerics' format (int8-fp16: fp16, in place for fp16 inputs; int8-fp8: e4m3 with channel scales).
template <typename T, int D>
void quantizeV(const Problem& p, Numerics n, const T* v, uint8_t* ws, QuantOperands& o, cudaStream_t s) {
  const QuantLayout L(p, n);
  const int bhk = p.B * p.Hkv;
  if (n == Numerics::Int8Fp16) {
    if constexpr (std::is_same_v<T, __half>) {
      o.v = v;
    } else {
      const size_t count = (size_t)bhk * p.Nkv * D;
      const int blocks = (int)std::min<size_t>((count + kQuantThreads - 1) / kQuantThreads, 65535);
      sparge_quant_v_half<T><<<blocks, kQuantThreads, 0, s>>>(v, count, reinterpret_cast<__half*>(ws + L.v));
      checkLaunch("sparge_quant_v_half");
    }
    return;
  }
  float* amax = reinterpret_cast<float*>(ws + L.vAmax);
  check(cudaMemsetAsync(amax, 0, (size_t)bhk * D * sizeof(float), s), "cudaMemsetAsync(V amax)");
  const int slices = std::max(1, std::min(64, (p.Nkv + 255) / 256));
  sparge_quant_v_amax<T, D><<<dim3(slices, bhk), kQuantThreads, 0, s>>>(v, p.Nkv, amax);
  checkLaunch("sparge_quant_v_amax");
  const int nPad = fp8VTokens(p.Nkv);
  sparge_quant_v_fp8<T, D><<<dim3(nPad / fp8VSliceKeys(D), bhk), kQuantThreads, 0, s>>>(
      v, p.Nkv, nPad, amax, ws + L.v, reinterpret_cast<float*>(ws + L.vScale));
  checkLaunch("sparge_quant_v_fp8");
}

// Calls f(T, D) with the element type and head dim as template arguments.
template <class F>
void withTypeAndDim(ElemType t, int d, F&& f) {
  withHeadDim(d, "CUDA engine", [&](auto dim) {
    if (t == ElemType::F16)
      f(__half{}, dim);
    else
      f(__nv_bfloat16{}, dim);
  });
}

}  // namespace

size_t quantWorkspaceBytes(const Problem& p, core::Numerics n) {
  if (n == Numerics::None) return 0;
  return QuantLayout(p, n).total;
}

QuantOperands launchQuantize(ElemType t, const Problem& p, core::Numerics n, const void* q, const void* k,
                             const void* km, const void* v, void* workspace, cudaStream_t s) {
  if (n == Numerics::None) return QuantOperands{};
  QuantOperands o = operandViews(p, n, static_cast<uint8_t*>(workspace));
  withTypeAndDim(t, p.D, [&](auto type, auto dim) {
    using T = decltype(type);
    constexpr int D = decltype(dim)::value;
    quantizeQk<T, D>(p, static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(km), o, s);
    quantizeV<T, D>(p, n, static_cast<const T*>(v), static_cast<uint8_t*>(workspace), o, s);
  });
  return o;
}

QuantOperands quantOperandViews(const Problem& p, core::Numerics n, void* workspace) {
  if (n == Numerics::None) return QuantOperands{};
  return operandViews(p, n, static_cast<uint8_t*>(workspace));
}

void launchQuantizeV(ElemType t, const Problem& p, core::Numerics n, const void* v, void* workspace,
                     QuantOperands& ops, cudaStream_t s) {
  if (n == Numerics::None) return;
  withTypeAndDim(t, p.D, [&](auto type, auto dim) {
    using T = decltype(type);
    quantizeV<T, decltype(dim)::value>(p, n, static_cast<const T*>(v), static_cast<uint8_t*>(workspace), ops, s);
  });
}

}  // namespace sparge::cuda

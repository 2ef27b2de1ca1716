// Dense fp32 reference attention (exact top-left causal mask and local window, as core::visibleKeys defines
// them), computed once per entry and head and cached by the engine; also the true attention mass per 64x64
// tile, from which the per-block mass of either geometry is summed on the host.
// On the tensor cores (mma.sync, sm_80 and newer) without giving up fp32: Q·Kᵀ multiplies the 16-bit inputs
// exactly (fp16/bf16 products fit fp32) and accumulates in fp32; P stays fp32 and P·V runs as two TF32 MMAs,
// P's leading 11 bits and the rest (V's 16-bit values are exact in TF32), so P·V keeps ~22 bits of P. Two
// passes: row maxima and normalisers first, then P = exp(s - m) / l, its mass per tile and P·V.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "common/cuda_util.h"
#include "common/device_common.cuh"
#include "common/head_dim.h"
#include "common/launch.h"
#include "common/mma_sm80.cuh"

namespace sparge::cuda {
namespace {

constexpr int kR = 64;  // query rows per CTA: one 16-row slice per warp
constexpr int kC = 64;  // keys per tile
constexpr int kWarps = kR / 16;
constexpr int kThreads = 32 * kWarps;
constexpr int kNT = kC / 8;  // 8-key column tiles of a score slice

template <typename T>
struct RParams {
  const T* q;
  const T* k;
  const T* v;
  float* o;
  float* mass;
  const int* heads;
  int Hq, Hkv, Nq, Nkv;
  float scale;
  int left;   // keys before the query a row sees (-1: unbounded)
  int right;  // keys after it (-1: unbounded; 0 when causal)
};

// Shared-memory strides: 16-bit Q and K rows padded by 8 elements, fp32 V rows by 4, so that the fragment
// loads of a warp hit 32 different banks.
template <int D>
struct RLayout {
  static constexpr int kLdH = D + 8;  // Q, K: 16-bit elements a row
  static constexpr int kLdV = D + 4;  // V: floats a row
  static constexpr size_t kQBytes = size_t(kR) * kLdH * 2, kKBytes = size_t(kC) * kLdH * 2;
  static constexpr size_t kBytes = kQBytes + kKBytes + size_t(kC) * kLdV * 4;
};

// core::visibleKeys on the device: may query qi see key kj?
__device__ __forceinline__ bool keyVisible(int qi, int kj, int Nkv, int left, int right) {
  return kj < Nkv && (right < 0 || kj <= qi + right) && (left < 0 || kj >= qi - left);
}

// Rows [r0, r0 + 64) of a [N][D] 16-bit matrix into shared memory (stride kLdH), zeros past N.
template <typename T, int D>
__device__ void loadHalfRows(T* dst, const T* src, int r0, int N) {
  constexpr int kChunks = D / 8;  // 16-byte chunks a row
  for (int x = threadIdx.x; x < kR * kChunks; x += kThreads) {
    const int r = x / kChunks, c = x % kChunks, g = r0 + r;
    const uint4 v =
        g < N ? *reinterpret_cast<const uint4*>(src + (size_t)g * D + 8 * c) : make_uint4(0, 0, 0, 0);
    *reinterpret_cast<uint4*>(dst + r * RLayout<D>::kLdH + 8 * c) = v;
  }
}

// The 16-bit element in the low or high half of a 32-bit word, exactly as fp32 (register-only conversions).
template <typename T>
__device__ __forceinline__ float lowToFloat(uint32_t w) {
  if constexpr (std::is_same_v<T, __half>)
    return __half2float(__ushort_as_half((unsigned short)(w & 0xffffu)));
  else
    return __uint_as_float(w << 16);
}
template <typename T>
__device__ __forceinline__ float highToFloat(uint32_t w) {
  if constexpr (std::is_same_v<T, __half>)
    return __half2float(__ushort_as_half((unsigned short)(w >> 16)));
  else
    return __uint_as_float(w & 0xffff0000u);
}

// Rows [r0, r0 + 64) of V converted to fp32 (exactly), zeros past N: a zero row times P = 0 adds nothing.
template <typename T, int D>
__device__ void loadFloatRows(float* dst, const T* src, int r0, int N) {
  constexpr int kChunks = D / 8;
  for (int x = threadIdx.x; x < kC * kChunks; x += kThreads) {
    const int r = x / kChunks, c = x % kChunks, g = r0 + r;
    const uint4 v =
        g < N ? *reinterpret_cast<const uint4*>(src + (size_t)g * D + 8 * c) : make_uint4(0, 0, 0, 0);
    float4* out = reinterpret_cast<float4*>(dst + r * RLayout<D>::kLdV + 8 * c);
    out[0] = make_float4(lowToFloat<T>(v.x), highToFloat<T>(v.x), lowToFloat<T>(v.y), highToFloat<T>(v.y));
    out[1] = make_float4(lowToFloat<T>(v.z), highToFloat<T>(v.z), lowToFloat<T>(v.w), highToFloat<T>(v.w));
  }
}

__device__ __forceinline__ uint32_t word(const void* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

// The warp's 16 x 64 scores of key tile k0 (C layout of m16n8: s[nt][e] is row g + 8 (e / 2), key
// k0 + 8 nt + 2 t + e % 2, g = lane / 4, t = lane % 4), scaled, invisible keys and rows past Nq at -inf.
template <typename T, int D>
__device__ __forceinline__ void scoreSlice(float (&s)[kNT][4], const T* sQ, const T* sK, int q0, int k0,
                                           const RParams<T>& p) {
  constexpr int ld = RLayout<D>::kLdH;
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, w = threadIdx.x >> 5;
  const T* qRow = sQ + (16 * w + g) * ld + 2 * t;
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[nt][e] = 0.f;
#pragma unroll
  for (int kk = 0; kk < D; kk += 16) {
    const uint32_t a[4] = {word(qRow + kk), word(qRow + 8 * ld + kk), word(qRow + kk + 8),
                           word(qRow + 8 * ld + kk + 8)};
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
      const T* kRow = sK + (8 * nt + g) * ld + kk + 2 * t;
      sm80::Mma<T>::run(s[nt], a, word(kRow), word(kRow + 8));
    }
  }
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int qi = q0 + 16 * w + g + 8 * (e >> 1), kj = k0 + 8 * nt + 2 * t + (e & 1);
      const bool ok = qi < p.Nq && keyVisible(qi, kj, p.Nkv, p.left, p.right);
      s[nt][e] = ok ? s[nt][e] * p.scale : -INFINITY;
    }
}

// o += P·V for the warp's 16 rows and the tile's 64 keys, P in the scores' C layout. An A fragment of TF32
// m16n8k8 holds columns t and t + 4 where this thread holds keys 2t and 2t + 1 of each 8-key tile: the MMA's
// k index is mapped to keys that way (k = t -> key 2t, k = t + 4 -> key 2t + 1), and V's rows are read in
// the same order. P = hi + lo with hi = P's leading TF32 bits; lo is exact in fp32 and keeps its own 11.
// The tensor cores add into their accumulator without rounding to nearest, which over a whole row of keys
// (thousands of MMAs) biased O by ~1e-5 relative; so each tile's P·V goes into a fresh accumulator (16 MMAs)
// that is then added to O by an ordinary fp32 add.
template <int D>
__device__ __forceinline__ void accumulatePV(float (&o)[D / 8][4], const float (&pr)[kNT][4],
                                             const float* sV) {
  constexpr int ld = RLayout<D>::kLdV;
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  uint32_t hi[kNT][4], lo[kNT][4];
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt) {
    const float order[4] = {pr[nt][0], pr[nt][2], pr[nt][1], pr[nt][3]};  // (g, 2t), (g+8, 2t), (g, 2t+1), ..
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      hi[nt][e] = __float_as_uint(order[e]) & 0xffffe000u;
      lo[nt][e] = __float_as_uint(order[e] - __uint_as_float(hi[nt][e]));
    }
  }
  const float* v0 = sV + 2 * t * ld + g;
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) {
    float c[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
      const float* v = v0 + 8 * nt * ld + 8 * dt;
      const uint32_t b0 = __float_as_uint(v[0]), b1 = __float_as_uint(v[ld]);
      sm80::mmaTf32(c, hi[nt], b0, b1);
      sm80::mmaTf32(c, lo[nt], b0, b1);
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) o[dt][e] += c[e];
  }
}

// Pass 1 of the reference: row maxima and normalisers of this thread's rows g and g + 8 over the key tiles
// before ktEnd (K tile by tile through sK).
template <typename T, int D>
__device__ __forceinline__ void rowMaxAndSum(float (&m)[2], float (&l)[2], const T* sQ, T* sK, const T* gK,
                                             int q0, int ktEnd, const RParams<T>& p) {
  for (int kt = 0; kt < ktEnd; ++kt) {
    __syncthreads();
    loadHalfRows<T, D>(sK, gK, kt * kC, p.Nkv);
    __syncthreads();
    float s[kNT][4];
    scoreSlice<T, D>(s, sQ, sK, q0, kt * kC, p);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) mx = fmaxf(mx, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
      const float mn = fmaxf(m[r], quadMax(mx));
      const float mu = finiteOr0(mn);  // no shuffle may be skipped: the quads differ
      float e = 0.f;
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) e += expf(s[nt][2 * r] - mu) + expf(s[nt][2 * r + 1] - mu);
      l[r] = (m[r] == -INFINITY ? 0.f : l[r] * expf(m[r] - mu)) + quadSum(e);
      m[r] = mn;
    }
  }
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads, 1) sparge_reference_attention(const RParams<T> p) {
  extern __shared__ __align__(16) unsigned char smem[];
  using L = RLayout<D>;
  T* sQ = reinterpret_cast<T*>(smem);
  T* sK = reinterpret_cast<T*>(smem + L::kQBytes);
  float* sV = reinterpret_cast<float*>(smem + L::kQBytes + L::kKBytes);
  __shared__ float sWarpMass[kWarps];  // summed in warp order: the same bits on every run
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, w = threadIdx.x >> 5;
  const int qt = blockIdx.x, hq = p.heads[blockIdx.y], b = blockIdx.z;
  const int bhq = b * p.Hq + hq, bhk = b * p.Hkv + hq / (p.Hq / p.Hkv);
  const int q0 = qt * kR;
  const T* gQ = p.q + (size_t)bhq * p.Nq * D;
  const T* gK = p.k + (size_t)bhk * p.Nkv * D;
  const T* gV = p.v + (size_t)bhk * p.Nkv * D;
  const int nkt = (p.Nkv + kC - 1) / kC;
  // Tiles past the last key any row of this tile may see hold no mass (and are not visited).
  const int lastQ = min(q0 + kR, p.Nq) - 1;
  const int ktEnd = p.right >= 0 ? min(nkt, (lastQ + p.right) / kC + 1) : nkt;

  loadHalfRows<T, D>(sQ, gQ, q0, p.Nq);
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  rowMaxAndSum<T, D>(m, l, sQ, sK, gK, q0, ktEnd, p);
  // Pass 2: probabilities, their mass per 64x64 tile, and the output.
  float o[D / 8][4];
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[dt][e] = 0.f;
  const int nqt = gridDim.x;
  for (int kt = 0; kt < ktEnd; ++kt) {
    __syncthreads();
    loadHalfRows<T, D>(sK, gK, kt * kC, p.Nkv);
    loadFloatRows<T, D>(sV, gV, kt * kC, p.Nkv);
    __syncthreads();
    float s[kNT][4];
    scoreSlice<T, D>(s, sQ, sK, q0, kt * kC, p);
    float part = 0.f;
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e >> 1;
        s[nt][e] = (l[r] > 0.f && s[nt][e] != -INFINITY) ? expf(s[nt][e] - m[r]) / l[r] : 0.f;
        part += s[nt][e];
      }
    for (int off = 16; off > 0; off >>= 1) part += __shfl_xor_sync(0xffffffffu, part, off);
    if (lane == 0) sWarpMass[w] = part;
    accumulatePV<D>(o, s, sV);
    __syncthreads();
    if (threadIdx.x == 0 && p.mass) {
      float mass = 0.f;
      for (int x = 0; x < kWarps; ++x) mass += sWarpMass[x];
      p.mass[((size_t)bhq * nqt + qt) * nkt + kt] = mass;
    }
  }
  // Tiles past the last visible key hold no mass.
  if (threadIdx.x == 0 && p.mass)
    for (int kt = ktEnd; kt < nkt; ++kt) p.mass[((size_t)bhq * nqt + qt) * nkt + kt] = 0.f;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int qi = q0 + 16 * w + g + 8 * r;
    if (qi >= p.Nq) continue;
    float* out = p.o + ((size_t)bhq * p.Nq + qi) * D + 2 * t;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt)
      *reinterpret_cast<float2*>(out + 8 * dt) = make_float2(o[dt][2 * r], o[dt][2 * r + 1]);
  }
}

// A window bound as the kernel reads it: -1 unbounded; bounds past the sequence are the same as Nkv.
int clampBound(int64_t bound, int nkv) {
  return bound < 0 ? -1 : (int)std::min<int64_t>(bound, nkv);
}

template <typename T>
void reference(const Problem& pr, const void* q, const void* k, const void* v, double scale, float* oref,
               float* mass, cudaStream_t s) {
  RParams<T> rp{static_cast<const T*>(q),
                static_cast<const T*>(k),
                static_cast<const T*>(v),
                oref,
                mass,
                pr.heads,
                pr.Hq,
                pr.Hkv,
                pr.Nq,
                pr.Nkv,
                (float)scale,
                clampBound(pr.window.left, pr.Nkv),
                pr.causal ? 0 : clampBound(pr.window.right, pr.Nkv)};
  dim3 grid((pr.Nq + kR - 1) / kR, pr.nHeads, pr.B);
  withHeadDim(pr.D, "CUDA engine", [&](auto d) {
    constexpr int D = decltype(d)::value;
    // 16-bit Q and K tiles and an fp32 V tile: 35 KB at D 64, 68 KB at D 128, 134 KB at D 256 (more than
    // an sm_89 block may have: the engine refuses it there with requireSharedMemory's message).
    const size_t smem = RLayout<D>::kBytes;
    auto kernel = sparge_reference_attention<T, D>;
    requireSharedMemory(smem, "the fp32 reference kernel", pr.D);
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
          "cudaFuncSetAttribute(reference)");
    kernel<<<grid, kThreads, smem, s>>>(rp);
  });
  checkLaunch("sparge_reference_attention");
}

}  // namespace

void launchReference(ElemType t, const Problem& p, const void* q, const void* k, const void* v, double scale,
                     float* oref, float* mass64, cudaStream_t s) {
  if (t == ElemType::F16)
    reference<__half>(p, q, k, v, scale, oref, mass64, s);
  else
    reference<__nv_bfloat16>(p, q, k, v, scale, oref, mass64, s);
}

}  // namespace sparge::cuda

// Dense fp32 reference attention on CUDA cores (exact top-left causal mask and local window, as
// core::visibleKeys defines them), computed once per entry
// and head and cached by the engine; also the true attention mass per 64x64 tile, from which the
// per-block mass of either geometry is summed on the host.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "cuda_util.h"
#include "device_common.cuh"
#include "head_dim.h"
#include "launch.h"

namespace sparge::cuda {
namespace {

constexpr int kR = 64;         // query rows per CTA
constexpr int kC = 64;         // keys per tile
constexpr int kThreads = 256;  // 16 x 16: thread (ty, tx) owns rows ty + 16a, keys tx + 16c

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

// core::visibleKeys on the device: may query qi see key kj?
__device__ __forceinline__ bool keyVisible(int qi, int kj, int Nkv, int left, int right) {
  return kj < Nkv && (right < 0 || kj <= qi + right) && (left < 0 || kj >= qi - left);
}

template <typename T>
__device__ void loadRows(float* dst, int ld, const T* src, int r0, int rows, int N, int D) {
  for (int x = threadIdx.x; x < rows * D; x += kThreads) {
    int r = x / D, d = x % D;
    int g = r0 + r;
    dst[r * ld + d] = g < N ? Elem<T>::toF(src[(size_t)g * D + d]) : 0.f;
  }
}

// S tile for this thread: 4x4 scores (rows ty+16a, keys tx+16c), masked to -inf.
template <typename T>
__device__ __forceinline__ void scoreTile(float (&s)[4][4], const float* sQ, const float* sK, int ld, int D,
                                          int q0, int k0, const RParams<T>& p) {
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
#pragma unroll
  for (int a = 0; a < 4; ++a)
#pragma unroll
    for (int c = 0; c < 4; ++c) s[a][c] = 0.f;
  for (int d = 0; d < D; ++d) {
    float qa[4], kc[4];
#pragma unroll
    for (int a = 0; a < 4; ++a) qa[a] = sQ[(ty + 16 * a) * ld + d];
#pragma unroll
    for (int c = 0; c < 4; ++c) kc[c] = sK[(tx + 16 * c) * ld + d];
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
      for (int c = 0; c < 4; ++c) s[a][c] = fmaf(qa[a], kc[c], s[a][c]);
  }
#pragma unroll
  for (int a = 0; a < 4; ++a)
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      int qi = q0 + ty + 16 * a, kj = k0 + tx + 16 * c;
      bool ok = qi < p.Nq && keyVisible(qi, kj, p.Nkv, p.left, p.right);
      s[a][c] = ok ? s[a][c] * p.scale : -INFINITY;
    }
}

__device__ __forceinline__ float max16(float v) {
  for (int o = 8; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float sum16(float v) {
  for (int o = 8; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads) sparge_reference_attention(const RParams<T> p) {
  extern __shared__ float sm[];
  constexpr int ld = D + 1;
  float* sQ = sm;                             // [64][D+1]
  float* sKV = sQ + kR * ld;                  // [64][D+1]: K, then in pass 2 V (so D 128 fits 99 KB)
  float* sP = sKV + kC * ld;                  // [64][65]
  __shared__ float sWarpMass[kThreads / 32];  // summed in warp order: the same bits on every run
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
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

  loadRows(sQ, ld, gQ, q0, kR, p.Nq, D);
  // Pass 1: row max and normaliser.
  float m[4], l[4];
#pragma unroll
  for (int a = 0; a < 4; ++a) m[a] = -INFINITY, l[a] = 0.f;
  for (int kt = 0; kt < ktEnd; ++kt) {
    __syncthreads();
    loadRows(sKV, ld, gK, kt * kC, kC, p.Nkv, D);
    __syncthreads();
    float s[4][4];
    scoreTile(s, sQ, sKV, ld, D, q0, kt * kC, p);
#pragma unroll
    for (int a = 0; a < 4; ++a) {
      float mx = max16(fmaxf(fmaxf(s[a][0], s[a][1]), fmaxf(s[a][2], s[a][3])));
      float mn = fmaxf(m[a], mx);
      float mu = mn == -INFINITY ? 0.f : mn;  // no shuffle may be skipped: the half-warps differ
      float e = 0.f;
#pragma unroll
      for (int c = 0; c < 4; ++c) e += expf(s[a][c] - mu);
      e = sum16(e);
      l[a] = (m[a] == -INFINITY ? 0.f : l[a] * expf(m[a] - mu)) + e;
      m[a] = mn;
    }
  }
  // Pass 2: probabilities, output and mass per 64x64 tile.
  constexpr int DC = D / 16;  // output columns per thread: tx + 16c
  float o[4][DC];
#pragma unroll
  for (int a = 0; a < 4; ++a)
#pragma unroll
    for (int c = 0; c < DC; ++c) o[a][c] = 0.f;
  const int nqt = gridDim.x;
  for (int kt = 0; kt < ktEnd; ++kt) {
    __syncthreads();
    loadRows(sKV, ld, gK, kt * kC, kC, p.Nkv, D);
    __syncthreads();
    float s[4][4];
    scoreTile(s, sQ, sKV, ld, D, q0, kt * kC, p);
    float part = 0.f;
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        float pr = (l[a] > 0.f && s[a][c] != -INFINITY) ? expf(s[a][c] - m[a]) / l[a] : 0.f;
        sP[(ty + 16 * a) * 65 + tx + 16 * c] = pr;
        part += pr;
      }
    for (int off = 16; off > 0; off >>= 1) part += __shfl_xor_sync(0xffffffffu, part, off);
    if ((threadIdx.x & 31) == 0) sWarpMass[threadIdx.x >> 5] = part;
    __syncthreads();
    if (threadIdx.x == 0 && p.mass) {
      float mass = 0.f;
      for (int w = 0; w < kThreads / 32; ++w) mass += sWarpMass[w];
      p.mass[((size_t)bhq * nqt + qt) * nkt + kt] = mass;
    }
    // Every thread has read its scores' K (the barrier above), so V takes K's place.
    loadRows(sKV, ld, gV, kt * kC, kC, p.Nkv, D);
    __syncthreads();
    for (int kk = 0; kk < kC; ++kk) {
      float pa[4];
#pragma unroll
      for (int a = 0; a < 4; ++a) pa[a] = sP[(ty + 16 * a) * 65 + kk];
#pragma unroll
      for (int c = 0; c < DC; ++c) {
        float vv = sKV[kk * ld + tx + 16 * c];
#pragma unroll
        for (int a = 0; a < 4; ++a) o[a][c] = fmaf(pa[a], vv, o[a][c]);
      }
    }
  }
  // Tiles past the last visible key hold no mass.
  if (threadIdx.x == 0 && p.mass)
    for (int kt = ktEnd; kt < nkt; ++kt) p.mass[((size_t)bhq * nqt + qt) * nkt + kt] = 0.f;
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    int qi = q0 + ty + 16 * a;
    if (qi >= p.Nq) continue;
#pragma unroll
    for (int c = 0; c < DC; ++c) p.o[((size_t)bhq * p.Nq + qi) * D + tx + 16 * c] = o[a][c];
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
  // fp32 tiles: Q and K [64][D + 1], V [64][D], P [64][65]: 65 KB at D 64, 113 KB at D 128, 209 KB at D 256
  // (Hopper only; the engine refuses it elsewhere with requireSharedMemory's message).
  const size_t smem = sizeof(float) * ((size_t)kR * (pr.D + 1) + (size_t)kC * (pr.D + 1) + kR * 65);
  dim3 grid((pr.Nq + kR - 1) / kR, pr.nHeads, pr.B);
  withHeadDim(pr.D, "CUDA engine", [&](auto d) {
    auto kernel = sparge_reference_attention<T, decltype(d)::value>;
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

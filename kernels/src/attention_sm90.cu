// Stage 2 on Hopper tensor cores (sm_90a) for the 64x128 geometry: one warpgroup of 128 threads per
// 64-row query tile issues wgmma.mma_async m64n128k16 for Q·Kᵀ (Q and K from 128-byte-swizzled shared
// memory) and m64nDk16 for P·V (P from registers, V read MN-major through the descriptor's transpose
// bit). Semantics are those of attention_sm80.cu with MT = KS = 1, row for row: the LUT walk or every
// causally valid block, base-2 online softmax, the CTA-uniform PV skip of SPARGE_SPEC.md §4.4 (block
// 0 and the last block never skipped), exact causal / kv-length masks, zero-filled tails, GQA, rows
// with no visible key written as 0 and counted. K and V are double-buffered with cp.async.
// Only the sm_90a pass has a body; other passes compile to a trap (the launcher never selects them).
#include <cuda_runtime.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "cuda_util.h"
#include "device_common.cuh"
#include "attention_params.cuh"
#include "launch.h"
#include "mma_sm80.cuh"
#include "smem_layout_sm90.h"
#include "wgmma_sm90.cuh"

namespace sparge::cuda {
namespace {

constexpr int kBQ = 64, kBK = 128, kThreads90 = 128;

template <int D>
struct Smem90 {
  static constexpr int kQBytes = kBQ * D * 2;
  static constexpr int kKVBytes = kBK * D * 2;
  // Q, two K tiles, two V tiles; +1024 to align the base to the swizzle atom.
  static constexpr int kBytes = kQBytes + 4 * kKVBytes + 1024;
};

#ifdef SPARGE_SM90A_DEVICE

using sm80::cpAsync16;
using sm80::cpAsyncCommit;
using sm80::cpAsyncWait;
using sm80::ex2;

// R rows x D columns from global rows r0.. into the swizzled slab layout; rows >= N are zero-filled.
template <int D, int R, typename T>
__device__ __forceinline__ void loadTile90(uint32_t smBase, const T* g, int r0, int N, int tid) {
  constexpr int kChunks = D / 8;
  constexpr int kTotal = R * kChunks;
#pragma unroll
  for (int x = tid; x < kTotal; x += kThreads90) {
    int row = x / kChunks, ch = x % kChunks;
    int gr = r0 + row;
    bool ok = gr < N;
    const T* src = g + (size_t)(ok ? gr : 0) * D + ch * 8;
    cpAsync16(smBase + 2u * (uint32_t)sm90::tileChunkOffset<R>(row, ch), src, ok);
  }
}

template <typename T, int D, bool kDense>
__device__ __forceinline__ void attention90Body(const KParams<T>& p) {
  using L = Smem90<D>;
  extern __shared__ unsigned char smemRaw[];
  const uint32_t rawAddr = sm80::smemAddr(smemRaw);
  const uint32_t base = (rawAddr + 1023u) & ~1023u;
  const uint32_t sQ = base;
  const uint32_t sK0 = sQ + L::kQBytes;
  const uint32_t sV0 = sK0 + 2 * L::kKVBytes;

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int i = gridDim.x - 1 - blockIdx.x;  // longest causal rows first
  const int hq = p.heads[blockIdx.y], b = blockIdx.z;
  const int bhq = b * p.Hq + hq;
  const int bhk = b * p.Hkv + hq / (p.Hq / p.Hkv);
  const T* gQ = p.q + (size_t)bhq * p.Nq * D;
  const T* gK = p.k + (size_t)bhk * p.Nkv * D;
  const T* gV = p.v + (size_t)bhk * p.Nkv * D;
  const size_t rowIdx = (size_t)bhq * p.nq + i;
  const int qRow0 = i * kBQ;
  const int warpRow0 = warp * 16;
  const float sc = p.scaleLog2;

  int n;
  const int32_t* lutRow = nullptr;
  float lambda = INFINITY;
  bool skipOn = false;
  if constexpr (kDense) {
    int lastQ = min(qRow0 + kBQ, p.Nq) - 1;
    n = p.causal ? min(p.nk, lastQ / kBK + 1) : p.nk;
  } else {
    n = p.validCount[rowIdx];
    lutRow = p.lut + rowIdx * p.nk;
    HeadParamsDev hp = p.params[hq];
    lambda = hp.lambda;
    skipOn = !hp.dense && isfinite(lambda);
  }

  // Accumulator fragments (wgmma m64nN f32): element 4*nt + e of a thread is row
  // warpRow0 + lane/4 + 8*(e/2), column 8*nt + 2*(lane%4) + e%2, as in mma.sync's C layout.
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  float acc[D / 2];
#pragma unroll
  for (int x = 0; x < D / 2; ++x) acc[x] = 0.f;
  float s[kBK / 2];
#pragma unroll
  for (int x = 0; x < kBK / 2; ++x) s[x] = 0.f;

  if (n > 0) {
    // Groups: {Q, K_0, V_0}, {K_1, V_1} (maybe empty), then one group per iteration (maybe empty),
    // so that "all but the newest group done" always means block t has landed.
    loadTile90<D, kBQ>(sQ, gQ, qRow0, p.Nq, tid);
    int jc = kDense ? 0 : lutRow[0];  // block computed in this iteration
    loadTile90<D, kBK>(sK0, gK, jc * kBK, p.Nkv, tid);
    loadTile90<D, kBK>(sV0, gV, jc * kBK, p.Nkv, tid);
    cpAsyncCommit();
    int jl = jc;  // block of the newest issued load
    if (n > 1) {
      jl = kDense ? 1 : jc + lutRow[1];
      loadTile90<D, kBK>(sK0 + L::kKVBytes, gK, jl * kBK, p.Nkv, tid);
      loadTile90<D, kBK>(sV0 + L::kKVBytes, gV, jl * kBK, p.Nkv, tid);
    }
    cpAsyncCommit();

    for (int t = 0; t < n; ++t) {
      const uint32_t buf = (uint32_t)(t & 1) * L::kKVBytes;
      cpAsyncWait<1>();
      sm90::fenceProxyAsync();  // cp.async writes (generic proxy) before wgmma reads (async proxy)
      __syncthreads();

      sm90::wgmmaFence();
#pragma unroll
      for (int ks = 0; ks < D / 16; ++ks)
        sm90::WgmmaSS<T, kBK>::run(s, sm90::kMajorDescriptor<kBQ>(sQ, ks),
                                   sm90::kMajorDescriptor<kBK>(sK0 + buf, ks), ks > 0 ? 1 : 0);
      sm90::wgmmaCommit();
      sm90::wgmmaWait<0>();

      const int kBase = jc * kBK;
      const bool needMask = (kBase + kBK > p.Nkv) || (p.causal && kBase + kBK - 1 > qRow0);
      if (needMask) {
#pragma unroll
        for (int nt = 0; nt < kBK / 8; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            int row = qRow0 + warpRow0 + (lane >> 2) + ((e >> 1) << 3);
            int col = kBase + nt * 8 + ((lane & 3) << 1) + (e & 1);
            if (col >= p.Nkv || (p.causal && col > row)) s[4 * nt + e] = -INFINITY;
          }
      }
      float rmax[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int nt = 0; nt < kBK / 8; ++nt) {
        rmax[0] = fmaxf(rmax[0], fmaxf(s[4 * nt + 0], s[4 * nt + 1]));
        rmax[1] = fmaxf(rmax[1], fmaxf(s[4 * nt + 2], s[4 * nt + 3]));
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        rmax[r] = fmaxf(rmax[r], __shfl_xor_sync(0xffffffffu, rmax[r], 1));
        rmax[r] = fmaxf(rmax[r], __shfl_xor_sync(0xffffffffu, rmax[r], 2));
        rmax[r] *= sc;  // base-2 units (the scale is positive)
      }

      bool skip = false;
      if (!kDense && skipOn && t >= 1 && t < n - 1) {
        // Skip iff max over the tile's real rows of (rowmax_new - m_old) <= -λ (CTA-uniform).
        float dmax = -INFINITY;
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          int row = qRow0 + warpRow0 + (lane >> 2) + 8 * r;
          if (row < p.Nq && rmax[r] != -INFINITY)
            dmax = fmaxf(dmax, m[r] == -INFINITY ? INFINITY : rmax[r] - m[r]);
        }
        skip = !__syncthreads_or(dmax + lambda > 0.f);
      }

      if (!skip) {
        float muse[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          float mnew = fmaxf(m[r], rmax[r]);
          muse[r] = mnew == -INFINITY ? 0.f : mnew;
          float alpha = ex2(m[r] - muse[r]);  // m = -inf gives 0: nothing accumulated yet
          m[r] = mnew;
          l[r] *= alpha;
#pragma unroll
          for (int dt = 0; dt < D / 8; ++dt) {
            acc[4 * dt + 2 * r] *= alpha;
            acc[4 * dt + 2 * r + 1] *= alpha;
          }
        }
#pragma unroll
        for (int nt = 0; nt < kBK / 8; ++nt) {
          s[4 * nt + 0] = ex2(fmaf(s[4 * nt + 0], sc, -muse[0]));
          s[4 * nt + 1] = ex2(fmaf(s[4 * nt + 1], sc, -muse[0]));
          s[4 * nt + 2] = ex2(fmaf(s[4 * nt + 2], sc, -muse[1]));
          s[4 * nt + 3] = ex2(fmaf(s[4 * nt + 3], sc, -muse[1]));
          l[0] += s[4 * nt + 0] + s[4 * nt + 1];
          l[1] += s[4 * nt + 2] + s[4 * nt + 3];
        }
        uint32_t pf[kBK / 16][4];
#pragma unroll
        for (int kk = 0; kk < kBK / 16; ++kk) {
          pf[kk][0] = Elem<T>::pack(s[8 * kk + 0], s[8 * kk + 1]);
          pf[kk][1] = Elem<T>::pack(s[8 * kk + 2], s[8 * kk + 3]);
          pf[kk][2] = Elem<T>::pack(s[8 * kk + 4], s[8 * kk + 5]);
          pf[kk][3] = Elem<T>::pack(s[8 * kk + 6], s[8 * kk + 7]);
        }
        sm90::wgmmaFence();
#pragma unroll
        for (int kk = 0; kk < kBK / 16; ++kk)
          sm90::WgmmaRS<T, D>::run(acc, pf[kk], sm90::mnMajorDescriptor<kBK>(sV0 + buf, kk));
        sm90::wgmmaCommit();
        sm90::wgmmaWait<0>();
      } else if (!kDense && tid == 0 && p.pvSkipped) {
        p.pvSkipped[rowIdx * p.nk + jc] = 1;
      }

      // Every warp is done with K_t and V_t: block t+2 loads into their buffers.
      __syncthreads();
      if (t + 2 < n) {
        jl = kDense ? jl + 1 : jl + lutRow[t + 2];
        loadTile90<D, kBK>(sK0 + buf, gK, jl * kBK, p.Nkv, tid);
        loadTile90<D, kBK>(sV0 + buf, gV, jl * kBK, p.Nkv, tid);
      }
      cpAsyncCommit();
      if (t + 1 < n) jc = kDense ? jc + 1 : jc + lutRow[t + 1];
    }
    cpAsyncWait<0>();
  }

  T* gO = p.o + (size_t)bhq * p.Nq * D;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float lr = l[r];
    lr += __shfl_xor_sync(0xffffffffu, lr, 1);
    lr += __shfl_xor_sync(0xffffffffu, lr, 2);
    int row = qRow0 + warpRow0 + (lane >> 2) + 8 * r;
    if (row < p.Nq) {
      float inv = lr > 0.f ? 1.f / lr : 0.f;  // a row with no attended key is written as 0
      if (lr == 0.f && (lane & 3) == 0 && p.emptyRows) atomicAdd(&p.emptyRows[bhq], 1);
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        int col = dt * 8 + ((lane & 3) << 1);
        *reinterpret_cast<uint32_t*>(gO + (size_t)row * D + col) =
            Elem<T>::pack(acc[4 * dt + 2 * r] * inv, acc[4 * dt + 2 * r + 1] * inv);
      }
    }
  }
}

#endif  // SPARGE_SM90A_DEVICE

template <typename T, int D>
__global__ void __launch_bounds__(kThreads90, 1) sparge_sparse_attention_sm90(const KParams<T> p) {
#ifdef SPARGE_SM90A_DEVICE
  attention90Body<T, D, false>(p);
#else
  __trap();  // only the sm_90a image is ever launched
#endif
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads90, 1) sparge_dense_attention_sm90(const KParams<T> p) {
#ifdef SPARGE_SM90A_DEVICE
  attention90Body<T, D, true>(p);
#else
  __trap();
#endif
}

int64_t gSm90Launches = 0;

template <typename T, int D>
void launch90(const Problem& pr, const AttnArgs& a, bool dense, cudaStream_t s) {
  const KParams<T> kp = makeKParams<T>(pr, a);
  dim3 grid(pr.nq, pr.nHeads, pr.B);
  auto kernel = dense ? sparge_dense_attention_sm90<T, D> : sparge_sparse_attention_sm90<T, D>;
  constexpr int kSmem = Smem90<D>::kBytes;
  static bool attrSet[2] = {false, false};
  if (!attrSet[dense]) {
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem),
          "cudaFuncSetAttribute(attention sm90)");
    attrSet[dense] = true;
  }
  kernel<<<grid, kThreads90, kSmem, s>>>(kp);
  checkLaunch(dense ? "sparge_dense_attention_sm90" : "sparge_sparse_attention_sm90");
  ++gSm90Launches;
}

}  // namespace

bool attentionSm90Selected(const Problem& p) {
  const char* env = std::getenv("SPARGE_ATTN_KERNEL");
  if (!env || std::strcmp(env, "sm90") != 0) return false;
  if (p.BQ != kBQ || p.BK != kBK || (p.D != 64 && p.D != 128)) return false;
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) return false;
  return major == 9 && minor == 0;
}

int64_t attentionSm90LaunchCount() {
  return gSm90Launches;
}

void launchAttentionSm90(ElemType t, const Problem& p, const AttnArgs& a, bool dense, cudaStream_t s) {
  if (t == ElemType::F16) {
    if (p.D == 64)
      launch90<__half, 64>(p, a, dense, s);
    else
      launch90<__half, 128>(p, a, dense, s);
  } else {
    if (p.D == 64)
      launch90<__nv_bfloat16, 64>(p, a, dense, s);
    else
      launch90<__nv_bfloat16, 128>(p, a, dense, s);
  }
}

}  // namespace sparge::cuda

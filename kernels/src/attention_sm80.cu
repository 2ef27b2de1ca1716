// Stage 2 on tensor cores with mma.sync m16n8k16 (sm80 and newer): FlashAttention-2-style block-sparse
// attention over the delta LUT of Stage 1, base-2 online softmax with fp32 accumulation, the
// CTA-uniform PV skip of SPARGE_SPEC.md §4.4, exact top-left causal masking, zero-filled tails and GQA.
// The same body with kDense = true walks every causally valid block with no skip (the dense path).
#include <cuda_runtime.h>

#include <cmath>

#include "attention_traits.cuh"
#include "cuda_util.h"
#include "device_common.cuh"
#include "attention_params.cuh"
#include "launch.h"
#include "mma_sm80.cuh"

namespace sparge::cuda {
namespace {

using namespace sm80;

template <typename Tr, typename T, int R>
__device__ __forceinline__ void loadTile(T* sm, const T* g, int r0, int N, int tid) {
  constexpr int kTotal = R * Tr::kChunks;
#pragma unroll
  for (int x = tid; x < kTotal; x += Tr::kThreads) {
    int row = x / Tr::kChunks, ch = x % Tr::kChunks;
    int gr = r0 + row;
    bool ok = gr < N;
    const T* src = g + (size_t)(ok ? gr : 0) * Tr::D + ch * 8;
    cpAsync16(smemAddr(sm + swz<Tr::D>(row, ch)), src, ok);
  }
}

template <typename T, int D, int BQ, int BK, int MT, int KS, bool kDense>
__device__ __forceinline__ void attentionBody(const KParams<T>& p) {
  using Tr = AttnTraits<D, BQ, BK, MT, KS>;
  extern __shared__ __align__(128) unsigned char smem[];
  T* sQ = reinterpret_cast<T*>(smem);
  T* sK = sQ + BQ * D;  // two K tiles: K of block t+1 loads while block t is processed
  T* sV = sK + 2 * BK * D;

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int i = gridDim.x - 1 - blockIdx.x;  // longest causal rows first
  const int hq = p.heads[blockIdx.y], b = blockIdx.z;
  const int bhq = b * p.Hq + hq;
  const int bhk = b * p.Hkv + hq / (p.Hq / p.Hkv);
  const T* gQ = p.q + (size_t)bhq * p.Nq * D;
  const T* gK = p.k + (size_t)bhk * p.Nkv * D;
  const T* gV = p.v + (size_t)bhk * p.Nkv * D;
  const size_t rowIdx = (size_t)bhq * p.nq + i;
  const int qRow0 = i * BQ;
  const int rowGroup = KS == 1 ? warp : warp % Tr::kRowGroups;
  const int keyPart = KS == 1 ? 0 : warp / Tr::kRowGroups;
  const int warpRow0 = rowGroup * Tr::kWarpRows;
  const int keyOff = keyPart * Tr::kWarpKeys;
  __shared__ float sMax[KS > 1 ? 2 : 1][KS][Tr::kRowGroups][Tr::kWarpRows];
  const float sc = p.scaleLog2;

  int n;
  const int32_t* lutRow = nullptr;
  float lambda = INFINITY;
  bool skipOn = false;
  if constexpr (kDense) {
    int lastQ = min(qRow0 + BQ, p.Nq) - 1;
    n = p.causal ? min(p.nk, lastQ / BK + 1) : p.nk;
  } else {
    n = p.validCount[rowIdx];
    lutRow = p.lut + rowIdx * p.nk;
    HeadParamsDev hp = p.params[hq];
    lambda = hp.lambda;
    skipOn = !hp.dense && isfinite(lambda);
  }

  // Running max m in base-2 units (scores · scale · log2 e); l and O unnormalised.
  float m[MT][2], l[MT][2];
  float acc[MT][Tr::kDT][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    m[mt][0] = m[mt][1] = -INFINITY;
    l[mt][0] = l[mt][1] = 0.f;
#pragma unroll
    for (int dt = 0; dt < Tr::kDT; ++dt)
      acc[mt][dt][0] = acc[mt][dt][1] = acc[mt][dt][2] = acc[mt][dt][3] = 0.f;
  }

  if (n > 0) {
    loadTile<Tr, T, BQ>(sQ, gQ, qRow0, p.Nq, tid);
    int j = kDense ? 0 : lutRow[0];
    loadTile<Tr, T, BK>(sK, gK, j * BK, p.Nkv, tid);
    cpAsyncCommit();
    int jNext = n > 1 ? (kDense ? 1 : j + lutRow[1]) : j;

    for (int t = 0; t < n; ++t) {
      // Block t+2 is looked up now so that the LUT read hides behind this iteration.
      int jAfter = jNext;
      if (t + 2 < n) jAfter = kDense ? jNext + 1 : jNext + lutRow[t + 2];
      cpAsyncWait<0>();
      __syncthreads();  // K_t (and Q) landed; every warp is done with V_{t-1} and K_{t-1}
      loadTile<Tr, T, BK>(sV, gV, j * BK, p.Nkv, tid);
      cpAsyncCommit();
      if (t + 1 < n) {
        loadTile<Tr, T, BK>(sK + ((t + 1) & 1) * BK * D, gK, jNext * BK, p.Nkv, tid);
        cpAsyncCommit();
      }
      const T* sKt = sK + (t & 1) * BK * D;

      float s[MT][Tr::kNT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < Tr::kNT; ++nt) s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.f;
#pragma unroll
      for (int ks = 0; ks < Tr::kKS; ++ks) {
        uint32_t a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
          ldmatrixX4(a[mt], smemAddr(sQ + swz<D>(warpRow0 + mt * 16 + (lane & 15), 2 * ks + (lane >> 4))));
#pragma unroll
        for (int np = 0; np < Tr::kNT / 2; ++np) {
          uint32_t bb[4];
          int key = keyOff + np * 16 + ((lane >> 4) << 3) + (lane & 7);
          ldmatrixX4(bb, smemAddr(sKt + swz<D>(key, 2 * ks + ((lane >> 3) & 1))));
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            Mma<T>::run(s[mt][2 * np], a[mt], bb[0], bb[1]);
            Mma<T>::run(s[mt][2 * np + 1], a[mt], bb[2], bb[3]);
          }
        }
      }

      const int kBase = j * BK;
      const bool needMask = (kBase + BK > p.Nkv) || (p.causal && kBase + BK - 1 > qRow0);
      if (needMask) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int nt = 0; nt < Tr::kNT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              int row = qRow0 + warpRow0 + mt * 16 + (lane >> 2) + ((e >> 1) << 3);
              int col = kBase + keyOff + nt * 8 + ((lane & 3) << 1) + (e & 1);
              if (col >= p.Nkv || (p.causal && col > row)) s[mt][nt][e] = -INFINITY;
            }
      }
      // Row maxima of the raw scores, then in base-2 units (the scale is positive).
      float rmax[MT][2];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        rmax[mt][0] = rmax[mt][1] = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < Tr::kNT; ++nt) {
          rmax[mt][0] = fmaxf(rmax[mt][0], fmaxf(s[mt][nt][0], s[mt][nt][1]));
          rmax[mt][1] = fmaxf(rmax[mt][1], fmaxf(s[mt][nt][2], s[mt][nt][3]));
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          rmax[mt][r] = fmaxf(rmax[mt][r], __shfl_xor_sync(0xffffffffu, rmax[mt][r], 1));
          rmax[mt][r] = fmaxf(rmax[mt][r], __shfl_xor_sync(0xffffffffu, rmax[mt][r], 2));
        }
      }
      if constexpr (KS > 1) {
        // Row maxima over the whole block: swap partial maxima with the other warps of the row group.
        const int slot = t & 1;
        if ((lane & 3) == 0) {
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int r = 0; r < 2; ++r)
              sMax[slot][keyPart][rowGroup][mt * 16 + (lane >> 2) + 8 * r] = rmax[mt][r];
        }
        namedBarrierSync(1 + rowGroup, 32 * KS);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int r = 0; r < 2; ++r)
#pragma unroll
            for (int kp = 0; kp < KS; ++kp)
              rmax[mt][r] = fmaxf(rmax[mt][r], sMax[slot][kp][rowGroup][mt * 16 + (lane >> 2) + 8 * r]);
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        rmax[mt][0] *= sc;
        rmax[mt][1] *= sc;
      }

      bool skip = false;
      if (!kDense && skipOn && t >= 1 && t < n - Tr::kTail) {
        // Skip iff max over the tile's real rows of (rowmax_new - m_old) <= -λ: one barrier-reduction.
        float dmax = -INFINITY;
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            int row = qRow0 + warpRow0 + mt * 16 + (lane >> 2) + 8 * r;
            if (row < p.Nq && rmax[mt][r] != -INFINITY)
              dmax = fmaxf(dmax, m[mt][r] == -INFINITY ? INFINITY : rmax[mt][r] - m[mt][r]);
          }
        skip = !__syncthreads_or(dmax + lambda > 0.f);
      }

      uint32_t pf[MT][Tr::kPS][4];
      if (!skip) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          float muse[2];
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            float mnew = fmaxf(m[mt][r], rmax[mt][r]);
            muse[r] = mnew == -INFINITY ? 0.f : mnew;
            float alpha = ex2(m[mt][r] - muse[r]);  // m = -inf gives 0: nothing accumulated yet
            m[mt][r] = mnew;
            l[mt][r] *= alpha;
#pragma unroll
            for (int dt = 0; dt < Tr::kDT; ++dt) {
              acc[mt][dt][2 * r] *= alpha;
              acc[mt][dt][2 * r + 1] *= alpha;
            }
          }
#pragma unroll
          for (int nt = 0; nt < Tr::kNT; ++nt) {
            s[mt][nt][0] = ex2(fmaf(s[mt][nt][0], sc, -muse[0]));
            s[mt][nt][1] = ex2(fmaf(s[mt][nt][1], sc, -muse[0]));
            s[mt][nt][2] = ex2(fmaf(s[mt][nt][2], sc, -muse[1]));
            s[mt][nt][3] = ex2(fmaf(s[mt][nt][3], sc, -muse[1]));
            l[mt][0] += s[mt][nt][0] + s[mt][nt][1];
            l[mt][1] += s[mt][nt][2] + s[mt][nt][3];
          }
#pragma unroll
          for (int kk = 0; kk < Tr::kPS; ++kk) {
            pf[mt][kk][0] = Elem<T>::pack(s[mt][2 * kk][0], s[mt][2 * kk][1]);
            pf[mt][kk][1] = Elem<T>::pack(s[mt][2 * kk][2], s[mt][2 * kk][3]);
            pf[mt][kk][2] = Elem<T>::pack(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
            pf[mt][kk][3] = Elem<T>::pack(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
          }
        }
      }

      if (t + 1 < n)
        cpAsyncWait<1>();  // V_t landed; K_{t+1} may still be in flight
      else
        cpAsyncWait<0>();
      __syncthreads();

      if (!skip) {
#pragma unroll
        for (int kk = 0; kk < Tr::kPS; ++kk) {
#pragma unroll
          for (int dp = 0; dp < Tr::kDT / 2; ++dp) {
            uint32_t bb[4];
            int key = keyOff + kk * 16 + (((lane >> 3) & 1) << 3) + (lane & 7);
            ldmatrixX4Trans(bb, smemAddr(sV + swz<D>(key, 2 * dp + (lane >> 4))));
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
              Mma<T>::run(acc[mt][2 * dp], pf[mt][kk], bb[0], bb[1]);
              Mma<T>::run(acc[mt][2 * dp + 1], pf[mt][kk], bb[2], bb[3]);
            }
          }
        }
      } else if (!kDense && tid == 0 && p.pvSkipped) {
        p.pvSkipped[rowIdx * p.nk + j] = 1;
      }
      j = jNext;
      jNext = jAfter;
    }
  }

  if constexpr (KS > 1) {
    // Key parts 1.. hand their partial O and l to key part 0 through the (now idle) K/V tiles.
    float* sO = reinterpret_cast<float*>(sK);             // [kRowGroups][kWarpRows][D]
    float* sL = sO + Tr::kRowGroups * Tr::kWarpRows * D;  // [kRowGroups][kWarpRows]
    static_assert((Tr::kRowGroups * Tr::kWarpRows * (D + 1)) * 4 <= 2 * BK * D * 2, "reduction fits");
    __syncthreads();
#pragma unroll
    for (int kp = 1; kp < KS; ++kp) {
      if (keyPart == kp) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            int rl = mt * 16 + (lane >> 2) + 8 * r;
            float* dst = sO + (rowGroup * Tr::kWarpRows + rl) * D;
#pragma unroll
            for (int dt = 0; dt < Tr::kDT; ++dt) {
              float2 v = make_float2(acc[mt][dt][2 * r], acc[mt][dt][2 * r + 1]);
              if (kp > 1) {
                float2 o = *reinterpret_cast<float2*>(dst + dt * 8 + ((lane & 3) << 1));
                v.x += o.x;
                v.y += o.y;
              }
              *reinterpret_cast<float2*>(dst + dt * 8 + ((lane & 3) << 1)) = v;
            }
            float lr = l[mt][r];
            lr += __shfl_xor_sync(0xffffffffu, lr, 1);
            lr += __shfl_xor_sync(0xffffffffu, lr, 2);
            if ((lane & 3) == 0)
              sL[rowGroup * Tr::kWarpRows + rl] = (kp > 1 ? sL[rowGroup * Tr::kWarpRows + rl] : 0.f) + lr;
          }
      }
      __syncthreads();
    }
    if (keyPart != 0) return;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        int rl = mt * 16 + (lane >> 2) + 8 * r;
        const float* src = sO + (rowGroup * Tr::kWarpRows + rl) * D;
#pragma unroll
        for (int dt = 0; dt < Tr::kDT; ++dt) {
          float2 o = *reinterpret_cast<const float2*>(src + dt * 8 + ((lane & 3) << 1));
          acc[mt][dt][2 * r] += o.x;
          acc[mt][dt][2 * r + 1] += o.y;
        }
        // Added to one lane of the quad only: the quad sum below then counts it once.
        if ((lane & 3) == 0) l[mt][r] += sL[rowGroup * Tr::kWarpRows + rl];
      }
  }

  T* gO = p.o + (size_t)bhq * p.Nq * D;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float lr = l[mt][r];
      lr += __shfl_xor_sync(0xffffffffu, lr, 1);
      lr += __shfl_xor_sync(0xffffffffu, lr, 2);
      int row = qRow0 + warpRow0 + mt * 16 + (lane >> 2) + 8 * r;
      if (row < p.Nq) {
        float inv = lr > 0.f ? 1.f / lr : 0.f;  // a row with no attended key is written as 0
        if (lr == 0.f && (lane & 3) == 0 && p.emptyRows) atomicAdd(&p.emptyRows[bhq], 1);
#pragma unroll
        for (int dt = 0; dt < Tr::kDT; ++dt) {
          int col = dt * 8 + ((lane & 3) << 1);
          *reinterpret_cast<uint32_t*>(gO + (size_t)row * D + col) =
              Elem<T>::pack(acc[mt][dt][2 * r] * inv, acc[mt][dt][2 * r + 1] * inv);
        }
      }
    }
}

template <typename T, int D, int BQ, int BK, int MT, int KS>
__global__ void __launch_bounds__(AttnTraits<D, BQ, BK, MT, KS>::kThreads)
    sparge_sparse_attention_sm80(const KParams<T> p) {
  attentionBody<T, D, BQ, BK, MT, KS, false>(p);
}

template <typename T, int D, int BQ, int BK, int MT, int KS>
__global__ void __launch_bounds__(AttnTraits<D, BQ, BK, MT, KS>::kThreads)
    sparge_dense_attention_sm80(const KParams<T> p) {
  attentionBody<T, D, BQ, BK, MT, KS, true>(p);
}

template <typename T, int D, int BQ, int BK, int MT, int KS>
void launchTyped(const Problem& pr, const AttnArgs& a, bool dense, cudaStream_t s) {
  using Tr = AttnTraits<D, BQ, BK, MT, KS>;
  const KParams<T> kp = makeKParams<T>(pr, a);
  dim3 grid(pr.nq, pr.nHeads, pr.B);
  auto kernel = dense ? sparge_dense_attention_sm80<T, D, BQ, BK, MT, KS>
                      : sparge_sparse_attention_sm80<T, D, BQ, BK, MT, KS>;
  static bool attrSet[2] = {false, false};
  if (!attrSet[dense]) {
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Tr::kSmemBytes),
          "cudaFuncSetAttribute(attention)");
    attrSet[dense] = true;
  }
  kernel<<<grid, Tr::kThreads, Tr::kSmemBytes, s>>>(kp);
  checkLaunch(dense ? "sparge_dense_attention_sm80" : "sparge_sparse_attention_sm80");
}

// Warp layouts per geometry (kernels/NOTES.md has the measurements): 128x64 tiles run 32 rows per warp
// (v2, +19% over 16 rows); 64x128 tiles keep 16 rows per warp over the whole block. The key split
// (MT = 2, KS = 2 for 64x128: two warps per row group exchange row maxima each block) is correct
// (tests and sanitizers pass with it) but measured 7% slower on H100: 64-row tiles are bound by
// L2->SM traffic (each CTA loads 64 KB of K/V per 64x128 block), not by shared memory.
#ifndef SPARGE_ATTN_MT_64X128
#define SPARGE_ATTN_MT_64X128 1
#endif
#ifndef SPARGE_ATTN_KS_64X128
#define SPARGE_ATTN_KS_64X128 1
#endif
constexpr int kMt128x64 = 2;
constexpr int kMt64x128 = SPARGE_ATTN_MT_64X128;
constexpr int kKs64x128 = SPARGE_ATTN_KS_64X128;

template <typename T>
void launchGeom(const Problem& pr, const AttnArgs& a, bool dense, cudaStream_t s) {
  bool g128x64 = pr.BQ == 128 && pr.BK == 64;
  if (pr.D == 64) {
    if (g128x64)
      launchTyped<T, 64, 128, 64, kMt128x64, 1>(pr, a, dense, s);
    else
      launchTyped<T, 64, 64, 128, kMt64x128, kKs64x128>(pr, a, dense, s);
  } else {
    if (g128x64)
      launchTyped<T, 128, 128, 64, kMt128x64, 1>(pr, a, dense, s);
    else
      launchTyped<T, 128, 64, 128, kMt64x128, kKs64x128>(pr, a, dense, s);
  }
}

}  // namespace

void launchAttention(ElemType t, const Problem& p, const AttnArgs& a, bool dense, cudaStream_t s) {
  if (attentionSm90Selected(p)) {
    launchAttentionSm90(t, p, a, dense, s);
    return;
  }
  if (t == ElemType::F16)
    launchGeom<__half>(p, a, dense, s);
  else
    launchGeom<__nv_bfloat16>(p, a, dense, s);
}

}  // namespace sparge::cuda

// Stage 2 on tensor cores with mma.sync (sm80 and newer): FlashAttention-2-style block-sparse attention over
// the delta LUT of Stage 1 with the shared parts (parts/: block walk and visibility, base-2 online softmax,
// CTA-uniform PV skip, epilogue), in three numerics:
//   None      fp16/bf16 Q·Kᵀ and P·V (m16n8k16), fp32 accumulation;
//   Int8Fp16  INT8 Q·Kᵀ (m16n8k32 s8, per-tile scales), P rounded to fp16, P·V with fp16 accumulation into a
//             fresh per-block buffer that is added to the fp32 output, denominator from the fp16 P;
//   Int8Fp8   INT8 Q·Kᵀ, P = exp2(s - m + 8.807) rounded to e4m3, P·V m16n8k32 e4m3 into a fresh fp32
//             per-block buffer, denominator from the unrounded P, per-channel V scale at the end (sm_89+).
// The same body with kDense = true walks every visible block with no skip (the dense path).
#include <cuda_runtime.h>

#include <cmath>
#include <string>
#include <type_traits>

#include "attention/attention_params.cuh"
#include "attention/sm80/attention_traits.cuh"
#include "common/cuda_util.h"
#include "common/device_common.cuh"
#include "common/head_dim.h"
#include "common/launch.h"
#include "common/mma_sm80.cuh"
#include "attention/parts/block_walk.cuh"
#include "attention/parts/epilogue.cuh"
#include "attention/parts/online_softmax.cuh"
#include "sparge/core/error.h"

namespace sparge::cuda {
namespace {

using namespace sm80;
using core::Numerics;

// R rows of kRowChunks 16-byte chunks from rows r0.. of a global matrix with rows `stride` bytes apart into
// a swizzled shared tile; rows >= n are zero-filled.
template <int kRowChunks, int R, int kThreads>
__device__ __forceinline__ void loadRows(uint32_t sm, const uint8_t* g, size_t stride, int r0, int n,
                                         int tid) {
  constexpr int kTotal = R * kRowChunks;
#pragma unroll
  for (int x = tid; x < kTotal; x += kThreads) {
    const int row = x / kRowChunks, ch = x % kRowChunks;
    const int gr = r0 + row;
    const bool ok = gr < n;
    cpAsync16(sm + chunkOffset<kRowChunks>(row, ch), g + (size_t)(ok ? gr : 0) * stride + ch * 16, ok);
  }
}

// The global operands of one CTA (one query tile of one head) as byte matrices.
template <class Tr>
struct Operands {
  const uint8_t* q;
  const uint8_t* k;
  const uint8_t* v;
  int qRows, kRows;  // rows that exist (beyond: zero fill)
  float qScale;      // INT8 Q scale of the tile (quantized numerics)
  const float* kScale;
  const float* vScale;
  size_t vStride;

  template <typename T>
  __device__ __forceinline__ static Operands make(const KParams<T>& p, int bhq, int bhk, int i) {
    constexpr int kQkRow = Tr::kQkChunks * 16;
    Operands o;
    if constexpr (Tr::kQuant) {
      o.q = static_cast<const uint8_t*>(p.q) + (size_t)bhq * p.nq * Tr::BQ * kQkRow;
      o.k = static_cast<const uint8_t*>(p.k) + (size_t)bhk * p.nk * Tr::BK * kQkRow;
      o.qRows = p.nq * Tr::BQ;
      o.kRows = p.nk * Tr::BK;
      o.qScale = p.qScale[(size_t)bhq * p.nq + i];
      o.kScale = p.kScale + (size_t)bhk * p.nk;
    } else {
      o.q = static_cast<const uint8_t*>(p.q) + (size_t)bhq * p.Nq * kQkRow;
      o.k = static_cast<const uint8_t*>(p.k) + (size_t)bhk * p.Nkv * kQkRow;
      o.qRows = p.Nq;
      o.kRows = p.Nkv;
      o.qScale = 1.f;
      o.kScale = nullptr;
    }
    if constexpr (Tr::kVFp8) {
      o.vStride = (size_t)fp8VTokens(p.Nkv);
      o.v = static_cast<const uint8_t*>(p.v) + (size_t)bhk * Tr::D * o.vStride;
      o.vScale = p.vScale + (size_t)bhk * Tr::D;
    } else {
      o.vStride = (size_t)Tr::D * 2;
      o.v = static_cast<const uint8_t*>(p.v) + (size_t)bhk * p.Nkv * o.vStride;
      o.vScale = nullptr;
    }
    return o;
  }

  __device__ __forceinline__ void loadQ(uint32_t sQ, int qRow0, int tid) const {
    loadRows<Tr::kQkChunks, Tr::BQ, Tr::kThreads>(sQ, q, Tr::kQkChunks * 16, qRow0, qRows, tid);
  }
  __device__ __forceinline__ void loadK(uint32_t sK, int j, int tid) const {
    loadRows<Tr::kQkChunks, Tr::BK, Tr::kThreads>(sK, k, Tr::kQkChunks * 16, j * Tr::BK, kRows, tid);
  }
  // e4m3 V: D channel rows of BK keys starting at key j·BK; otherwise BK token rows.
  __device__ __forceinline__ void loadV(uint32_t sV, int j, int nKv, int tid) const {
    if constexpr (Tr::kVFp8)
      loadRows<Tr::kVChunks, Tr::D, Tr::kThreads>(sV, v + (size_t)j * Tr::BK, vStride, 0, Tr::D, tid);
    else
      loadRows<Tr::kVChunks, Tr::BK, Tr::kThreads>(sV, v, vStride, j * Tr::BK, nKv, tid);
  }
  // Factor from raw scores (fp or dequantised int) to base-2 logits for key block j.
  __device__ __forceinline__ float scoreScale(float scaleLog2, int j) const {
    if constexpr (Tr::kQuant) return scaleLog2 * (qScale * kScale[j]);
    return scaleLog2;
  }
};

// S = Q·Kᵀ of this warp's MT m-tiles against the BK keys in sK (fp16/bf16 m16n8k16 with fp32 accumulators,
// or INT8 m16n8k32 with int32 accumulators converted toward zero).
template <class Tr, typename T>
__device__ __forceinline__ void qkScores(float (&s)[Tr::MT][Tr::kNT][4], uint32_t sQ, uint32_t sK,
                                         int warpRow0, int lane) {
  using Acc = std::conditional_t<Tr::kQuant, int32_t, float>;
  Acc acc[Tr::MT][Tr::kNT][4];
#pragma unroll
  for (int mt = 0; mt < Tr::MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < Tr::kNT; ++nt)
      acc[mt][nt][0] = acc[mt][nt][1] = acc[mt][nt][2] = acc[mt][nt][3] = 0;
#pragma unroll
  for (int ks = 0; ks < Tr::kQkSteps; ++ks) {
    uint32_t a[Tr::MT][4];
#pragma unroll
    for (int mt = 0; mt < Tr::MT; ++mt)
      ldmatrixX4(a[mt],
                 sQ + chunkOffset<Tr::kQkChunks>(warpRow0 + mt * 16 + (lane & 15), 2 * ks + (lane >> 4)));
#pragma unroll
    for (int np = 0; np < Tr::kNT / 2; ++np) {
      uint32_t bb[4];
      const int key = np * 16 + ((lane >> 4) << 3) + (lane & 7);
      ldmatrixX4(bb, sK + chunkOffset<Tr::kQkChunks>(key, 2 * ks + ((lane >> 3) & 1)));
#pragma unroll
      for (int mt = 0; mt < Tr::MT; ++mt) {
        if constexpr (Tr::kQuant) {
          mmaS8(acc[mt][2 * np], a[mt], bb[0], bb[1]);
          mmaS8(acc[mt][2 * np + 1], a[mt], bb[2], bb[3]);
        } else {
          Mma<T>::run(acc[mt][2 * np], a[mt], bb[0], bb[1]);
          Mma<T>::run(acc[mt][2 * np + 1], a[mt], bb[2], bb[3]);
        }
      }
    }
  }
#pragma unroll
  for (int mt = 0; mt < Tr::MT; ++mt) {
    if constexpr (Tr::kQuant)
      intToFloat(acc[mt], s[mt]);
    else
#pragma unroll
      for (int nt = 0; nt < Tr::kNT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mt][nt][e] = acc[mt][nt][e];
  }
}

// P·V of the O n-tiles d0 .. d0 + kPvDT - 1 (kernels/NOTES.md: D 256 runs the quantized numerics' per-block
// buffer in passes of 64 channels; below D 256 one pass covers every channel).
template <class Tr, typename T>
__device__ __forceinline__ void pvPass(float (&acc)[Tr::MT][Tr::kDT][4],
                                       const uint32_t (&pf)[Tr::MT][Tr::kPSteps][4], uint32_t sV, int lane,
                                       int d0) {
  if constexpr (Tr::kVFp8) {
    float blk[Tr::MT][Tr::kPvDT][4] = {};
#pragma unroll
    for (int kk = 0; kk < Tr::kPSteps; ++kk)
#pragma unroll
      for (int dp = 0; dp < Tr::kPvDT / 2; ++dp) {
        uint32_t bb[4];
        const int ch = (d0 + 2 * dp) * 8 + ((lane >> 4) << 3) + (lane & 7);
        ldmatrixX4(bb, sV + chunkOffset<Tr::kVChunks>(ch, 2 * kk + ((lane >> 3) & 1)));
#pragma unroll
        for (int mt = 0; mt < Tr::MT; ++mt) {
          mmaE4m3(blk[mt][2 * dp], pf[mt][kk], bb[0], bb[1]);
          mmaE4m3(blk[mt][2 * dp + 1], pf[mt][kk], bb[2], bb[3]);
        }
      }
#pragma unroll
    for (int mt = 0; mt < Tr::MT; ++mt)
#pragma unroll
      for (int dt = 0; dt < Tr::kPvDT; ++dt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mt][d0 + dt][e] += blk[mt][dt][e];
  } else {
    constexpr bool kHalfAcc = Tr::N == Numerics::Int8Fp16;
    uint32_t blk[Tr::MT][Tr::kPvDT][2] = {};  // fp16 per-block accumulators (int8-fp16 only)
#pragma unroll
    for (int kk = 0; kk < Tr::kPSteps; ++kk)
#pragma unroll
      for (int dp = 0; dp < Tr::kPvDT / 2; ++dp) {
        uint32_t bb[4];
        const int key = kk * 16 + (((lane >> 3) & 1) << 3) + (lane & 7);
        ldmatrixX4Trans(bb, sV + chunkOffset<Tr::kVChunks>(key, d0 + 2 * dp + (lane >> 4)));
#pragma unroll
        for (int mt = 0; mt < Tr::MT; ++mt) {
          if constexpr (kHalfAcc) {
            mmaF16Acc(blk[mt][2 * dp], pf[mt][kk], bb[0], bb[1]);
            mmaF16Acc(blk[mt][2 * dp + 1], pf[mt][kk], bb[2], bb[3]);
          } else {
            Mma<T>::run(acc[mt][d0 + 2 * dp], pf[mt][kk], bb[0], bb[1]);
            Mma<T>::run(acc[mt][d0 + 2 * dp + 1], pf[mt][kk], bb[2], bb[3]);
          }
        }
      }
    if constexpr (kHalfAcc) {
#pragma unroll
      for (int mt = 0; mt < Tr::MT; ++mt)
#pragma unroll
        for (int dt = 0; dt < Tr::kPvDT; ++dt)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&blk[mt][dt][h]));
            acc[mt][d0 + dt][2 * h] += f.x;
            acc[mt][d0 + dt][2 * h + 1] += f.y;
          }
    }
  }
}

// P (registers, packed for the P·V MMA) times the V tile, accumulated into acc per the numerics.
template <class Tr, typename T>
__device__ __forceinline__ void pvAccumulate(float (&acc)[Tr::MT][Tr::kDT][4],
                                             const uint32_t (&pf)[Tr::MT][Tr::kPSteps][4], uint32_t sV,
                                             int lane) {
#pragma unroll
  for (int d0 = 0; d0 < Tr::kDT; d0 += Tr::kPvDT) pvPass<Tr, T>(acc, pf, sV, lane, d0);
}

// Per-thread softmax state of the warp's MT m-tiles.
template <class Tr>
struct RowState {
  float m[Tr::MT][2], l[Tr::MT][2];
  float acc[Tr::MT][Tr::kDT][4];

  __device__ __forceinline__ void init() {
#pragma unroll
    for (int mt = 0; mt < Tr::MT; ++mt) {
      m[mt][0] = m[mt][1] = -INFINITY;
      l[mt][0] = l[mt][1] = 0.f;
#pragma unroll
      for (int dt = 0; dt < Tr::kDT; ++dt)
        acc[mt][dt][0] = acc[mt][dt][1] = acc[mt][dt][2] = acc[mt][dt][3] = 0.f;
    }
  }
};

// Softmax of one block's scores (already masked): CTA-wide skip vote when eligible, then rescale,
// exponentiate and pack P. Returns true when the block's P·V is skipped.
template <class Tr, typename T>
__device__ __forceinline__ bool softmaxBlock(RowState<Tr>& st, float (&s)[Tr::MT][Tr::kNT][4],
                                             uint32_t (&pf)[Tr::MT][Tr::kPSteps][4], float sc, bool vote,
                                             float lambda, int row0, int nQ) {
  float rmax[Tr::MT][2];
#pragma unroll
  for (int mt = 0; mt < Tr::MT; ++mt) {
    rowMax(s[mt], rmax[mt]);
    rmax[mt][0] *= sc;  // base-2 units (the scale is positive)
    rmax[mt][1] *= sc;
  }
  if (vote) {
    float rise = -INFINITY;
#pragma unroll
    for (int mt = 0; mt < Tr::MT; ++mt)
      rise = fmaxf(rise, maxRise<Tr::kQuant>(rmax[mt], st.m[mt], row0 + mt * 16, nQ));
    if (!__syncthreads_or(rise + lambda > 0.f)) return true;
  }
  constexpr RowSum kSum = Tr::N == Numerics::Int8Fp16 ? RowSum::Half : RowSum::Fp32;
  const float offset = Tr::kVFp8 ? kFp8POffset : 0.f;
#pragma unroll
  for (int mt = 0; mt < Tr::MT; ++mt) {
    float muse[2];
    rescaleRows<true>(st.m[mt], st.l[mt], st.acc[mt], rmax[mt], muse);
    exponentiate<kSum>(s[mt], muse, sc, offset, st.l[mt]);
    if constexpr (Tr::kVFp8)
      packPE4m3(s[mt], pf[mt]);
    else
      packP16<std::conditional_t<Tr::kQuant, __half, T>>(s[mt], pf[mt]);
  }
  return false;
}

struct SmemTiles {
  uint32_t q, k, v;  // K and V the same buffer when Tr::kKvShared
};

// What every block of a walk shares, whichever way its loads are scheduled.
template <typename T, class Tr, bool kDense>
struct BlockCtx {
  const KParams<T>& p;
  const Operands<Tr>& op;
  const BlockWalk<kDense>& walk;
  const SmemTiles& sm;
  RowState<Tr>& st;
  int qRow0, qLast;
  size_t rowIdx;
  float lambda;
  bool skipOn;
  int tid, lane, warpRow0, row0, col0;

  // S = Q·Kᵀ of block j from the K tile at sK, with keys the rows may not see at -inf.
  __device__ __forceinline__ void scores(float (&s)[Tr::MT][Tr::kNT][4], uint32_t sK, int j) const {
    qkScores<Tr, T>(s, sm.q, sK, warpRow0, lane);
    if (!p.vis.fullyVisible(qRow0, qLast, j * Tr::BK, Tr::BK))
#pragma unroll
      for (int mt = 0; mt < Tr::MT; ++mt) maskFragment(s[mt], row0 + mt * 16, j * Tr::BK + col0, p.vis);
  }
  // Softmax of block j (iteration t); true when its P·V is skipped.
  __device__ __forceinline__ bool softmax(float (&s)[Tr::MT][Tr::kNT][4],
                                          uint32_t (&pf)[Tr::MT][Tr::kPSteps][4], int t, int j) const {
    const bool vote = !kDense && skipOn && skipEligible(t, walk.n, Tr::kTail);
    return softmaxBlock<Tr, T>(st, s, pf, op.scoreScale(p.scaleLog2, j), vote, lambda, row0, p.Nq);
  }
  // P·V of block j from the landed V tile, or the record of its skip.
  __device__ __forceinline__ void finish(bool skip, const uint32_t (&pf)[Tr::MT][Tr::kPSteps][4],
                                         int j) const {
    if (!skip)
      pvAccumulate<Tr, T>(st.acc, pf, sm.v, lane);
    else if (tid == 0 && p.pvSkipped)
      p.pvSkipped[rowIdx * p.nk + j] = 1;
  }
};

// The pipelined walk: K of block t+1 and V of block t load while Q·Kᵀ of block t runs; the LUT is read two
// blocks ahead so that its latency hides behind an iteration.
template <typename T, class Tr, bool kDense>
__device__ __forceinline__ void mainLoop(const BlockCtx<T, Tr, kDense>& c) {
  const int n = c.walk.n, tid = c.tid;
  c.op.loadQ(c.sm.q, c.qRow0, tid);
  int j = c.walk.first();
  c.op.loadK(c.sm.k, j, tid);
  cpAsyncCommit();
  int jNext = n > 1 ? c.walk.advance(j, 1) : j;
  for (int t = 0; t < n; ++t) {
    const int jAfter = t + 2 < n ? c.walk.advance(jNext, t + 2) : jNext;
    cpAsyncWait<0>();
    __syncthreads();  // K_t (and Q) landed; every warp is done with V_{t-1} and K_{t-1}
    c.op.loadV(c.sm.v, j, c.p.Nkv, tid);
    cpAsyncCommit();
    if (t + 1 < n) {
      c.op.loadK(c.sm.k + ((t + 1) & 1) * Tr::kKBytes, jNext, tid);
      cpAsyncCommit();
    }
    float s[Tr::MT][Tr::kNT][4];
    c.scores(s, c.sm.k + (t & 1) * Tr::kKBytes, j);
    uint32_t pf[Tr::MT][Tr::kPSteps][4];
    const bool skip = c.softmax(s, pf, t, j);
    if (t + 1 < n)
      cpAsyncWait<1>();  // V_t landed; K_{t+1} may still be in flight
    else
      cpAsyncWait<0>();
    __syncthreads();
    c.finish(skip, pf, j);
    j = jNext;
    jNext = jAfter;
  }
}

// The walk of tiles whose K and V share one buffer (Tr::kKvShared, D 256): K_t loads, Q·Kᵀ, then V_t loads
// over it while the softmax runs. Same arithmetic in the same order as mainLoop.
template <typename T, class Tr, bool kDense>
__device__ __forceinline__ void mainLoopSharedKv(const BlockCtx<T, Tr, kDense>& c) {
  const int n = c.walk.n, tid = c.tid;
  c.op.loadQ(c.sm.q, c.qRow0, tid);
  int j = c.walk.first();
  for (int t = 0; t < n; ++t) {
    if (t > 0) __syncthreads();  // every warp is done with V_{t-1}, which K_t overwrites
    c.op.loadK(c.sm.k, j, tid);
    cpAsyncCommit();
    const int jNext = t + 1 < n ? c.walk.advance(j, t + 1) : j;
    cpAsyncWait<0>();
    __syncthreads();  // K_t (and Q) landed
    float s[Tr::MT][Tr::kNT][4];
    c.scores(s, c.sm.k, j);
    __syncthreads();  // every warp is done with K_t, which V_t overwrites
    c.op.loadV(c.sm.v, j, c.p.Nkv, tid);
    cpAsyncCommit();
    uint32_t pf[Tr::MT][Tr::kPSteps][4];
    const bool skip = c.softmax(s, pf, t, j);
    cpAsyncWait<0>();
    __syncthreads();  // V_t landed
    c.finish(skip, pf, j);
    j = jNext;
  }
}

template <typename T, class Tr, bool kDense>
__device__ __forceinline__ void attentionBody(const KParams<T>& p) {
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t base = smemAddr(smem);
  const uint32_t kv = base + Tr::kQBytes;
  const SmemTiles sm{base, kv, Tr::kKvShared ? kv : kv + 2 * Tr::kKBytes};

  const int lane = threadIdx.x & 31, warpRow0 = (threadIdx.x >> 5) * Tr::kWarpRows;
  const int i = gridDim.x - 1 - blockIdx.x;  // longest causal rows first
  const int hq = p.heads[blockIdx.y], b = blockIdx.z;
  const int bhq = b * p.Hq + hq;
  const int bhk = b * p.Hkv + hq / (p.Hq / p.Hkv);
  const size_t rowIdx = (size_t)bhq * p.nq + i;
  const int qRow0 = i * Tr::BQ, qLast = min(qRow0 + Tr::BQ, p.Nq) - 1;
  const Operands<Tr> op = Operands<Tr>::make(p, bhq, bhk, i);
  const BlockWalk<kDense> walk =
      BlockWalk<kDense>::make(p.vis, qRow0, qLast, Tr::BK, kDense ? nullptr : p.lut + rowIdx * p.nk,
                              kDense ? nullptr : p.validCount + rowIdx);
  float lambda = INFINITY;
  bool skipOn = false;
  if constexpr (!kDense) {
    const HeadParamsDev hp = p.params[hq];
    lambda = hp.lambda;
    skipOn = !hp.dense && isfinite(lambda);
  }
  RowState<Tr> st;
  st.init();
  const BlockCtx<T, Tr, kDense> ctx{p,
                                    op,
                                    walk,
                                    sm,
                                    st,
                                    qRow0,
                                    qLast,
                                    rowIdx,
                                    lambda,
                                    skipOn,
                                    (int)threadIdx.x,
                                    lane,
                                    warpRow0,
                                    qRow0 + warpRow0 + (lane >> 2),
                                    2 * (lane & 3)};
  if (walk.n > 0) {
    if constexpr (Tr::kKvShared)
      mainLoopSharedKv(ctx);
    else
      mainLoop(ctx);
  }

  T* gO = p.o + (size_t)bhq * p.Nq * Tr::D;
#pragma unroll
  for (int mt = 0; mt < Tr::MT; ++mt)
    storeRows<T, Tr::kDT>(gO, Tr::D, st.acc[mt], st.l[mt], qRow0 + warpRow0 + mt * 16 + (lane >> 2),
                          2 * (lane & 3), p.Nq, op.vScale, p.emptyRows ? p.emptyRows + bhq : nullptr);
}

template <typename T, class Tr>
__global__ void __launch_bounds__(Tr::kThreads) sparge_sparse_attention_sm80(const KParams<T> p) {
  attentionBody<T, Tr, false>(p);
}

template <typename T, class Tr>
__global__ void __launch_bounds__(Tr::kThreads) sparge_dense_attention_sm80(const KParams<T> p) {
  attentionBody<T, Tr, true>(p);
}

template <typename T, class Tr>
void launchTyped(const Problem& pr, const AttnArgs& a, bool dense, cudaStream_t s) {
  const KParams<T> kp = makeKParams<T>(pr, a);
  dim3 grid(pr.nq, pr.nHeads, pr.B);
  auto kernel = dense ? sparge_dense_attention_sm80<T, Tr> : sparge_sparse_attention_sm80<T, Tr>;
  static bool attrSet[2] = {false, false};
  if (!attrSet[dense]) {
    requireSharedMemory(Tr::kSmemBytes, "the mma.sync attention kernel", Tr::D);
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Tr::kSmemBytes),
          "cudaFuncSetAttribute(attention)");
    attrSet[dense] = true;
  }
  kernel<<<grid, Tr::kThreads, Tr::kSmemBytes, s>>>(kp);
  checkLaunch(dense ? "sparge_dense_attention_sm80" : "sparge_sparse_attention_sm80");
}

// Warp layouts (kernels/NOTES.md has the measurements): exact 128x64 tiles run 32 rows per warp (v2);
// 64x128 tiles, the quantized numerics (whose per-block P·V buffer needs the registers) and
// D 256 (whose 16-row output alone takes 128 registers a thread) run 16.
template <typename T, Numerics N, int D>
void launchGeometry(const Problem& pr, const AttnArgs& a, bool dense, cudaStream_t s) {
  constexpr int kMt128x64 = N == Numerics::None && D <= 128 ? 2 : 1;
  if (pr.BQ == 128 && pr.BK == 64)
    launchTyped<T, AttnTraits<D, 128, 64, kMt128x64, N>>(pr, a, dense, s);
  else
    launchTyped<T, AttnTraits<D, 64, 128, 1, N>>(pr, a, dense, s);
}

template <typename T, Numerics N>
void launchHeadDim(const Problem& pr, const AttnArgs& a, bool dense, cudaStream_t s) {
  withHeadDim(pr.D, "CUDA engine",
              [&](auto d) { launchGeometry<T, N, decltype(d)::value>(pr, a, dense, s); });
}

template <typename T>
void launchNumerics(const Problem& pr, const AttnArgs& a, bool dense, cudaStream_t s) {
  switch (a.numerics) {
    case Numerics::None:
      return launchHeadDim<T, Numerics::None>(pr, a, dense, s);
    case Numerics::Int8Fp16:
      return launchHeadDim<T, Numerics::Int8Fp16>(pr, a, dense, s);
    case Numerics::Int8Fp8:
      return launchHeadDim<T, Numerics::Int8Fp8>(pr, a, dense, s);
  }
}

// e4m3 tensor-core instructions exist from compute capability 8.9 (Ada, Hopper).
void requireFp8Device() {
  int dev = 0, major = 0, minor = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), "cudaDeviceGetAttribute");
  check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev), "cudaDeviceGetAttribute");
  if (major * 10 + minor < 89)
    throw Error("CUDA engine",
                "numerics int8-fp8 needs FP8 tensor cores (compute capability 8.9 or newer); this "
                "GPU is " +
                    std::to_string(major) + "." + std::to_string(minor) +
                    ": use --quant int8-fp16 or none, or the CPU engine");
}

}  // namespace

void launchAttention(ElemType t, const Problem& p, const AttnArgs& a, bool dense, cudaStream_t s) {
  requireHeadDim(p.D, "CUDA engine");
  if (a.numerics == Numerics::Int8Fp8) requireFp8Device();
  if (attentionSm90Selected(p, a.numerics, a.family)) {
    launchAttentionSm90(t, p, a, dense, s);
    return;
  }
  if (t == ElemType::F16)
    launchNumerics<__half>(p, a, dense, s);
  else
    launchNumerics<__nv_bfloat16>(p, a, dense, s);
}

}  // namespace sparge::cuda

// Stage 2 on Hopper (sm_90a) for the 64x128 geometry, with FlashAttention-3's structure: a CTA holds two
// adjacent 64-row query tiles, one per consumer warpgroup (each with its own LUT row), and a producer warp
// that loads K and V blocks with TMA into a multi-stage shared-memory pipeline guarded by mbarriers. The
// producer walks the sorted union of both LUT rows; every stage carries its key block and which consumers
// need it, so one load serves both tiles when their rows agree (dense attention, and neighbouring rows of
// real data). The consumers take turns on the tensor cores (ping-pong on named barriers): one issues Q·Kᵀ of
// its block and P·V of its previous block while the other runs its softmax. Register reallocation gives the
// consumers 240 registers. Numerics: fp16/bf16 exact (wgmma m64n128k16, P·V m64nDk16 with V transposed by the
// descriptor), and int8-fp8 (wgmma s8 m64n128k32, P rounded to e4m3, P·V e4m3 m64nDk32 into a fresh per-block
// fp32 buffer). Masks, the PV-skip vote (per query tile), empty rows and the output go through the shared
// parts. Only the sm_90a image has a body; other images trap (the launcher never selects them).
#include <cuda.h>
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include "attention_params.cuh"
#include "cuda_util.h"
#include "device_common.cuh"
#include "launch.h"
#include "parts/block_walk.cuh"
#include "parts/epilogue.cuh"
#include "parts/hopper_sync.cuh"
#include "parts/online_softmax.cuh"
#include "smem_layout_sm90.h"
#include "sparge/core/error.h"
#include "wgmma_sm90.cuh"

// Only the sm_90a pass compiles the kernel bodies; the other passes would warn about the constants they use.
#pragma nv_diag_suppress 177

namespace sparge::cuda {
namespace {

using core::Numerics;

constexpr int kBQ = 64, kBK = 128;
constexpr int kConsumers = 2;
constexpr int kThreads90 = 128 * (1 + kConsumers);  // producer warpgroup + two consumer warpgroups
constexpr int kProducerRegs = 24, kConsumerRegs = 240;
// Named barriers: ping-pong turns (1, 2) and the per-tile skip vote (3, 4).
constexpr int kBarTurn = 1, kBarVote = 3;

template <typename T_, int D_, Numerics N_>
struct Sm90Traits {
  using T = T_;  // input and output element type
  static constexpr int D = D_;
  static constexpr bool kFp8 = N_ == Numerics::Int8Fp8;
  static constexpr int kElemBytes = kFp8 ? 1 : 2;  // Q and K elements
  static constexpr int kQkRowBytes = D * kElemBytes;
  static constexpr int kSlabBytes = kQkRowBytes < 128 ? kQkRowBytes : 128;  // one TMA box row, one swizzle
  static constexpr int kSlabs = kQkRowBytes / kSlabBytes;
  static constexpr int kQTileBytes = kBQ * kQkRowBytes;
  static constexpr int kKTileBytes = kBK * kQkRowBytes;
  static constexpr int kVTileBytes = kFp8 ? D * kBK : kBK * D * 2;  // e4m3 [D][keys] or 16-bit [keys][D]
  static constexpr int kStages = kKTileBytes + kVTileBytes > 32768 ? 2 : 4;
  static constexpr int kQkSteps = kQkRowBytes / 32;  // wgmma k-steps of 32 bytes
  static constexpr int kPSteps = kFp8 ? kBK / 32 : kBK / 16;
  static constexpr int kNT = kBK / 8, kDT = D / 8;
  // e4m3 P·V runs in parts of kPvN channels, each into a fresh fp32 block buffer that is added to O before
  // the next part: the two-level accumulation in 16 (D = 128) or 32 (D = 64) buffer registers, so that the
  // consumers do not spill.
  static constexpr int kPvN = kFp8 ? (D == 128 ? 32 : 64) : D;
  static constexpr int kPvParts = D / kPvN;
  // Q tiles, K stages, V stages (all 1024-byte aligned), then barriers and stage tags.
  static constexpr int kOffK = kConsumers * kQTileBytes;
  static constexpr int kOffV = kOffK + kStages * kKTileBytes;
  static constexpr int kOffBar = kOffV + kStages * kVTileBytes;
  static constexpr int kBarBytes = 8 * (1 + 4 * kStages);
  static constexpr int kOffTag = kOffBar + kBarBytes;
  static constexpr int kSmemBytes = kOffTag + 8 * kStages + 1024;  // + alignment slack
  static_assert(kQTileBytes % 1024 == 0 && kKTileBytes % 1024 == 0 && kVTileBytes % 1024 == 0,
                "aligned tiles");
};

template <typename T>
struct Sm90Params {
  KParams<T> k;
  CUtensorMap q, kmap, v;
};

#ifdef SPARGE_SM90A_DEVICE

using namespace sm90;

// Shared-memory addresses of the pipeline.
template <class Tr>
struct Pipe {
  uint32_t base;
  __device__ __forceinline__ uint32_t q(int c) const { return base + c * Tr::kQTileBytes; }
  __device__ __forceinline__ uint32_t k(int s) const { return base + Tr::kOffK + s * Tr::kKTileBytes; }
  __device__ __forceinline__ uint32_t v(int s) const { return base + Tr::kOffV + s * Tr::kVTileBytes; }
  __device__ __forceinline__ uint32_t fullQ() const { return base + Tr::kOffBar; }
  __device__ __forceinline__ uint32_t fullK(int s) const { return base + Tr::kOffBar + 8 * (1 + s); }
  __device__ __forceinline__ uint32_t fullV(int s) const { return fullK(s) + 8 * Tr::kStages; }
  __device__ __forceinline__ uint32_t emptyK(int s) const { return fullK(s) + 16 * Tr::kStages; }
  __device__ __forceinline__ uint32_t emptyV(int s) const { return fullK(s) + 24 * Tr::kStages; }
  __device__ __forceinline__ uint32_t tag(int s) const { return base + Tr::kOffTag + 8 * s; }
};

// A stage's tag: its key block, which consumers need it, whether it is the last stage, and the block's
// INT8 K scale (int8-fp8).
struct StageTag {
  int j;
  int mask;
  bool last;
  float kScale;
};
__device__ __forceinline__ void storeTag(uint32_t addr, const StageTag& t) {
  const uint32_t w = (uint32_t)t.j | ((uint32_t)t.mask << 24) | ((uint32_t)t.last << 26);
  asm volatile("st.shared.v2.u32 [%0], {%1, %2};\n" ::"r"(addr), "r"(w), "r"(__float_as_uint(t.kScale))
               : "memory");
}
__device__ __forceinline__ StageTag loadTag(uint32_t addr) {
  uint32_t w, f;
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];\n" : "=r"(w), "=r"(f) : "r"(addr) : "memory");
  return StageTag{int(w & 0xFFFFFF), int((w >> 24) & 3), ((w >> 26) & 1) != 0, __uint_as_float(f)};
}

// The tag as every lane of the warp sees it (the same value; the shuffle tells the compiler so, which keeps
// the wgmma issue off divergent paths).
__device__ __forceinline__ StageTag uniformTag(const StageTag& t) {
  return StageTag{__shfl_sync(0xffffffffu, t.j, 0), __shfl_sync(0xffffffffu, t.mask, 0),
                  __shfl_sync(0xffffffffu, (int)t.last, 0) != 0, t.kScale};
}

// The CTA's two query tiles and their walks, computed the same way by every thread.
template <typename T, bool kDense>
struct TilePair {
  int i[kConsumers];
  BlockWalk<kDense> walk[kConsumers];
  int bhq, bhk, hq;

  __device__ __forceinline__ static TilePair make(const KParams<T>& p) {
    TilePair tp;
    const int c = gridDim.x - 1 - blockIdx.x;  // longest causal rows first
    tp.hq = p.heads[blockIdx.y];
    tp.bhq = blockIdx.z * p.Hq + tp.hq;
    tp.bhk = blockIdx.z * p.Hkv + tp.hq / (p.Hq / p.Hkv);
#pragma unroll
    for (int w = 0; w < kConsumers; ++w) {
      tp.i[w] = kConsumers * c + w;
      const int q0 = tp.i[w] * kBQ, q1 = min(q0 + kBQ, p.Nq) - 1;
      const size_t row = (size_t)tp.bhq * p.nq + tp.i[w];
      if (tp.i[w] < p.nq)
        tp.walk[w] = BlockWalk<kDense>::make(p.vis, q0, q1, kBK, kDense ? nullptr : p.lut + row * p.nk,
                                             kDense ? nullptr : p.validCount + row);
      else
        tp.walk[w].n = 0;
    }
    return tp;
  }
  __device__ __forceinline__ bool empty() const {
    return walk[0].n == 0 && walk[1].n == 0;
  }
};

// ---------------------------------------------------------------------------------------------
// Producer: one thread merges both walks and streams Q once, then K and V per union step.

template <class Tr>
__device__ __forceinline__ void loadKV(const Sm90Params<typename Tr::T>& prm, const Pipe<Tr>& pp, int s,
                                       int j, int bhk) {
  mbarArriveExpectTx(pp.fullK(s), Tr::kKTileBytes);
#pragma unroll
  for (int x = 0; x < Tr::kSlabs; ++x)
    tmaLoad3d(pp.k(s) + x * kBK * Tr::kSlabBytes, &prm.kmap, pp.fullK(s), x * Tr::kSlabBytes / Tr::kElemBytes,
              j * kBK, bhk);
}

template <class Tr>
__device__ __forceinline__ void loadV(const Sm90Params<typename Tr::T>& prm, const Pipe<Tr>& pp, int s, int j,
                                      int bhk) {
  mbarArriveExpectTx(pp.fullV(s), Tr::kVTileBytes);
  if constexpr (Tr::kFp8) {
    tmaLoad3d(pp.v(s), &prm.v, pp.fullV(s), j * kBK, 0, bhk);
  } else {
#pragma unroll
    for (int x = 0; x < Tr::D / 64; ++x)
      tmaLoad3d(pp.v(s) + x * kBK * 128, &prm.v, pp.fullV(s), x * 64, j * kBK, bhk);
  }
}

template <class Tr, bool kDense>
__device__ __forceinline__ void produce(const Sm90Params<typename Tr::T>& prm, const Pipe<Tr>& pp,
                                        const TilePair<typename Tr::T, kDense>& tp) {
  const KParams<typename Tr::T>& p = prm.k;
  prefetchTensorMap(&prm.kmap);
  prefetchTensorMap(&prm.v);
  const bool second = tp.i[1] < p.nq;  // an odd tile count leaves the last CTA one tile
  mbarArriveExpectTx(pp.fullQ(), (second ? 2 : 1) * Tr::kQTileBytes);
#pragma unroll
  for (int w = 0; w < kConsumers; ++w)
#pragma unroll
    for (int x = 0; x < Tr::kSlabs; ++x)
      if (w == 0 || second)
        tmaLoad3d(pp.q(w) + x * kBQ * Tr::kSlabBytes, &prm.q, pp.fullQ(), x * Tr::kSlabBytes / Tr::kElemBytes,
                  tp.i[w] * kBQ, tp.bhq);
  int t[kConsumers] = {0, 0}, j[kConsumers];
#pragma unroll
  for (int w = 0; w < kConsumers; ++w) j[w] = tp.walk[w].n > 0 ? tp.walk[w].first() : INT_MAX;
  for (int u = 0;; ++u) {
    const int s = u % Tr::kStages;
    const uint32_t phase = (u / Tr::kStages) & 1;
    StageTag tag;
    tag.j = min(j[0], j[1]);
    tag.mask = 0;
#pragma unroll
    for (int w = 0; w < kConsumers; ++w)
      if (j[w] == tag.j) {
        tag.mask |= 1 << w;
        j[w] = ++t[w] < tp.walk[w].n ? tp.walk[w].advance(j[w], t[w]) : INT_MAX;
      }
    tag.last = j[0] == INT_MAX && j[1] == INT_MAX;
    tag.kScale = Tr::kFp8 ? p.kScale[(size_t)tp.bhk * p.nk + tag.j] : 1.f;
    mbarWait(pp.emptyK(s), phase ^ 1);
    storeTag(pp.tag(s), tag);
    loadKV<Tr>(prm, pp, s, tag.j, tp.bhk);
    mbarWait(pp.emptyV(s), phase ^ 1);
    loadV<Tr>(prm, pp, s, tag.j, tp.bhk);
    if (tag.last) break;
  }
}

// ---------------------------------------------------------------------------------------------
// Consumers: one warpgroup per 64-row query tile.

template <class Tr>
struct ConsumerState {
  float m[2], l[2];
  float acc[Tr::kDT][4];
  uint32_t pf[Tr::kPSteps][4];
  // The block whose P·V is still to issue (or whose V stage is still to release).
  bool pending = false, pendingGemm = false;
  int pendingStage = 0;
  uint32_t pendingPhase = 0;
};

template <class Tr>
__device__ __forceinline__ void issueQK(float (&s)[Tr::kNT][4], int32_t (&si)[Tr::kNT][4], uint32_t sQ,
                                        uint32_t sK) {
  using namespace sm90;
#pragma unroll
  for (int ks = 0; ks < Tr::kQkSteps; ++ks) {
    const uint64_t dq = kMajorDescriptorBytes<kBQ, Tr::kSlabBytes>(sQ, ks * 32);
    const uint64_t dk = kMajorDescriptorBytes<kBK, Tr::kSlabBytes>(sK, ks * 32);
    if constexpr (Tr::kFp8)
      WgmmaS8::run(si, dq, dk, ks > 0);
    else
      WgmmaSS<typename Tr::T, kBK>::run(s, dq, dk, ks > 0);
  }
}

// P·V of one part of the output channels (all of them for 16-bit V).
template <class Tr>
__device__ __forceinline__ void issuePV(ConsumerState<Tr>& st, float (&blk)[Tr::kPvN / 8][4], uint32_t sV,
                                        int part) {
  using namespace sm90;
#pragma unroll
  for (int kk = 0; kk < Tr::kPSteps; ++kk) {
    if constexpr (Tr::kFp8)
      WgmmaE4m3<Tr::kPvN>::run(
          blk, st.pf[kk], kMajorDescriptorBytes<Tr::kPvN, 128>(sV + part * Tr::kPvN * 128, kk * 32), kk > 0);
    else
      WgmmaRS<typename Tr::T, Tr::D>::run(st.acc, st.pf[kk], mnMajorDescriptor<kBK>(sV, kk), 1);
  }
}

template <class Tr>
__device__ __forceinline__ void addPart(ConsumerState<Tr>& st, const float (&blk)[Tr::kPvN / 8][4],
                                        int part) {
#pragma unroll
  for (int dt = 0; dt < Tr::kPvN / 8; ++dt)
#pragma unroll
    for (int e = 0; e < 4; ++e) st.acc[part * (Tr::kPvN / 8) + dt][e] += blk[dt][e];
}

// Softmax of the consumer's own block (scores in s): masks, skip vote, rescale, exponentiate, pack P.
// Returns true when the block's P·V is skipped.
template <class Tr>
__device__ __forceinline__ bool consumerSoftmax(ConsumerState<Tr>& st, float (&s)[Tr::kNT][4], float sc,
                                                bool vote, float lambda, int row0, int nQ, int wg) {
  float rmax[2];
  rowMax(s, rmax);
  rmax[0] *= sc;
  rmax[1] *= sc;
  if (vote && !sm90::barAny(kBarVote + wg, 128, maxRise(rmax, st.m, row0, nQ) + lambda > 0.f)) return true;
  float muse[2];
  rescaleRows(st.m, st.l, st.acc, rmax, muse);
  exponentiate<RowSum::Fp32>(s, muse, sc, Tr::kFp8 ? kFp8POffset : 0.f, st.l);
  if constexpr (Tr::kFp8)
    packPE4m3(s, st.pf);
  else
    packP16<typename Tr::T>(s, st.pf);
  return false;
}

// Finishes the pending block once its first P·V part has completed: the remaining parts (e4m3 V), then
// releases its V stage.
template <class Tr>
__device__ __forceinline__ void releasePending(ConsumerState<Tr>& st, float (&blk)[Tr::kPvN / 8][4],
                                               const Pipe<Tr>& pp) {
  if (!st.pending) return;
  if (!st.pendingGemm) sm90::mbarWait(pp.fullV(st.pendingStage), st.pendingPhase);  // keep the phases in step
  if constexpr (Tr::kFp8) {
    if (st.pendingGemm) {
      addPart(st, blk, 0);
#pragma unroll
      for (int part = 1; part < Tr::kPvParts; ++part) {
        sm90::wgmmaFence();
        issuePV<Tr>(st, blk, pp.v(st.pendingStage), part);
        sm90::wgmmaCommit();
        sm90::wgmmaWait<0>();
        addPart(st, blk, part);
      }
    }
  }
  sm90::mbarArrive(pp.emptyV(st.pendingStage));
  st.pending = false;
}

// Per-consumer constants of the walk.
struct ConsumerCtx {
  int wg, i, n, row0, col0, qRow0, qLast;
  size_t rowIdx;
  float lambda;
  bool skipOn;
};

template <class Tr, bool kDense>
__device__ __forceinline__ void consume(const Sm90Params<typename Tr::T>& prm, const Pipe<Tr>& pp,
                                        const ConsumerCtx& cx, ConsumerState<Tr>& st) {
  using namespace sm90;
  const KParams<typename Tr::T>& p = prm.k;
  const float qScale = Tr::kFp8 && cx.i < p.nq ? p.qScale[cx.rowIdx] : 1.f;
  float blk[Tr::kPvN / 8][4];
  mbarWait(pp.fullQ(), 0);
  int t = 0;
  for (int u = 0;; ++u) {
    const int s = u % Tr::kStages;
    const uint32_t phase = (u / Tr::kStages) & 1;
    mbarWait(pp.fullK(s), phase);
    const StageTag tag = uniformTag(loadTag(pp.tag(s)));
    const bool mine = (tag.mask >> cx.wg) & 1;
    float sc[Tr::kNT][4];
    int32_t si[Tr::kNT][4];
    barSync(kBarTurn + cx.wg, 256);  // our turn on the tensor cores
    wgmmaFence();
    if (mine) issueQK<Tr>(sc, si, pp.q(cx.wg), pp.k(s));
    if (st.pending && st.pendingGemm) {
      mbarWait(pp.fullV(st.pendingStage), st.pendingPhase);
      issuePV<Tr>(st, blk, pp.v(st.pendingStage), 0);
    }
    wgmmaCommit();
    if (!(tag.last && cx.wg == kConsumers - 1)) barArrive(kBarTurn + (cx.wg ^ 1), 256);
    wgmmaWait<0>();
    mbarArrive(pp.emptyK(s));
    releasePending<Tr>(st, blk, pp);
    st.pending = true;
    st.pendingGemm = false;
    st.pendingStage = s;
    st.pendingPhase = phase;
    if (mine) {
      if constexpr (Tr::kFp8) intToFloat(si, sc);
      const float scale = Tr::kFp8 ? p.scaleLog2 * (qScale * tag.kScale) : p.scaleLog2;
      if (!p.vis.fullyVisible(cx.qRow0, cx.qLast, tag.j * kBK, kBK))
        maskFragment(sc, cx.row0, tag.j * kBK + cx.col0, p.vis);
      const bool vote = !kDense && cx.skipOn && skipEligible(t, cx.n, 1);
      // The vote is warpgroup-wide; the shuffle tells the compiler the branch is uniform.
      const bool skip = __shfl_sync(
          0xffffffffu, (int)consumerSoftmax<Tr>(st, sc, scale, vote, cx.lambda, cx.row0, p.Nq, cx.wg), 0);
      st.pendingGemm = !skip;
      if (skip && threadIdx.x % 128 == 0 && p.pvSkipped) p.pvSkipped[cx.rowIdx * p.nk + tag.j] = 1;
      ++t;
    }
    if (tag.last) break;
  }
  if (st.pending && st.pendingGemm) {
    mbarWait(pp.fullV(st.pendingStage), st.pendingPhase);
    wgmmaFence();
    issuePV<Tr>(st, blk, pp.v(st.pendingStage), 0);
    wgmmaCommit();
    wgmmaWait<0>();
  }
  releasePending<Tr>(st, blk, pp);
}

template <class Tr, bool kDense>
__device__ __forceinline__ void consumerTile(const Sm90Params<typename Tr::T>& prm, const Pipe<Tr>& pp,
                                             const TilePair<typename Tr::T, kDense>& tp, int wg) {
  const KParams<typename Tr::T>& p = prm.k;
  const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
  ConsumerCtx cx;
  cx.wg = wg;
  cx.i = wg ? tp.i[1] : tp.i[0];  // constant indices keep the pair in registers
  cx.n = wg ? tp.walk[1].n : tp.walk[0].n;
  cx.qRow0 = cx.i * kBQ;
  cx.qLast = min(cx.qRow0 + kBQ, p.Nq) - 1;
  cx.row0 = cx.qRow0 + warp * 16 + (lane >> 2);
  cx.col0 = 2 * (lane & 3);
  cx.rowIdx = (size_t)tp.bhq * p.nq + cx.i;
  cx.lambda = INFINITY;
  cx.skipOn = false;
  if constexpr (!kDense) {
    const HeadParamsDev hp = p.params[tp.hq];
    cx.lambda = hp.lambda;
    cx.skipOn = !hp.dense && isfinite(hp.lambda);
  }
  ConsumerState<Tr> st;
  st.m[0] = st.m[1] = -INFINITY;
  st.l[0] = st.l[1] = 0.f;
#pragma unroll
  for (int dt = 0; dt < Tr::kDT; ++dt) st.acc[dt][0] = st.acc[dt][1] = st.acc[dt][2] = st.acc[dt][3] = 0.f;
  if (!tp.empty()) {
    if (wg == 1) sm90::barArrive(kBarTurn, 256);  // consumer 0 takes the first turn
    consume<Tr, kDense>(prm, pp, cx, st);
  }
  if (cx.i >= p.nq) return;
  typename Tr::T* gO = p.o + (size_t)tp.bhq * p.Nq * Tr::D;
  const float* vScale = Tr::kFp8 ? p.vScale + (size_t)tp.bhk * Tr::D : nullptr;
  storeRows<typename Tr::T, Tr::kDT>(gO, Tr::D, st.acc, st.l, cx.row0, cx.col0, p.Nq, vScale,
                                     p.emptyRows ? p.emptyRows + tp.bhq : nullptr);
}

template <class Tr, bool kDense>
__device__ __forceinline__ void attention90(const Sm90Params<typename Tr::T>& prm) {
  extern __shared__ unsigned char smemRaw[];
  const Pipe<Tr> pp{((uint32_t)__cvta_generic_to_shared(smemRaw) + 1023u) & ~1023u};
  if (threadIdx.x == 0) {
    sm90::mbarInit(pp.fullQ(), 1);
    for (int s = 0; s < Tr::kStages; ++s) {
      sm90::mbarInit(pp.fullK(s), 1);
      sm90::mbarInit(pp.fullV(s), 1);
      sm90::mbarInit(pp.emptyK(s), 128 * kConsumers);
      sm90::mbarInit(pp.emptyV(s), 128 * kConsumers);
    }
    sm90::fenceBarrierInit();
  }
  __syncthreads();
  const TilePair<typename Tr::T, kDense> tp = TilePair<typename Tr::T, kDense>::make(prm.k);
  // Warp-uniform by construction (a shuffle from lane 0): lets the compiler give each role its own registers.
  const int wg = __shfl_sync(0xffffffffu, (int)threadIdx.x / 128, 0);
  if (wg == 0) {
    sm90::regDealloc<kProducerRegs>();
    if (threadIdx.x == 0 && !tp.empty()) produce<Tr, kDense>(prm, pp, tp);
  } else {
    sm90::regAlloc<kConsumerRegs>();
    consumerTile<Tr, kDense>(prm, pp, tp, wg - 1);
  }
}

#endif  // SPARGE_SM90A_DEVICE

template <class Tr>
__global__ void __launch_bounds__(kThreads90, 1)
    sparge_sparse_attention_sm90(const __grid_constant__ Sm90Params<typename Tr::T> p) {
#ifdef SPARGE_SM90A_DEVICE
  attention90<Tr, false>(p);
#else
  __trap();  // only the sm_90a image is ever launched
#endif
}

template <class Tr>
__global__ void __launch_bounds__(kThreads90, 1)
    sparge_dense_attention_sm90(const __grid_constant__ Sm90Params<typename Tr::T> p) {
#ifdef SPARGE_SM90A_DEVICE
  attention90<Tr, true>(p);
#else
  __trap();
#endif
}

// ---------------------------------------------------------------------------------------------
// Host: TMA descriptors (cuTensorMapEncodeTiled through the runtime's driver entry point, so no libcuda
// link).

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*,
                                 CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
                                 CUtensorMapFloatOOBfill);

EncodeTiled encodeTiled() {
  static EncodeTiled fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    check(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q),
          "cudaGetDriverEntryPointByVersion(cuTensorMapEncodeTiled)");
    if (!f || q != cudaDriverEntryPointSuccess)
      throw Error("CUDA engine", "the driver has no cuTensorMapEncodeTiled (TMA); update the NVIDIA driver");
    return reinterpret_cast<EncodeTiled>(f);
  }();
  return fn;
}

// A [d2][d1][d0] tensor of `elemBytes` elements, boxes of box1 x box0 elements, swizzled per row width.
CUtensorMap tensorMap3d(const void* base, CUtensorMapDataType type, int elemBytes, uint64_t d0, uint64_t d1,
                        uint64_t d2, uint32_t box0, uint32_t box1) {
  CUtensorMap map;
  const cuuint64_t dims[3] = {d0, d1, d2};
  const cuuint64_t strides[2] = {d0 * elemBytes, d0 * d1 * elemBytes};
  const cuuint32_t box[3] = {box0, box1, 1};
  const cuuint32_t elemStrides[3] = {1, 1, 1};
  const CUtensorMapSwizzle sw =
      box0 * elemBytes == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B;
  const CUresult r = encodeTiled()(&map, type, 3, const_cast<void*>(base), dims, strides, box, elemStrides,
                                   CU_TENSOR_MAP_INTERLEAVE_NONE, sw, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                   CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw Error("CUDA engine", "cuTensorMapEncodeTiled failed (error " + std::to_string(int(r)) + ")");
  return map;
}

template <class Tr>
Sm90Params<typename Tr::T> makeSm90Params(const Problem& pr, const AttnArgs& a) {
  Sm90Params<typename Tr::T> p;
  p.k = makeKParams<typename Tr::T>(pr, a);
  const uint64_t bhq = (uint64_t)pr.B * pr.Hq, bhk = (uint64_t)pr.B * pr.Hkv, D = Tr::D;
  if constexpr (Tr::kFp8) {
    const auto u8 = CU_TENSOR_MAP_DATA_TYPE_UINT8;
    p.q = tensorMap3d(p.k.q, u8, 1, D, (uint64_t)pr.nq * kBQ, bhq, D, kBQ);
    p.kmap = tensorMap3d(p.k.k, u8, 1, D, (uint64_t)pr.nk * kBK, bhk, D, kBK);
    p.v = tensorMap3d(p.k.v, u8, 1, (uint64_t)fp8VTokens(pr.Nkv), D, bhk, kBK, D);
  } else {
    const auto t = std::is_same_v<typename Tr::T, __half> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                          : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    p.q = tensorMap3d(p.k.q, t, 2, D, (uint64_t)pr.Nq, bhq, 64, kBQ);
    p.kmap = tensorMap3d(p.k.k, t, 2, D, (uint64_t)pr.Nkv, bhk, 64, kBK);
    p.v = tensorMap3d(p.k.v, t, 2, D, (uint64_t)pr.Nkv, bhk, 64, kBK);
  }
  return p;
}

int64_t gSm90Launches = 0;

template <class Tr>
void launch90(const Problem& pr, const AttnArgs& a, bool dense, cudaStream_t s) {
  const Sm90Params<typename Tr::T> kp = makeSm90Params<Tr>(pr, a);
  dim3 grid((pr.nq + kConsumers - 1) / kConsumers, pr.nHeads, pr.B);
  auto kernel = dense ? sparge_dense_attention_sm90<Tr> : sparge_sparse_attention_sm90<Tr>;
  static bool attrSet[2] = {false, false};
  if (!attrSet[dense]) {
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Tr::kSmemBytes),
          "cudaFuncSetAttribute(attention sm90)");
    attrSet[dense] = true;
  }
  kernel<<<grid, kThreads90, Tr::kSmemBytes, s>>>(kp);
  checkLaunch(dense ? "sparge_dense_attention_sm90" : "sparge_sparse_attention_sm90");
  ++gSm90Launches;
}

template <typename T, Numerics N>
void launchHeadDim90(const Problem& p, const AttnArgs& a, bool dense, cudaStream_t s) {
  if (p.D == 64)
    launch90<Sm90Traits<T, 64, N>>(p, a, dense, s);
  else
    launch90<Sm90Traits<T, 128, N>>(p, a, dense, s);
}

}  // namespace

bool attentionSm90Selected(const Problem& p, core::Numerics n) {
  const char* env = std::getenv("SPARGE_ATTN_KERNEL");
  if (env && std::strcmp(env, "sm80") == 0) return false;
  if (p.BQ != kBQ || p.BK != kBK || (p.D != 64 && p.D != 128)) return false;
  if (n == Numerics::Int8Fp16) return false;  // fp16-accumulated P·V: the mma.sync family
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
  if (a.numerics == Numerics::Int8Fp16)
    throw Error("CUDA engine", "the Hopper kernel has no int8-fp16 numerics (the mma.sync family runs it)");
  const bool fp8 = a.numerics == Numerics::Int8Fp8;
  if (t == ElemType::F16) {
    if (fp8)
      launchHeadDim90<__half, Numerics::Int8Fp8>(p, a, dense, s);
    else
      launchHeadDim90<__half, Numerics::None>(p, a, dense, s);
  } else {
    if (fp8)
      launchHeadDim90<__nv_bfloat16, Numerics::Int8Fp8>(p, a, dense, s);
    else
      launchHeadDim90<__nv_bfloat16, Numerics::None>(p, a, dense, s);
  }
}

}  // namespace sparge::cuda

// Stage 2 on Hopper (sm_90a) for the 64x128 geometry (and 128x64, below), with FlashAttention-3's structure:
// a CTA holds three (four for int8-fp8 at D 64) adjacent 64-row query tiles, one per consumer warpgroup (each
// with its own LUT row), and a producer warp that loads K and V blocks with TMA into a multi-stage
// shared-memory pipeline guarded by mbarriers. The producer walks the sorted union of the tiles' LUT rows;
// every stage carries a record of its step (key block, which consumers need it, the block's K scale, whether
// it is the last), so one load serves several tiles when their rows agree (dense attention, and neighbouring
// rows of real data) and the consumers never read the LUT (its loads would sit on their critical path). Where
// the rows visit few blocks, a CTA instead splits the stages into one ring per tile, each streamed by its own
// producer thread (splitWalks). In fp16/bf16 at D 64 each consumer issues Q·Kᵀ of its block with P·V of its
// previous block, and its row maxima, PV-skip vote and softmax run beside that P·V; elsewhere registers are
// spent on more consumers instead, each block's P·V follows its own softmax (kPvBesideQk), and the other
// consumers keep the tensor cores busy meanwhile. The consumers do not take turns on the tensor cores (FA3's
// ping-pong): with two consumers and the P·V overlap inside each, turns measured no faster in dense walks and
// 2-8 % slower in sparse ones. Register reallocation gives each consumer 160 registers (112 with four).
// Numerics: fp16/bf16 exact (wgmma m64n128k16, P·V m64nDk16 with V transposed by the descriptor), and
// int8-fp8 (wgmma s8 m64n128k32, P rounded to e4m3, P·V e4m3 m64nDk32 into a fresh per-block fp32 buffer).
// The 128x64 geometry (fp16/bf16) runs the same kernel with 64-key blocks (wgmma m64n64k16 for Q·Kᵀ): a CTA
// holds the two 64-row halves of one LUT row's 128-row query block, in two consumers of 240 registers with
// the P·V overlap, which walk the same blocks and vote on PV skips together (each half posts its answer after
// its row maxima and collects the other's just before the block's P·V).
// Masks, the PV-skip vote (per query tile), empty rows and the output go through the shared parts. Only the
// sm_90a image has a body; other images trap (the launcher never selects them).
#include <cuda.h>
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include "attention/attention_params.cuh"
#include "common/cuda_util.h"
#include "common/device_common.cuh"
#include "common/launch.h"
#include "attention/parts/block_walk.cuh"
#include "attention/parts/epilogue.cuh"
#include "attention/sm90/hopper_sync.cuh"
#include "attention/parts/online_softmax.cuh"
#include "attention/sm90/smem_layout_sm90.h"
#include "sparge/core/error.h"
#include "attention/sm90/tma_map.h"
#include "attention/sm90/wgmma_sm90.cuh"

// Only the sm_90a pass compiles the kernel bodies; the other passes would warn about the constants they use.
#pragma nv_diag_suppress 177

namespace sparge::cuda {
namespace {

using core::Numerics;

constexpr int kBQ = 64;  // query rows of a consumer's tile (wgmma m64)
constexpr int kProducerRegs = 24;
// Named barriers of the skip vote: a warpgroup's own meeting is kBarVote + consumer (1 .. consumers); the
// two halves of a 128x64 query block post their votes at kBarVote + consumers + 2 * (block's step % 2) +
// half (postVote / collectVote).
constexpr int kBarVote = 1;

// BK_: keys of a block. 128: the 64x128 geometry, one LUT row per 64-row tile. 64: the 128x64 geometry
// (fp16/bf16 only), whose LUT rows cover 128 query rows: the CTA's two consumers hold the two halves of one
// row's query block, walk the same blocks and vote on PV skips together.
template <typename T_, int D_, Numerics N_, bool kDense_, int BK_ = 128>
struct Sm90Traits {
  using T = T_;  // input and output element type
  static constexpr int D = D_;
  static constexpr bool kDense = kDense_;  // the dense launch (every visible block, every tile on each)
  static constexpr bool kFp8 = N_ == Numerics::Int8Fp8;
  static constexpr int kBK = BK_;
  static_assert(kBK == 128 || (kBK == 64 && !kFp8), "64x128 in every numerics, 128x64 in fp16/bf16");
  static constexpr int kTilesPerRow = kBK == 64 ? 2 : 1;  // consumer tiles sharing a LUT row
  // Visited blocks at the end of a row that are never PV-skipped (docs/method.md: a 128-row diagonal spans
  // two 64-key blocks).
  static constexpr int kTail = kTilesPerRow;
  // Whether a consumer issues its pending block's P·V beside its next block's Q·Kᵀ (FlashAttention-3's
  // intra-warpgroup overlap): only fp16/bf16 at D 64. The softmax, not the tensor cores, bounds these
  // kernels, and the overlap holds O, the P·V block buffer (e4m3) or P (16-bit), and the scores at once
  // (up to 208 registers at D 128): more consumers with fewer registers and no overlap, each block's P·V
  // right after its own softmax and the other consumers' wgmmas filling the tensor cores meanwhile, keep
  // more warps of softmax in flight and measured faster (H100, 16K and 32K, every density; kernels/NOTES.md
  // v15): at D 128 three consumers of 160 registers against two of 240 with the overlap, int8-fp8 10-16 %,
  // fp16 2-10 %; at int8-fp8 D 64 four of 112 against three of 160 with the overlap, 8-16 %. fp16/bf16 D
  // 64 keeps three with the overlap (four of 112 spill 516 bytes there).
  static constexpr bool kPvBesideQk = (D == 64 && !kFp8) || kBK == 64;
  // Whether the walk holds two copies of a block's softmax: one for blocks whose keys are all visible, with
  // no mask and (int8-fp8) the row maxima taken from the integer scores, so that the 64 conversions to float
  // leave the path to the maxima and ptxas places them among the exponentials; one for the blocks a mask
  // cuts. Otherwise one copy checks at run time (and still takes integer maxima for visible blocks).
  // Measured (H100, 16K and 32K, int8-fp8 against one checking copy): two copies 6-9 % faster in D 128
  // sparse walks (32K full rows 20.1-20.4 against 21.1-21.3 ms) and at D 64, one copy faster in the D 128
  // dense walk (32K 17.4-18.4 against 19.2-19.3 ms); fp16/bf16 moved within ±3 % either way, so they keep
  // one copy.
  static constexpr bool kTwoSoftmaxCopies = kFp8 && !(kDense && D == 128);
  // Consumer warpgroups (query tiles) of a CTA. 128x64: the two halves of one LUT row's query block; their
  // 64-key blocks (scores 32 registers) leave room for the P·V overlap in 240 registers each.
  static constexpr int kConsumers = kBK == 64 ? 2 : D == 64 && kFp8 ? 4 : 3;
  static constexpr int kThreads = 128 * (1 + kConsumers);  // and the producer warpgroup
  static constexpr int kConsumerRegs = kConsumers == 4 ? 112 : kConsumers == 2 ? 240 : 160;
  // The launch gives the CTA the register file over its threads (in steps of 8); a consumer's setmaxnreg.inc
  // waits until the registers it asks for are free, so asking for more than the producer leaves hangs.
  static_assert(kProducerRegs + kConsumers * kConsumerRegs <= (1 + kConsumers) * (65536 / kThreads / 8 * 8),
                "the registers the launch gives the CTA");
  static constexpr int kElemBytes = kFp8 ? 1 : 2;  // Q and K elements
  static constexpr int kQkRowBytes = D * kElemBytes;
  static constexpr int kSlabBytes = kQkRowBytes < 128 ? kQkRowBytes : 128;  // one TMA box row, one swizzle
  static constexpr int kSlabs = kQkRowBytes / kSlabBytes;
  static constexpr int kQTileBytes = kBQ * kQkRowBytes;
  static constexpr int kKTileBytes = kBK * kQkRowBytes;
  static constexpr int kVTileBytes = kFp8 ? D * kBK : kBK * D * 2;  // e4m3 [D][keys] or 16-bit [keys][D]
  // The dense walk: 2 stages of 64 KB (fp16 D 128) measured faster than 3 (kernels/NOTES.md, v8e), 4 for
  // smaller tiles. Sparse walks, where each consumer waits for and releases every stage in order, also those
  // of blocks only other tiles visit, take as many stages as shared memory holds (up to 8): the deeper
  // the pipeline, the further one tile's walk may run ahead of the other's.
  static constexpr int kStageBytes = kKTileBytes + kVTileBytes;
  static constexpr int kSparseStages = (227 * 1024 - kConsumers * kQTileBytes - 2048) / kStageBytes;
  static constexpr int kStages =
      kDense ? (kStageBytes > 32768 ? 2 : 4) : (kSparseStages < 8 ? kSparseStages : 8);
  // A sparse CTA whose tiles visit less than this share of their visible blocks splits the stages into one
  // ring per tile (splitWalks): each consumer then walks only its own blocks, never waiting for or passing
  // the other tiles', at the price of loading a block several visit more than once. Split against union,
  // random masks, H100, 16K and 32K (kernels/NOTES.md, v13 to v15):
  //   int8-fp8 D 128   3-6 % faster at densities <= 0.3, 1 % slower at 0.5, 4-7 % at 0.8 and full rows
  //                    (6 stages: rings of 2); with the integer row maxima (32K, two passes): 6-8 % faster
  //                    at 0.35, 4-6 % at 0.5, 3 % slower at 0.7, hence 0.6;
  //   fp16/bf16 D 64   6-14 % faster at <= 0.5, -2..+5 % at 0.8, slower at full rows;
  //   int8-fp8 D 64    5-8 % faster at <= 0.3, even at 0.5, 4 % slower at 0.8, 1-2 % at full rows (with
  //                    the exponentials after the P·V wait; with them beside it, never faster);
  //   fp16/bf16 D 128  2 stages, too few for three rings.
  // 128x64: the consumers share their LUT row, so the union is every tile's walk and splitting would load
  // each block twice.
  static constexpr bool kUnionOnly = kDense || kTilesPerRow > 1 || kStages < 2 * kConsumers;
  static constexpr float kSplitBelow = kUnionOnly ? 0.f : kFp8 && D == 128 ? 0.6f : 0.7f;
  static constexpr bool kSplittable = kSplitBelow > 0.f;
  static constexpr int kQkSteps = kQkRowBytes / 32;  // wgmma k-steps of 32 bytes
  static constexpr int kPSteps = kFp8 ? kBK / 32 : kBK / 16;
  static constexpr int kNT = kBK / 8, kDT = D / 8;
  // Q tiles, K stages, V stages (all 1024-byte aligned), the barriers, then one 16-byte step record a stage.
  static constexpr int kOffK = kConsumers * kQTileBytes;
  static constexpr int kOffV = kOffK + kStages * kKTileBytes;
  static constexpr int kOffBar = kOffV + kStages * kVTileBytes;
  static constexpr int kQBars = kSplittable ? kConsumers : 1;  // one Q barrier a ring
  static constexpr int kBarBytes = 8 * (kQBars + 4 * kStages);
  static constexpr int kOffStep = (kOffBar + kBarBytes + 15) / 16 * 16;
  // Two sets of vote words per LUT row (one word per warpgroup voting on it), used in turns.
  static constexpr int kVoteSetBytes = 4 * kTilesPerRow;
  static constexpr int kOffVote = kOffStep + 16 * kStages;
  static constexpr int kSmemBytes = kOffVote + 8 * kConsumers + 1024;  // + alignment slack
  static_assert(kSmemBytes <= 227 * 1024, "fits the shared memory of an sm_90 CTA");
  static_assert(kQTileBytes % 1024 == 0 && kKTileBytes % 1024 == 0 && kVTileBytes % 1024 == 0,
                "aligned tiles");
};

template <typename T>
struct Sm90Params {
  KParams<T> k;
  CUtensorMap q, kmap, v;
  float splitBelow;  // Tr::kSplitBelow (SPARGE_SM90_SPLIT_BELOW overrides it, for measuring)
};

#ifdef SPARGE_SM90A_DEVICE

using namespace sm90;

// A walk's position in its ring: stage and phase parity.
struct StageCursor {
  int s = 0;
  uint32_t phase = 0;
};

// Shared-memory addresses of the pipeline, as one walk sees them: its stages are first .. first + ring - 1
// (all of them for the union walk; one tile's ring in split walks), numbered from 0, and its Q arrives on
// barrier qBar.
template <class Tr>
struct Pipe {
  uint32_t base;
  int first = 0, ring = Tr::kStages, qBar = 0;

  // Tile w's view: its own ring and Q barrier when the CTA splits, else the whole pipeline.
  __device__ __forceinline__ Pipe walkOf(int w, bool split) const {
    constexpr int kRing = Tr::kStages / Tr::kConsumers;
    return split ? Pipe{base, w * kRing, kRing, w} : *this;
  }
  __device__ __forceinline__ uint32_t q(int c) const { return base + c * Tr::kQTileBytes; }
  __device__ __forceinline__ uint32_t k(int s) const {
    return base + Tr::kOffK + (first + s) * Tr::kKTileBytes;
  }
  __device__ __forceinline__ uint32_t v(int s) const {
    return base + Tr::kOffV + (first + s) * Tr::kVTileBytes;
  }
  __device__ __forceinline__ uint32_t fullQ(int bar) const { return base + Tr::kOffBar + 8 * bar; }
  __device__ __forceinline__ uint32_t fullQ() const { return fullQ(qBar); }
  __device__ __forceinline__ uint32_t fullK(int s) const {
    return base + Tr::kOffBar + 8 * (Tr::kQBars + first + s);
  }
  __device__ __forceinline__ uint32_t fullV(int s) const { return fullK(s) + 8 * Tr::kStages; }
  __device__ __forceinline__ uint32_t emptyK(int s) const { return fullK(s) + 16 * Tr::kStages; }
  __device__ __forceinline__ uint32_t emptyV(int s) const { return fullK(s) + 24 * Tr::kStages; }
  __device__ __forceinline__ uint32_t step(int s) const { return base + Tr::kOffStep + 16 * (first + s); }
  // The walk's steps fill the ring's stages in turn; each round flips the phase parity.
  __device__ __forceinline__ int after(int s) const { return s + 1 == ring ? 0 : s + 1; }
  __device__ __forceinline__ void advance(StageCursor& c) const {
    c.s = after(c.s);
    c.phase ^= c.s == 0;
  }
  // The vote words of the CTA's LUT row r (each consumer's own row in 64x128).
  __device__ __forceinline__ uint32_t vote(int r) const {
    return base + Tr::kOffVote + 2 * Tr::kVoteSetBytes * r;
  }
};

// The value of a per-tile array for tile w: constant indices keep such arrays in registers (a runtime index
// put them in local memory).
template <class A, int N>
__device__ __forceinline__ A pick(const A (&a)[N], int w) {
  A r = a[0];
#pragma unroll
  for (int x = 1; x < N; ++x)
    if (w == x) r = a[x];
  return r;
}

// The CTA's N adjacent 64-row query tiles and their walks, computed the same way by every thread. Tile i
// lies in LUT row i / Tr::kTilesPerRow.
template <class Tr, bool kDense>
struct CtaTiles {
  static constexpr int N = Tr::kConsumers;
  int i[N];
  BlockWalk<kDense> walk[N];
  int bhq, bhk, hq, tiles;  // tiles: 64-row query tiles of a head

  __device__ __forceinline__ static CtaTiles make(const KParams<typename Tr::T>& p) {
    CtaTiles tp;
    const int c = gridDim.x - 1 - blockIdx.x;  // longest causal rows first
    tp.hq = p.heads[blockIdx.y];
    tp.bhq = blockIdx.z * p.Hq + tp.hq;
    tp.bhk = blockIdx.z * p.Hkv + tp.hq / (p.Hq / p.Hkv);
    tp.tiles = (p.Nq + kBQ - 1) / kBQ;
#pragma unroll
    for (int w = 0; w < N; ++w) {
      tp.i[w] = N * c + w;
      const int q0 = tp.i[w] * kBQ, q1 = min(q0 + kBQ, p.Nq) - 1;
      const size_t row = tp.lutRow(p, w);
      if (tp.walks(p, w))
        tp.walk[w] = BlockWalk<kDense>::make(p.vis, q0, q1, Tr::kBK, kDense ? nullptr : p.lut + row * p.nk,
                                             kDense ? nullptr : p.validCount + row);
      else
        tp.walk[w].n = 0;
    }
    return tp;
  }
  // Whether tile w walks: every tile of the head in dense walks; in sparse ones also the padding tile of a
  // 128-row block whose second half lies past the last query, which walks its row with its partner (it has
  // no rows that vote and stores nothing) so that both halves meet at every vote.
  __device__ __forceinline__ bool walks(const KParams<typename Tr::T>& p, int w) const {
    const int x = pick(i, w);
    return kDense ? x < tiles : x / Tr::kTilesPerRow < p.nq;
  }
  // Index of tile w's LUT row over all heads (its validCount, PV-skip map row and int8 Q scale).
  __device__ __forceinline__ size_t lutRow(const KParams<typename Tr::T>& p, int w) const {
    return (size_t)bhq * p.nq + pick(i, w) / Tr::kTilesPerRow;
  }
  __device__ __forceinline__ int n(int w) const {
    int x[N];
#pragma unroll
    for (int v = 0; v < N; ++v) x[v] = walk[v].n;
    return pick(x, w);
  }
  __device__ __forceinline__ bool empty() const {
    bool any = false;
#pragma unroll
    for (int w = 0; w < N; ++w) any |= walk[w].n > 0;
    return !any;
  }
  // The tiles as the producer of tile w's ring sees them in split walks: the other tiles' walks empty.
  __device__ __forceinline__ CtaTiles only(int w) const {
    CtaTiles tp = *this;
#pragma unroll
    for (int x = 0; x < N; ++x)
      if (x != w) tp.walk[x].n = 0;
    return tp;
  }
};

// One step of the union of the tiles' walks: its key block and which tiles visit it (bit w: tile w).
struct UnionStep {
  int j;
  int mask;
};

// The sorted union of the tiles' block walks, run by the producer; each step goes into the next stage of the
// ring, with the record the consumers walk by (StepRecord).
template <class Tr, bool kDense>
struct UnionCursor {
  static constexpr int N = Tr::kConsumers;
  BlockWalk<kDense> walk[N];
  int t[N], j[N];

  __device__ __forceinline__ explicit UnionCursor(const CtaTiles<Tr, kDense>& tp) {
#pragma unroll
    for (int w = 0; w < N; ++w) {
      walk[w] = tp.walk[w];
      t[w] = 0;
      j[w] = walk[w].n > 0 ? walk[w].first() : INT_MAX;
    }
  }
  __device__ __forceinline__ int nextBlock() const {
    int m = j[0];
#pragma unroll
    for (int w = 1; w < N; ++w) m = min(m, j[w]);
    return m;
  }
  __device__ __forceinline__ bool done() const {
    return nextBlock() == INT_MAX;
  }
  // The next step (the caller checks done() first).
  __device__ __forceinline__ UnionStep next() {
    UnionStep st{nextBlock(), 0};
#pragma unroll
    for (int w = 0; w < N; ++w)
      if (j[w] == st.j) {
        st.mask |= 1 << w;
        j[w] = ++t[w] < walk[w].n ? walk[w].advance(j[w], t[w]) : INT_MAX;
      }
    return st;
  }
};

// ---------------------------------------------------------------------------------------------
// Producer: one thread merges the tiles' walks and streams Q once, then K and V per union step; in split
// walks one thread per tile streams its Q and its own blocks into its ring.

template <class Tr>
__device__ __forceinline__ void loadKV(const Sm90Params<typename Tr::T>& prm, const Pipe<Tr>& pp, int s,
                                       int j, int bhk) {
  mbarArriveExpectTx(pp.fullK(s), Tr::kKTileBytes);
#pragma unroll
  for (int x = 0; x < Tr::kSlabs; ++x)
    tmaLoad3d(pp.k(s) + x * Tr::kBK * Tr::kSlabBytes, &prm.kmap, pp.fullK(s),
              x * Tr::kSlabBytes / Tr::kElemBytes, j * Tr::kBK, bhk);
}

template <class Tr>
__device__ __forceinline__ void loadV(const Sm90Params<typename Tr::T>& prm, const Pipe<Tr>& pp, int s, int j,
                                      int bhk) {
  mbarArriveExpectTx(pp.fullV(s), Tr::kVTileBytes);
  if constexpr (Tr::kFp8) {
    tmaLoad3d(pp.v(s), &prm.v, pp.fullV(s), j * Tr::kBK, 0, bhk);
  } else {
#pragma unroll
    for (int x = 0; x < Tr::D / 64; ++x)
      tmaLoad3d(pp.v(s) + x * Tr::kBK * 128, &prm.v, pp.fullV(s), x * 64, j * Tr::kBK, bhk);
  }
}

template <class Tr, bool kDense>
__device__ __forceinline__ void produce(const Sm90Params<typename Tr::T>& prm, const Pipe<Tr>& pp,
                                        const CtaTiles<Tr, kDense>& tp, bool split) {
  const KParams<typename Tr::T>& p = prm.k;
  const float* kScale = Tr::kFp8 ? p.kScale + (size_t)tp.bhk * p.nk : nullptr;
  prefetchTensorMap(&prm.kmap);
  prefetchTensorMap(&prm.v);
  // Union walk: every tile of the CTA (the last CTA may have fewer); split walk: the tile with blocks.
  bool load[Tr::kConsumers];
  int tiles = 0;
#pragma unroll
  for (int w = 0; w < Tr::kConsumers; ++w) {
    load[w] = split ? tp.walk[w].n > 0 : tp.walks(p, w);
    tiles += load[w];
  }
  mbarArriveExpectTx(pp.fullQ(), tiles * Tr::kQTileBytes);
#pragma unroll
  for (int w = 0; w < Tr::kConsumers; ++w)
#pragma unroll
    for (int x = 0; x < Tr::kSlabs; ++x)
      if (load[w])
        tmaLoad3d(pp.q(w) + x * kBQ * Tr::kSlabBytes, &prm.q, pp.fullQ(), x * Tr::kSlabBytes / Tr::kElemBytes,
                  tp.i[w] * kBQ, tp.bhq);
  UnionCursor<Tr, kDense> cur(tp);
  for (StageCursor at; !cur.done(); pp.advance(at)) {
    const UnionStep st = cur.next();
    const int s = at.s;
    const uint32_t phase = at.phase;
    const float kScaleJ = Tr::kFp8 ? kScale[st.j] : 1.f;
    mbarWait(pp.emptyK(s), phase ^ 1);  // every consumer has read the stage's previous record, too
    // The record goes out with K: the arrive on fullK(s) in loadKV releases it to the consumers.
    stShared16(pp.step(s), st.j, st.mask, __float_as_int(kScaleJ), cur.done());
    loadKV<Tr>(prm, pp, s, st.j, tp.bhk);
    mbarWait(pp.emptyV(s), phase ^ 1);
    loadV<Tr>(prm, pp, s, st.j, tp.bhk);
  }
}

// ---------------------------------------------------------------------------------------------
// Consumers: one warpgroup per 64-row query tile.

// A thread's row maxima and sums before a block's softmax (undoIfSkipped).
struct RowsBefore {
  float m[2], l[2];
};
template <class Tr>
struct ConsumerState {
  float m[2], l[2];
  float acc[Tr::kDT][4];
  uint32_t pf[Tr::kPSteps][4];
  // The block whose P·V is still to issue (or whose V stage is still to release); with e4m3 P·V also the
  // rescale of O that its softmax deferred to the add of its block.
  float pendingAlpha[2];
  bool pending = false, pendingGemm = false;
  int pendingStage = 0;
  uint32_t pendingPhase = 0;
  // 128x64: the pending block's vote, posted and not yet collected (resolveVote), with what a skip undoes.
  bool voteOpen = false;
  uint32_t openWord = 0;
  int openBar = 0, openJ = 0;
  RowsBefore openBefore;
};

template <class Tr>
__device__ __forceinline__ void issueQK(float (&s)[Tr::kNT][4], int32_t (&si)[Tr::kNT][4], uint32_t sQ,
                                        uint32_t sK) {
  using namespace sm90;
  const uint64_t dq0 = kMajorDescriptorBytes<kBQ, Tr::kSlabBytes>(sQ, 0);
  const uint64_t dk0 = kMajorDescriptorBytes<Tr::kBK, Tr::kSlabBytes>(sK, 0);
#pragma unroll
  for (int ks = 0; ks < Tr::kQkSteps; ++ks) {
    const uint64_t dq = advanceDescriptor(dq0, kMajorStepBytes<kBQ, Tr::kSlabBytes>(ks * 32));
    const uint64_t dk = advanceDescriptor(dk0, kMajorStepBytes<Tr::kBK, Tr::kSlabBytes>(ks * 32));
    if constexpr (Tr::kFp8)
      WgmmaS8::run(si, dq, dk, ks > 0);
    else
      WgmmaSS<typename Tr::T, Tr::kBK>::run(s, dq, dk, ks > 0);
  }
}

// P·V of the pending block: e4m3 into a fresh fp32 block buffer (scaleD = 0 on the first k-step), 16-bit
// straight into O (`blk` unused).
template <class Tr>
__device__ __forceinline__ void issuePV(ConsumerState<Tr>& st, float (&blk)[Tr::kDT][4], uint32_t sV) {
  using namespace sm90;
  const uint64_t dv0 =
      Tr::kFp8 ? kMajorDescriptorBytes<Tr::D, 128>(sV, 0) : mnMajorDescriptor<Tr::kBK>(sV, 0);
#pragma unroll
  for (int kk = 0; kk < Tr::kPSteps; ++kk) {
    if constexpr (Tr::kFp8)
      WgmmaE4m3<Tr::D>::run(blk, st.pf[kk], advanceDescriptor(dv0, kMajorStepBytes<Tr::D, 128>(kk * 32)),
                            kk > 0);
    else  // k-step kk of 16 keys: two 8-key groups of kSwizzleAtomBytes (mnMajorDescriptor)
      WgmmaRS<typename Tr::T, Tr::D>::run(st.acc, st.pf[kk],
                                          advanceDescriptor(dv0, kk * 2u * kSwizzleAtomBytes), 1);
  }
}

// Q·Kᵀ of the consumer's block and P·V of its pending one, issued back to back (Q·Kᵀ first, each its own
// group). Returns once Q·Kᵀ is complete, with the P·V (into O for 16-bit P, into `blk` for e4m3) still
// running, so that the softmax of this block overlaps the P·V of the previous one (FlashAttention-3's
// intra-warpgroup overlap). Returns whether a P·V was issued; the caller waits for it (wgmmaWait<0>) before
// it touches O, `blk` or P. Without Tr::kPvBesideQk nothing is pending here and Q·Kᵀ goes out alone.
// `decidePending` runs once Q·Kᵀ is on its way and may still cancel the pending P·V (128x64: the vote
// across both halves, collected while Q·Kᵀ runs).
template <class Tr, class DecidePending>
__device__ __forceinline__ bool issueOwnStep(ConsumerState<Tr>& st, const Pipe<Tr>& pp, int s, int wg,
                                             float (&sc)[Tr::kNT][4], int32_t (&si)[Tr::kNT][4],
                                             float (&blk)[Tr::kDT][4], DecidePending&& decidePending) {
  using namespace sm90;
  constexpr bool kLateDecision = Tr::kTilesPerRow > 1;
  if constexpr (!kLateDecision)
    if (Tr::kPvBesideQk && st.pending && st.pendingGemm) mbarWait(pp.fullV(st.pendingStage), st.pendingPhase);
  wgmmaFence();
  issueQK<Tr>(sc, si, pp.q(wg), pp.k(s));
  wgmmaCommit();
  decidePending();
  const bool pv = Tr::kPvBesideQk && st.pending && st.pendingGemm;
  // One branch per case from issue to wait: ptxas then sees on every path which group is still running (with
  // two branches on the same condition it also follows the impossible mix and serialises the wgmmas).
  if (pv) {
    if constexpr (kLateDecision) mbarWait(pp.fullV(st.pendingStage), st.pendingPhase);
    issuePV<Tr>(st, blk, pp.v(st.pendingStage));
    wgmmaCommit();
    wgmmaWait<1>();
  } else {
    wgmmaWait<0>();
  }
  if constexpr (Tr::kFp8)
    fenceRegs(si);
  else
    fenceRegs(sc);
  return pv;
}

// After the pending block's P·V completed: an e4m3 block is added to O with the rescale its softmax deferred.
template <class Tr>
__device__ __forceinline__ void addPendingBlock(ConsumerState<Tr>& st, bool pv,
                                                const float (&blk)[Tr::kDT][4]) {
  if constexpr (Tr::kFp8)
    if (pv) addBlockRescaled(st.acc, st.pendingAlpha, blk);
}

// What the softmax of a block knows of its keys' visibility: all visible, some masked, or checked at run time.
enum class BlockKeys { AllVisible, SomeMasked, Checked };

// Whether a block's PV-skip vote runs, the shared-memory word it meets in and this warp's byte of it.
struct BlockVote {
  bool on;
  uint32_t word, byte;
  int bar;         // the named barrier the voters meet at (128x64: this warpgroup's post)
  int partnerBar;  // 128x64: the other half's post
};

// Does any row of the tile rise above its running max by more than -λ (the PV-skip vote's question; the only
// quantized numerics of this family is int8-fp8, and its padded rows vote)? Row maxima in base-2 units.
template <class Tr>
__device__ __forceinline__ bool rowsRise(const ConsumerState<Tr>& st, const float (&rmax)[2], float lambda,
                                         int row0, int nQ) {
  return maxRise<Tr::kFp8>(rmax, st.m, row0, nQ) + lambda > 0.f;
}

// The block's softmax: new running max (alpha) and the exponentials in place.
template <class Tr>
__device__ __forceinline__ void exponentiateBlock(ConsumerState<Tr>& st, float (&s)[Tr::kNT][4],
                                                  const float (&rmax)[2], float sc, float (&alpha)[2]) {
  float muse[2];
  updateRowMax(st.m, st.l, rmax, muse, alpha);
  exponentiate<RowSum::Fp32>(s, muse, sc, Tr::kFp8 ? kFp8POffset : 0.f, st.l);
}

// Both orders below run the exponentials also for a skipped block and then undo them, so that no branch on
// the skip splits the softmax (with one, int8-fp8 measured ~5 % slower). That is exact: a skip means that no
// row's max rose (its rise is at most -λ < 0), so the max and alpha stay and only the row sums took the
// block; they go back, with the max (rows outside the tile, which do not vote, may have moved it).
template <class Tr>
__device__ __forceinline__ RowsBefore rowsBefore(const ConsumerState<Tr>& st) {
  return RowsBefore{{st.m[0], st.m[1]}, {st.l[0], st.l[1]}};
}
template <class Tr>
__device__ __forceinline__ void undoIfSkipped(ConsumerState<Tr>& st, const RowsBefore& b, bool skip) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    st.m[r] = skip ? b.m[r] : st.m[r];
    st.l[r] = skip ? b.l[r] : st.l[r];
  }
}

// int8-fp8: the softmax, then the vote (the warpgroup's only meeting). Returns the skip.
template <class Tr>
__device__ __forceinline__ bool softmaxThenVote(ConsumerState<Tr>& st, float (&s)[Tr::kNT][4],
                                                const float (&rmax)[2], float sc, const BlockVote& vote,
                                                float lambda, int row0, int nQ, float (&alpha)[2]) {
  const bool rises = vote.on && rowsRise(st, rmax, lambda, row0, nQ);
  const RowsBefore before = rowsBefore(st);
  exponentiateBlock<Tr>(st, s, rmax, sc, alpha);
  if (!vote.on || sm90::warpgroupAny(vote.word, vote.byte, vote.bar, rises)) return false;
  // Undone on this branch, as measured (a select on the skip compiles to other code here).
  undoIfSkipped(st, before, true);
  return true;
}

// fp16/bf16: the vote (or, without one, a plain meeting of the warpgroup: ptxas then keeps the exponentials
// after the wait) before the wait for the previous P·V; the softmax after it (softmaxAfterVote).
template <class Tr>
__device__ __forceinline__ bool voteFirst(const ConsumerState<Tr>& st, const float (&rmax)[2],
                                          const BlockVote& vote, float lambda, int row0, int nQ, int wg) {
  if (!vote.on) {
    sm90::barSync(kBarVote + wg, 128);
    return false;
  }
  return !sm90::warpgroupAny(vote.word, vote.byte, vote.bar, rowsRise(st, rmax, lambda, row0, nQ));
}
template <class Tr>
__device__ __forceinline__ void softmaxAfterVote(ConsumerState<Tr>& st, float (&s)[Tr::kNT][4],
                                                 const float (&rmax)[2], float sc, bool skip,
                                                 float (&alpha)[2]) {
  const RowsBefore before = rowsBefore(st);
  exponentiateBlock<Tr>(st, s, rmax, sc, alpha);
  undoIfSkipped(st, before, skip);
}

// Once the previous P·V completed: O takes the block's rescale (16-bit; e4m3 defers it to the block's add)
// and P goes into the registers the next P·V reads.
template <class Tr>
__device__ __forceinline__ void finishSoftmax(ConsumerState<Tr>& st, const float (&s)[Tr::kNT][4],
                                              const float (&alpha)[2]) {
  if constexpr (Tr::kFp8) {
    st.pendingAlpha[0] = alpha[0];
    st.pendingAlpha[1] = alpha[1];
    packPE4m3(s, st.pf);
  } else {
    scaleRows(st.acc, alpha);  // a branch here would serialise the wgmma issue
    packP16<typename Tr::T>(s, st.pf);
  }
}

// Releases the pending block's V stage once its P·V (if any) has completed.
template <class Tr>
__device__ __forceinline__ void releasePending(ConsumerState<Tr>& st, const Pipe<Tr>& pp) {
  if (!st.pending) return;
  if (!st.pendingGemm) sm90::mbarWait(pp.fullV(st.pendingStage), st.pendingPhase);  // keep the phases in step
  sm90::mbarArrive(pp.emptyV(st.pendingStage));
  st.pending = false;
}

// Per-consumer constants of the walk.
struct ConsumerCtx {
  int wg, i, n, row0, col0, qRow0, qLast;
  size_t rowIdx;
  float lambda;
  bool skipOn;
  uint32_t voteWord, voteByte;  // the first set of vote words and this warp's byte in it
  int voteBar, votePartnerBar;  // the named barriers of the vote (the first set)
};

// Marks block j's P·V as skipped in the LUT row's map (one thread of the row's first tile writes it).
template <class Tr>
__device__ __forceinline__ void markPvSkipped(const KParams<typename Tr::T>& p, const ConsumerCtx& cx,
                                              int j) {
  if (threadIdx.x % 128 == 0 && cx.wg % Tr::kTilesPerRow == 0 && p.pvSkipped)
    p.pvSkipped[cx.rowIdx * p.nk + j] = 1;
}

// 128x64: collects the pending block's vote (postVote went out in its softmax) just before its P·V would
// issue, so that a half waits for the other only once it needs the answer; a skip puts the row maxima and
// sums back, keeps the P·V from issuing and is counted. Nothing to do where a tile votes alone (64x128).
template <class Tr>
__device__ __forceinline__ void resolveVote(ConsumerState<Tr>& st, const KParams<typename Tr::T>& p,
                                            const ConsumerCtx& cx) {
  if constexpr (Tr::kTilesPerRow > 1) {
    if (!st.voteOpen) return;
    st.voteOpen = false;
    const bool skip = __shfl_sync(0xffffffffu, (int)!sm90::collectVote(st.openWord, st.openBar), 0) != 0;
    undoIfSkipped(st, st.openBefore, skip);
    st.pendingGemm = !skip;
    if (skip) markPvSkipped<Tr>(p, cx, st.openJ);
  }
}

// Issues the pending block's P·V now (alone), once its vote is in, waits for it, adds it (e4m3) and releases
// its V stage.
template <class Tr>
__device__ __forceinline__ void finishPending(ConsumerState<Tr>& st, const Pipe<Tr>& pp,
                                              const KParams<typename Tr::T>& p, const ConsumerCtx& cx) {
  using namespace sm90;
  resolveVote(st, p, cx);
  const bool pv = st.pending && st.pendingGemm;
  if (pv) {
    mbarWait(pp.fullV(st.pendingStage), st.pendingPhase);
    wgmmaFence();
    float blk[Tr::kDT][4];
    issuePV<Tr>(st, blk, pp.v(st.pendingStage));
    wgmmaCommit();
    wgmmaWait<0>();
    addPendingBlock<Tr>(st, true, blk);
  }
  releasePending<Tr>(st, pp);
}

// A union step as the producer recorded it in the step's stage: every lane reads the same record; the
// shuffles say so, keeping the wgmma issue off divergent paths.
struct StepRecord {
  int j;
  int mask;  // bit w: tile w visits the block
  float kScale;
  bool last;
};

// Waits for stage s to hold its step's K (the record came with it) and reads the record.
template <class Tr>
__device__ __forceinline__ StepRecord awaitStep(const Pipe<Tr>& pp, int s, uint32_t phase) {
  sm90::mbarWait(pp.fullK(s), phase);
  const int4 r = sm90::ldShared16(pp.step(s));
  return StepRecord{__shfl_sync(0xffffffffu, r.x, 0), __shfl_sync(0xffffffffu, r.y, 0),
                    __int_as_float(__shfl_sync(0xffffffffu, r.z, 0)), __shfl_sync(0xffffffffu, r.w, 0) != 0};
}

// A step that this tile does not visit, once its K stage is full: the consumer releases K, waits for V and
// releases it, like a visit without work. That keeps every consumer within one phase of every stage: a parity
// wait only tells the last two phases apart, so a consumer that fell two phases behind (or ran two ahead)
// would misread a stage.
template <class Tr>
__device__ __forceinline__ void passStage(const Pipe<Tr>& pp, int s, uint32_t phase) {
  sm90::mbarArrive(pp.emptyK(s));
  sm90::mbarWait(pp.fullV(s), phase);
  sm90::mbarArrive(pp.emptyV(s));
}

// The own block once its Q·Kᵀ completed (beside the previous block's P·V where the consumer overlaps them):
// scores to float, masks, row maxima, the skip vote and (int8-fp8) the softmax; once that P·V completed, its
// add (e4m3) and V release, then (fp16/bf16) the softmax, this block's rescale of O and its P. Returns
// whether this block's P·V is skipped. Where the exponentials go was measured (16K and 32K, D 64 and 128,
// H100 and H200): fp16/bf16 after the vote (sparse walks 2-3 %, dense D 64 ~10 % faster; dense D 128 ~2 %
// slower, kept for one order per numerics); int8-fp8 before it (with the overlap that was ~4 % faster at D
// 128 full rows, but 3-6 % slower at D 64 sparse walks, which then spilled 46 bytes against 18; without
// it, 6-9 % faster at D 128 sparse walks).
template <class Tr, bool kDense, BlockKeys kKeys>
__device__ __forceinline__ bool softmaxOwnBlock(const KParams<typename Tr::T>& p, const Pipe<Tr>& pp,
                                                const ConsumerCtx& cx, ConsumerState<Tr>& st, int j,
                                                const BlockVote& vote, float scale, bool pv,
                                                float (&sc)[Tr::kNT][4], const int32_t (&si)[Tr::kNT][4],
                                                float (&blk)[Tr::kDT][4]) {
  using namespace sm90;
  float rmax[2], alpha[2];
  // The masked copy checks visibility again although its caller did: without the check (an unconditional
  // mask) ptxas spilled 8 bytes more, and the copy measured is this one.
  const bool visible =
      kKeys == BlockKeys::AllVisible || p.vis.fullyVisible(cx.qRow0, cx.qLast, j * Tr::kBK, Tr::kBK);
  if (Tr::kFp8 && kKeys != BlockKeys::SomeMasked && visible) {
    rowMaxInt(si, rmax);
    intToFloat(si, sc);
  } else {
    if constexpr (Tr::kFp8) intToFloat(si, sc);
    if (!visible) maskFragment(sc, cx.row0, j * Tr::kBK + cx.col0, p.vis);
    rowMax(sc, rmax);
  }
  rmax[0] *= scale;
  rmax[1] *= scale;
  bool skip;  // the vote is warpgroup-wide; the shuffles tell the compiler the result is uniform
  if constexpr (Tr::kFp8) {
    skip = __shfl_sync(
        0xffffffffu,
        (int)softmaxThenVote<Tr>(st, sc, rmax, scale, vote, cx.lambda, cx.row0, p.Nq, alpha), 0);
    fenceRegs(sc);  // the softmax stays above the wait, beside the P·V
    fenceRegs(st.l);
    // Without a vote (dense walk) the softmax and the wait share one basic block, and ptxas hoisted the wait
    // to its top; a warpgroup barrier keeps it below.
    if constexpr (kDense) barSync(kBarVote + cx.wg, 128);
    wgmmaWait<0>();  // the previous block's P·V
    fenceRegs(blk);
    addPendingBlock<Tr>(st, pv, blk);
    releasePending<Tr>(st, pp);
  } else if constexpr (Tr::kTilesPerRow > 1) {
    // 128x64: the vote across both halves of the query block in two parts. A half posts its answer once it
    // has its row maxima and collects the other's only when the block's P·V is about to issue (resolveVote,
    // at its next own step, behind the next Q·Kᵀ), so the exponentials, O's rescale, P, the wait for the next
    // K and that Q·Kᵀ run in between.
    // One meeting before the exponentials held both halves in step at every block (the 20 % walk at 16K
    // took 10-18 % longer).
    if (vote.on)
      postVote(vote.byte, vote.bar, rowsRise(st, rmax, cx.lambda, cx.row0, p.Nq));
    else
      barSync(kBarVote + cx.wg, 128);
    wgmmaWait<0>();  // the previous block's P·V (into O)
    fenceRegs(st.acc);
    releasePending<Tr>(st, pp);
    st.voteOpen = vote.on;
    st.openWord = vote.word;
    st.openBar = vote.partnerBar;
    st.openJ = j;
    st.openBefore = rowsBefore(st);
    exponentiateBlock<Tr>(st, sc, rmax, scale, alpha);
    // O's rescale and P as if the block were kept: a skip leaves this half's maxima where they were
    // (alpha 1), so resolveVote only puts the maxima and row sums back.
    finishSoftmax<Tr>(st, sc, alpha);
    return false;
  } else {
    skip = __shfl_sync(0xffffffffu, (int)voteFirst<Tr>(st, rmax, vote, cx.lambda, cx.row0, p.Nq, cx.wg), 0);
    wgmmaWait<0>();  // the previous block's P·V (into O)
    fenceRegs(st.acc);
    releasePending<Tr>(st, pp);
    softmaxAfterVote<Tr>(st, sc, rmax, scale, skip, alpha);
  }
  // Also after a skip: its alpha is 1 (the max did not move) and its P goes unused.
  finishSoftmax<Tr>(st, sc, alpha);
  return skip;
}

// One block of the consumer's own tile, step `rec` in stage s (K full): Q·Kᵀ and the pending P·V, K released,
// the softmax; the block becomes the pending one (its P·V goes out with the next own block's Q·Kᵀ, or at
// once without Tr::kPvBesideQk).
template <class Tr, bool kDense>
__device__ __forceinline__ void ownStep(const Sm90Params<typename Tr::T>& prm, const Pipe<Tr>& pp,
                                        const ConsumerCtx& cx, ConsumerState<Tr>& st, const StepRecord& rec,
                                        int s, uint32_t phase, int t, float qScale) {
  using namespace sm90;
  const KParams<typename Tr::T>& p = prm.k;
  float sc[Tr::kNT][4], blk[Tr::kDT][4];
  int32_t si[Tr::kNT][4];
  const bool pv = issueOwnStep<Tr>(st, pp, s, cx.wg, sc, si, blk, [&] { resolveVote(st, p, cx); });
  mbarArrive(pp.emptyK(s));
  const float scale = Tr::kFp8 ? p.scaleLog2 * (qScale * rec.kScale) : p.scaleLog2;
  const uint32_t slot = Tr::kVoteSetBytes * (t & 1);          // the vote words alternate
  const int barSet = Tr::kTilesPerRow > 1 ? 2 * (t & 1) : 0;  // and so do 128x64's barriers
  const BlockVote vote{!kDense && cx.skipOn && skipEligible(t, cx.n, Tr::kTail), cx.voteWord + slot,
                       cx.voteByte + slot, cx.voteBar + barSet, cx.votePartnerBar + barSet};
  bool skip;
  if constexpr (Tr::kTwoSoftmaxCopies) {
    skip = p.vis.fullyVisible(cx.qRow0, cx.qLast, rec.j * Tr::kBK, Tr::kBK)
               ? softmaxOwnBlock<Tr, kDense, BlockKeys::AllVisible>(p, pp, cx, st, rec.j, vote, scale, pv, sc,
                                                                    si, blk)
               : softmaxOwnBlock<Tr, kDense, BlockKeys::SomeMasked>(p, pp, cx, st, rec.j, vote, scale, pv, sc,
                                                                    si, blk);
  } else {
    skip = softmaxOwnBlock<Tr, kDense, BlockKeys::Checked>(p, pp, cx, st, rec.j, vote, scale, pv, sc, si, blk);
  }
  st.pending = true;
  st.pendingGemm = !skip;
  st.pendingStage = s;
  st.pendingPhase = phase;
  if (skip) markPvSkipped<Tr>(p, cx, rec.j);
  if constexpr (!Tr::kPvBesideQk) finishPending<Tr>(st, pp, p, cx);
}

// The consumer's walk: every step of its ring in order, from the records the producer left in the stages;
// work on its own blocks, a pass on the other tiles' (union walk only). The pending block's P·V waits for the
// next own block unless passes come close to its stage first: the producer waits for the V release before it
// reloads a stage, so the consumer must finish the pending block before it passes that stage. (The inner
// loop keeps the own block's wgmmas out of a branch on the record: ptxas then serialised every wgmma, C7520.)
template <class Tr, bool kDense>
__device__ __forceinline__ void consume(const Sm90Params<typename Tr::T>& prm, const Pipe<Tr>& pp,
                                        const ConsumerCtx& cx, ConsumerState<Tr>& st) {
  using namespace sm90;
  const KParams<typename Tr::T>& p = prm.k;
  const float qScale = Tr::kFp8 && cx.i < p.nq ? p.qScale[cx.rowIdx] : 1.f;
  mbarWait(pp.fullQ(), 0);
  bool last = false;
  StageCursor at;
  for (int t = 0; t < cx.n; ++t, pp.advance(at)) {
    StepRecord rec;
    for (;; pp.advance(at)) {  // other tiles' blocks up to this tile's next one
      rec = awaitStep(pp, at.s, at.phase);
      if ((rec.mask >> cx.wg) & 1) break;
      // One step before the pending block's stage is due again: finishing it now lets the producer reload
      // that stage while this step passes (finishing when it is due left the reload in the open: fp16 D 128
      // has 3 stages).
      if (st.pending && pp.after(at.s) == st.pendingStage) finishPending<Tr>(st, pp, p, cx);
      passStage(pp, at.s, at.phase);
    }
    last = rec.last;
    ownStep<Tr, kDense>(prm, pp, cx, st, rec, at.s, at.phase, t, qScale);
  }
  finishPending<Tr>(st, pp, p, cx);  // the last block's P·V
  for (; !last; pp.advance(at)) {  // other tiles' remaining blocks
    last = awaitStep(pp, at.s, at.phase).last;
    passStage(pp, at.s, at.phase);
  }
}

template <class Tr, bool kDense>
__device__ __forceinline__ void consumerTile(const Sm90Params<typename Tr::T>& prm, const Pipe<Tr>& pp,
                                             const CtaTiles<Tr, kDense>& tp, int wg, bool split) {
  const KParams<typename Tr::T>& p = prm.k;
  const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
  ConsumerCtx cx;
  cx.wg = wg;
  cx.i = pick(tp.i, wg);
  cx.n = tp.n(wg);
  cx.qRow0 = cx.i * kBQ;
  cx.qLast = min(cx.qRow0 + kBQ, p.Nq) - 1;
  cx.row0 = cx.qRow0 + warp * 16 + (lane >> 2);
  cx.col0 = 2 * (lane & 3);
  cx.rowIdx = tp.lutRow(p, wg);
  cx.lambda = INFINITY;
  cx.skipOn = false;
  // 128x64: the two halves of a query block vote together (each posts at its own barrier and collects at
  // the other's; a warpgroup's plain meeting keeps kBarVote + wg).
  const int half = wg % Tr::kTilesPerRow;
  cx.voteWord = pp.vote(wg / Tr::kTilesPerRow);
  cx.voteByte = cx.voteWord + 4 * half + warp;
  cx.voteBar = Tr::kTilesPerRow > 1 ? kBarVote + Tr::kConsumers + half : kBarVote + wg;
  cx.votePartnerBar = Tr::kTilesPerRow > 1 ? kBarVote + Tr::kConsumers + 1 - half : cx.voteBar;
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
  // A split walk's consumer meets only its own ring; the union walk's passes every step, also with no
  // blocks of its own.
  if (split ? cx.n > 0 : !tp.empty()) consume<Tr, kDense>(prm, pp.walkOf(wg, split), cx, st);
  if (cx.i >= tp.tiles) return;
  typename Tr::T* gO = p.o + (size_t)tp.bhq * p.Nq * Tr::D;
  const float* vScale = Tr::kFp8 ? p.vScale + (size_t)tp.bhk * Tr::D : nullptr;
  storeRows<typename Tr::T, Tr::kDT>(gO, Tr::D, st.acc, st.l, cx.row0, cx.col0, p.Nq, vScale,
                                     p.emptyRows ? p.emptyRows + tp.bhq : nullptr);
}

// Does the CTA split its stages into one ring per tile? Where its tiles visit less than Tr::kSplitBelow of
// their visible blocks (the rule is per CTA, so rows that agree, as in dense regions of real masks, keep the
// union's single loads). The same answer in every thread; the shuffle tells the compiler so.
template <class Tr, bool kDense>
__device__ __forceinline__ bool splitWalks(const Sm90Params<typename Tr::T>& prm,
                                           const CtaTiles<Tr, kDense>& tp) {
  if constexpr (!Tr::kSplittable) {
    return false;
  } else {
    const KParams<typename Tr::T>& p = prm.k;
    int visited = 0, visible = 0;
#pragma unroll
    for (int w = 0; w < Tr::kConsumers; ++w) {
      if (tp.i[w] >= tp.tiles) continue;
      const int q0 = tp.i[w] * kBQ, q1 = min(q0 + kBQ, p.Nq) - 1;
      visited += tp.walk[w].n;
      visible += BlockWalk<true>::make(p.vis, q0, q1, Tr::kBK, nullptr, nullptr).n;
    }
    return __shfl_sync(0xffffffffu, (int)(visited < prm.splitBelow * visible), 0) != 0;
  }
}

template <class Tr, bool kDense>
__device__ __forceinline__ void attention90(const Sm90Params<typename Tr::T>& prm) {
  extern __shared__ unsigned char smemRaw[];
  const Pipe<Tr> pp{((uint32_t)__cvta_generic_to_shared(smemRaw) + 1023u) & ~1023u};
  const CtaTiles<Tr, kDense> tp = CtaTiles<Tr, kDense>::make(prm.k);
  const bool split = splitWalks<Tr, kDense>(prm, tp);
  if (threadIdx.x == 0) {
    for (int c = 0; c < Tr::kQBars; ++c) sm90::mbarInit(pp.fullQ(c), 1);
    const int readers = split ? 128 : 128 * Tr::kConsumers;  // consumer threads that release a stage
    for (int s = 0; s < Tr::kStages; ++s) {
      sm90::mbarInit(pp.fullK(s), 1);
      sm90::mbarInit(pp.fullV(s), 1);
      sm90::mbarInit(pp.emptyK(s), readers);
      sm90::mbarInit(pp.emptyV(s), readers);
    }
    sm90::fenceBarrierInit();
  }
  __syncthreads();
  // Warp-uniform by construction (a shuffle from lane 0): lets the compiler give each role its own registers.
  const int wg = __shfl_sync(0xffffffffu, (int)threadIdx.x / 128, 0);
  if (wg == 0) {
    sm90::regDealloc<kProducerRegs>();
    if (split) {  // lane 0 of warp w streams tile w's ring
      const int w = threadIdx.x / 32;
      if (threadIdx.x % 32 == 0 && w < Tr::kConsumers && tp.n(w) > 0)
        produce<Tr, kDense>(prm, pp.walkOf(w, true), tp.only(w), true);
    } else if (threadIdx.x == 0 && !tp.empty()) {
      produce<Tr, kDense>(prm, pp, tp, false);
    }
  } else {
    sm90::regAlloc<Tr::kConsumerRegs>();
    consumerTile<Tr, kDense>(prm, pp, tp, wg - 1, split);
  }
}

#endif  // SPARGE_SM90A_DEVICE

template <class Tr>
__global__ void __launch_bounds__(Tr::kThreads, 1)
    sparge_sparse_attention_sm90(const __grid_constant__ Sm90Params<typename Tr::T> p) {
#ifdef SPARGE_SM90A_DEVICE
  attention90<Tr, false>(p);
#else
  __trap();  // only the sm_90a image is ever launched
#endif
}

template <class Tr>
__global__ void __launch_bounds__(Tr::kThreads, 1)
    sparge_dense_attention_sm90(const __grid_constant__ Sm90Params<typename Tr::T> p) {
#ifdef SPARGE_SM90A_DEVICE
  attention90<Tr, true>(p);
#else
  __trap();
#endif
}

template <class Tr>
Sm90Params<typename Tr::T> makeSm90Params(const Problem& pr, const AttnArgs& a) {
  Sm90Params<typename Tr::T> p;
  p.k = makeKParams<typename Tr::T>(pr, a);
  const char* split = std::getenv("SPARGE_SM90_SPLIT_BELOW");
  p.splitBelow = split ? std::strtof(split, nullptr) : Tr::kSplitBelow;
  const uint64_t bhq = (uint64_t)pr.B * pr.Hq, bhk = (uint64_t)pr.B * pr.Hkv, D = Tr::D;
  if constexpr (Tr::kFp8) {
    const auto u8 = CU_TENSOR_MAP_DATA_TYPE_UINT8;
    p.q = tensorMap3d(p.k.q, u8, 1, D, (uint64_t)pr.nq * kBQ, bhq, D, kBQ);
    p.kmap = tensorMap3d(p.k.k, u8, 1, D, (uint64_t)pr.nk * Tr::kBK, bhk, D, Tr::kBK);
    p.v = tensorMap3d(p.k.v, u8, 1, (uint64_t)fp8VTokens(pr.Nkv), D, bhk, Tr::kBK, D);
  } else {
    const auto t = std::is_same_v<typename Tr::T, __half> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                          : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    p.q = tensorMap3d(p.k.q, t, 2, D, (uint64_t)pr.Nq, bhq, 64, kBQ);
    p.kmap = tensorMap3d(p.k.k, t, 2, D, (uint64_t)pr.Nkv, bhk, 64, Tr::kBK);
    p.v = tensorMap3d(p.k.v, t, 2, D, (uint64_t)pr.Nkv, bhk, 64, Tr::kBK);
  }
  return p;
}

int64_t gSm90Launches = 0;

template <class Tr>
void launch90(const Problem& pr, const AttnArgs& a, cudaStream_t s) {
  const Sm90Params<typename Tr::T> kp = makeSm90Params<Tr>(pr, a);
  const int tiles = (pr.Nq + kBQ - 1) / kBQ;  // 64-row query tiles (128x64: two a LUT row)
  dim3 grid((tiles + Tr::kConsumers - 1) / Tr::kConsumers, pr.nHeads, pr.B);
  void (*kernel)(const Sm90Params<typename Tr::T>) = nullptr;
  if constexpr (Tr::kDense)
    kernel = sparge_dense_attention_sm90<Tr>;
  else
    kernel = sparge_sparse_attention_sm90<Tr>;
  static bool attrSet = false;
  if (!attrSet) {
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Tr::kSmemBytes),
          "cudaFuncSetAttribute(attention sm90)");
    attrSet = true;
  }
  kernel<<<grid, Tr::kThreads, Tr::kSmemBytes, s>>>(kp);
  checkLaunch(Tr::kDense ? "sparge_dense_attention_sm90" : "sparge_sparse_attention_sm90");
  ++gSm90Launches;
}

template <typename T, int D, Numerics N>
void launchWalk90(const Problem& p, const AttnArgs& a, bool dense, cudaStream_t s) {
  if constexpr (N == Numerics::None) {
    if (p.BK == 64) {  // 128x64 (attentionSm90Selected admits no other geometry with 64-key blocks)
      if (dense)
        launch90<Sm90Traits<T, D, N, true, 64>>(p, a, s);
      else
        launch90<Sm90Traits<T, D, N, false, 64>>(p, a, s);
      return;
    }
  }
  if (p.BQ != kBQ || p.BK != 128)
    throw Error("CUDA engine", "the Hopper kernel runs 64x128 tiles (and 128x64 without quantization), not " +
                                   std::to_string(p.BQ) + "x" + std::to_string(p.BK) +
                                   " (the mma.sync family runs it)");
  if (dense)
    launch90<Sm90Traits<T, D, N, true>>(p, a, s);
  else
    launch90<Sm90Traits<T, D, N, false>>(p, a, s);
}

template <typename T, Numerics N>
void launchHeadDim90(const Problem& p, const AttnArgs& a, bool dense, cudaStream_t s) {
  if (p.D == 64)
    launchWalk90<T, 64, N>(p, a, dense, s);
  else if (p.D == 128)
    launchWalk90<T, 128, N>(p, a, dense, s);
  else  // attentionSm90Selected sends other head dims (D 256) to the mma.sync family
    throw Error("CUDA engine", "the Hopper kernel runs head dim 64 or 128, not " + std::to_string(p.D) +
                                   " (the mma.sync family runs it)");
}

}  // namespace

bool attentionSm90Selected(const Problem& p, core::Numerics n) {
  const char* env = std::getenv("SPARGE_ATTN_KERNEL");
  if (env && std::strcmp(env, "sm80") == 0) return false;
  // D 256 has no wgmma kernel: it runs the mma.sync family (kernel names end in _sm80), as do the quantized
  // numerics at 128x64.
  const bool g64x128 = p.BQ == 64 && p.BK == 128, g128x64 = p.BQ == 128 && p.BK == 64;
  if (!(g64x128 || (g128x64 && n == Numerics::None)) || (p.D != 64 && p.D != 128)) return false;
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

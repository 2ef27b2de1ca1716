// XAttention's strided scores on Hopper (sm_90a): the GEMM of xattn_scores.cuh on wgmma, its Q and K rows
// brought by TMA, two consumer warpgroups and a producer warp; the same epilogue and output; xattention.cu
// launches it.
//
// The tensor maps view a head's tokens as [rows][S][D] (heads one after another, so rows of all heads are
// one dimension): a box of 64 channels x 1 x R rows at step coordinate u holds tokens aS + u of R strided
// rows, every S-th token row, 128-byte swizzled as wgmma's K-major operand wants. The query side takes
// u = S-1-t, the key side u = t: the reversed order costs only the coordinate. The view needs N a multiple
// of S (a partial last group would read the next head's tokens); rows past a head's end read the next
// head's rows or zeros past the tensor, and the epilogue drops them as the mma.sync kernel does.
#pragma once

#include <cuda.h>

#include "attention/sm90/hopper_sync.cuh"
#include "attention/sm90/smem_layout_sm90.h"
#include "attention/sm90/wgmma_sm90.cuh"
#include "predictors/xattn_scores.cuh"

namespace sparge::cuda::predictors {

// A CTA's output tile: two consumer warpgroups of 64 strided rows each, NB 128-column wgmma blocks each
// (128 x 128·NB outputs), and the stage ring (64 channels of Q and K rows a stage).
template <int NB_, int STAGES_>
struct XattnWgmmaTile {
  static constexpr int kConsumers = 2, NB = NB_, BM = 64 * kConsumers, BN = 128 * NB, kStages = STAGES_;
  // The consumers are warps 0 .. 4·kConsumers-1 (warpgroups start at multiples of four warps), the producer
  // the warp after them: a warp, not a warpgroup, so that two CTAs an SM keep ~112 registers a thread
  // without register reallocation.
  static constexpr int kThreads = 128 * kConsumers + 32;
  static constexpr uint32_t kQBytes = BM * 128, kKBytes = BN * 128, kStageBytes = kQBytes + kKBytes;
  // Stages, their full and empty barriers, and the slack to align the ring to the 1024-byte swizzle atom.
  static constexpr size_t kSmem = size_t(kStages) * kStageBytes + 16 * kStages + 1024;
  static constexpr int kMinBlocks = kSmem <= 110 * 1024 ? 2 : 1;
  // writeBlockMaxima's view of one 128-column block of a warp: one m16 row of sixteen n8 tiles.
  static constexpr int MT = 1, NT = 16;
  static_assert(65536 / (kThreads * kMinBlocks) >= 64 * NB + 40, "the accumulators fit");
};

#ifdef SPARGE_SM90A_DEVICE

// The stage ring in shared memory: stage s's Q rows, its K rows, and its barriers.
template <class Tile>
struct XattnRing {
  uint32_t base;
  __device__ __forceinline__ uint32_t q(int s) const { return base + s * Tile::kStageBytes; }
  __device__ __forceinline__ uint32_t k(int s) const { return q(s) + Tile::kQBytes; }
  __device__ __forceinline__ uint32_t full(int s) const {
    return base + Tile::kStages * Tile::kStageBytes + 8 * s;
  }
  __device__ __forceinline__ uint32_t empty(int s) const { return full(s) + 8 * Tile::kStages; }
};

// One thread streams the chunks: chunk c is channels 64(c mod D/64).. of token step t = c / (D/64), the
// query rows' tokens aS + S-1-t and the key rows' bS + t.
template <class Tile>
__device__ __forceinline__ void produceXattn(const XattnRing<Tile>& ring, const CUtensorMap* qmap,
                                             const CUtensorMap* kmap, int qRow, int kRow, int S,
                                             int kPerStep) {
  sm90::prefetchTensorMap(qmap);
  sm90::prefetchTensorMap(kmap);
  const int chunks = S * kPerStep;
  for (int c = 0; c < chunks; ++c) {
    const int s = c % Tile::kStages, t = c / kPerStep, ch = (c % kPerStep) * 64;
    const uint32_t phase = (c / Tile::kStages) & 1;
    sm90::mbarWait(ring.empty(s), phase ^ 1);
    sm90::mbarArriveExpectTx(ring.full(s), Tile::kStageBytes);
    sm90::tmaLoad3d(ring.q(s), qmap, ring.full(s), ch, S - 1 - t, qRow);
    sm90::tmaLoad3d(ring.k(s), kmap, ring.full(s), ch, t, kRow);
  }
}

// A consumer's 64 rows x BN columns: four k-steps of 16 channels a chunk, the chunk's products in flight
// while the previous chunk's stage is released.
template <typename T, class Tile>
__device__ __forceinline__ void consumeXattn(float (&acc)[Tile::NB][16][4], const XattnRing<Tile>& ring,
                                             int w, int chunks) {
#pragma unroll
  for (int nb = 0; nb < Tile::NB; ++nb)
#pragma unroll
    for (int i = 0; i < 16; ++i) acc[nb][i][0] = acc[nb][i][1] = acc[nb][i][2] = acc[nb][i][3] = 0.f;
  for (int c = 0; c < chunks; ++c) {
    const int s = c % Tile::kStages;
    sm90::mbarWait(ring.full(s), (c / Tile::kStages) & 1);
    sm90::wgmmaFence();
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      const uint64_t da = sm90::kMajorDescriptor<64>(ring.q(s) + w * 64 * 128, ks);
#pragma unroll
      for (int nb = 0; nb < Tile::NB; ++nb)
        sm90::WgmmaSS<T, 128>::run(acc[nb], da, sm90::kMajorDescriptor<128>(ring.k(s) + nb * 128 * 128, ks),
                                   1);
    }
    sm90::wgmmaCommit();
    sm90::wgmmaWait<1>();  // the previous chunk's products are done: its stage can be refilled
    if (c > 0) sm90::mbarArrive(ring.empty((c - 1) % Tile::kStages));
  }
  sm90::wgmmaWait<0>();
#pragma unroll
  for (int nb = 0; nb < Tile::NB; ++nb) sm90::fenceRegs(acc[nb]);
}

#endif  // SPARGE_SM90A_DEVICE

// One CTA per output tile (grid as sparge_predict_xattn_scores); kC as writeBlockMaxima's. Dynamic smem:
// Tile::kSmem.
template <typename T, int D, class Tile, int kC>
__global__ void __launch_bounds__(Tile::kThreads, Tile::kMinBlocks)
    sparge_predict_xattn_scores_sm90(const __grid_constant__ CUtensorMap qmap,
                                     const __grid_constant__ CUtensorMap kmap, const ScoreArgs g) {
#ifdef SPARGE_SM90A_DEVICE
  extern __shared__ unsigned char smemRaw[];
  __shared__ int first[Tile::BM], last[Tile::BM];
  const Strided& st = g.st;
  const int2 tile = g.tiles[blockIdx.x];
  const int a0 = tile.x * Tile::BM, c0 = tile.y * Tile::BN, y = blockIdx.y;
  if (!tileSeesKeys<Tile::BM, Tile::BN, Tile::kThreads>(st, a0, c0, first, last)) return;
  const XattnRing<Tile> ring{((uint32_t)__cvta_generic_to_shared(smemRaw) + 1023u) & ~1023u};
  if (threadIdx.x == 0) {
    for (int s = 0; s < Tile::kStages; ++s) {
      sm90::mbarInit(ring.full(s), 1);
      sm90::mbarInit(ring.empty(s), 128 * Tile::kConsumers);
    }
    sm90::fenceBarrierInit();
  }
  __syncthreads();
  const int wg = __shfl_sync(0xffffffffu, (int)threadIdx.x / 128, 0);
  if (wg == Tile::kConsumers) {
    if (threadIdx.x == 128 * Tile::kConsumers) {
      const int b = y / g.nHeads, hq = g.heads[y % g.nHeads];
      const int qRow = (b * g.Hq + hq) * st.rows + a0;
      const int kRow = (b * g.Hkv + hq / (g.Hq / g.Hkv)) * st.cols + c0;
      produceXattn<Tile>(ring, &qmap, &kmap, qRow, kRow, st.S, D / 64);
    }
  } else {
    float acc[Tile::NB][16][4];
    consumeXattn<T, Tile>(acc, ring, wg, st.S * (D / 64));
    const int rowBase = wg * 64 + ((threadIdx.x / 32) % 4) * 16;
#pragma unroll
    for (int nb = 0; nb < Tile::NB; ++nb)
      writeBlockMaxima<Tile, kC>(reinterpret_cast<const float(&)[1][16][4]>(acc[nb]), first, last, a0, c0,
                                 rowBase, nb * 128, st, g.me + (size_t)y * st.rows * st.nk);
  }
#else
  (void)qmap, (void)kmap, (void)g;
  __trap();  // only the sm_90a image is ever launched
#endif
}

}  // namespace sparge::cuda::predictors

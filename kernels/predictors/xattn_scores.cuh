// XAttention's strided antidiagonal scores as a tensor-core GEMM (mma.sync m16n8k16, fp32 sums) with the
// per-(strided row, key block) maximum and exp-sum as its epilogue; xattention.cu launches it.
//
// Row a of the strided Q holds Q[aS + S-1-t] for t = 0..S-1 and row b of the strided K holds K[bS + t], so
// the scores of a head are the product of a [rows, S·D] by an [S·D, cols] matrix. The reduction runs in
// chunks of 64 channels of one token step t: chunk c reads channels 64(c mod D/64).. of the rows' tokens
// aS + S-1-t and bS + t (t = c / (D/64)), so no strided copy is made. A CTA computes one Tile::BM x Tile::BN
// output tile through a Tile::kStages-deep cp.async pipeline; tiles no row of which sees a column (causal,
// window) are skipped.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "common/device_common.cuh"
#include "common/mma_sm80.cuh"
#include "predictors/visible.cuh"

namespace sparge::cuda::predictors {

// The strided geometry of one launch.
struct Strided {
  int S, rows, cols, rowsPerBlock, colsPerBlock, nq, nk;
  float scale;  // the entry's scale / S, as the CPU predictor multiplies
  Visibility vis;
  int Nq;
  // The strided columns whose S x S sub-tile holds a visible pair for strided row a (core's keysSeenBy).
  __host__ __device__ __forceinline__ KeySpan columnsOf(int a) const {
    const KeySpan k = vis.keysSeenBy(a * S, std::min(Nq, (a + 1) * S));
    return k.empty() ? k : KeySpan{k.first / S, k.last / S};
  }
};

// A CTA's output tile (BM strided rows x BN strided columns), its warps (WM x WN, each a (BM/WM) x (BN/WN)
// part) and the pipeline depth.
template <int BM_, int BN_, int WM_, int WN_, int STAGES_>
struct XattnTile {
  static constexpr int BM = BM_, BN = BN_, WM = WM_, WN = WN_, kStages = STAGES_;
  static constexpr int kThreads = WM * WN * 32, kChunk = 64;  // channels a pipeline stage holds
  static constexpr int MT = BM / WM / 16, NT = BN / WN / 8;   // m16 and n8 tiles of a warp
  static constexpr size_t kSmem = size_t(kStages) * (BM + BN) * kChunk * 2;
  static constexpr int kMinBlocks = kSmem <= 110 * 1024 ? 2 : 1;  // CTAs an SM the registers must allow
  static_assert(NT % 2 == 0, "warp parts of whole n16 column pairs");
};

struct ScoreArgs {
  const int2* tiles;  // the output tiles a head computes (row tile, column tile), blockIdx.x's (visibleTiles)
  const int* heads;
  int Hq, Hkv, nHeads, Nkv;
  Strided st;
  float2* me;  // [B*nHeads][rows][nk]: per strided row and key block (max, Σ exp(s - max))
};

// `n` rows of 64 channels of every S-th token (from token `first`, step S; zero past `limit`) into a
// swizzled stage: 16-byte chunk c of row r lands at chunk c ^ (r & 7).
template <typename T, int D, int THREADS>
__device__ __forceinline__ void loadChunk(T* tile, const T* rows, int n, int first, int S, int limit, int ch,
                                          bool rowsOk) {
  for (int x = threadIdx.x; x < n * 8; x += THREADS) {
    const int r = x >> 3, c = x & 7, token = first + r * S;
    const bool ok = rowsOk && token < limit;
    const T* src = rows + (size_t)(ok ? token : 0) * D + ch + c * 8;
    sm80::cpAsync16(sm80::smemAddr(tile + r * 64 + ((c ^ (r & 7)) * 8)), src, ok);
  }
}

// The A (Q) and B (K) fragments of one k-step of the warp's part, through ldmatrix.
template <typename T, class Tile>
struct Fragments {
  uint32_t a[Tile::MT][4], b[Tile::NT / 2][4];
  __device__ __forceinline__ void load(const T* qs, const T* ks, int rowBase, int colBase, int kk, int lane) {
#pragma unroll
    for (int mt = 0; mt < Tile::MT; ++mt) {
      const int r = rowBase + mt * 16 + (lane & 15), c = kk * 2 + (lane >> 4);
      sm80::ldmatrixX4(a[mt], sm80::smemAddr(qs + r * 64 + ((c ^ (r & 7)) * 8)));
    }
#pragma unroll
    for (int np = 0; np < Tile::NT / 2; ++np) {
      const int r = colBase + np * 16 + (lane & 7) + ((lane >> 4) << 3), c = kk * 2 + ((lane >> 3) & 1);
      sm80::ldmatrixX4(b[np], sm80::smemAddr(ks + r * 64 + ((c ^ (r & 7)) * 8)));
    }
  }
  __device__ __forceinline__ void mma(float (&acc)[Tile::MT][Tile::NT][4]) const {
#pragma unroll
    for (int mt = 0; mt < Tile::MT; ++mt)
#pragma unroll
      for (int np = 0; np < Tile::NT / 2; ++np) {
        sm80::Mma<T>::run(acc[mt][2 * np], a[mt], b[np][0], b[np][1]);
        sm80::Mma<T>::run(acc[mt][2 * np + 1], a[mt], b[np][2], b[np][3]);
      }
  }
};

// One 64-channel stage of the warp's (MT·16) x (NT·8) part: four k-steps of 16, the next step's fragments
// loaded before this step's products are issued (the wrappers' asm statements keep their order).
template <typename T, class Tile>
__device__ __forceinline__ void mmaChunk(float (&acc)[Tile::MT][Tile::NT][4], const T* qs, const T* ks,
                                         int rowBase, int colBase, int lane) {
  Fragments<T, Tile> f[2];
  f[0].load(qs, ks, rowBase, colBase, 0, lane);
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    if (kk + 1 < 4) f[(kk + 1) & 1].load(qs, ks, rowBase, colBase, kk + 1, lane);
    f[kk & 1].mma(acc);
  }
}

constexpr int log2Of(int c) {
  return c <= 1 ? 0 : 1 + log2Of(c / 2);
}

// Whether column c lies among the n columns from f (one unsigned comparison).
__device__ __forceinline__ bool seen(int c, int f, int n) {
  return unsigned(c - f) < unsigned(n);
}

// Per row of the warp's part and key block: M = the block's max of the visible scaled scores, E = Σ exp(s
// - M) (M = -inf, E = 0 when none is visible). A block spans C = colsPerBlock columns, a power of two (the
// stride divides the tile): within an n8 tile the quad's lanes combine (C of 4 or more), across n8 tiles (C
// of 16 or more) a lane combines its running pair with the next tile's (E·exp(M - M') + e·exp(m - M')).
// kC > 0 fixes C at compile time, so that the block tests and indices fold away and the unrolled epilogue
// stays small enough for the instruction cache: it runs once a tile, with only the other CTA's products
// beside it. kC = 0 takes C from st (shifts and masks, C being a power of two).
template <class Tile, int kC = 0>
__device__ __forceinline__ void writeBlockMaxima(const float (&acc)[Tile::MT][Tile::NT][4], const int* first,
                                                 const int* last, int a0, int c0, int rowBase, int colBase,
                                                 const Strided& st, float2* me) {
  const int lane = threadIdx.x & 31, gr = lane >> 2, tq = lane & 3;
  const int C = kC > 0 ? kC : st.colsPerBlock, shift = kC > 0 ? log2Of(kC) : __ffs(C) - 1;
  const int per = C >= 8 ? C / 8 : 1;  // n8 tiles a block spans, a power of two
  const bool writer = C >= 8 ? tq == 0 : C == 4 ? (tq & 1) == 0 : true;
  // nt outside h: each n8 tile's four accumulators are consumed together, so the live ones shrink steadily
  // (h outside left half of them waiting through the first row's pass, and ptxas spilling).
#pragma unroll
  for (int mt = 0; mt < Tile::MT; ++mt) {
    int f[2], n[2];
    bool rowOut[2];
    float2* out[2];
    float M[2] = {-INFINITY, -INFINITY}, E[2] = {0.f, 0.f};
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = rowBase + mt * 16 + gr + 8 * h, a = a0 + r;
      f[h] = first[r], n[h] = max(last[r] - f[h] + 1, 0), rowOut[h] = a < st.rows;
      out[h] = me + (size_t)a * st.nk;
    }
#pragma unroll
    for (int nt = 0; nt < Tile::NT; ++nt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int col = c0 + colBase + nt * 8 + 2 * tq;
        const float v0 = seen(col, f[h], n[h]) ? acc[mt][nt][2 * h] * st.scale : -INFINITY;
        const float v1 = seen(col + 1, f[h], n[h]) ? acc[mt][nt][2 * h + 1] * st.scale : -INFINITY;
        if (C == 1) {
          if (rowOut[h] && col < st.nk) out[h][col] = make_float2(v0, v0 == -INFINITY ? 0.f : 1.f);
          if (rowOut[h] && col + 1 < st.nk) out[h][col + 1] = make_float2(v1, v1 == -INFINITY ? 0.f : 1.f);
          continue;
        }
        float m = fmaxf(v0, v1);
        if (C >= 4) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
        if (C >= 8) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
        float e = expf(v0 - finiteOr0(m)) + expf(v1 - finiteOr0(m));
        if (C >= 4) e += __shfl_xor_sync(0xffffffffu, e, 1);
        if (C >= 8) e += __shfl_xor_sync(0xffffffffu, e, 2);
        if ((nt & (per - 1)) == 0) {
          M[h] = m, E[h] = e;
        } else {
          const float Mn = fmaxf(M[h], m);
          E[h] = E[h] * expf(M[h] - finiteOr0(Mn)) + e * expf(m - finiteOr0(Mn));
          M[h] = Mn;
        }
        const int j = col >> shift;
        if ((nt & (per - 1)) == per - 1 && writer && rowOut[h] && j < st.nk)
          out[h][j] = make_float2(M[h], E[h]);
      }
  }
}

// Each strided row's visible columns (first > last: none) into first/last [BM]; whether any row of the tile
// (rows a0.., columns c0..c0+BN-1) sees one of its columns. Every thread of the CTA calls it.
template <int BM, int BN, int THREADS>
__device__ __forceinline__ bool tileSeesKeys(const Strided& st, int a0, int c0, int* first, int* last) {
  bool sees = false;
  for (int r = threadIdx.x; r < BM; r += THREADS) {
    const KeySpan c = a0 + r < st.rows ? st.columnsOf(a0 + r) : KeySpan{1, 0};
    first[r] = c.first;
    last[r] = c.last;
    sees = sees || (c.first <= c.last && c.first < c0 + BN && c.last >= c0);
  }
  return __syncthreads_or(sees);
}

// One CTA per output tile: blockIdx.x indexes g.tiles, blockIdx.y = b * nHeads + head index. Dynamic smem:
// Tile::kSmem.
template <typename T, int D, class Tile>
__global__ void __launch_bounds__(Tile::kThreads, Tile::kMinBlocks)
    sparge_predict_xattn_scores(const T* __restrict__ q, const T* __restrict__ k, const ScoreArgs g) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int BM = Tile::BM, BN = Tile::BN, kStages = Tile::kStages;
  __shared__ int first[BM], last[BM];
  const Strided& st = g.st;
  const int2 tile = g.tiles[blockIdx.x];
  const int a0 = tile.x * BM, c0 = tile.y * BN, y = blockIdx.y;
  if (!tileSeesKeys<BM, BN, Tile::kThreads>(st, a0, c0, first, last)) return;
  const int b = y / g.nHeads, hq = g.heads[y % g.nHeads];
  const T* qh = q + (size_t)(b * g.Hq + hq) * st.Nq * D;
  const T* kh = k + (size_t)(b * g.Hkv + hq / (g.Hq / g.Hkv)) * g.Nkv * D;
  T* smemQ = reinterpret_cast<T*>(smem);
  T* smemK = smemQ + kStages * BM * 64;
  constexpr int kPerStep = D / 64;
  const int chunks = st.S * kPerStep;
  auto load = [&](int c) {
    if (c < chunks) {
      const int t = c / kPerStep, ch = (c % kPerStep) * 64, s = c % kStages;
      loadChunk<T, D, Tile::kThreads>(smemQ + s * BM * 64, qh, BM, a0 * st.S + st.S - 1 - t, st.S, st.Nq, ch,
                                      true);
      loadChunk<T, D, Tile::kThreads>(smemK + s * BN * 64, kh, BN, c0 * st.S + t, st.S, g.Nkv, ch, true);
    }
    sm80::cpAsyncCommit();  // empty groups keep the count of groups in flight uniform
  };
#pragma unroll
  for (int c = 0; c < kStages - 1; ++c) load(c);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int rowBase = (warp / Tile::WN) * (BM / Tile::WM), colBase = (warp % Tile::WN) * (BN / Tile::WN);
  float acc[Tile::MT][Tile::NT][4];
#pragma unroll
  for (int mt = 0; mt < Tile::MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < Tile::NT; ++nt)
      acc[mt][nt][0] = acc[mt][nt][1] = acc[mt][nt][2] = acc[mt][nt][3] = 0.f;
  for (int c = 0; c < chunks; ++c) {
    sm80::cpAsyncWait<kStages - 2>();
    __syncthreads();  // chunk c landed for all; everyone is done with chunk c - 1's stage
    load(c + kStages - 1);
    const int s = c % kStages;
    mmaChunk<T, Tile>(acc, smemQ + s * BM * 64, smemK + s * BN * 64, rowBase, colBase, lane);
  }
  sm80::cpAsyncWait<0>();
  writeBlockMaxima<Tile>(acc, first, last, a0, c0, rowBase, colBase, st, g.me + (size_t)y * st.rows * st.nk);
}

}  // namespace sparge::cuda::predictors

// The last queries' scores of MInference and FlexPrefill (line_common.h: launchLastScores) on the tensor
// cores, with each row's softmax statistics per chunk of keys. Rounding mirrors the CPU predictors
// (core/src/method_*.cpp): a score is rounded to the input type as upstream holds it.
#include <cmath>

#include "common/cuda_util.h"
#include "common/device_common.cuh"
#include "common/head_dim.h"
#include "common/mma_sm80.cuh"
#include "predictors/line_common.h"
#include "predictors/line_device.cuh"

namespace sparge::cuda::predictors::lines {
namespace {

// The input-type score of an accumulator, as the CPU rounds it: T(T(q · k) · postScale). kScaled false:
// postScale is 1, and T(T(x) · 1) is T(x).
template <typename T, bool kScaled>
__device__ __forceinline__ float scoreOf(float acc, float postScale) {
  return kScaled ? roundT<T>(roundT<T>(acc) * postScale) : roundT<T>(acc);
}

// Merges a running (max, Σ exp(x − max)) pair of a row into (m, l).
__device__ __forceinline__ void mergeStats(float& m, float& l, float om, float ol) {
  const float mn = fmaxf(m, om);
  if (mn == -INFINITY) return;
  l = (m == -INFINITY ? 0.f : l * expf(m - mn)) + (om == -INFINITY ? 0.f : ol * expf(om - mn));
  m = mn;
}

// Folds kGroup steps of a lane's scores of one row (pairs of keys; −inf where unseen) into its (m, l).
template <int kGroup>
__device__ __forceinline__ void foldStats(const float (&v)[kGroup][4], int hh, float& m, float& l) {
  float gm = -INFINITY;
#pragma unroll
  for (int u = 0; u < kGroup; ++u) gm = fmaxf(gm, fmaxf(v[u][2 * hh], v[u][2 * hh + 1]));
  const float mn = fmaxf(m, gm);
  // No branch: when every value so far is −inf, each term is exp(−inf) = 0 and (m, l) stays (−inf, 0), as an
  // early return would leave it.
  const float ms = finiteOr0(mn);
  float acc = m == -INFINITY ? 0.f : l * expf(m - ms);
#pragma unroll
  for (int u = 0; u < kGroup; ++u) acc += expf(v[u][2 * hh] - ms) + expf(v[u][2 * hh + 1] - ms);
  l = acc;
  m = mn;
}

// The score kernel's key chunks: kScoreKeys keys are one chunk of the row statistics and one shared-memory
// stage; a CTA walks kScoreChunksPerCta chunks of one slot. With two stages the next chunk's keys load
// (cp.async) while the current one's products run; CTAs of at most four warps (MInference's 64 queries) and
// D 256 stage one chunk at a time, which lets more CTAs share an SM instead. Either way each SM keeps whole
// chunks in flight rather than one group of a warp's fragments (the kernel that loaded fragments straight
// from global memory waited on those loads).
constexpr int kScoreKeys = kLineScoreKeys, kScoreChunksPerCta = 4;
inline int scoreStages(int D, int Lpad) {
  return D <= 128 && Lpad > 64 ? 2 : 1;
}

// Chunk `chunk`'s keys into a [kScoreKeys][D] tile, 16-byte pieces swizzled (sm80::swz) so that a warp's
// fragment reads (eight key rows, four head-dim slices) spread over every bank; keys past Nkv read as zero.
template <typename T, int D>
__device__ __forceinline__ void stageKeys(T* tile, const T* kRows, int chunk, int Nkv) {
  constexpr int kRowChunks = D / 8;
  for (int x = threadIdx.x; x < kScoreKeys * kRowChunks; x += blockDim.x) {
    const int r = x / kRowChunks, c = x % kRowChunks, key = chunk * kScoreKeys + r;
    const T* src = kRows + (size_t)(key < Nkv ? key : 0) * D + c * 8;
    sm80::cpAsync16(sm80::smemAddr(tile + sm80::swz<D>(r, c)), src, key < Nkv);
  }
  sm80::cpAsyncCommit();
}

// Where lane (g, t)'s 16-byte pieces of key row 8·n + g lie in a staged tile, less 8·n rows: swz's XOR
// takes the row's low three bits, which are g for every such row, so the offsets are the lane's for good.
template <int D>
struct LanePieces {
  int at[D / 32];
  __device__ __forceinline__ LanePieces(int g, int t) {
#pragma unroll
    for (int i = 0; i < D / 32; ++i) at[i] = sm80::swz<D>(g, t * (D / 32) + i);
  }
};

// c += (16 query rows) · (key row 8·n + g of a staged tile, `rows` pointing at row 8·n)ᵀ over the head dim.
// Lane t holds the head-dim slice [t·D/4, (t+1)·D/4) (sliceOf, line_device.cuh): 16-byte piece i of it feeds
// k-steps 2i and 2i + 1, loaded just before them so that a key row's fragment never sits in registers whole.
template <typename T, int D>
__device__ __forceinline__ void keyRowProducts(const uint32_t (&a)[D / 16][4], const T* rows,
                                               const LanePieces<D>& pieces, float (&c)[4]) {
#pragma unroll
  for (int i = 0; i < D / 32; ++i) {
    const uint4 w = *reinterpret_cast<const uint4*>(rows + pieces.at[i]);
    sm80::Mma<T>::run(c, a[2 * i], w.x, w.y);
    sm80::Mma<T>::run(c, a[2 * i + 1], w.z, w.w);
  }
}

// The scores of one group of kGroup steps of 8 keys (tile rows j .. j + 8·kGroup − 1, keys k0 ..) for the
// lane's two rows into v (−inf where the row's query does not see the key), stored to their S rows. kWhole:
// the caller checked that every row sees every key of the group, that the group lies within Nkv and that
// rows are stored in pairs, so no element is tested.
template <bool kWhole, bool kScaled, typename T, int D, int kGroup>
__device__ __forceinline__ void scoreGroup(const uint32_t (&a)[D / 16][4], const T* tile, int j, int k0,
                                           const LanePieces<D>& pieces, int t, const int (&first)[2],
                                           const int (&last)[2], T* const (&sRow)[2], int Nkv, bool evenKeys,
                                           float postScale, float (&v)[kGroup][4]) {
#pragma unroll
  for (int u = 0; u < kGroup; ++u) {
    float c[4] = {0.f, 0.f, 0.f, 0.f};
    keyRowProducts<T, D>(a, tile + (j + 8 * u) * D, pieces, c);
    const int col = k0 + 8 * u + 2 * t;
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const float lo = scoreOf<T, kScaled>(c[2 * hh], postScale);
      const float hi = scoreOf<T, kScaled>(c[2 * hh + 1], postScale);
      if (kWhole) {
        v[u][2 * hh] = lo;
        v[u][2 * hh + 1] = hi;
        *reinterpret_cast<uint32_t*>(sRow[hh] + col) = Elem<T>::pack(lo, hi);
        continue;
      }
      v[u][2 * hh] = col >= first[hh] && col <= last[hh] ? lo : -INFINITY;
      v[u][2 * hh + 1] = col + 1 >= first[hh] && col + 1 <= last[hh] ? hi : -INFINITY;
      if (sRow[hh] == nullptr || col >= Nkv) continue;
      T* at = sRow[hh] + col;
      if (evenKeys && col + 1 < Nkv) {
        *reinterpret_cast<uint32_t*>(at) = Elem<T>::pack(lo, hi);  // aligned: even row length and column
      } else {
        at[0] = Elem<T>::fromF(lo);
        if (col + 1 < Nkv) at[1] = Elem<T>::fromF(hi);
      }
    }
  }
}

// The A fragments of query rows `row` and row + 8 (sliceOf's head-dim order), k-step by k-step.
template <typename T, int D>
__device__ __forceinline__ void queryFragments(const T* qRows, int row, int t, int Lpad,
                                               uint32_t (&a)[D / 16][4]) {
  uint32_t lo[D / 8], hi[D / 8];
  sliceOf<T, D>(qRows, row, t, Lpad, lo);
  sliceOf<T, D>(qRows, row + 8, t, Lpad, hi);
#pragma unroll
  for (int s = 0; s < D / 16; ++s) {
    a[s][0] = lo[2 * s];
    a[s][1] = hi[2 * s];
    a[s][2] = lo[2 * s + 1];
    a[s][3] = hi[2 * s + 1];
  }
}

// A row's (max, sum) merged over the four lanes of its mma quad.
__device__ __forceinline__ void quadMergeStats(float& m, float& l) {
  for (int off = 1; off <= 2; off <<= 1) {
    const float om = __shfl_xor_sync(0xffffffffu, m, off), ol = __shfl_xor_sync(0xffffffffu, l, off);
    mergeStats(m, l, om, ol);
  }
}

// Per chunk of keys: warp w holds query rows 16w .. 16w+15 as A fragments and walks the chunk kGroup steps
// of 8 keys at a time on the tensor cores (m16n8k16, fp32 accumulators). Besides S, each row's max and
// Σ exp(s − max) over the chunk's keys that its query sees go to partial[slot][row][chunk]: the row
// statistics without reading S again.
template <typename T, int D, bool kScaled>
__global__ void __launch_bounds__(256, D <= 128 ? 3 : 2)
    sparge_predict_line_scores(const T* __restrict__ lastQ, const T* __restrict__ k, Problem p, int L,
                               int Lpad, int stages, float postScale, T* __restrict__ S,
                               float2* __restrict__ partial) {
  constexpr int kSteps = D / 16, kGroup = 2;
  extern __shared__ uint4 keyTiles[];  // [stages][kScoreKeys][D]
  const SlotHeads h = slotHeads(p, blockIdx.y);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int r0 = warp * 16;
  const T* qRows = lastQ + (size_t)blockIdx.y * Lpad * D;
  const T* kRows = k + (size_t)h.bhk * p.Nkv * D;
  const int chunks = lineScoreChunks(p);
  const int cBegin = blockIdx.x * kScoreChunksPerCta, cEnd = min(chunks, cBegin + kScoreChunksPerCta);
  T* tiles = reinterpret_cast<T*>(keyTiles);
  stageKeys<T, D>(tiles, kRows, cBegin, p.Nkv);
  uint32_t a[kSteps][4];
  queryFragments<T, D>(qRows, r0 + g, t, Lpad, a);
  // The keys each of the lane's two rows sees, as ints (key indices fit), and where its S row starts (null
  // for the padding rows past L, which store nothing).
  int first[2], last[2];
  T* sRow[2];
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int row = r0 + g + 8 * hh;
    const Visible v = visibleOf(p.Nq - L + row, p);
    first[hh] = int(v.first);
    last[hh] = int(v.last);
    sRow[hh] = row < L ? S + ((size_t)blockIdx.y * L + row) * p.Nkv : nullptr;
  }
  const bool evenKeys = (p.Nkv & 1) == 0;
  const LanePieces<D> pieces(g, t);
#pragma unroll 1
  for (int chunk = cBegin; chunk < cEnd; ++chunk) {
    const T* tile = tiles + (stages == 2 ? (chunk - cBegin) & 1 : 0) * kScoreKeys * D;
    if (stages == 2 && chunk + 1 < cEnd) {
      stageKeys<T, D>(tiles + ((chunk + 1 - cBegin) & 1) * kScoreKeys * D, kRows, chunk + 1, p.Nkv);
      sm80::cpAsyncWait<1>();
    } else {
      sm80::cpAsyncWait<0>();
    }
    __syncthreads();
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    const int kBegin = chunk * kScoreKeys;
#pragma unroll 1
    for (int j = 0; j < kScoreKeys; j += 8 * kGroup) {
      const int k0 = kBegin + j, k1 = k0 + 8 * kGroup - 1;
      // Most groups lie inside every row's visible keys and inside the row, stored in pairs: the warp
      // then skips the per-element tests.
      const bool whole = evenKeys && k1 < p.Nkv &&
                         __all_sync(0xffffffffu, sRow[0] != nullptr && sRow[1] != nullptr && k0 >= first[0] &&
                                                     k1 <= last[0] && k0 >= first[1] && k1 <= last[1]);
      float v[kGroup][4];
      if (whole)
        scoreGroup<true, kScaled, T, D, kGroup>(a, tile, j, k0, pieces, t, first, last, sRow, p.Nkv, evenKeys,
                                                postScale, v);
      else
        scoreGroup<false, kScaled, T, D, kGroup>(a, tile, j, k0, pieces, t, first, last, sRow, p.Nkv,
                                                 evenKeys, postScale, v);
      foldStats<kGroup>(v, 0, m[0], l[0]);
      foldStats<kGroup>(v, 1, m[1], l[1]);
    }
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      quadMergeStats(m[hh], l[hh]);
      const int row = r0 + g + 8 * hh;
      if (t == 0 && row < L)
        partial[((size_t)blockIdx.y * L + row) * chunks + chunk] = make_float2(m[hh], l[hh]);
    }
    __syncthreads();  // every warp is done with this tile before it is staged again
    if (stages == 1 && chunk + 1 < cEnd) stageKeys<T, D>(tiles, kRows, chunk + 1, p.Nkv);
  }
}

}  // namespace

size_t linePartialCount(const Problem& p, int L) {
  return size_t(slotCount(p)) * L * lineScoreChunks(p);
}

void launchLastScores(const MethodLaunch& m, const void* lastQ, int L, int Lpad, float postScale, void* S,
                      float2* partial) {
  const int chunks = lineScoreChunks(m.problem);
  const dim3 grid((chunks + kScoreChunksPerCta - 1) / kScoreChunksPerCta, slotCount(m.problem));
  withElem(m.qkv.et, [&](auto tag) {
    using T = decltype(tag);
    withHeadDim(m.problem.D, "CUDA line predictors", [&](auto d) {
      constexpr int D = decltype(d)::value;
      const auto kernel =
          postScale == 1.f ? sparge_predict_line_scores<T, D, false> : sparge_predict_line_scores<T, D, true>;
      const int stages = scoreStages(D, Lpad);
      const size_t smem = size_t(stages) * kScoreKeys * D * sizeof(T);
      check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
            "cudaFuncSetAttribute (line scores)");
      kernel<<<grid, 32 * (Lpad / 16), smem, m.stream>>>(static_cast<const T*>(lastQ),
                                                         static_cast<const T*>(m.qkv.k), m.problem, L, Lpad,
                                                         stages, postScale, static_cast<T*>(S), partial);
    });
  });
  checkLaunch("sparge_predict_line_scores");
}

}  // namespace sparge::cuda::predictors::lines

// XAttention's block predictor on the GPU (core/src/method_xattention.cpp is the rule): the strided
// antidiagonal scores on the tensor cores with each row's softmax factored per block, the block sums of the
// probabilities, then per query block the blocks kept by cumulative threshold τ.
//
// Row a of the strided Q holds Q[aS + S-1-t] for t = 0..S-1 and row b of the strided K holds K[bS + t], so
// score(a, b) = Σ_t Q[aS + S-1-t] · K[bS + t]: S products of D-wide token rows, each an mma over a Q tile
// whose rows are every S-th token and a K tile likewise. One pass over the scores keeps, per strided row and
// key block, the block's own maximum M and Σ exp(s - M); a second kernel turns them into the row's softmax
// and the block sums (exp(s - m) / l = exp(s - M) · exp(M - m) / l: the same probabilities up to fp32
// rounding).
#include <cuda_runtime.h>

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "attention/sm90/tma_map.h"
#include "common/cuda_util.h"
#include "common/device_common.cuh"
#include "common/head_dim.h"
#include "common/launch.h"
#include "common/mma_sm80.cuh"
#include "common/upload.h"
#include "predictors/method_kernels.h"
#include "predictors/visible.cuh"
#include "predictors/xattn_scores.cuh"
#include "predictors/xattn_scores_sm90.cuh"
#include "sparge/core/error.h"
#include "stages/stage1_parts.cuh"

namespace sparge::cuda::predictors {
namespace {

constexpr int kMaxSelectBlocks = 1024;  // key blocks of a row the selection and the block sums hold

// The score kernel's tile: 128 x 128 outputs, 8 warps of 64 x 32, three stages (96 KB: two CTAs an SM);
// kernels/NOTES.md has the other tiles measured.
using ScoreTile = XattnTile<128, 128, 2, 4, 3>;
// On Hopper: 128 x 128 outputs, two consumer warpgroups, three stages (two CTAs an SM, so that one CTA's
// epilogue and pipeline fill run beside the other's products); kernels/NOTES.md has the other variants.
using ScoreTileSm90 = XattnWgmmaTile<1, 3>;
// Both score kernels' output tile, which visibleTiles lists.
constexpr int kScoreTileRows = ScoreTile::BM, kScoreTileCols = ScoreTile::BN;
static_assert(ScoreTileSm90::BM == kScoreTileRows && ScoreTileSm90::BN == kScoreTileCols, "one tile list");

// The block sums of query block i: Σ over its strided rows of exp(M - m) · E · (1 / l) per key block, with
// the row's max m and sum l over its visible blocks (a product by the reciprocal: within an ulp of the
// quotient, as the factored probabilities are of the CPU's). A warp per (query block, head): lane t holds
// key blocks t, t + 32, ... (E of them) of each strided row in registers, so a row is read once, its max and
// sum come from warp reductions, and each exponential serves both the sum l and the block sums, which add
// the rows in row order. kBlockWarps query blocks a CTA.
constexpr int kBlockWarps = 4;
template <int E>
__global__ void __launch_bounds__(kBlockWarps * 32)
    sparge_predict_xattn_blocks(const float2* __restrict__ me, const int* __restrict__ heads, int Hq,
                                int nHeads, const Strided st, float* __restrict__ blockMass) {
  const int lane = threadIdx.x & 31, i = blockIdx.x * kBlockWarps + (threadIdx.x >> 5);
  if (i >= st.nq) return;  // the whole warp
  const int y = blockIdx.y, b = y / nHeads, hq = heads[y % nHeads], aBegin = i * st.rowsPerBlock;
  const int n = min(st.rows, aBegin + st.rowsPerBlock) - aBegin;
  float sum[E];
#pragma unroll
  for (int e = 0; e < E; ++e) sum[e] = 0.f;
  for (int x = 0; x < n; ++x) {  // a row that sees no key adds nothing, as on the CPU
    const KeySpan c = st.columnsOf(aBegin + x);
    const int j0 = c.empty() ? 1 : c.first / st.colsPerBlock, j1 = c.empty() ? 0 : c.last / st.colsPerBlock;
    const float2* row = me + ((size_t)y * st.rows + aBegin + x) * st.nk;
    float2 v[E];
    float m = -INFINITY;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const int j = lane + 32 * e;
      v[e] = j >= j0 && j <= j1 ? row[j] : make_float2(-INFINITY, 0.f);  // y 0: adds nothing
      m = fmaxf(m, v[e].x);
    }
    m = warpMax(m);
    float l = 0.f, ex[E];
#pragma unroll
    for (int e = 0; e < E; ++e) {
      ex[e] = v[e].y > 0.f ? expf(v[e].x - m) : 0.f;
      l = fmaf(v[e].y, ex[e], l);
    }
    const float inv = 1.f / warpSum(l);
#pragma unroll
    for (int e = 0; e < E; ++e)
      if (v[e].y > 0.f) sum[e] = fmaf(v[e].y * ex[e], inv, sum[e]);
  }
  float* out = blockMass + ((size_t)(b * Hq + hq) * st.nq + i) * st.nk;
#pragma unroll
  for (int e = 0; e < E; ++e)
    if (lane + 32 * e < st.nk) out[lane + 32 * e] = sum[e];
}

// What the selection reads beside the block mass.
struct SelectIn {
  const float* blockMass;   // [B*Hq][nq][nk]
  const double* threshold;  // per query head
  const uint8_t* blocks;    // BlockFlags [nq][nk]
  const int* heads;
  int Hq, nq, nk, nHeads, total;
  bool causal;
};

constexpr int kSelectWarps = 4;

// Whether sorted entry x is kept: the CPU's loop over the entries in sorted order, stopping at the first
// forced or padding entry (key < 0) or once the cumulative mass (from the forced blocks' mass) reaches τ ·
// total. Each lane holds the sorted positions lane·E .. lane·E + E - 1; their cumulative masses come from a
// warp scan, whose sums are associated differently from the loop's: each differs from the exact sum by at
// most (nk + 2) ulps of the total, so where every such mass lies further than that from τ · total, the scan
// decides as the loop does. Otherwise (false returned) the caller runs the loop itself. keepRest: whether
// the loop, past every sorted entry, still keeps the zero-mass entries left out of the sort.
template <int E>
__device__ __forceinline__ bool keptByScan(const float (&key)[E], double forcedSum, double total,
                                           double required, int nk, bool (&kept)[E], bool& keepRest) {
  const int lane = threadIdx.x & 31;
  double local = 0;
#pragma unroll
  for (int e = 0; e < E; ++e) local += key[e] >= 0.f ? double(key[e]) : 0.0;
  double inclusive = local;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const double v = __shfl_up_sync(0xffffffffu, inclusive, o);
    if (lane >= o) inclusive += v;
  }
  double before = __shfl_up_sync(0xffffffffu, inclusive, 1);
  double cumulative = forcedSum + (lane == 0 ? 0.0 : before);
  const double margin = double(nk + 2) * 0x1p-50 * (total + forcedSum);
  const double end = forcedSum + __shfl_sync(0xffffffffu, inclusive, 31);
  keepRest = end < required;
  bool near = fabs(end - required) <= margin;
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const bool live = key[e] >= 0.f;
    kept[e] = live && cumulative < required;
    near = near || (live && fabs(cumulative - required) <= margin);
    cumulative += live ? double(key[e]) : 0.0;
  }
  return !__any_sync(0xffffffffu, near);
}

// What one row's selection needs beside its sorted span.
struct SelectRow {
  const float* mass;
  size_t rowOff;
  int nk, first, last;  // the span sorted: every entry outside it has zero mass or is forced
  double forcedSum, total, required;
};

// The row's entries first .. last sorted in one warp (E a lane, 32·E >= last - first + 1) and kept by the
// rule; the zero-mass entries outside the span sort after every positive mass and before the forced ones in
// the full order, and the cumulative mass no longer moves there, so they share one decision (keepRest),
// which `rest` applies. Returns false where the caller must decide by the sequential loop (keptByScan),
// after it left the sorted entries in sortedKey / sortedId.
template <int E, class Live, class Rest>
__device__ __forceinline__ bool selectSpan(const SelectRow& r, Live live, Rest rest, MethodRows& out,
                                           float* sortedKey, int* sortedId) {
  const int lane = threadIdx.x & 31;
  float key[E];
  int id[E];
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const int j = r.first + lane * E + e;
    // Forced blocks of causal rows (the CPU's NaN) and padding sort after every mass (>= 0).
    key[e] = j <= r.last && live(j) ? r.mass[j] : -1.f;
    id[e] = j <= r.last ? j : INT_MAX;
  }
  bitonicSortWarp<E>(key, id);
  bool kept[E], keepRest;
  const bool decided = keptByScan<E>(key, r.forcedSum, r.total, r.required, r.nk, kept, keepRest);
  __syncwarp();  // the zeros the caller stored land before any lane's ones
  if (decided) {
#pragma unroll
    for (int e = 0; e < E; ++e)
      if (kept[e]) out.selected[r.rowOff + id[e]] = 1;
    if (keepRest) rest();
    return true;
  }
#pragma unroll
  for (int e = 0; e < E; ++e) {
    sortedKey[lane * E + e] = key[e];
    sortedId[lane * E + e] = id[e];
  }
  __syncwarp();
  return false;
}

// Calls f with std::integral_constant<int, e>, the fewest key blocks a lane (a power of two up to E) that
// hold n blocks in one warp; the host's launches and the selection's sorted spans choose alike.
#pragma nv_exec_check_disable
template <int E, class F>
__host__ __device__ __forceinline__ void withFewestLaneBlocks(int n, F&& f) {
  if constexpr (E > 1)
    if (n <= 16 * E) return withFewestLaneBlocks<E / 2>(n, f);
  f(std::integral_constant<int, E>{});
}

// One warp per row (query block i of one head): the score (block mass over the row's total), the blocks the
// method keeps (key block 0, and the diagonal on causal entries, whose mass counts toward τ first there), and
// the others largest first (ties to the lower index) while the cumulative mass stays below τ · total. Only
// the span from the first to the last block of nonzero mass is sorted, in as few registers a lane as it
// needs (a causal row's seen prefix: half the row on average). Dynamic smem per warp: the sorted keys (32*E
// floats) and their blocks (32*E ints), for the loop that decides rows the scan cannot (keptByScan).
template <int E>
__global__ void __launch_bounds__(kSelectWarps * 32)
    sparge_predict_xattn_select(const SelectIn in, MethodRows out) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int row = blockIdx.x * kSelectWarps + warp;
  if (row >= in.total) return;  // the whole warp
  float* sortedKey = reinterpret_cast<float*>(smem) + warp * 32 * E;
  int* sortedId = reinterpret_cast<int*>(smem + kSelectWarps * 32 * E * sizeof(float)) + warp * 32 * E;
  const int nk = in.nk, i = row % in.nq, hq = in.heads[(row / in.nq) % in.nHeads],
            b = row / (in.nq * in.nHeads);
  SelectRow r;
  r.rowOff = ((size_t)(b * in.Hq + hq) * in.nq + i) * nk;
  r.mass = in.blockMass + r.rowOff;
  r.nk = nk;
  auto forced = [&](int j) {
    return j == 0 || (in.causal && (in.blocks[(size_t)i * nk + j] & kBlockOnDiagonal));
  };
  auto live = [&](int j) { return !(in.causal && forced(j)); };
  double total = 0, forcedSum = 0;
  int first = INT_MAX, last = -1;
  for (int j = lane; j < nk; j += 32) {
    const float m = r.mass[j];
    total += m;
    if (!live(j)) forcedSum += m;
    if (live(j) && m != 0.f) first = min(first, j), last = j;  // NaN counts as nonzero
  }
  for (int o = 16; o > 0; o >>= 1) {
    total += __shfl_xor_sync(0xffffffffu, total, o);
    forcedSum += __shfl_xor_sync(0xffffffffu, forcedSum, o);
    first = min(first, __shfl_xor_sync(0xffffffffu, first, o));
    last = max(last, __shfl_xor_sync(0xffffffffu, last, o));
  }
  for (int j = lane; j < nk; j += 32) {
    out.score[r.rowOff + j] = total > 0 ? float(double(r.mass[j]) / total) : 0.f;
    out.methodForced[r.rowOff + j] = forced(j) ? 1 : 0;
    out.selected[r.rowOff + j] = 0;
  }
  r.first = last < 0 ? 0 : first;
  r.last = last < 0 ? 0 : last;
  r.forcedSum = forcedSum;
  r.total = total;
  r.required = in.threshold[hq] * total;
  auto rest = [&] {  // the live zero-mass entries outside the span
    for (int j = lane; j < nk; j += 32)
      if ((j < r.first || j > r.last) && live(j)) out.selected[r.rowOff + j] = 1;
  };
  const int width = r.last - r.first + 1;
  bool decided = false;
  withFewestLaneBlocks<E>(width, [&](auto e) {
    decided = selectSpan<decltype(e)::value>(r, live, rest, out, sortedKey, sortedId);
  });
  if (decided) return;  // the warp's vote: every lane alike
  double cumulative = forcedSum;
  if (lane == 0)
    for (int x = 0; x < width; ++x) {
      if (sortedKey[x] < 0.f || !(cumulative < r.required)) break;
      out.selected[r.rowOff + sortedId[x]] = 1;
      cumulative += sortedKey[x];
    }
  if (__shfl_sync(0xffffffffu, cumulative < r.required, 0)) rest();
}

template <int E>
void selectRows(const SelectIn& in, MethodRows& out, cudaStream_t s) {
  const size_t smem = kSelectWarps * 32 * E * (sizeof(float) + sizeof(int));
  if (smem > 48 * 1024)
    check(cudaFuncSetAttribute(sparge_predict_xattn_select<E>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               (int)smem),
          "cudaFuncSetAttribute(sparge_predict_xattn_select)");
  sparge_predict_xattn_select<E>
      <<<(in.total + kSelectWarps - 1) / kSelectWarps, kSelectWarps * 32, smem, s>>>(in, out);
  checkLaunch("sparge_predict_xattn_select");
}

// The launch's one stride (the heads of a launch share their statistics key), checked as the CPU does.
int strideOf(const MethodLaunch& l) {
  const int s = (*l.params)[size_t(l.heads->front())].xattention.stride;
  const Problem& p = l.problem;
  if (s <= 0 || p.BQ % s != 0 || p.BK % s != 0)
    throw Error("XAttention", "stride " + std::to_string(s) + " does not divide the " + std::to_string(p.BQ) +
                                  "x" + std::to_string(p.BK) + " tiles: use a power of two up to " +
                                  std::to_string(std::min(p.BQ, p.BK)));
  if (s < 2)
    throw Error("XAttention", "stride 1 (every token pair scored) has no CUDA kernel: use --engine cpu");
  return s;
}

Strided stridedOf(const MethodLaunch& l, int s) {
  const Problem& p = l.problem;
  Strided st;
  st.S = s;
  st.rows = (p.Nq + s - 1) / s;
  st.cols = (p.Nkv + s - 1) / s;
  st.rowsPerBlock = p.BQ / s;
  st.colsPerBlock = p.BK / s;
  st.nq = p.nq;
  st.nk = p.nk;
  st.scale = float(l.scale / s);
  st.vis = visibilityOf(p);
  st.Nq = p.Nq;
  return st;
}

// The score kernels' output tiles (row tile, column tile) that may hold a visible pair, row tile by row
// tile: a launch over these alone spares the CTAs that would only find their tile unseen (half the grid of
// a causal entry). A strided row's visible columns only move right as the row grows, so a row tile's
// visible tiles lie between its first row's first column and its last seeing row's last column; the
// kernels still test each tile (tileSeesKeys).
std::vector<int2> visibleTiles(const Strided& st) {
  std::vector<int2> tiles;
  const int lastColTile = (st.cols - 1) / kScoreTileCols;
  for (int t = 0; t * kScoreTileRows < st.rows; ++t) {
    const int a0 = t * kScoreTileRows;
    int a = std::min(st.rows, a0 + kScoreTileRows) - 1;
    KeySpan last = st.columnsOf(a);
    while (last.empty() && a > a0) last = st.columnsOf(--a);
    const KeySpan first = st.columnsOf(a0);
    if (first.empty() || last.empty()) continue;
    for (int c = first.first / kScoreTileCols; c <= std::min(lastColTile, last.last / kScoreTileCols); ++c)
      tiles.push_back(int2{t, c});
  }
  return tiles;
}

template <typename T, int D>
void scoreKernel(const MethodLaunch& l, const Strided& st, float2* me, const int2* tiles, int nTiles) {
  const Problem& p = l.problem;
  requireSharedMemory(ScoreTile::kSmem, "XAttention's score kernel", D);
  auto kernel = sparge_predict_xattn_scores<T, D, ScoreTile>;
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)ScoreTile::kSmem),
        "cudaFuncSetAttribute(sparge_predict_xattn_scores)");
  const dim3 grid(nTiles, p.B * p.nHeads);
  const ScoreArgs g{tiles, p.heads, p.Hq, p.Hkv, p.nHeads, p.Nkv, st, me};
  kernel<<<grid, ScoreTile::kThreads, ScoreTile::kSmem, l.stream>>>(static_cast<const T*>(l.qkv.q),
                                                                    static_cast<const T*>(l.qkv.k), g);
  checkLaunch("sparge_predict_xattn_scores");
}

// The wgmma kernel runs on sm_90 when the tokens of both sides fill whole groups of S (its TMA view, see
// xattn_scores_sm90.cuh) and the mma.sync family is not forced (SPARGE_ATTN_KERNEL=sm80).
bool wgmmaScores(const Problem& p, int S) {
  if (p.Nq % S != 0 || p.Nkv % S != 0) return false;
  if (KernelSwitches::fromEnvironment().family == AttnFamily::Sm80) return false;
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) return false;
  return major == 9 && minor == 0;
}

// Calls f with std::integral_constant<int, C> for the key block's strided columns the score epilogue is
// specialised for (the strides 8 and 16 of 64- and 128-token key blocks, and 4 and 32 beside them), else
// with 0 (C read at run time).
template <typename F>
void withColsPerBlock(int C, F&& f) {
  switch (C) {
    case 4:
      return f(std::integral_constant<int, 4>{});
    case 8:
      return f(std::integral_constant<int, 8>{});
    case 16:
      return f(std::integral_constant<int, 16>{});
    case 32:
      return f(std::integral_constant<int, 32>{});
    default:
      return f(std::integral_constant<int, 0>{});
  }
}

template <typename T, int D, class Tile>
void scoreKernelSm90(const MethodLaunch& l, const Strided& st, float2* me, const int2* tiles, int nTiles) {
  const Problem& p = l.problem;
  const CUtensorMapDataType type =
      std::is_same_v<T, __half> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const CUtensorMap qmap =
      tensorMap3d(l.qkv.q, type, 2, D, st.S, uint64_t(p.B) * p.Hq * st.rows, 64, 1, Tile::BM);
  const CUtensorMap kmap =
      tensorMap3d(l.qkv.k, type, 2, D, st.S, uint64_t(p.B) * p.Hkv * st.cols, 64, 1, Tile::BN);
  requireSharedMemory(Tile::kSmem, "XAttention's score kernel", D);
  const dim3 grid(nTiles, p.B * p.nHeads);
  const ScoreArgs g{tiles, p.heads, p.Hq, p.Hkv, p.nHeads, p.Nkv, st, me};
  withColsPerBlock(st.colsPerBlock, [&](auto c) {
    auto kernel = sparge_predict_xattn_scores_sm90<T, D, Tile, decltype(c)::value>;
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)Tile::kSmem),
          "cudaFuncSetAttribute(sparge_predict_xattn_scores_sm90)");
    kernel<<<grid, Tile::kThreads, Tile::kSmem, l.stream>>>(qmap, kmap, g);
  });
  checkLaunch("sparge_predict_xattn_scores_sm90");
}

template <typename T, int D>
void scores(const MethodLaunch& l, const Strided& st, float2* me, const int2* tiles, int nTiles) {
  if (!wgmmaScores(l.problem, st.S)) return scoreKernel<T, D>(l, st, me, tiles, nTiles);
  scoreKernelSm90<T, D, ScoreTileSm90>(l, st, me, tiles, nTiles);
}

// The selection sorts a row in one warp's registers (and the block sums keep one there): up to
// kMaxSelectBlocks key blocks.
void requireSelectableRows(int nk) {
  if (nk > kMaxSelectBlocks)
    throw Error("XAttention", std::to_string(nk) + " key blocks: the CUDA selection sorts up to " +
                                  std::to_string(kMaxSelectBlocks) + " a row; use --engine cpu");
}

// Calls f with std::integral_constant<int, E>, the key blocks each lane holds of a row of nk blocks (<=
// kMaxSelectBlocks): the selection and the block sums keep a row in one warp's registers.
template <typename F>
void withLaneBlocks(int nk, F&& f) {
  withFewestLaneBlocks<kMaxSelectBlocks / 32>(nk, f);
}

}  // namespace

void xattentionStats(const MethodLaunch& l, DeviceBuffer& stats, DeviceBuffer& scratch) {
  const Problem& p = l.problem;
  requireSelectableRows(p.nk);
  const Strided st = stridedOf(l, strideOf(l));
  // The pairs, then the visible tiles' list behind them.
  const size_t pairBytes = (sizeof(float2) * p.B * p.nHeads * (size_t)st.rows * p.nk + 255) / 256 * 256;
  const std::vector<int2> tiles = visibleTiles(st);
  scratch.reserve(pairBytes + sizeof(int2) * tiles.size(), "XAttention block maxima");
  stats.reserve(sizeof(float) * p.B * p.Hq * (size_t)p.nq * p.nk, "XAttention block mass");
  auto* me = scratch.as<float2>();
  auto* devTiles = reinterpret_cast<int2*>(static_cast<char*>(scratch.get()) + pairBytes);
  if (!tiles.empty()) {
    uploadAsync(devTiles, tiles, l.stream);
    withHeadDim(p.D, "XAttention", [&](auto d) {
      if (l.qkv.et == ElemType::F16)
        scores<__half, decltype(d)::value>(l, st, me, devTiles, (int)tiles.size());
      else
        scores<__nv_bfloat16, decltype(d)::value>(l, st, me, devTiles, (int)tiles.size());
    });
  }
  const dim3 grid((p.nq + kBlockWarps - 1) / kBlockWarps, p.B * p.nHeads);
  withLaneBlocks(p.nk, [&](auto e) {
    sparge_predict_xattn_blocks<decltype(e)::value>
        <<<grid, kBlockWarps * 32, 0, l.stream>>>(me, p.heads, p.Hq, p.nHeads, st, stats.as<float>());
  });
  checkLaunch("sparge_predict_xattn_blocks");
}

void xattentionSelect(const MethodLaunch& l, MethodRows& rows, DeviceBuffer& scratch) {
  const Problem& p = l.problem;
  requireSelectableRows(p.nk);
  std::vector<double> threshold(size_t(p.Hq));
  for (int h = 0; h < p.Hq; ++h) threshold[size_t(h)] = (*l.params)[size_t(h)].xattention.threshold;
  scratch.reserve(sizeof(double) * threshold.size(), "XAttention thresholds");
  uploadAsync(scratch.as<double>(), threshold, l.stream);
  SelectIn in{l.stats->as<float>(),
              scratch.as<double>(),
              l.blockFlags,
              p.heads,
              p.Hq,
              p.nq,
              p.nk,
              p.nHeads,
              p.nq * p.nHeads * p.B,
              p.causal};
  if (in.total == 0) return;
  withLaneBlocks(p.nk, [&](auto e) { selectRows<decltype(e)::value>(in, rows, l.stream); });
}

}  // namespace sparge::cuda::predictors

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
#include <vector>

#include "common/cuda_util.h"
#include "common/device_common.cuh"
#include "common/head_dim.h"
#include "common/mma_sm80.cuh"
#include "predictors/method_kernels.h"
#include "predictors/visible.cuh"
#include "sparge/core/error.h"
#include "stages/stage1_parts.cuh"

namespace sparge::cuda::predictors {
namespace {

constexpr int kRows = 64, kCols = 64;  // strided rows and columns of a CTA's score tile
constexpr int kPad = 1;                // the fp32 score tile's row padding (bank conflicts)

// The strided geometry of one launch.
struct Strided {
  int S, rows, cols, rowsPerBlock, colsPerBlock, nq, nk;
  float scale;  // the entry's scale / S, as the CPU predictor multiplies
  Visibility vis;
  int Nq;
  // The strided columns whose S x S sub-tile holds a visible pair for strided row a (core's keysSeenBy).
  __device__ __forceinline__ KeySpan columnsOf(int a) const {
    const KeySpan k = vis.keysSeenBy(a * S, min(Nq, (a + 1) * S));
    return k.empty() ? k : KeySpan{k.first / S, k.last / S};
  }
};

// A 64 x D tile of every S-th token row, from token `first` (zero rows past n), into swizzled shared memory:
// 16-byte chunk c of row r lands at chunk c ^ (r & 7).
template <typename T, int D>
__device__ __forceinline__ void loadStridedTile(T* tile, const T* rows, int first, int S, int n) {
  constexpr int kChunks = D / 8;
  for (int x = threadIdx.x; x < kRows * kChunks; x += blockDim.x) {
    const int r = x / kChunks, c = x % kChunks, token = first + r * S;
    const bool ok = token < n;
    const T* src = rows + (size_t)(ok ? token : 0) * D + c * 8;
    sm80::cpAsync16(sm80::smemAddr(tile + r * D + ((c ^ (r & 7)) * 8)), src, ok);
  }
}

// One warp's 16 rows x 64 columns of Q_tile · K_tileᵀ added to acc, k-steps of 16 through ldmatrix.
template <typename T, int D>
__device__ __forceinline__ void mmaTile(float (&acc)[8][4], const T* qTile, const T* kTile, int warp,
                                        int lane) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t a[4];
    const int ar = warp * 16 + (lane & 15), ac = kk * 2 + (lane >> 4);
    sm80::ldmatrixX4(a, sm80::smemAddr(qTile + ar * D + ((ac ^ (ar & 7)) * 8)));
#pragma unroll
    for (int np = 0; np < 4; ++np) {
      uint32_t b[4];
      const int br = np * 16 + (lane & 7) + ((lane >> 4) << 3), bc = kk * 2 + ((lane >> 3) & 1);
      sm80::ldmatrixX4(b, sm80::smemAddr(kTile + br * D + ((bc ^ (br & 7)) * 8)));
      sm80::Mma<T>::run(acc[2 * np], a, b[0], b[1]);
      sm80::Mma<T>::run(acc[2 * np + 1], a, b[2], b[3]);
    }
  }
}

// Scores of 64 strided rows against strided columns [c0, c0 + 64): S token steps, double-buffered.
template <typename T, int D>
__device__ void scoreTile(float (&acc)[8][4], T* smemQ, T* smemK, const T* q, const T* k, int a0, int c0,
                          const Strided& st, int Nkv) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
  for (int n = 0; n < 8; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
  auto load = [&](int t, int buf) {
    loadStridedTile<T, D>(smemQ + buf * kRows * D, q, a0 * st.S + st.S - 1 - t, st.S, st.Nq);
    loadStridedTile<T, D>(smemK + buf * kCols * D, k, c0 * st.S + t, st.S, Nkv);
    sm80::cpAsyncCommit();
  };
  load(0, 0);
  for (int t = 0; t < st.S; ++t) {
    if (t + 1 < st.S) {
      load(t + 1, (t + 1) & 1);
      sm80::cpAsyncWait<1>();
    } else {
      sm80::cpAsyncWait<0>();
    }
    __syncthreads();
    mmaTile<T, D>(acc, smemQ + (t & 1) * kRows * D, smemK + (t & 1) * kCols * D, warp, lane);
    __syncthreads();
  }
}

// Per strided row a and key block j: M = max of the row's visible scores in the block, E = Σ exp(s - M)
// (M = -inf, E = 0 when none is visible), into me[(y * rows + a) * nk + j] for the blocks of the columns
// the CTA's rows see. One CTA per 64 strided rows of one head (y = b * nHeads + head index).
template <typename T, int D>
__global__ void __launch_bounds__(128)
    sparge_predict_xattn_scores(const T* __restrict__ q, const T* __restrict__ k,
                                const int* __restrict__ heads, int Hq, int Hkv, int nHeads, int Nkv,
                                const Strided st, float2* __restrict__ me) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* smemQ = reinterpret_cast<T*>(smem);
  T* smemK = smemQ + 2 * kRows * D;
  float* tile = reinterpret_cast<float*>(smemK + 2 * kCols * D);  // [kRows][kCols + kPad]
  __shared__ int first[kRows], last[kRows], span[2];
  const int y = blockIdx.y, b = y / nHeads, hq = heads[y % nHeads];
  const int a0 = blockIdx.x * kRows;
  const T* qh = q + (size_t)(b * Hq + hq) * st.Nq * D;
  const T* kh = k + (size_t)(b * Hkv + hq / (Hq / Hkv)) * Nkv * D;
  if (threadIdx.x < kRows) {
    const int a = a0 + threadIdx.x;
    const KeySpan c = a < st.rows ? st.columnsOf(a) : KeySpan{1, 0};
    first[threadIdx.x] = c.first;
    last[threadIdx.x] = c.last;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int lo = INT_MAX, hi = -1;
    for (int r = 0; r < kRows; ++r)
      if (first[r] <= last[r]) lo = min(lo, first[r]), hi = max(hi, last[r]);
    span[0] = lo;
    span[1] = hi;
  }
  __syncthreads();
  if (span[1] < 0) return;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tq = lane & 3;
  const int blocksPerTile = kCols / st.colsPerBlock;
  for (int c0 = span[0] / kCols * kCols; c0 <= span[1]; c0 += kCols) {
    float acc[8][4];
    scoreTile<T, D>(acc, smemQ, smemK, qh, kh, a0, c0, st, Nkv);
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = warp * 16 + g + 8 * (e >> 1), c = n * 8 + 2 * tq + (e & 1), col = c0 + c;
        tile[r * (kCols + kPad) + c] = col >= first[r] && col <= last[r] ? acc[n][e] * st.scale : -INFINITY;
      }
    __syncthreads();
    for (int x = threadIdx.x; x < kRows * blocksPerTile; x += blockDim.x) {
      const int r = x / blocksPerTile, jb = x % blocksPerTile, a = a0 + r;
      const int j = c0 / st.colsPerBlock + jb;
      if (a >= st.rows || j >= st.nk) continue;
      const float* s = tile + r * (kCols + kPad) + jb * st.colsPerBlock;
      float m = -INFINITY, sum = 0.f;
      for (int u = 0; u < st.colsPerBlock; ++u) m = fmaxf(m, s[u]);
      if (m != -INFINITY)
        for (int u = 0; u < st.colsPerBlock; ++u) sum += expf(s[u] - m);
      me[((size_t)y * st.rows + a) * st.nk + j] = make_float2(m, sum);
    }
    __syncthreads();
  }
}

// The block sums of query block i: Σ over its strided rows of exp(M - m) · E / l per key block, with the
// row's max m and sum l over its visible blocks. One CTA per (query block, head); each thread owns the key
// blocks j ≡ tid (mod 128), so the sums run in row order whatever the schedule. Dynamic smem: nk floats.
__global__ void __launch_bounds__(128)
    sparge_predict_xattn_blocks(const float2* __restrict__ me, const int* __restrict__ heads, int Hq,
                                int nHeads, const Strided st, float* __restrict__ blockMass) {
  extern __shared__ float sums[];
  __shared__ float red[8];
  const int i = blockIdx.x, y = blockIdx.y, b = y / nHeads, hq = heads[y % nHeads];
  for (int j = threadIdx.x; j < st.nk; j += blockDim.x) sums[j] = 0.f;
  const int aEnd = min(st.rows, (i + 1) * st.rowsPerBlock);
  for (int a = i * st.rowsPerBlock; a < aEnd; ++a) {
    const KeySpan c = st.columnsOf(a);
    if (c.empty()) continue;  // no key: the row adds nothing, as on the CPU
    const int j0 = c.first / st.colsPerBlock, j1 = c.last / st.colsPerBlock;
    const float2* row = me + ((size_t)y * st.rows + a) * st.nk;
    float m = -INFINITY;
    for (int j = j0 + threadIdx.x; j <= j1; j += blockDim.x) m = fmaxf(m, row[j].x);
    m = ctaMax(m, red);
    float l = 0.f;
    for (int j = j0 + threadIdx.x; j <= j1; j += blockDim.x)
      if (row[j].y > 0.f) l += row[j].y * expf(row[j].x - m);
    l = ctaSum(l, red);
    for (int j = j0 + threadIdx.x; j <= j1; j += blockDim.x)
      if (row[j].y > 0.f) sums[j] += row[j].y * expf(row[j].x - m) / l;
  }
  float* out = blockMass + ((size_t)(b * Hq + hq) * st.nq + i) * st.nk;
  for (int j = threadIdx.x; j < st.nk; j += blockDim.x) out[j] = sums[j];
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

// One warp per row (query block i of one head): the score (block mass over the row's total), the blocks the
// method keeps (key block 0, and the diagonal on causal entries, whose mass counts toward τ first there), and
// the others largest first (ties to the lower index) while the cumulative mass stays below τ · total.
// Dynamic smem per warp: the sorted keys (32*E floats) and their blocks (32*E ints).
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
  const size_t rowOff = ((size_t)(b * in.Hq + hq) * in.nq + i) * nk;
  const float* mass = in.blockMass + rowOff;
  auto forced = [&](int j) {
    return j == 0 || (in.causal && (in.blocks[(size_t)i * nk + j] & kBlockOnDiagonal));
  };
  double total = 0, forcedSum = 0;
  for (int j = lane; j < nk; j += 32) {
    total += mass[j];
    if (in.causal && forced(j)) forcedSum += mass[j];
  }
  for (int o = 16; o > 0; o >>= 1) {
    total += __shfl_xor_sync(0xffffffffu, total, o);
    forcedSum += __shfl_xor_sync(0xffffffffu, forcedSum, o);
  }
  for (int j = lane; j < nk; j += 32) {
    out.score[rowOff + j] = total > 0 ? float(double(mass[j]) / total) : 0.f;
    out.methodForced[rowOff + j] = forced(j) ? 1 : 0;
    out.selected[rowOff + j] = 0;
  }
  // Forced blocks of causal rows (the CPU's NaN) and padding sort after every mass (>= 0).
  float key[E];
  int id[E];
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const int j = lane * E + e;
    key[e] = j < nk && !(in.causal && forced(j)) ? mass[j] : -1.f;
    id[e] = j < nk ? j : INT_MAX;
  }
  bitonicSortWarp<E>(key, id);
#pragma unroll
  for (int e = 0; e < E; ++e) {
    sortedKey[lane * E + e] = key[e];
    sortedId[lane * E + e] = id[e];
  }
  __syncwarp();
  if (lane == 0) {
    const double required = in.threshold[hq] * total;
    double cumulative = forcedSum;
    for (int x = 0; x < nk; ++x) {
      if (sortedKey[x] < 0.f || !(cumulative < required)) break;
      out.selected[rowOff + sortedId[x]] = 1;
      cumulative += sortedKey[x];
    }
  }
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

template <typename T, int D>
void scoreKernel(const MethodLaunch& l, const Strided& st, float2* me) {
  const Problem& p = l.problem;
  const size_t smem = 2 * (kRows + kCols) * D * sizeof(T) + kRows * (kCols + kPad) * sizeof(float);
  requireSharedMemory(smem, "XAttention's score kernel", D);
  auto kernel = sparge_predict_xattn_scores<T, D>;
  if (smem > 48 * 1024)
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
          "cudaFuncSetAttribute(sparge_predict_xattn_scores)");
  dim3 grid((st.rows + kRows - 1) / kRows, p.B * p.nHeads);
  kernel<<<grid, 128, smem, l.stream>>>(static_cast<const T*>(l.qkv.q), static_cast<const T*>(l.qkv.k),
                                        p.heads, p.Hq, p.Hkv, p.nHeads, p.Nkv, st, me);
  checkLaunch("sparge_predict_xattn_scores");
}

}  // namespace

void xattentionStats(const MethodLaunch& l, DeviceBuffer& stats, DeviceBuffer& scratch) {
  const Problem& p = l.problem;
  const Strided st = stridedOf(l, strideOf(l));
  scratch.reserve(sizeof(float2) * p.B * p.nHeads * (size_t)st.rows * p.nk, "XAttention block maxima");
  stats.reserve(sizeof(float) * p.B * p.Hq * (size_t)p.nq * p.nk, "XAttention block mass");
  auto* me = scratch.as<float2>();
  withHeadDim(p.D, "XAttention", [&](auto d) {
    if (l.qkv.et == ElemType::F16)
      scoreKernel<__half, decltype(d)::value>(l, st, me);
    else
      scoreKernel<__nv_bfloat16, decltype(d)::value>(l, st, me);
  });
  const size_t smem = sizeof(float) * p.nk;
  if (smem > 48 * 1024)
    check(cudaFuncSetAttribute(sparge_predict_xattn_blocks, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               (int)smem),
          "cudaFuncSetAttribute(sparge_predict_xattn_blocks)");
  sparge_predict_xattn_blocks<<<dim3(p.nq, p.B * p.nHeads), 128, smem, l.stream>>>(
      me, p.heads, p.Hq, p.nHeads, st, stats.as<float>());
  checkLaunch("sparge_predict_xattn_blocks");
}

void xattentionSelect(const MethodLaunch& l, MethodRows& rows, DeviceBuffer& scratch) {
  const Problem& p = l.problem;
  if (p.nk > 1024)
    throw Error("XAttention", std::to_string(p.nk) +
                                  " key blocks: the CUDA selection sorts up to 1024 a row; use --engine cpu");
  std::vector<double> threshold(size_t(p.Hq));
  for (int h = 0; h < p.Hq; ++h) threshold[size_t(h)] = (*l.params)[size_t(h)].xattention.threshold;
  scratch.reserve(sizeof(double) * threshold.size(), "XAttention thresholds");
  check(cudaMemcpyAsync(scratch.get(), threshold.data(), sizeof(double) * threshold.size(),
                        cudaMemcpyHostToDevice, l.stream),
        "upload XAttention thresholds");
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
  if (p.nk <= 32) return selectRows<1>(in, rows, l.stream);
  if (p.nk <= 64) return selectRows<2>(in, rows, l.stream);
  if (p.nk <= 128) return selectRows<4>(in, rows, l.stream);
  if (p.nk <= 256) return selectRows<8>(in, rows, l.stream);
  if (p.nk <= 512) return selectRows<16>(in, rows, l.stream);
  selectRows<32>(in, rows, l.stream);
}

}  // namespace sparge::cuda::predictors

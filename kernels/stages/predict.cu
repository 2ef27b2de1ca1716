// Stage 1 of SpargeAttn on the GPU (docs/method.md, section 3): K token mean, block pooling and
// self-similarity, compressed scores, per-row selection, final mask, reasons and the delta LUT.
// Rounding mirrors the CPU engine (stage1.h): pooled values, scores and probabilities are
// rounded to the input half dtype; unit vectors to fp16; thresholds compared as the CPU does.
#include <cuda_runtime.h>

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdlib>

#include "common/cuda_util.h"
#include "common/device_common.cuh"
#include "common/head_dim.h"
#include "common/launch.h"
#include "common/mma_sm80.cuh"
#include "sparge/core/result.h"
#include "stages/block_pass.cuh"
#include "stages/stage1_parts.cuh"

namespace sparge::cuda {
namespace {

// Tokens a key-mean thread sums in double before its chunk's atomic add (the chunks' adds land in any order;
// sums of fp16/bf16 values of ordinary range are exact in double, so the order does not show). 64 rather
// than 256: each thread's chain of dependent double adds is what the kernel waited on.
constexpr int kMeanChunk = 64;

template <typename T>
__global__ void sparge_predict_key_mean(const T* __restrict__ k, int N, int D, double* __restrict__ sums) {
  int bh = blockIdx.x;
  int d = threadIdx.x;
  int t0 = blockIdx.y * kMeanChunk;
  int t1 = min(t0 + kMeanChunk, N);
  const T* base = k + (size_t)bh * N * D;
  double acc = 0;
  for (int t = t0; t < t1; ++t) acc += (double)Elem<T>::toF(base[(size_t)t * D + d]);
  atomicAdd(&sums[(size_t)bh * D + d], acc);
}

template <typename T>
__global__ void sparge_predict_key_mean_finalize(const double* __restrict__ sums, int N, int total, T* km) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  if (x < total) km[x] = Elem<T>::fromF((float)(sums[x] / (double)N));
}

// One CTA (4 warps) per (block, bh): blockStatsPass (block_pass.cuh) without the INT8 amax.
template <typename T, int NC>
__global__ void __launch_bounds__(128)
    sparge_predict_block_stats(const T* __restrict__ x, int N, int BS, const T* __restrict__ km,
                               T* __restrict__ pooled, float* __restrict__ selfSim) {
  blockStatsPass<T, NC, false>(x, N, BS, km, pooled, selfSim, blockIdx.x, blockIdx.y, gridDim.x);
}

// Compressed scores of 16 query blocks against every key block of one head, on the tensor cores
// (m16n8k16, fp32 accumulators): each warp keeps the 16 pooled query rows as A fragments and walks key
// blocks 8 at a time, so the pooled K of a head is read once per 16 query blocks instead of once per query
// block. The fp32 sums round to the input type as the CPU engine's do (their summation order differs, which
// moves a sum by an fp32 ulp at most before that rounding).
template <typename T, int D>
__global__ void __launch_bounds__(128)
    sparge_predict_scores(const T* __restrict__ pq, const T* __restrict__ pk, int Hq, int Hkv, int nq, int nk,
                          float scale, T* __restrict__ scores) {
  constexpr int kSteps = D / 16;
  const int i0 = blockIdx.x * 16, bhq = blockIdx.y;
  const int b = bhq / Hq, hq = bhq % Hq;
  const int bhk = b * Hkv + hq / (Hq / Hkv);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const T* qRows = pq + (size_t)bhq * nq * D;
  const T* kRows = pk + (size_t)bhk * nk * D;
  uint32_t a[kSteps][4];
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    const int col = s * 16 + 2 * t;
    a[s][0] = pairAt<T, D>(qRows, i0 + g, col, nq);
    a[s][1] = pairAt<T, D>(qRows, i0 + g + 8, col, nq);
    a[s][2] = pairAt<T, D>(qRows, i0 + g, col + 8, nq);
    a[s][3] = pairAt<T, D>(qRows, i0 + g + 8, col + 8, nq);
  }
  for (int j0 = warp * 8; j0 < nk; j0 += 4 * 8) {
    float c[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
      const int col = s * 16 + 2 * t;
      sm80::Mma<T>::run(c, a[s], pairAt<T, D>(kRows, j0 + g, col, nk),
                        pairAt<T, D>(kRows, j0 + g, col + 8, nk));
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = i0 + g + 8 * (e >> 1), col = j0 + 2 * t + (e & 1);
      if (row < nq && col < nk)
        scores[((size_t)bhq * nq + row) * nk + col] = Elem<T>::fromF(roundT<T>(c[e]) * scale);
    }
  }
}

// The steps j < 32 of the merges k = kFrom .. kTo, all inside warps: each thread loads its elements once,
// exchanges them with shuffles and stores them back (one barrier instead of one per step). Lanes past np
// (np < 32) take part in the shuffles with elements that are never stored; their partners are too.
__device__ void bitonicWarpSteps(float* keys, int* idx, int np, int kFrom, int kTo) {
  const int lane = threadIdx.x & 31;
  for (int t = threadIdx.x; t - lane < np; t += blockDim.x) {
    float key = t < np ? keys[t] : -INFINITY;
    int id = t < np ? idx[t] : INT_MAX;
    for (int k = kFrom; k <= kTo; k <<= 1)
      for (int j = min(k >> 1, 16); j > 0; j >>= 1) exchangeInWarp(key, id, t, k, j, j);
    if (t < np) {
      keys[t] = key;
      idx[t] = id;
    }
  }
  __syncthreads();
}

// Bitonic sort of np (a power of two) keys in shared memory, descending probability, ties by ascending
// index (torch's sort is unstable: any order among equal probabilities is a legitimate outcome, see the
// near-tie test). Steps across warps (j >= 32) go through shared memory; the rest stay in registers.
// Called by every thread of the CTA (blockDim.x a multiple of 32).
__device__ void bitonicSortDescending(float* keys, int* idx, int np) {
  bitonicWarpSteps(keys, idx, np, 2, min(np, 32));
  for (int k = 64; k <= np; k <<= 1) {
    for (int j = k >> 1; j >= 32; j >>= 1) {
      for (int t = threadIdx.x; t < np; t += blockDim.x) {
        const int o = t ^ j;
        if (o > t) {
          const bool desc = (t & k) == 0;
          const float ka = keys[t], kb = keys[o];
          const int ia = idx[t], ib = idx[o];
          if (outOfOrder(desc, ka, ia, kb, ib)) {
            keys[t] = kb;
            keys[o] = ka;
            idx[t] = ib;
            idx[o] = ia;
          }
        }
      }
      __syncthreads();
    }
    bitonicWarpSteps(keys, idx, np, k, k);
  }
}

// How many of the sorted probabilities the head selects (at least one): top-k, or the cdf accumulated in
// fp32 with each prefix rounded to fp16 and compared with float(τ), as the CPU engine does.
__device__ __forceinline__ int selectedCount(const HeadParamsDev& prm, const float* sorted, int nk) {
  int n = 0;
  if (prm.mode == 1) {
    n = (int)truncf(prm.topk * (float)nk);
  } else {
    float c = 0.f;
    for (int r = 0; r < nk; ++r) {
      c += sorted[r];
      if (__half2float(__float2half_rn(c)) <= prm.tau)
        n = r + 1;
      else
        break;
    }
  }
  return max(n, 1);
}

// What every selection kernel needs of one row (query block i of one head and batch item).
struct SelectRow {
  int i, bhq, bhk;
  size_t rowOff;  // of the row in the [nq][nk] outputs
  HeadParamsDev prm;
  float theta;  // the CPU engine compares s > float(θ)
  bool simQ;

  __device__ __forceinline__ SelectRow(const SelectArgs& a, int i_, int hq, int b, int Hq, int Hkv, int nq,
                                       int nk)
      : i(i_),
        bhq(b * Hq + hq),
        bhk(b * Hkv + hq / (Hq / Hkv)),
        rowOff(((size_t)bhq * nq + i) * nk),
        prm(a.params[hq]),
        theta((float)prm.theta),
        simQ(a.selfSimQ[(size_t)bhq * nq + i] > theta) {}

  __device__ __forceinline__ bool valid(const SelectArgs& a, int nk, int j) const {
    return a.blocks[(size_t)i * nk + j] & kBlockValid;
  }
  __device__ __forceinline__ bool simK(const SelectArgs& a, int nk, int j) const {
    return a.selfSimK[(size_t)bhk * nk + j] > theta;  // NaN compares false
  }
  // The masked score: non-similar K columns and blocks no query of the row may see -> -inf.
  template <typename T>
  __device__ __forceinline__ float maskedScore(const SelectArgs& a, int nk, int j) const {
    return valid(a, nk, j) && simK(a, nk, j) ? Elem<T>::toF(static_cast<const T*>(a.scores)[rowOff + j])
                                             : -INFINITY;
  }
  // P̂ of a block from its masked score, the row max and sum; rounded to fp16 for either input type, as the
  // CPU engine does (an all -inf row's softmax is all NaN).
  __device__ __forceinline__ static float prob(float e, float sum, bool allMasked) {
    return allMasked ? NAN : __half2float(__float2half_rn(e / sum));
  }
  // Reason bits as in core::selectBlocks and the final mask bit of block j (on when any "on" reason holds
  // and it is valid); writes both outputs and returns the bit.
  __device__ __forceinline__ uint8_t finish(const SelectArgs& a, int nk, int j, bool selected) const {
    const uint8_t flags = a.blocks[(size_t)i * nk + j];
    uint8_t rs = (selected ? core::kReasonSelected : 0) | (simQ ? 0 : core::kReasonForcedRow) |
                 (simK(a, nk, j) ? 0 : core::kReasonForcedCol) | (prm.dense ? core::kReasonDenseHead : 0) |
                 ((a.sink && j == 0) ? core::kReasonSink : 0) |
                 ((a.diagonal && (flags & kBlockOnDiagonal)) ? core::kReasonDiagonal : 0);
    uint8_t m = rs ? 1 : 0;
    if (!(flags & kBlockValid)) {
      m = 0;
      rs |= core::kReasonCausalOff;
    }
    a.mask[rowOff + j] = m;
    a.reasons[rowOff + j] = rs;
    return m;
  }
};

// One CTA per (q-block, selected head, batch), for rows of more than kSelectWarpKeys blocks. Dynamic smem:
// keys[np] floats, idx[np] ints, two byte rows of nk (selected, final mask).
template <typename T>
__global__ void __launch_bounds__(256)
    sparge_predict_select(const SelectArgs a, const int* __restrict__ heads, int Hq, int Hkv, int nq, int nk,
                          int np) {
  extern __shared__ unsigned char smem[];
  float* keys = reinterpret_cast<float*>(smem);
  int* idx = reinterpret_cast<int*>(keys + np);
  uint8_t* sel = reinterpret_cast<uint8_t*>(idx + np);
  uint8_t* fin = sel + nk;
  __shared__ float red[8];
  __shared__ int sN;
  const SelectRow r(a, blockIdx.x, heads[blockIdx.y], blockIdx.z, Hq, Hkv, nq, nk);
  const int tid = threadIdx.x, nt = blockDim.x, warp = tid >> 5;

  float mx = -INFINITY;
  for (int j = tid; j < nk; j += nt) {
    keys[j] = r.maskedScore<T>(a, nk, j);
    mx = fmaxf(mx, keys[j]);
  }
  mx = ctaMax(mx, red);
  const bool allMasked = (mx == -INFINITY);
  float sum = 0.f;
  for (int j = tid; j < nk; j += nt) {
    float e = allMasked ? 0.f : expf(keys[j] - mx);
    keys[j] = e;
    sum += e;
  }
  sum = ctaSum(sum, red);
  for (int j = tid; j < np; j += nt) {
    if (j < nk) {
      const float p = SelectRow::prob(keys[j], sum, allMasked);
      a.prob[r.rowOff + j] = p;
      keys[j] = p;
      idx[j] = j;
      sel[j] = 0;
    } else {
      keys[j] = -1.f;  // padding sorts last
      idx[j] = INT_MAX;
    }
  }
  __syncthreads();

  if (!allMasked) {
    bitonicSortDescending(keys, idx, np);
    if (tid == 0) sN = selectedCount(r.prm, keys, nk);
    __syncthreads();
    const int n = min(sN, nk);
    for (int x = tid; x < n; x += nt) sel[idx[x]] = 1;
  }
  // An all-NaN row selects nothing: upstream's searchsorted keeps all nk, but every valid block of such a
  // row is a forced (non-similar) column, so the mask is the same and the blocks are reported as forced.
  __syncthreads();
  for (int j = tid; j < nk; j += nt) fin[j] = r.finish(a, nk, j, sel[j]);
  __syncthreads();
  if (warp == 0) writeDeltaLut(fin, nk, a.lut + r.rowOff, a.validCount + (size_t)r.bhq * nq + r.i);
}

// Rows of up to kSelectWarpKeys blocks: one warp per row and no CTA barrier (the CTA kernel's ~20 barriers a
// row made selection latency-bound: kernels/NOTES.md, v9 and v13). Lane l holds the row's
// sorting positions l*E .. l*E+E-1 in registers: bitonic steps with j < E swap inside a thread, the others
// exchange with lane l ^ (j/E); the same network positions and comparisons as bitonicSortDescending, padded
// to 32*E, so the same order (a strict total order without NaN; no swap at all in an all-NaN row). Top-k
// rows without a NaN skip the sort: their count does not depend on the order, and the first n of it are the
// n smallest words, found by bisection (markSmallest) in a fraction of the sort's instructions. Dynamic smem
// per warp: the sorted probabilities (32*E floats, for the CDF), then the selected and final-mask rows.
constexpr int kSelectWarps = 4, kSelectWarpKeys = 1024;

template <typename T, int E>
__global__ void __launch_bounds__(kSelectWarps * 32)
    sparge_predict_select_warp(const SelectArgs a, const int* __restrict__ heads, int Hq, int Hkv, int nq,
                               int nk, int nHeads, int rows) {
  extern __shared__ unsigned char smem[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int row = blockIdx.x * kSelectWarps + warp;
  if (row >= rows) return;  // the whole warp
  float* sorted = reinterpret_cast<float*>(smem) + warp * 32 * E;
  uint8_t* sel = smem + kSelectWarps * 32 * E * sizeof(float) + warp * 2 * nk;
  uint8_t* fin = sel + nk;
  const SelectRow r(a, row % nq, heads[(row / nq) % nHeads], row / (nq * nHeads), Hq, Hkv, nq, nk);

  // The row's probabilities first go through `sorted` (the division stays out of the sort's registers,
  // which it would spill around its slow path).
  float mx = -INFINITY;
  for (int j = lane; j < nk; j += 32) {
    sorted[j] = r.maskedScore<T>(a, nk, j);
    mx = fmaxf(mx, sorted[j]);
  }
  mx = warpMax(mx);
  const bool allMasked = (mx == -INFINITY);
  float sum = 0.f;
  for (int j = lane; j < nk; j += 32) {
    sorted[j] = allMasked ? 0.f : expf(sorted[j] - mx);
    sum += sorted[j];
  }
  sum = warpSum(sum);
  for (int j = lane; j < nk; j += 32) {
    sorted[j] = SelectRow::prob(sorted[j], sum, allMasked);
    a.prob[r.rowOff + j] = sorted[j];
  }
  __syncwarp();
  float key[E];
  int id[E];
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const int j = lane * E + e;
    key[e] = j < nk ? sorted[j] : -1.f;  // padding sorts last
    id[e] = j < nk ? j : INT_MAX;
  }
  __syncwarp();
  for (int j = lane; j < nk; j += 32) sel[j] = 0;
  __syncwarp();
  if (!allMasked && r.prm.mode == 1 && !warpHasNaN<E>(key)) {
    // Top-k takes a count that does not depend on the order: the smallest words without the sort.
    uint32_t word[E];
#pragma unroll
    for (int e = 0; e < E; ++e) word[e] = descendingKey(key[e]);
    // Top-k's count does not read the sorted row.
    markSmallest<E>(word, min(selectedCount(r.prm, sorted, nk), nk), nk, sel);
  } else if (!allMasked) {  // an all-NaN row selects nothing (see sparge_predict_select)
    bitonicSortWarp<E>(key, id);
#pragma unroll
    for (int e = 0; e < E; ++e) sorted[lane * E + e] = key[e];
    __syncwarp();
    int n = lane == 0 ? selectedCount(r.prm, sorted, nk) : 0;
    n = min(__shfl_sync(0xffffffffu, n, 0), nk);
#pragma unroll
    for (int e = 0; e < E; ++e)
      if (lane * E + e < n) sel[id[e]] = 1;
  }
  __syncwarp();
  for (int j = lane; j < nk; j += 32) fin[j] = r.finish(a, nk, j, sel[j]);
  __syncwarp();
  writeDeltaLut(fin, nk, a.lut + r.rowOff, a.validCount + (size_t)r.bhq * nq + r.i);
}

__device__ __forceinline__ uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Random benchmark data; the sparge_other_ prefix files it under "other" in the profiler's stages.
template <typename T>
__global__ void sparge_other_random_fill(T* x, int64_t n, uint64_t seed, float stddev) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  for (; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    uint64_t h = splitmix(seed ^ splitmix((uint64_t)i));
    float u1 = ((h >> 40) + 1) * (1.0f / 16777217.0f);
    float u2 = ((h & 0xffffff)) * (1.0f / 16777216.0f);
    float g = sqrtf(-2.f * logf(u1)) * cospif(2.f * u2);
    x[i] = Elem<T>::fromF(g * stddev);
  }
}

template <typename T>
void keyMean(const void* k, int BH, int N, int D, double* scratch, void* km, cudaStream_t s) {
  check(cudaMemsetAsync(scratch, 0, sizeof(double) * BH * D, s), "cudaMemsetAsync");
  dim3 grid(BH, (N + kMeanChunk - 1) / kMeanChunk);
  sparge_predict_key_mean<T><<<grid, D, 0, s>>>(static_cast<const T*>(k), N, D, scratch);
  checkLaunch("sparge_predict_key_mean");
  int total = BH * D;
  sparge_predict_key_mean_finalize<T>
      <<<(total + 255) / 256, 256, 0, s>>>(scratch, N, total, static_cast<T*>(km));
  checkLaunch("sparge_predict_key_mean_finalize");
}

template <typename T>
void blockStats(const void* x, int BH, int N, int D, int BS, const void* km, void* pooled, float* sim,
                cudaStream_t s) {
  dim3 grid((N + BS - 1) / BS, BH);
  withHeadDim(D, "CUDA engine", [&](auto d) {
    sparge_predict_block_stats<T, decltype(d)::value / 32><<<grid, 128, 0, s>>>(
        static_cast<const T*>(x), N, BS, static_cast<const T*>(km), static_cast<T*>(pooled), sim);
  });
  checkLaunch("sparge_predict_block_stats");
}

template <typename T>
void scores(const Problem& p, const void* pq, const void* pk, void* out, cudaStream_t s) {
  dim3 grid((p.nq + 15) / 16, p.B * p.Hq);
  float scale = (float)(1.0 / std::sqrt((double)p.D));
  auto* q = static_cast<const T*>(pq);
  auto* k = static_cast<const T*>(pk);
  withHeadDim(p.D, "CUDA engine", [&](auto d) {
    sparge_predict_scores<T, decltype(d)::value>
        <<<grid, 128, 0, s>>>(q, k, p.Hq, p.Hkv, p.nq, p.nk, scale, static_cast<T*>(out));
  });
  checkLaunch("sparge_predict_scores");
}

template <typename T, int E>
void selectRowsByWarp(const Problem& p, const SelectArgs& a, cudaStream_t s) {
  const int rows = p.nq * p.nHeads * p.B;
  const size_t smem = kSelectWarps * (32 * E * sizeof(float) + 2 * (size_t)p.nk);
  if (smem > 48 * 1024)
    check(cudaFuncSetAttribute(sparge_predict_select_warp<T, E>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               (int)smem),
          "cudaFuncSetAttribute(sparge_predict_select_warp)");
  const int grid = (rows + kSelectWarps - 1) / kSelectWarps;
  sparge_predict_select_warp<T, E>
      <<<grid, kSelectWarps * 32, smem, s>>>(a, p.heads, p.Hq, p.Hkv, p.nq, p.nk, p.nHeads, rows);
  checkLaunch("sparge_predict_select_warp");
}

template <typename T>
void selectRows(const Problem& p, const SelectArgs& a, cudaStream_t s) {
  if (p.nk <= kSelectWarpKeys && !a.ctaPerRow) {
    if (p.nk <= 32) return selectRowsByWarp<T, 1>(p, a, s);
    if (p.nk <= 64) return selectRowsByWarp<T, 2>(p, a, s);
    if (p.nk <= 128) return selectRowsByWarp<T, 4>(p, a, s);
    if (p.nk <= 256) return selectRowsByWarp<T, 8>(p, a, s);
    if (p.nk <= 512) return selectRowsByWarp<T, 16>(p, a, s);
    return selectRowsByWarp<T, 32>(p, a, s);
  }
  int np = 1;
  while (np < p.nk) np <<= 1;
  size_t smem = (size_t)np * 8 + 2 * (size_t)p.nk;
  smem = (smem + 15) & ~size_t(15);
  if (smem > 48 * 1024)
    check(cudaFuncSetAttribute(sparge_predict_select<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               (int)smem),
          "cudaFuncSetAttribute(sparge_predict_select)");
  dim3 grid(p.nq, p.nHeads, p.B);
  sparge_predict_select<T><<<grid, 256, smem, s>>>(a, p.heads, p.Hq, p.Hkv, p.nq, p.nk, np);
  checkLaunch("sparge_predict_select");
}

}  // namespace

void launchKeyMean(ElemType t, const void* k, int BH, int N, int D, double* scratch, void* km,
                   cudaStream_t s) {
  if (t == ElemType::F16)
    keyMean<__half>(k, BH, N, D, scratch, km, s);
  else
    keyMean<__nv_bfloat16>(k, BH, N, D, scratch, km, s);
}

void launchBlockStats(ElemType t, const void* x, int BH, int N, int D, int BS, const void* km, void* pooled,
                      float* selfSim, cudaStream_t s) {
  if (t == ElemType::F16)
    blockStats<__half>(x, BH, N, D, BS, km, pooled, selfSim, s);
  else
    blockStats<__nv_bfloat16>(x, BH, N, D, BS, km, pooled, selfSim, s);
}

void launchScores(ElemType t, const Problem& p, const void* pq, const void* pk, void* out, cudaStream_t s) {
  if (t == ElemType::F16)
    scores<__half>(p, pq, pk, out, s);
  else
    scores<__nv_bfloat16>(p, pq, pk, out, s);
}

void launchSelect(ElemType t, const Problem& p, const SelectArgs& a, cudaStream_t s) {
  if (t == ElemType::F16)
    selectRows<__half>(p, a, s);
  else
    selectRows<__nv_bfloat16>(p, a, s);
}

void launchRandomFill(ElemType t, void* x, int64_t n, uint64_t seed, float stddev, cudaStream_t s) {
  int grid = (int)std::min<int64_t>((n + 255) / 256, 65536);
  if (t == ElemType::F16)
    sparge_other_random_fill<__half><<<grid, 256, 0, s>>>(static_cast<__half*>(x), n, seed, stddev);
  else
    sparge_other_random_fill<__nv_bfloat16>
        <<<grid, 256, 0, s>>>(static_cast<__nv_bfloat16*>(x), n, seed, stddev);
  checkLaunch("sparge_other_random_fill");
}

}  // namespace sparge::cuda

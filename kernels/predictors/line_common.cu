// The device steps MInference and FlexPrefill share (line_common.h). Rounding mirrors the CPU predictors
// (core/src/method_*.cpp): scores and pooled values are rounded to the input type where upstream holds them
// in it; sums that the CPU runs in an order the GPU can keep (per column, per diagonal, per tile mean, per
// dot product) run in that order.
#include <algorithm>
#include <cmath>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>

#include "common/cuda_util.h"
#include "common/device_common.cuh"
#include "common/head_dim.h"
#include "common/mma_sm80.cuh"
#include "predictors/line_common.h"
#include "predictors/line_device.cuh"

namespace sparge::cuda::predictors::lines {
namespace {

template <typename T>
__global__ void sparge_predict_line_last_queries(const T* __restrict__ q, Problem p, int L, int Lpad,
                                                 float mul, T* __restrict__ out) {
  const SlotHeads h = slotHeads(p, blockIdx.y);
  const int r = blockIdx.x;
  const T* src = q + ((size_t)h.bhq * p.Nq + (p.Nq - L + r)) * p.D;
  T* dst = out + ((size_t)blockIdx.y * Lpad + r) * p.D;
  for (int d = threadIdx.x; d < p.D; d += blockDim.x)
    dst[d] = r < L ? Elem<T>::fromF(Elem<T>::toF(src[d]) * mul) : Elem<T>::fromF(0.f);
}

// Two consecutive elements (col even) of row `row` of a [n][D] array as one fragment register; rows past n
// read as zero.
template <typename T, int D>
__device__ __forceinline__ uint32_t pairOf(const T* base, long long row, int col, long long n) {
  return row < n ? *reinterpret_cast<const uint32_t*>(base + (size_t)row * D + col) : 0u;
}

// One CTA per 128 keys of a slot; warp w holds query rows 16w .. 16w+15 as A fragments and walks the keys
// 8 at a time on the tensor cores (m16n8k16, fp32 accumulators).
constexpr int kScoreKeys = 128;
template <typename T, int D>
__global__ void __launch_bounds__(256)
    sparge_predict_line_scores(const T* __restrict__ lastQ, const T* __restrict__ k, Problem p, int L,
                               int Lpad, float postScale, T* __restrict__ S) {
  constexpr int kSteps = D / 16;
  const SlotHeads h = slotHeads(p, blockIdx.y);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int r0 = warp * 16;
  const T* qRows = lastQ + (size_t)blockIdx.y * Lpad * D;
  const T* kRows = k + (size_t)h.bhk * p.Nkv * D;
  uint32_t a[kSteps][4];
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    const int col = s * 16 + 2 * t;
    a[s][0] = pairOf<T, D>(qRows, r0 + g, col, Lpad);
    a[s][1] = pairOf<T, D>(qRows, r0 + g + 8, col, Lpad);
    a[s][2] = pairOf<T, D>(qRows, r0 + g, col + 8, Lpad);
    a[s][3] = pairOf<T, D>(qRows, r0 + g + 8, col + 8, Lpad);
  }
  const int kEnd = min(p.Nkv, (int)(blockIdx.x + 1) * kScoreKeys);
  for (int j0 = blockIdx.x * kScoreKeys; j0 < kEnd; j0 += 8) {
    float c[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
      const int col = s * 16 + 2 * t;
      sm80::Mma<T>::run(c, a[s], pairOf<T, D>(kRows, j0 + g, col, p.Nkv),
                        pairOf<T, D>(kRows, j0 + g, col + 8, p.Nkv));
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = r0 + g + 8 * (e >> 1), col = j0 + 2 * t + (e & 1);
      if (row < L && col < p.Nkv)
        S[((size_t)blockIdx.y * L + row) * p.Nkv + col] = Elem<T>::fromF(roundT<T>(c[e]) * postScale);
    }
  }
}

// Max and Σ exp(s − max) of each row over the keys its query sees (all threads get the result).
template <typename T>
__global__ void __launch_bounds__(256)
    sparge_predict_line_row_stats(const T* __restrict__ S, Problem p, int L, float* rowMax, float* rowSum) {
  using Reduce = cub::BlockReduce<float, 256>;
  __shared__ typename Reduce::TempStorage tmp;
  __shared__ float sMax;
  const int r = blockIdx.x;
  const Visible v = visibleOf(p.Nq - L + r, p);
  const T* row = S + ((size_t)blockIdx.y * L + r) * p.Nkv;
  float mx = -INFINITY;
  for (long long k = v.first + threadIdx.x; k <= v.last; k += blockDim.x)
    mx = fmaxf(mx, Elem<T>::toF(row[k]));
  mx = Reduce(tmp).Reduce(mx, [](float a, float b) { return fmaxf(a, b); });
  if (threadIdx.x == 0) sMax = mx;
  __syncthreads();
  mx = sMax;
  float sum = 0.f;
  for (long long k = v.first + threadIdx.x; k <= v.last; k += blockDim.x)
    sum += expf(Elem<T>::toF(row[k]) - mx);
  sum = Reduce(tmp).Sum(sum);
  if (threadIdx.x == 0) {
    rowMax[(size_t)blockIdx.y * L + r] = mx;
    rowSum[(size_t)blockIdx.y * L + r] = sum;
  }
}

// Thread x sums column x and diagonal x over the rows in query order (the CPU's order).
template <typename T>
__global__ void __launch_bounds__(256)
    sparge_predict_line_sums(const T* __restrict__ S, Problem p, int L, const float* __restrict__ rowMax,
                             const float* __restrict__ rowSum, LineSums out) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, s = blockIdx.y;
  const T* rows = S + (size_t)s * L * p.Nkv;
  const float* mx = rowMax + (size_t)s * L;
  const float* sum = rowSum + (size_t)s * L;
  if (x < p.Nkv) {
    float acc = 0.f;
    for (int r = 0; r < L; ++r) {
      const Visible v = visibleOf(p.Nq - L + r, p);
      if (x >= v.first && x <= v.last)
        acc += expf(Elem<T>::toF(rows[(size_t)r * p.Nkv + x]) - mx[r]) / sum[r];
    }
    out.vertical[(size_t)s * p.Nkv + x] = x < out.infColumns ? INFINITY : acc / out.divisor;
  }
  if (x < out.nSlash) {
    float acc = 0.f;
    for (int r = 0; r < L; ++r) {
      const long long q = p.Nq - L + r, k = q - x;
      const Visible v = visibleOf(q, p);
      if (k >= 0 && k < p.Nkv && k >= v.first && k <= v.last)
        acc += expf(Elem<T>::toF(rows[(size_t)r * p.Nkv + k]) - mx[r]) / sum[r];
    }
    out.slash[(size_t)s * out.nSlash + x] = x < out.infDiagonals ? INFINITY : acc / out.divisor;
  }
}

// Thread d of CTA (tile, sequence) sums column d of the tile's rows in order (core's meanRows).
template <typename T>
__global__ void sparge_predict_line_tile_means(const T* __restrict__ x, Problem p, int rows, int seqRows,
                                               TileMeans t, int seqIsSlot) {
  const int tile = blockIdx.x, seq = blockIdx.y, nTiles = gridDim.x;
  int src = seq;
  if (seqIsSlot) src = slotHeads(p, seq).bhq;
  const T* base = x + (size_t)src * seqRows * p.D;
  const int r0 = tile * t.tile, r1 = min(rows, r0 + t.tile);
  const float divisor = t.fullTile ? (float)t.tile : (float)(r1 - r0);
  for (int d = threadIdx.x; d < p.D; d += blockDim.x) {
    float sum = 0.f;
    for (int r = r0; r < r1; ++r) sum += Elem<T>::toF(base[(size_t)r * p.D + d]);
    float v = roundT<T>(sum / divisor);
    if (t.postScale != 0.f) v = roundT<T>(v * t.postScale);
    t.out[((size_t)seq * nTiles + tile) * p.D + d] = v;
  }
}

// CTA per (16 query tiles, slot): the query means in shared memory, thread per key tile.
constexpr int kDotRows = 16;
template <typename T>
__global__ void __launch_bounds__(256)
    sparge_predict_line_pooled_dots(const float* __restrict__ pq, const float* __restrict__ pk, Problem p,
                                    int nTq, int nTk, const uint8_t* __restrict__ flags,
                                    float* __restrict__ out) {
  extern __shared__ float qs[];
  const int s = blockIdx.y, i0 = blockIdx.x * kDotRows, D = p.D;
  const SlotHeads h = slotHeads(p, s);
  const int nRows = min(kDotRows, nTq - i0);
  for (int x = threadIdx.x; x < kDotRows * D; x += blockDim.x)
    qs[x] = x < nRows * D ? pq[((size_t)s * nTq + i0) * D + x] : 0.f;
  __syncthreads();
  for (int j = threadIdx.x; j < nTk; j += blockDim.x) {
    const float* kr = pk + ((size_t)h.bhk * nTk + j) * D;
    float acc[kDotRows];
#pragma unroll
    for (int r = 0; r < kDotRows; ++r) acc[r] = 0.f;
    for (int d = 0; d < D; d += 4) {
      const float4 kv = *reinterpret_cast<const float4*>(kr + d);
#pragma unroll
      for (int r = 0; r < kDotRows; ++r) {
        const float* qr = qs + r * D + d;
        acc[r] = __fadd_rn(acc[r], __fmul_rn(qr[0], kv.x));
        acc[r] = __fadd_rn(acc[r], __fmul_rn(qr[1], kv.y));
        acc[r] = __fadd_rn(acc[r], __fmul_rn(qr[2], kv.z));
        acc[r] = __fadd_rn(acc[r], __fmul_rn(qr[3], kv.w));
      }
    }
    for (int r = 0; r < nRows; ++r) {
      const int i = i0 + r;
      out[((size_t)s * nTq + i) * nTk + j] =
          (flags[(size_t)i * nTk + j] & kBlockValid) ? roundT<T>(acc[r]) : -INFINITY;
    }
  }
}

// Warp per row.
__global__ void sparge_predict_line_row_softmax(const float* __restrict__ x, int rows, int len, float* out) {
  const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (row >= rows) return;
  const float* in = x + (size_t)row * len;
  float mx = -INFINITY, sum = 0.f;
  for (int j = lane; j < len; j += 32) mx = fmaxf(mx, in[j]);
  for (int o = 16; o; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  if (mx != -INFINITY)
    for (int j = lane; j < len; j += 32) sum += expf(in[j] - mx);
  for (int o = 16; o; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  for (int j = lane; j < len; j += 32) out[(size_t)row * len + j] = sum > 0.f ? expf(in[j] - mx) / sum : 0.f;
}

// Sort keys (segment in the high word, descendingKey in the low) and each value's index in its segment.
__global__ void sparge_predict_line_sort_keys(const float* __restrict__ keys, long long n, int len,
                                              uint64_t* __restrict__ out, int* __restrict__ iota) {
  const long long x = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (x >= n) return;
  out[x] = (uint64_t(x / len) << 32) | descendingKey(keys[x]);
  iota[x] = int(x % len);
}

// The sorted values back from their indices: sorted position x lies in segment x / len.
__global__ void sparge_predict_line_sort_gather(const float* __restrict__ keys, long long n, int len,
                                                const int* __restrict__ idx, float* __restrict__ sorted) {
  const long long x = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (x < n) sorted[x] = keys[x / len * len + idx[x]];
}

// CTA per slot: tiles of 1024 x 4 values, each thread's four summed in order, a block-wide prefix over the
// threads, the running total carried from tile to tile; stops once the total passes the threshold.
constexpr int kCoverThreads = 1024, kCoverItems = 4;
__global__ void __launch_bounds__(kCoverThreads)
    sparge_predict_line_cover_count(const float* __restrict__ sorted, Problem p, int len,
                                    const double* __restrict__ thresholds, double mul, int* count) {
  using Scan = cub::BlockScan<float, kCoverThreads>;
  using Reduce = cub::BlockReduce<int, kCoverThreads>;
  __shared__ typename Scan::TempStorage scanTmp;
  __shared__ typename Reduce::TempStorage reduceTmp;
  const int s = blockIdx.x;
  const double thr = thresholds[slotHeads(p, s).hq] * mul;
  const float* row = sorted + (size_t)s * len;
  float carry = 0.f;
  int n = 0;
  for (int base = 0; base < len; base += kCoverThreads * kCoverItems) {
    float v[kCoverItems], local = 0.f;
#pragma unroll
    for (int e = 0; e < kCoverItems; ++e) {
      const int x = base + threadIdx.x * kCoverItems + e;
      v[e] = x < len ? row[x] : 0.f;
      local += v[e];
    }
    float before, total;
    Scan(scanTmp).ExclusiveSum(local, before, total);
    float run = carry + before;
    int mine = 0;
#pragma unroll
    for (int e = 0; e < kCoverItems; ++e) {
      const int x = base + threadIdx.x * kCoverItems + e;
      run += v[e];
      if (x < len && (double)run <= thr) ++mine;
    }
    n += Reduce(reduceTmp).Sum(mine);
    __syncthreads();
    carry += total;
    if (!((double)carry <= thr)) break;
  }
  if (threadIdx.x == 0) count[s] = n;
}

__global__ void sparge_predict_line_square_flags(Problem p, int B, int nbq, int nbk, uint8_t* flags) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  if (x >= nbq * nbk) return;
  const long long i = x / nbk, j = x % nbk;
  const long long q0 = i * B, q1 = min((long long)p.Nq, q0 + B), k0 = j * B,
                  k1 = min((long long)p.Nkv, k0 + B) - 1;
  flags[x] = visibleArea(p, q0, q1, k0, k1) > 0 ? kBlockValid : 0;
}

}  // namespace

void launchLastQueries(const MethodLaunch& m, int L, int Lpad, float mul, void* out) {
  const dim3 grid(Lpad, slotCount(m.problem));
  withElem(m.qkv.et, [&](auto tag) {
    using T = decltype(tag);
    sparge_predict_line_last_queries<T><<<grid, 128, 0, m.stream>>>(static_cast<const T*>(m.qkv.q), m.problem,
                                                                    L, Lpad, mul, static_cast<T*>(out));
  });
  checkLaunch("sparge_predict_line_last_queries");
}

void launchLastScores(const MethodLaunch& m, const void* lastQ, int L, int Lpad, float postScale, void* S) {
  const dim3 grid((m.problem.Nkv + kScoreKeys - 1) / kScoreKeys, slotCount(m.problem));
  withElem(m.qkv.et, [&](auto tag) {
    using T = decltype(tag);
    withHeadDim(m.problem.D, "CUDA line predictors", [&](auto d) {
      sparge_predict_line_scores<T, decltype(d)::value><<<grid, 32 * (Lpad / 16), 0, m.stream>>>(
          static_cast<const T*>(lastQ), static_cast<const T*>(m.qkv.k), m.problem, L, Lpad, postScale,
          static_cast<T*>(S));
    });
  });
  checkLaunch("sparge_predict_line_scores");
}

void launchLineSums(const MethodLaunch& m, const void* S, int L, float* rowMax, float* rowSum,
                    const LineSums& out) {
  const int slots = slotCount(m.problem);
  withElem(m.qkv.et, [&](auto tag) {
    using T = decltype(tag);
    sparge_predict_line_row_stats<T>
        <<<dim3(L, slots), 256, 0, m.stream>>>(static_cast<const T*>(S), m.problem, L, rowMax, rowSum);
    checkLaunch("sparge_predict_line_row_stats");
    const int n = std::max(m.problem.Nkv, out.nSlash);
    sparge_predict_line_sums<T><<<dim3((n + 255) / 256, slots), 256, 0, m.stream>>>(
        static_cast<const T*>(S), m.problem, L, rowMax, rowSum, out);
    checkLaunch("sparge_predict_line_sums");
  });
}

void launchTileMeans(const MethodLaunch& m, const TileMeans& t) {
  const Problem& p = m.problem;
  const int nTiles = (t.rows + t.tile - 1) / t.tile;
  const int seqs = t.querySlots ? slotCount(p) : p.B * p.Hkv;
  // Launch's own Q and K hold every head; a given x holds one sequence per slot.
  const int seqIsSlot = t.querySlots && t.x == nullptr;
  const int seqRows = t.x ? (t.stride ? t.stride : t.rows) : (t.querySlots ? p.Nq : p.Nkv);
  const void* x = t.x ? t.x : (t.querySlots ? m.qkv.q : m.qkv.k);
  withElem(m.qkv.et, [&](auto tag) {
    using T = decltype(tag);
    sparge_predict_line_tile_means<T><<<dim3(nTiles, seqs), 128, 0, m.stream>>>(
        static_cast<const T*>(x), p, t.rows, seqRows, t, seqIsSlot);
  });
  checkLaunch("sparge_predict_line_tile_means");
}

void launchPooledDots(const MethodLaunch& m, const float* pq, const float* pk, int nTq, int nTk,
                      const uint8_t* flags, float* out) {
  const dim3 grid((nTq + kDotRows - 1) / kDotRows, slotCount(m.problem));
  const size_t smem = sizeof(float) * kDotRows * m.problem.D;
  withElem(m.qkv.et, [&](auto tag) {
    using T = decltype(tag);
    sparge_predict_line_pooled_dots<T>
        <<<grid, 256, smem, m.stream>>>(pq, pk, m.problem, nTq, nTk, flags, out);
  });
  checkLaunch("sparge_predict_line_pooled_dots");
}

void launchRowSoftmax(const float* x, int rows, int len, float* out, cudaStream_t s) {
  sparge_predict_line_row_softmax<<<(rows + 7) / 8, 256, 0, s>>>(x, rows, len, out);
  checkLaunch("sparge_predict_line_row_softmax");
}

void layoutSort(Carve& c, SegmentSort& s, int nSeg, int len) {
  s.nSeg = nSeg;
  s.len = len;
  s.endBit = 32;
  while ((1LL << (s.endBit - 32)) < nSeg) ++s.endBit;
  const size_t n = size_t(nSeg) * len;
  s.keys = c.take<uint64_t>(n);
  s.sortedKeys = c.take<uint64_t>(n);
  s.iota = c.take<int>(n);
  s.tempBytes = 0;
  check(cub::DeviceRadixSort::SortPairs<uint64_t, int>(nullptr, s.tempBytes, nullptr, nullptr, nullptr,
                                                       nullptr, int(n), 0, s.endBit),
        "cub::DeviceRadixSort (size)");
  s.temp = c.take<char>(s.tempBytes);
}

void sortDescending(const SegmentSort& s, const float* keys, float* sortedKeys, int* sortedIdx,
                    cudaStream_t stream) {
  const long long n = (long long)s.nSeg * s.len;
  const unsigned grid = unsigned((n + 255) / 256);
  sparge_predict_line_sort_keys<<<grid, 256, 0, stream>>>(keys, n, s.len, s.keys, s.iota);
  checkLaunch("sparge_predict_line_sort_keys");
  size_t bytes = s.tempBytes;
  check(cub::DeviceRadixSort::SortPairs(s.temp, bytes, s.keys, s.sortedKeys, s.iota, sortedIdx, int(n), 0,
                                        s.endBit, stream),
        "cub::DeviceRadixSort");
  sparge_predict_line_sort_gather<<<grid, 256, 0, stream>>>(keys, n, s.len, sortedIdx, sortedKeys);
  checkLaunch("sparge_predict_line_sort_gather");
}

void launchCoverCount(const MethodLaunch& m, const float* sorted, int len, const double* thresholds,
                      double mul, int* count) {
  sparge_predict_line_cover_count<<<slotCount(m.problem), kCoverThreads, 0, m.stream>>>(
      sorted, m.problem, len, thresholds, mul, count);
  checkLaunch("sparge_predict_line_cover_count");
}

void launchSquareFlags(const MethodLaunch& m, int B, int nbq, int nbk, uint8_t* flags) {
  sparge_predict_line_square_flags<<<(nbq * nbk + 255) / 256, 256, 0, m.stream>>>(m.problem, B, nbq, nbk,
                                                                                  flags);
  checkLaunch("sparge_predict_line_square_flags");
}

}  // namespace sparge::cuda::predictors::lines

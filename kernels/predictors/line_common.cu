// The device steps MInference and FlexPrefill share (line_common.h). Rounding mirrors the CPU predictors
// (core/src/method_*.cpp): scores and pooled values are rounded to the input type where upstream holds them
// in it; sums that the CPU runs in an order the GPU can keep (per column, per diagonal, per tile mean, per
// dot product) run in that order.
#include <algorithm>
#include <cmath>
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>

#include "common/cuda_util.h"
#include "common/device_common.cuh"
#include "predictors/line_common.h"
#include "predictors/line_device.cuh"
#include "predictors/line_methods.h"
#include "sparge/core/cover_sum.h"

namespace sparge::cuda::predictors {
namespace {
LinePhaseProbe* gPhaseProbe = nullptr;
}  // namespace

void setLinePhaseProbe(LinePhaseProbe* probe) {
  gPhaseProbe = probe;
}

}  // namespace sparge::cuda::predictors

namespace sparge::cuda::predictors::lines {

void endPhase(const char* phase, cudaStream_t s) {
  if (gPhaseProbe) gPhaseProbe->mark(phase, s);
}

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

// The probabilities of elements k .. k+7 of a row of S (exp(s − max) times the row's 1 / sum: within an ulp
// of the CPU's quotient, as the row sum itself is) into dst, 0 where the row's query does not see the key.
// A group the query sees whole, in a row aligned for it (row lengths a multiple of 8), takes one 16-byte
// load and no per-element test.
template <typename T>
__device__ __forceinline__ void eightProbs(const T* row, long long k, Visible v, bool vector, float mx,
                                           float inv, float* dst) {
  float out[8];
  if (vector && k >= v.first && k + 7 <= v.last) {
    const uint4 w = *reinterpret_cast<const uint4*>(row + k);
    T e[8];
    memcpy(e, &w, sizeof w);
#pragma unroll
    for (int i = 0; i < 8; ++i) out[i] = expf(Elem<T>::toF(e[i]) - mx) * inv;
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i)
      out[i] = k + i >= v.first && k + i <= v.last ? expf(Elem<T>::toF(row[k + i]) - mx) * inv : 0.f;
  }
  reinterpret_cast<float4*>(dst)[0] = make_float4(out[0], out[1], out[2], out[3]);
  reinterpret_cast<float4*>(dst)[1] = make_float4(out[4], out[5], out[6], out[7]);
}

// Warp per row: its max over the score kernel's chunks and Σ l · exp(m − max), in a fixed order (the row
// sum is not the CPU's sequential one, nor was the block-wide sum before it; the probabilities it divides
// differ from the CPU's by an ulp at most, below what any comparison of line sums resolves).
__global__ void sparge_predict_line_row_combine(const float2* __restrict__ partial, int rows, int chunks,
                                                float* __restrict__ rowMax, float* __restrict__ rowSum) {
  const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (row >= rows) return;
  const float2* in = partial + (size_t)row * chunks;
  float mx = -INFINITY;
  for (int c = lane; c < chunks; c += 32) mx = fmaxf(mx, in[c].x);
  for (int o = 16; o; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  float sum = 0.f;
  if (mx != -INFINITY)
    for (int c = lane; c < chunks; c += 32)
      if (in[c].x != -INFINITY) sum += in[c].y * expf(in[c].x - mx);
  for (int o = 16; o; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (lane == 0) {
    rowMax[row] = mx;
    rowSum[row] = sum;
  }
}

// CTA per (window of kLineWindow columns c0 .. c0 + W − 1, slot). Thread t sums column c0 + t and the
// diagonal that meets row L − 1 at column c0 + t (o = Nq − 1 − c0 − t); at row r that diagonal lies
// L − 1 − r columns further left, so a chunk of rows needs the probabilities of columns [c0 − (L − 1),
// c0 + W) alone: each is computed once into shared memory (0 where the row's query does not see the key:
// adding +0 leaves a sum unchanged), then every thread adds its column's and its diagonal's in row order,
// the CPU's order. `lead` (L − 1 rounded up to 8) and `cBase` (a multiple of 8) keep each row's loads
// 16-byte aligned when the row length is a multiple of 8.
constexpr int kLineWindow = 512, kLineRows = 16;
template <typename T>
__global__ void __launch_bounds__(kLineWindow)
    sparge_predict_line_sums(const T* __restrict__ S, Problem p, int L, int lead, long long cBase,
                             const float* __restrict__ rowMax, const float* __restrict__ rowSum,
                             LineSums out) {
  extern __shared__ float prob[];  // [kLineRows][lead + kLineWindow]: column left + i at index i
  __shared__ long long rowFirst[kLineRows], rowLast[kLineRows];
  __shared__ float mx[kLineRows], inv[kLineRows];
  const int s = blockIdx.y, t = threadIdx.x, width = lead + kLineWindow, groups = width / 8;
  const int stepRows = kLineWindow / groups, stepGroups = kLineWindow % groups;
  const long long c0 = cBase + (long long)blockIdx.x * kLineWindow, left = c0 - lead;
  const T* rows = S + (size_t)s * L * p.Nkv;
  const bool vector = p.Nkv % 8 == 0;
  float accV = 0.f, accD = 0.f;
  for (int r0 = 0; r0 < L; r0 += kLineRows) {
    const int nRows = min(kLineRows, L - r0);
    if (t < nRows) {
      const Visible v = visibleOf(p.Nq - L + r0 + t, p);
      rowFirst[t] = v.first;
      rowLast[t] = v.last;
      mx[t] = rowMax[(size_t)s * L + r0 + t];
      inv[t] = 1.f / rowSum[(size_t)s * L + r0 + t];
    }
    __syncthreads();
    // Item x = rr · groups + g for x = t, t + kLineWindow, ...: (rr, g) stepped without a division.
    for (int rr = t / groups, g = t % groups; rr < nRows;) {
      if (8 * g + 7 >= lead - (L - 1) + r0 + rr)  // else left of every diagonal at this row
        eightProbs<T>(rows + (size_t)(r0 + rr) * p.Nkv, left + 8LL * g, Visible{rowFirst[rr], rowLast[rr]},
                      vector, mx[rr], inv[rr], prob + rr * width + 8 * g);
      rr += stepRows;
      g += stepGroups;
      if (g >= groups) {
        g -= groups;
        ++rr;
      }
    }
    __syncthreads();
    for (int rr = 0; rr < nRows; ++rr) {
      accV += prob[rr * width + lead + t];
      accD += prob[rr * width + lead - (L - 1) + r0 + rr + t];
    }
    __syncthreads();
  }
  const long long c = c0 + t, o = (long long)p.Nq - 1 - c;
  if (c >= 0 && c < p.Nkv)
    out.vertical[(size_t)s * p.Nkv + c] = c < out.infColumns ? INFINITY : accV / out.divisor;
  if (o >= 0 && o < out.nSlash)
    out.slash[(size_t)s * out.nSlash + o] = o < out.infDiagonals ? INFINITY : accD / out.divisor;
}

// Thread (d, y) of CTA (tile group, sequence) sums columns 2d and 2d + 1 of tile blockIdx.x * kMeanTiles + y
// in row order (core's meanRows), reading both as one 4-byte word; the loop is unrolled so that the loads of
// several rows are in flight at once.
constexpr int kMeanTiles = 4;
template <typename T>
__global__ void sparge_predict_line_tile_means(const T* __restrict__ x, Problem p, int rows, int seqRows,
                                               TileMeans t, int seqIsSlot, int nTiles) {
  const int tile = blockIdx.x * kMeanTiles + threadIdx.y, seq = blockIdx.y, d = 2 * threadIdx.x;
  if (tile >= nTiles || d >= p.D) return;
  int src = seq;
  if (seqIsSlot) src = slotHeads(p, seq).bhq;
  const T* base = x + (size_t)src * seqRows * p.D + d;
  const int r0 = tile * t.tile, r1 = min(rows, r0 + t.tile);
  const float divisor = t.fullTile ? (float)t.tile : (float)(r1 - r0);
  float sum0 = 0.f, sum1 = 0.f;
#pragma unroll 8
  for (int r = r0; r < r1; ++r) {
    const uint32_t word = *reinterpret_cast<const uint32_t*>(base + (size_t)r * p.D);
    T pair[2];
    memcpy(pair, &word, sizeof word);
    sum0 += Elem<T>::toF(pair[0]);
    sum1 += Elem<T>::toF(pair[1]);
  }
  float* out = t.out + ((size_t)seq * nTiles + tile) * p.D + d;
  const float sums[2] = {sum0, sum1};
  for (int e = 0; e < 2; ++e) {
    float v = roundT<T>(sums[e] / divisor);
    if (t.postScale != 0.f) v = roundT<T>(v * t.postScale);
    out[e] = v;
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
    bool seen = false;  // a column no row of the CTA sees (past a causal diagonal) takes no products
    for (int r = 0; r < nRows; ++r) seen = seen || (flags[(size_t)(i0 + r) * nTk + j] & kBlockValid);
    if (!seen) {
      for (int r = 0; r < nRows; ++r) out[((size_t)s * nTq + i0 + r) * nTk + j] = -INFINITY;
      continue;
    }
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
  if (iota) iota[x] = int(x % len);
}

__global__ void sparge_predict_line_sort_decode(const uint64_t* __restrict__ keys, long long n,
                                                float* __restrict__ sorted) {
  const long long x = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (x < n) sorted[x] = fromDescendingKey(uint32_t(keys[x]));
}

// The sorted values back from their indices: sorted position x lies in segment x / len.
__global__ void sparge_predict_line_sort_gather(const float* __restrict__ keys, long long n, int len,
                                                const int* __restrict__ idx, float* __restrict__ sorted) {
  const long long x = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (x < n) sorted[x] = keys[x / len * len + idx[x]];
}

// Short segments: CTA per segment, a block radix sort of (descendingKey, index) held in registers. The
// block sort is stable and the items enter in index order, so equal keys keep ascending index; padding sorts
// after every real key (NaN's key with a larger index). Output is striped: item e of thread t has rank
// e * kBlockSortThreads + t.
// Six bits a pass (six passes, not eight) keep a CTA's digit counters within 16 KB of shared memory.
constexpr int kBlockSortThreads = 128, kBlockSortMaxItems = 32, kBlockSortBits = 6;
template <int kItems>
__global__ void __launch_bounds__(kBlockSortThreads)
    sparge_predict_line_block_sort(const float* __restrict__ keys, int len, float* __restrict__ sorted,
                                   int* __restrict__ sortedIdx) {
  using Sort = cub::BlockRadixSort<uint32_t, kBlockSortThreads, kItems, int, kBlockSortBits>;
  __shared__ typename Sort::TempStorage tmp;
  const size_t base = (size_t)blockIdx.x * len;
  uint32_t k[kItems];
  int idx[kItems];
#pragma unroll
  for (int e = 0; e < kItems; ++e) {
    const int x = threadIdx.x * kItems + e;
    k[e] = x < len ? descendingKey(keys[base + x]) : 0xffffffffu;
    idx[e] = x;
  }
  Sort(tmp).SortBlockedToStriped(k, idx);
#pragma unroll
  for (int e = 0; e < kItems; ++e) {
    const int rank = e * kBlockSortThreads + threadIdx.x;
    if (rank < len) {
      if (sortedIdx) sortedIdx[base + rank] = idx[e];
      sorted[base + rank] = keys[base + idx[e]];
    }
  }
}

bool blockSorted(int len) {
  return len <= kBlockSortThreads * kBlockSortMaxItems;
}

// Keys-only segments up to kKeySortThreads · kKeySortItems values (FlexPrefill's columns and diagonals at up
// to 32K keys): a CTA of kKeySortThreads threads each, its block radix sort in dynamic shared memory. The
// device-wide sort these replace ran several passes over every segment at once, each a few kernels; here a
// segment stays in one SM. Without indices the order of equal keys is not observable, so the values load
// striped (coalesced) rather than in index order.
constexpr int kKeySortThreads = 1024, kKeySortItems = 32, kKeySortBits = 6;
using KeySort =
    cub::BlockRadixSort<uint32_t, kKeySortThreads, kKeySortItems, cub::NullType, kKeySortBits, false>;

__global__ void __launch_bounds__(kKeySortThreads)
    sparge_predict_line_key_sort(const float* __restrict__ keys, int len, float* __restrict__ sorted) {
  extern __shared__ __align__(16) unsigned char keySortSmem[];
  auto& tmp = *reinterpret_cast<typename KeySort::TempStorage*>(keySortSmem);
  const size_t base = (size_t)blockIdx.x * len;
  uint32_t k[kKeySortItems];
#pragma unroll
  for (int e = 0; e < kKeySortItems; ++e) {
    const int x = e * kKeySortThreads + threadIdx.x;
    k[e] = x < len ? descendingKey(keys[base + x]) : 0xffffffffu;
  }
  KeySort(tmp).SortBlockedToStriped(k);
#pragma unroll
  for (int e = 0; e < kKeySortItems; ++e) {
    const int rank = e * kKeySortThreads + threadIdx.x;
    if (rank < len) sorted[base + rank] = fromDescendingKey(k[e]);
  }
}

// Whether the device allows the key sort's shared memory (132 KB: not every GPU does).
bool keySortFits(int len) {
  return len <= kKeySortThreads * kKeySortItems && sizeof(KeySort::TempStorage) <= deviceSharedMemoryOptin();
}

void launchKeySort(const SegmentSort& s, const float* keys, float* sorted, cudaStream_t stream) {
  const int smem = int(sizeof(KeySort::TempStorage));
  check(cudaFuncSetAttribute(sparge_predict_line_key_sort, cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
        "cudaFuncSetAttribute (line key sort)");
  sparge_predict_line_key_sort<<<s.nSeg, kKeySortThreads, smem, stream>>>(keys, s.len, sorted);
  checkLaunch("sparge_predict_line_key_sort");
}

void launchBlockSort(const SegmentSort& s, const float* keys, float* sorted, int* sortedIdx,
                     cudaStream_t stream) {
  const int items = (s.len + kBlockSortThreads - 1) / kBlockSortThreads;
  const auto launch = [&](auto kernel) {
    kernel<<<s.nSeg, kBlockSortThreads, 0, stream>>>(keys, s.len, sorted, sortedIdx);
  };
  if (items <= 1)
    launch(sparge_predict_line_block_sort<1>);
  else if (items <= 2)
    launch(sparge_predict_line_block_sort<2>);
  else if (items <= 4)
    launch(sparge_predict_line_block_sort<4>);
  else if (items <= 8)
    launch(sparge_predict_line_block_sort<8>);
  else if (items <= 16)
    launch(sparge_predict_line_block_sort<16>);
  else
    launch(sparge_predict_line_block_sort<kBlockSortMaxItems>);
  checkLaunch("sparge_predict_line_block_sort");
}

// The count is the CPU's (core's coverCount, less its +1): how many leading values of a descending row keep
// their exact running sum of weights (sparge/core/cover_sum.h) within the limit. Integer sums do not depend
// on the order of the additions, so a block-wide prefix sum gives every running sum at once (an fp32 running
// sum would have to add one value at a time, in order). Weights are >= 0, so the running sums never fall
// back: the count is the first position whose sum passes the limit, found in the first chunk that passes it.
// One CTA per (row, slot), the rows of one launch side by side.
constexpr int kCoverThreads = 1024, kCoverItems = 8;

__global__ void __launch_bounds__(kCoverThreads)
    sparge_predict_line_cover_count(CoverRows rows, Problem p, const double* __restrict__ thresholds) {
  using Scan = cub::BlockScan<unsigned long long, kCoverThreads>;
  __shared__ typename Scan::TempStorage scanTmp;
  __shared__ int firstPast;
  const CoverRow& r = rows.row[blockIdx.y];
  const int s = blockIdx.x, shift = core::coverShift(r.mul);
  const long long limit = core::coverLimit(thresholds[slotHeads(p, s).hq] * r.mul, shift);
  const float* row = r.values + (size_t)s * r.len;
  if (threadIdx.x == 0) firstPast = limit < 0 ? 0 : r.len;
  __syncthreads();
  unsigned long long before = 0;  // the sum of the chunks before; under the limit
  for (int base = 0; limit >= 0 && base < r.len; base += kCoverThreads * kCoverItems) {
    const int first = base + int(threadIdx.x) * kCoverItems;
    unsigned long long w[kCoverItems], mine = 0;
#pragma unroll
    for (int i = 0; i < kCoverItems; ++i) {
      w[i] = first + i < r.len ? core::coverWeight(row[first + i], shift) : 0;
      mine += w[i];  // at most kCoverItems · 2^40
    }
    unsigned long long run, chunk;
    Scan(scanTmp).ExclusiveSum(mine, run, chunk);
    run += before;
#pragma unroll
    for (int i = 0; i < kCoverItems; ++i) {
      run += w[i];
      if (run > (unsigned long long)limit && first + i < r.len) {
        atomicMin(&firstPast, first + i);
        break;
      }
    }
    __syncthreads();  // firstPast, and the scan's storage before it is used again
    if (firstPast < r.len) break;
    before += chunk;  // within the limit, so < 2^40
  }
  if (threadIdx.x == 0) r.count[s] = firstPast;
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

void launchLineSums(const MethodLaunch& m, const void* S, int L, const float2* partial, float* rowMax,
                    float* rowSum, const LineSums& out) {
  const int slots = slotCount(m.problem), rows = slots * L;
  const int chunks = lineScoreChunks(m.problem);
  sparge_predict_line_row_combine<<<(rows + 7) / 8, 256, 0, m.stream>>>(partial, rows, chunks, rowMax,
                                                                        rowSum);
  checkLaunch("sparge_predict_line_row_combine");
  endPhase("row stats", m.stream);
  withElem(m.qkv.et, [&](auto tag) {
    using T = decltype(tag);
    // Windows over the columns of every key and of every diagonal's last row (Nq − 1 − o).
    const long long cBase = std::min(0LL, (long long)m.problem.Nq - out.nSlash) & ~7LL;
    const long long cEnd = std::max<long long>(m.problem.Nkv, m.problem.Nq);
    const int lead = (L - 1 + 7) / 8 * 8;
    const size_t smem = sizeof(float) * kLineRows * (lead + kLineWindow);
    const auto kernel = sparge_predict_line_sums<T>;
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
          "cudaFuncSetAttribute (line sums)");
    const unsigned windows = unsigned((cEnd - cBase + kLineWindow - 1) / kLineWindow);
    kernel<<<dim3(windows, slots), kLineWindow, smem, m.stream>>>(static_cast<const T*>(S), m.problem, L,
                                                                  lead, cBase, rowMax, rowSum, out);
    checkLaunch("sparge_predict_line_sums");
    endPhase("line sums", m.stream);
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
    const dim3 threads(unsigned(p.D / 2), kMeanTiles);
    sparge_predict_line_tile_means<T>
        <<<dim3((nTiles + kMeanTiles - 1) / kMeanTiles, seqs), threads, 0, m.stream>>>(
            static_cast<const T*>(x), p, t.rows, seqRows, t, seqIsSlot, nTiles);
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

void layoutSort(Carve& c, SegmentSort& s, int nSeg, int len, bool keysOnly) {
  s.nSeg = nSeg;
  s.len = len;
  s.endBit = 32;
  s.keysOnly = keysOnly;
  s.keyBlock = keysOnly && !blockSorted(len) && keySortFits(len);
  if (blockSorted(len) || s.keyBlock) return;  // no scratch: a CTA per segment
  while ((1LL << (s.endBit - 32)) < nSeg) ++s.endBit;
  const size_t n = size_t(nSeg) * len;
  s.keys = c.take<uint64_t>(n);
  s.sortedKeys = c.take<uint64_t>(n);
  s.tempBytes = 0;
  if (keysOnly) {
    check(
        cub::DeviceRadixSort::SortKeys<uint64_t>(nullptr, s.tempBytes, nullptr, nullptr, int(n), 0, s.endBit),
        "cub::DeviceRadixSort (size)");
  } else {
    s.iota = c.take<int>(n);
    check(cub::DeviceRadixSort::SortPairs<uint64_t, int>(nullptr, s.tempBytes, nullptr, nullptr, nullptr,
                                                         nullptr, int(n), 0, s.endBit),
          "cub::DeviceRadixSort (size)");
  }
  s.temp = c.take<char>(s.tempBytes);
}

void sortDescending(const SegmentSort& s, const float* keys, float* sortedKeys, int* sortedIdx,
                    cudaStream_t stream) {
  if (s.nSeg == 0 || s.len == 0) return;
  if (blockSorted(s.len)) return launchBlockSort(s, keys, sortedKeys, sortedIdx, stream);
  if (s.keyBlock) return launchKeySort(s, keys, sortedKeys, stream);
  const long long n = (long long)s.nSeg * s.len;
  const unsigned grid = unsigned((n + 255) / 256);
  sparge_predict_line_sort_keys<<<grid, 256, 0, stream>>>(keys, n, s.len, s.keys, s.iota);
  checkLaunch("sparge_predict_line_sort_keys");
  size_t bytes = s.tempBytes;
  if (s.keysOnly) {
    check(cub::DeviceRadixSort::SortKeys(s.temp, bytes, s.keys, s.sortedKeys, int(n), 0, s.endBit, stream),
          "cub::DeviceRadixSort");
    sparge_predict_line_sort_decode<<<grid, 256, 0, stream>>>(s.sortedKeys, n, sortedKeys);
    checkLaunch("sparge_predict_line_sort_decode");
    return;
  }
  check(cub::DeviceRadixSort::SortPairs(s.temp, bytes, s.keys, s.sortedKeys, s.iota, sortedIdx, int(n), 0,
                                        s.endBit, stream),
        "cub::DeviceRadixSort");
  sparge_predict_line_sort_gather<<<grid, 256, 0, stream>>>(keys, n, s.len, sortedIdx, sortedKeys);
  checkLaunch("sparge_predict_line_sort_gather");
}

void launchCoverCounts(const MethodLaunch& m, const CoverRows& rows, const double* thresholds) {
  const dim3 grid(slotCount(m.problem), rows.n);
  sparge_predict_line_cover_count<<<grid, kCoverThreads, 0, m.stream>>>(rows, m.problem, thresholds);
  checkLaunch("sparge_predict_line_cover_count");
}

void launchSquareFlags(const MethodLaunch& m, int B, int nbq, int nbk, uint8_t* flags) {
  sparge_predict_line_square_flags<<<(nbq * nbk + 255) / 256, 256, 0, m.stream>>>(m.problem, B, nbq, nbk,
                                                                                  flags);
  checkLaunch("sparge_predict_line_square_flags");
}

}  // namespace sparge::cuda::predictors::lines

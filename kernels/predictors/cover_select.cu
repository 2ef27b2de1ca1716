// FlexPrefill's γ counts without a sort (line_common.h: launchCoverSelect): a CTA per row finds, by a radix
// descent over the row's keys, the tie group in which the first exact running sum past the limit falls, and
// from it the count the sorted row's prefix sum gives, and where that count cuts the row.
#include <algorithm>
#include <cub/block/block_reduce.cuh>
#include <cuda/functional>

#include "common/cuda_util.h"
#include "predictors/line_common.h"
#include "predictors/line_device.cuh"
#include "sparge/core/cover_sum.h"

namespace sparge::cuda::predictors::lines {
namespace {

// The count (launchCoverCounts' rule) from a row in any order, without sorting it. Ranked by descendingKey
// (NaN last), the first running sum past the limit lies in the tie group of one key x: A(x), the weight of
// the keys ranked before x, is within the limit and A(x) + n(x) · w(x) is not, so the count is C(x) +
// floor((limit − A(x)) / w(x)), C(x) the number of keys ranked before x. A radix descent finds x: each level
// histograms the remaining candidates by their next digit (count and weight per bucket), and the buckets'
// running sums pick the digit whose bucket holds the crossing. The first digit spans the row's own key range,
// so that values of a few binades spread over the buckets instead of sharing a few (colliding shared-memory
// atomics serialise). Counters are 32-bit, the native shared-memory atomics: each copy of the histogram takes
// at most 2,048 values, and a weight (at most 2^40) is added as its bits above and below 2^20, sums that stay
// under 2^31.
constexpr int kSelectThreads = 1024, kSelectBuckets = 256, kSelectDigitBits = 8, kSelectLowBits = 20;
constexpr int kSelectPerCopy = 2048;

// A thread's share of a row's keys (descendingKey), visited in any order: kept in registers for rows of up
// to 32 a thread; longer rows (kItems 0) are read again from the row at each pass, since 64 keys a thread
// would spill at 1,024 threads anyway.
template <int kItems>
struct RowKeys {
  static constexpr int kMaxLen = kSelectThreads * kItems;
  uint32_t key[kItems];
  __device__ __forceinline__ RowKeys(const float* row, int len) {
#pragma unroll
    for (int e = 0; e < kItems; ++e) {
      const int x = e * kSelectThreads + int(threadIdx.x);
      key[e] = x < len ? descendingKey(row[x]) : 0u;
    }
  }
  template <typename Visit>
  __device__ __forceinline__ void forEach(const float*, int len, Visit visit) const {
#pragma unroll
    for (int e = 0; e < kItems; ++e)
      if (e * kSelectThreads + int(threadIdx.x) < len) visit(key[e]);
  }
};
template <>
struct RowKeys<0> {
  static constexpr int kMaxLen = 32 * kSelectPerCopy;  // a histogram copy a warp
  __device__ __forceinline__ RowKeys(const float*, int) {}
  template <typename Visit>
  __device__ __forceinline__ void forEach(const float* row, int len, Visit visit) const {
    for (int x = threadIdx.x; x < len; x += kSelectThreads) visit(descendingKey(row[x]));
  }
};

template <int kItems>
struct SelectHist {
  static constexpr int kCopies = (RowKeys<kItems>::kMaxLen + kSelectPerCopy - 1) / kSelectPerCopy;
  static_assert((kSelectThreads / 32) % kCopies == 0, "the warps share the copies evenly");
  uint32_t count[kCopies][kSelectBuckets], low[kCopies][kSelectBuckets], high[kCopies][kSelectBuckets];
};
struct SelectChoice {
  unsigned long long weightBefore;
  int countBefore, ties, digit;  // digit −1: the row's whole weight is within the limit
  uint32_t keyMin, keyMax;
};

// Warp 0: the bucket whose running weight (from `before`) first passes `limit`, with the weight and count of
// the buckets before it and its own count; lane l scans buckets 8l .. 8l + 7.
__device__ __forceinline__ void chooseBucket(const unsigned long long* weight, const uint32_t* count,
                                             unsigned long long before, long long limit, SelectChoice& out) {
  constexpr int kPerLane = kSelectBuckets / 32;
  const int lane = threadIdx.x;
  unsigned long long w = 0;
  int c = 0;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    w += weight[lane * kPerLane + i];
    c += int(count[lane * kPerLane + i]);
  }
  unsigned long long wBefore = w;
  int cBefore = c;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {  // inclusive scans across the lanes
    const unsigned long long wo = __shfl_up_sync(0xffffffffu, wBefore, o);
    const int co = __shfl_up_sync(0xffffffffu, cBefore, o);
    if (lane >= o) {
      wBefore += wo;
      cBefore += co;
    }
  }
  wBefore = before + wBefore - w;
  cBefore -= c;
  if (lane == 31 && wBefore + w <= (unsigned long long)limit) out.digit = -1;
  for (int i = 0; i < kPerLane; ++i) {
    const int b = lane * kPerLane + i;
    if (wBefore <= (unsigned long long)limit && wBefore + weight[b] > (unsigned long long)limit) {
      out.digit = b;
      out.weightBefore = wBefore;
      out.countBefore = cBefore;
      out.ties = int(count[b]);
    }
    wBefore += weight[b];
    cBefore += int(count[b]);
  }
}

// The largest of the row's keys that `take` admits (0 where none does) and how many of them there are.
template <typename Reduce, typename Keys, typename Take>
__device__ CoverCut lastOf(const Keys& keys, const float* row, int len, Take take,
                           typename Reduce::TempStorage& tmp, uint32_t& shared) {
  uint32_t best = 0;
  keys.forEach(row, len, [&](uint32_t k) {
    if (take(k)) best = max(best, k);
  });
  best = Reduce(tmp).Reduce(best, ::cuda::maximum<uint32_t>());
  if (threadIdx.x == 0) shared = best;
  __syncthreads();
  best = shared;
  uint32_t n = 0;
  keys.forEach(row, len, [&](uint32_t k) { n += take(k) && k == best; });
  __syncthreads();  // every thread has read `shared` and the reduction's storage is free again
  n = Reduce(tmp).Sum(n);
  return {best, int(n), true};
}

// One level of the descent: every weighed key whose offset from `base` has `prefix` above bit shiftAbove
// adds its count and weight to the bucket of its bits shiftHere .. shiftAbove − 1; the buckets' totals over
// the histogram's copies go to `weight` and `count`.
template <typename Keys, typename Hist, typename Weighs>
__device__ void levelHistogram(const Keys& keys, const float* row, int len, Hist& hist, Weighs weighs,
                               uint32_t base, uint32_t prefix, int shiftAbove, int shiftHere, int shift,
                               unsigned long long* weight, uint32_t* count) {
  const int copy = int(threadIdx.x >> 5) % Hist::kCopies;
  uint32_t* flat = &hist.count[0][0];
  for (int i = threadIdx.x; i < 3 * Hist::kCopies * kSelectBuckets; i += kSelectThreads) flat[i] = 0;
  __syncthreads();
  keys.forEach(row, len, [&](uint32_t k) {
    const uint32_t offset = k - base;
    if (!weighs(k) || (uint64_t(offset) >> shiftAbove) != prefix) return;
    const int digit = int((offset >> shiftHere) & ((1u << (shiftAbove - shiftHere)) - 1u));
    const unsigned long long w = core::coverWeight(fromDescendingKey(k), shift);
    atomicAdd(&hist.count[copy][digit], 1u);
    atomicAdd(&hist.low[copy][digit], uint32_t(w & ((1u << kSelectLowBits) - 1u)));
    atomicAdd(&hist.high[copy][digit], uint32_t(w >> kSelectLowBits));
  });
  __syncthreads();
  if (threadIdx.x < kSelectBuckets) {
    unsigned long long low = 0, high = 0;
    uint32_t n = 0;
    for (int c = 0; c < Hist::kCopies; ++c) {
      n += hist.count[c][threadIdx.x];
      low += hist.low[c][threadIdx.x];
      high += hist.high[c][threadIdx.x];
    }
    count[threadIdx.x] = n;
    weight[threadIdx.x] = (high << kSelectLowBits) + low;
  }
  __syncthreads();
}

template <int kItems>
__global__ void __launch_bounds__(kSelectThreads)
    sparge_predict_line_cover_select(CoverRows rows, Problem p, const double* __restrict__ thresholds) {
  using Hist = SelectHist<kItems>;
  using Reduce = cub::BlockReduce<uint32_t, kSelectThreads>;
  extern __shared__ __align__(16) unsigned char selectSmem[];
  Hist& hist = *reinterpret_cast<Hist*>(selectSmem);
  __shared__ typename Reduce::TempStorage reduceTmp;
  __shared__ unsigned long long bucketWeight[kSelectBuckets];
  __shared__ uint32_t bucketCount[kSelectBuckets], sharedKey;
  __shared__ SelectChoice choice;
  const CoverRow& r = rows.row[blockIdx.y];
  const int s = blockIdx.x, shift = core::coverShift(r.mul), len = r.len;
  const long long limit = core::coverLimit(thresholds[slotHeads(p, s).hq] * r.mul, shift);
  auto finish = [&](int count, const CoverCut& cut) {
    if (threadIdx.x != 0) return;
    r.count[s] = count;
    if (r.cut) r.cut[s] = cut;
  };
  if (limit < 0 || len <= 0) return finish(0, CoverCut{0, 0, true});
  const float* row = r.values + (size_t)s * len;
  const RowKeys<kItems> keys(row, len);
  // Values of weight 0 are left out of the descent: they rank after every value that can pass the limit, so
  // they never count before x, and they would stretch the first digit's span down to zero.
  const auto weighs = [&](uint32_t k) { return core::coverWeight(fromDescendingKey(k), shift) > 0; };
  uint32_t lo = 0xffffffffu, hi = 0;
  keys.forEach(row, len, [&](uint32_t k) {
    if (!weighs(k)) return;
    lo = min(lo, k);
    hi = max(hi, k);
  });
  lo = Reduce(reduceTmp).Reduce(lo, ::cuda::minimum<uint32_t>());
  __syncthreads();
  hi = Reduce(reduceTmp).Reduce(hi, ::cuda::maximum<uint32_t>());
  if (threadIdx.x == 0) {
    choice.keyMin = lo;
    choice.keyMax = hi;
  }
  __syncthreads();
  const auto any = [](uint32_t) { return true; };
  if (choice.keyMin > choice.keyMax)  // nothing weighs: every value fits
    return finish(len, lastOf<Reduce>(keys, row, len, any, reduceTmp, sharedKey));
  const uint32_t base = choice.keyMin, range = choice.keyMax - base;
  unsigned long long before = 0;
  int counted = 0;
  uint32_t prefix = 0;                             // the chosen digits so far, of offsets >> shiftAbove
  int shiftAbove = range ? 32 - __clz(range) : 0;  // every offset is below 2^shiftAbove
  for (;;) {
    const int shiftHere = max(0, shiftAbove - kSelectDigitBits);
    levelHistogram(keys, row, len, hist, weighs, base, prefix, shiftAbove, shiftHere, shift, bucketWeight,
                   bucketCount);
    if (threadIdx.x < 32) chooseBucket(bucketWeight, bucketCount, before, limit, choice);
    __syncthreads();
    if (choice.digit < 0)  // only at the first level: the whole row fits
      return finish(len, lastOf<Reduce>(keys, row, len, any, reduceTmp, sharedKey));
    before = choice.weightBefore;
    counted += choice.countBefore;
    prefix = (prefix << (shiftAbove - shiftHere)) | uint32_t(choice.digit);
    shiftAbove = shiftHere;
    if (shiftHere == 0) break;
    __syncthreads();  // every thread has read the choice before the next level writes it
  }
  const uint32_t x = base + prefix;
  const int ties = choice.ties;
  const int kept = int(((unsigned long long)limit - before) / core::coverWeight(fromDescendingKey(x), shift));
  if (kept > 0) return finish(counted + kept, CoverCut{x, kept, kept == ties});
  if (counted == 0) return finish(0, CoverCut{0, 0, true});
  // The count ends right before x: the last value counted is the largest key below x, all of its ties.
  const auto below = [&](uint32_t k) { return k < x && weighs(k); };
  finish(counted, lastOf<Reduce>(keys, row, len, below, reduceTmp, sharedKey));
}

}  // namespace

template <int kItems>
bool selectFits(int len) {
  return len <= RowKeys<kItems>::kMaxLen && sizeof(SelectHist<kItems>) <= deviceSharedMemoryOptin();
}

bool coverSelectFits(int len) {
  return selectFits<32>(len) || selectFits<0>(len);
}

template <int kItems>
void launchSelect(const MethodLaunch& m, const CoverRows& rows, const double* thresholds) {
  const auto kernel = sparge_predict_line_cover_select<kItems>;
  const int smem = int(sizeof(SelectHist<kItems>));
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
        "cudaFuncSetAttribute (cover select)");
  kernel<<<dim3(slotCount(m.problem), rows.n), kSelectThreads, smem, m.stream>>>(rows, m.problem, thresholds);
  checkLaunch("sparge_predict_line_cover_select");
}

void launchCoverSelect(const MethodLaunch& m, const CoverRows& rows, const double* thresholds) {
  int longest = 0;
  for (int i = 0; i < rows.n; ++i) longest = std::max(longest, rows.row[i].len);
  if (selectFits<32>(longest)) return launchSelect<32>(m, rows, thresholds);
  launchSelect<0>(m, rows, thresholds);
}

}  // namespace sparge::cuda::predictors::lines

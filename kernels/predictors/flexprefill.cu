// FlexPrefill's block predictor on the GPU (core/src/method_flexprefill.cpp, docs/methods.md), on square
// blocks of the larger tile side B, each covering whole tiles of the run's geometry: vertical and slash
// blocks covering γ of the last query block's attention or, for query-aware heads, pooled block scores
// covering γ. The statistics (line sums and their orders, block sums, the JS distance, pooled scores and
// their order) and the γ counts come first, the lines and the pooled ones on two streams side by side; the
// selection follows.
#include <algorithm>
#include <cmath>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <map>
#include <string>
#include <vector>

#include "common/cuda_util.h"
#include "common/device_common.cuh"
#include "common/upload.h"
#include "predictors/line_common.h"
#include "predictors/line_device.cuh"
#include "predictors/line_methods.h"
#include "sparge/core/error.h"
#include "sparge/core/method.h"

namespace sparge::cuda::predictors {
namespace {

using namespace lines;

// One query head's parameters as the kernels read them; counts in blocks of B.
struct FlexHead {
  double tau = 0;
  long long minBlocks = 1, maxBlocks = 1;
  int shortSequence = 0;  // upstream runs sequences of at most two blocks (or the minimum budget) dense
  int dense = 0;
};

// Where the first countP ranks of a stable descending order (ties to the lower index, core's
// rankDescending) end, without the order's indices (lines::CoverCut: the countP-th value's key, and how many
// of the values equal to it are taken, lowest index first; `all` when that is every one of them). The cover
// select finds it with the count; after a sort, binary searches in the sorted values do.
using PooledCut = CoverCut;
struct FlexScratch {
  FlexHead* heads = nullptr;
  double* gamma = nullptr;  // [Hq]
  void *lastQ = nullptr, *S = nullptr;
  float *rowMax = nullptr, *rowSum = nullptr, *vertical = nullptr, *slash = nullptr;
  float2* partial = nullptr;
  float *sortedV = nullptr, *sortedS = nullptr, *vBlock = nullptr, *sBlock = nullptr;
  int *countV = nullptr, *countS = nullptr, *countP = nullptr;
  float *avgK = nullptr, *aq = nullptr, *meanLast = nullptr, *raw = nullptr, *pooled = nullptr,
        *sortedP = nullptr;
  double* js = nullptr;
  PooledCut* cuts = nullptr;
  uint8_t *squareFlags = nullptr, *vOn = nullptr, *sOn = nullptr, *pooledOn = nullptr;
  SegmentSort sortLines, sortP;
  int B = 0, nbq = 0, nbk = 0, L = 0, Lpad = 0;
  bool stats = false;
  bool selectLines = false, selectPooled = false;  // γ counts by the cover select (no sort), decided once
};

void layout(Carve& c, FlexScratch& f, const Problem& p) {
  const size_t slots = size_t(slotCount(p)), Nkv = size_t(p.Nkv), blocks = size_t(f.nbq) * f.nbk;
  f.heads = c.take<FlexHead>(size_t(p.Hq));
  f.gamma = c.take<double>(size_t(p.Hq));
  f.vBlock = c.take<float>(slots * f.nbk);
  f.pooled = c.take<float>(slots * blocks);
  f.vOn = c.take<uint8_t>(slots * f.nbk);
  f.sOn = c.take<uint8_t>(slots * f.nbk);
  f.pooledOn = c.take<uint8_t>(slots * blocks);
  f.js = c.take<double>(slots);
  f.cuts = c.take<PooledCut>(slots);
  if (!f.stats) return;
  f.lastQ = c.take<uint16_t>(slots * f.Lpad * p.D);
  f.S = c.take<uint16_t>(slots * f.L * Nkv);
  f.partial = c.take<float2>(linePartialCount(p, f.L));
  f.rowMax = c.take<float>(slots * f.L);
  f.rowSum = c.take<float>(slots * f.L);
  // Vertical and slash sums side by side, [2][slots][Nkv], so that one sort orders both.
  const size_t lineValues = slots * Nkv;
  f.vertical = c.take<float>(2 * lineValues);
  f.slash = f.vertical ? f.vertical + lineValues : nullptr;
  if (!f.selectLines) {  // the lines' counts sort them first
    f.sortedV = c.take<float>(2 * lineValues);
    f.sortedS = f.sortedV ? f.sortedV + lineValues : nullptr;
    layoutSort(c, f.sortLines, int(2 * slots), p.Nkv, true);  // the cover counts need values alone
  }
  f.sBlock = c.take<float>(slots * f.nbk);
  f.countV = c.take<int>(slots);
  f.countS = c.take<int>(slots);
  f.countP = c.take<int>(slots);
  f.avgK = c.take<float>(size_t(p.B) * p.Hkv * f.nbk * p.D);
  f.aq = c.take<float>(slots * f.nbq * p.D);
  f.meanLast = c.take<float>(slots * p.D);
  f.raw = c.take<float>(slots * blocks);
  if (!f.selectPooled) {  // the pooled count sorts its row first
    f.sortedP = c.take<float>(slots * blocks);
    layoutSort(c, f.sortP, int(slots), int(blocks), true);  // marked from the values, not the order
  }
  f.squareFlags = c.take<uint8_t>(blocks);
}

// Warp per (block, slot): the block's vertical sum over its key columns, and the block diagonal's slash
// sum (upstream pools diagonals in the order t = Nkv − 1 − o: block t / B is diagonal block nbk − 1 − t / B),
// each in index order as the CPU sums them. The warp stages both ranges in shared memory with coalesced
// loads; lanes 0 and 1 add them up.
constexpr int kBlockSumWarps = 4;
__global__ void __launch_bounds__(kBlockSumWarps * 32)
    sparge_predict_flexprefill_block_sums(Problem p, int B, int nbk, const float* vertical,
                                          const float* slash, float* vBlock, float* sBlock) {
  extern __shared__ float staged[];  // [warp][vertical B | slash B]
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int J = blockIdx.x * kBlockSumWarps + warp, s = blockIdx.y;
  if (J >= nbk) return;  // the whole warp
  const long long c0 = (long long)J * B, t = nbk - 1 - J;
  const long long oLo = max(0LL, p.Nkv - 1 - (t * B + B - 1)), oHi = p.Nkv - 1 - t * B;
  const int nV = int(min((long long)p.Nkv, c0 + B) - c0), nS = int(oHi - oLo + 1);
  const float* v = vertical + (size_t)s * p.Nkv + c0;
  const float* sl = slash + (size_t)s * p.Nkv + oLo;
  float* sv = staged + (size_t)warp * 2 * B;
  float* ss = sv + B;
  for (int x = lane; x < nV; x += 32) sv[x] = v[x];
  for (int x = lane; x < nS; x += 32) ss[x] = sl[x];
  __syncwarp();
  if (lane > 1) return;
  const float* row = lane == 0 ? sv : ss;
  const int n = lane == 0 ? nV : nS;
  float acc = 0.f;
  for (int x = 0; x < n; ++x) acc += row[x];
  (lane == 0 ? vBlock : sBlock)[(size_t)s * nbk + J] = acc;
}

// Σ a[d] · b[d] in index order, each product and sum rounded (no fused multiply-add): the CPU's pooled dot,
// bit for bit. Four values a load where the rows allow it (D a multiple of 4: every row 16-byte aligned).
__device__ __forceinline__ float orderedDot(const float* a, const float* b, int D) {
  float acc = 0.f;
  if (D % 4 == 0) {
    const float4* a4 = reinterpret_cast<const float4*>(a);
    const float4* b4 = reinterpret_cast<const float4*>(b);
#pragma unroll 4
    for (int d = 0; d < D / 4; ++d) {
      const float4 x = a4[d], y = b4[d];
      acc = __fadd_rn(acc, __fmul_rn(x.x, y.x));
      acc = __fadd_rn(acc, __fmul_rn(x.y, y.y));
      acc = __fadd_rn(acc, __fmul_rn(x.z, y.z));
      acc = __fadd_rn(acc, __fmul_rn(x.w, y.w));
    }
    return acc;
  }
  for (int d = 0; d < D; ++d) acc = __fadd_rn(acc, __fmul_rn(a[d], b[d]));
  return acc;
}

// CTA per slot: the last query block's mean query against each mean key over the key blocks it sees, its
// softmax and the square-root Jensen-Shannon distance to the vertical block sums.
constexpr int kJsThreads = 128;
template <typename T>
__global__ void __launch_bounds__(kJsThreads)
    sparge_predict_flexprefill_js(Problem p, int B, int nbk, int L, const float* meanLast, const float* avgK,
                                  const float* vBlock, double* js) {
  extern __shared__ float row[];
  __shared__ long long seenFirst, seenLast;
  const int s = blockIdx.x;
  const SlotHeads h = slotHeads(p, s);
  if (threadIdx.x == 0) {
    seenFirst = 0;
    seenLast = -1;
    bool any = false;
    for (long long q = p.Nq - L; q < p.Nq; ++q) {
      const Visible v = visibleOf(q, p);
      if (v.first > v.last) continue;
      seenFirst = any ? min(seenFirst, v.first) : v.first;
      seenLast = any ? max(seenLast, v.last) : v.last;
      any = true;
    }
  }
  __syncthreads();
  const float* mq = meanLast + (size_t)s * p.D;
  for (int J = threadIdx.x; J < nbk; J += blockDim.x) {
    row[J] = -INFINITY;
    if (seenFirst <= seenLast && (long long)J * B <= seenLast && (long long)(J + 1) * B - 1 >= seenFirst) {
      row[J] = roundT<T>(orderedDot(mq, avgK + ((size_t)h.bhk * nbk + J) * p.D, p.D));
    }
  }
  __syncthreads();
  // The softmax's max and sum in the CPU's order (one thread); the divergence's terms, which only meet the
  // comparison with τ, summed by the CTA in its own order.
  __shared__ float sMax, sSum;
  if (threadIdx.x == 0) {
    float mx = -INFINITY, sum = 0.f;
    for (int J = 0; J < nbk; ++J) mx = fmaxf(mx, row[J]);
    for (int J = 0; J < nbk && mx != -INFINITY; ++J) sum += expf(row[J] - mx);
    sMax = mx;
    sSum = sum;
  }
  __syncthreads();
  const float mx = sMax, sum = sSum;
  const float* vb = vBlock + (size_t)s * nbk;
  double acc = 0;
  for (int J = threadIdx.x; J < nbk; J += blockDim.x) {
    const double a = mx == -INFINITY ? 0.0 : (double)(expf(row[J] - mx) / sum), b = vb[J], m = 0.5 * (a + b);
    if (a > 0) acc += 0.5 * a * log(a / m);
    if (b > 0) acc += 0.5 * b * log(b / m);
  }
  using Reduce = cub::BlockReduce<double, kJsThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  acc = Reduce(tmp).Sum(acc);
  if (threadIdx.x == 0) js[s] = sqrt(fmax(0.0, acc));
}

__device__ __forceinline__ bool queryAware(const FlexHead& h, const double* js, int s) {
  return js[s] < h.tau;
}

__device__ __forceinline__ PooledCut pooledCut(const float* sorted, int n, int blocks) {
  const uint32_t kth = descendingKey(sorted[n - 1]);
  int lo = 0, hi = n - 1, up = n, top = blocks;  // first rank holding kth; first rank past it
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (descendingKey(sorted[mid]) < kth)
      lo = mid + 1;
    else
      hi = mid;
  }
  while (up < top) {
    const int mid = (up + top) / 2;
    if (descendingKey(sorted[mid]) <= kth)
      up = mid + 1;
    else
      top = mid;
  }
  return {kth, n - lo, n - lo == up - lo};
}

// Thread per slot: pooledCut of the slot's pooled row, once, for the marking's CTAs.
__global__ void sparge_predict_flexprefill_pooled_cut(Problem p, int blocks, const FlexHead* heads,
                                                      const int* countP, const float* sortedP,
                                                      PooledCut* cuts) {
  const int s = blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= p.B * p.nHeads) return;  // the slots
  const int n = min(countP[s], blocks);
  cuts[s] = heads[slotHeads(p, s).hq].shortSequence || n <= 0
                ? PooledCut{0, 0, true}
                : pooledCut(sortedP + (size_t)s * blocks, n, blocks);
}

// The pooled blocks a head keeps if it is query-aware (its PooledCut), CTA (chunk of kMarkThreads ·
// kMarkSteps blocks, slot). They are marked for every head, before the JS distance decides which heads are:
// so the marking runs in the pooled branch, beside the lines, instead of after them. When every block equal
// to the cut's value is kept, each block decides alone; otherwise (ties across the cut) the equal ones are
// taken in index order: each CTA counts those before its chunk again (a few loads a thread), then scans its
// own.
constexpr int kMarkThreads = 1024, kMarkSteps = 4;
__global__ void __launch_bounds__(kMarkThreads)
    sparge_predict_flexprefill_mark_pooled(Problem p, int blocks, const FlexHead* heads, const int* countP,
                                           const PooledCut* cuts, const float* pooled, uint8_t* pooledOn) {
  using Scan = cub::BlockScan<int, kMarkThreads>;
  using Reduce = cub::BlockReduce<int, kMarkThreads>;
  __shared__ union {
    typename Scan::TempStorage scan;
    typename Reduce::TempStorage reduce;
  } tmp;
  __shared__ int carry;
  const int s = blockIdx.y;
  if (heads[slotHeads(p, s).hq].shortSequence || min(countP[s], blocks) <= 0) return;
  const PooledCut cut = cuts[s];
  const float* row = pooled + (size_t)s * blocks;
  uint8_t* on = pooledOn + (size_t)s * blocks;
  const int begin = blockIdx.x * kMarkThreads * kMarkSteps;
  const int end = min(blocks, begin + kMarkThreads * kMarkSteps);
  if (cut.all) {
    for (int x = begin + threadIdx.x; x < end; x += kMarkThreads) on[x] = descendingKey(row[x]) <= cut.kth;
    return;
  }
  int before = 0;
  for (int x = threadIdx.x; x < begin; x += kMarkThreads) before += descendingKey(row[x]) == cut.kth;
  before = Reduce(tmp.reduce).Sum(before);
  if (threadIdx.x == 0) carry = before;
  __syncthreads();
  for (int base = begin; base < end; base += kMarkThreads) {
    const int x = base + threadIdx.x;
    const uint32_t key = x < end ? descendingKey(row[x]) : 0xffffffffu;
    const int equal = x < end && key == cut.kth;
    int equalBefore = 0, equalTotal = 0;
    Scan(tmp.scan).ExclusiveSum(equal, equalBefore, equalTotal);
    if (x < end) on[x] = key < cut.kth || (equal && carry + equalBefore < cut.need);
    __syncthreads();  // every thread has read carry and the scan's storage
    if (threadIdx.x == 0) carry += equalTotal;
    __syncthreads();
  }
}

// CTA per slot, thread per block: how many vertical / slash blocks the head keeps (upstream's count of top
// token scores covering γ, plus one, over B, plus one, within the budgets), and which: the largest, block 0
// first, ties to the lower index.
__global__ void sparge_predict_flexprefill_line_blocks(Problem p, int B, int nbk, const FlexHead* heads,
                                                       const double* js, const int* countV, const int* countS,
                                                       const float* vBlock, const float* sBlock, uint8_t* vOn,
                                                       uint8_t* sOn) {
  const int s = blockIdx.x;
  const FlexHead h = heads[slotHeads(p, s).hq];
  if (h.shortSequence) return;
  auto clampBlocks = [&](long long n) { return min(max(n, h.minBlocks), h.maxBlocks); };
  const bool qa = queryAware(h, js, s);
  const long long nV = qa ? h.minBlocks : clampBlocks((countV[s] + 1LL) / B + 1);
  const long long nS = qa ? h.minBlocks : clampBlocks((countS[s] + 1LL) / B + 1);
  const float* vb = vBlock + (size_t)s * nbk;
  const float* sb = sBlock + (size_t)s * nbk;
  for (int J = threadIdx.x; J < nbk; J += blockDim.x) {
    const float v = J == 0 ? INFINITY : vb[J], sl = J == 0 ? INFINITY : sb[J];
    long long rankV = 0, rankS = 0;
    for (int K = 0; K < nbk; ++K) {
      const float vk = K == 0 ? INFINITY : vb[K], sk = K == 0 ? INFINITY : sb[K];
      rankV += vk > v || (vk == v && K < J);
      rankS += sk > sl || (sk == sl && K < J);
    }
    vOn[(size_t)s * nbk + J] = rankV < nV;
    sOn[(size_t)s * nbk + J] = rankS < nS;
  }
}

// CTA per (kTileRows query tiles, slot), a thread per key tile j: the tile's FlexPrefill block (i·BQ / B,
// j·BK / B) and what was chosen for it. What the rows share (the head's parameters and pattern) is read once
// a CTA, and several rows a CTA spread that latency.
constexpr int kTileThreads = 256, kTileRows = 8;
__global__ void __launch_bounds__(kTileThreads)
    sparge_predict_flexprefill_tiles(Problem p, int B, int nbq, int nbk, const FlexHead* heads,
                                     const double* js, const uint8_t* vOn, const uint8_t* sOn,
                                     const uint8_t* pooledOn, const float* vBlock, const float* pooled,
                                     MethodRows out) {
  const int s = blockIdx.y;
  const SlotHeads sh = slotHeads(p, s);
  const bool shortSequence = heads[sh.hq].shortSequence, qa = queryAware(heads[sh.hq], js, s);
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    out.denseHead[sh.bhq] = uint8_t(heads[sh.hq].dense);
    out.elementPairs[sh.bhq] = NAN;
  }
  const uint8_t* v = vOn + (size_t)s * nbk;
  const uint8_t* sl = sOn + (size_t)s * nbk;
  const int iEnd = min(p.nq, int(blockIdx.x + 1) * kTileRows);
  for (int i = blockIdx.x * kTileRows; i < iEnd; ++i) {
    const size_t row = ((size_t)sh.bhq * p.nq + i) * p.nk;
    const int I = i * p.BQ / B;  // i · BQ is at most Nq + BQ: an int
    const size_t pooledRow = ((size_t)s * nbq + I) * nbk;
    for (int j = threadIdx.x; j < p.nk; j += kTileThreads) {
      if (shortSequence) {
        out.selected[row + j] = 0;
        out.methodForced[row + j] = 1;
        out.score[row + j] = 0.f;
        continue;
      }
      const int J = j * p.BK / B;
      const bool slashOn = I - J >= 0 && I - J < nbk && sl[I - J];
      const bool on = v[J] || slashOn;
      const bool keep = J == 0 || I == J;
      out.selected[row + j] = (!keep && on) || (qa && pooledOn[pooledRow + J]);
      out.methodForced[row + j] = (keep && on) || (qa && I == 0 && J == 0);
      out.score[row + j] = qa ? pooled[pooledRow + J] : vBlock[(size_t)s * nbk + J];
    }
  }
}

std::vector<FlexHead> headParams(const MethodLaunch& m, int B, int nbk, std::vector<double>& gamma) {
  const Problem& p = m.problem;
  if (!m.params || m.params->size() < size_t(p.Hq))
    throw Error("CUDA FlexPrefill",
                "per-head parameters for " + std::to_string(p.Hq) + " query heads expected");
  std::vector<FlexHead> out(size_t(p.Hq));
  gamma.assign(size_t(p.Hq), 0.0);
  for (int hq = 0; hq < p.Hq; ++hq) {
    const core::HeadParams& hp = (*m.params)[size_t(hq)];
    const core::FlexPrefillParams& fp = hp.flexprefill;
    FlexHead& h = out[size_t(hq)];
    h.tau = fp.tau;
    h.minBlocks = std::max<long long>(1, core::ceilDiv(fp.minBudget, B));
    h.maxBlocks = std::min<long long>(nbk, fp.maxBudget > 0 ? core::ceilDiv(fp.maxBudget, B) : nbk);
    h.shortSequence = p.Nq <= std::max<long long>(2LL * B, h.minBlocks * B) ? 1 : 0;
    h.dense = hp.dense ? 1 : 0;
    gamma[size_t(hq)] = fp.gamma;
  }
  return out;
}

// The pooled block scores, their descending values, the γ count over them and the blocks it keeps (on
// `side`: they read Q and K alone, so they run beside the lines).
void pooledBranch(const MethodLaunch& m, const FlexScratch& f, cudaStream_t side) {
  const Problem& p = m.problem;
  MethodLaunch s = m;
  s.stream = side;
  launchTileMeans(s, TileMeans{nullptr, p.Nkv, f.B, false, false, 0.f, f.avgK});
  launchTileMeans(s, TileMeans{nullptr, p.Nq, f.B, true, false, float(m.scale), f.aq});
  launchSquareFlags(s, f.B, f.nbq, f.nbk, f.squareFlags);
  launchPooledDots(s, f.aq, f.avgK, f.nbq, f.nbk, f.squareFlags, f.raw);
  launchRowSoftmax(f.raw, slotCount(p) * f.nbq, f.nbk, f.pooled, side);
  const int slots = slotCount(p), blocks = f.nbq * f.nbk;
  CoverRows rows{};
  rows.n = 1;
  if (f.selectPooled) {  // the count and its cut at once, nothing sorted
    rows.row[0] = CoverRow{f.pooled, blocks, double(f.nbq), f.countP, f.cuts};
    launchCoverSelect(s, rows, f.gamma);
  } else {
    sortDescending(f.sortP, f.pooled, f.sortedP, nullptr, side);
    rows.row[0] = CoverRow{f.sortedP, blocks, double(f.nbq), f.countP};
    launchCoverCounts(s, rows, f.gamma);
    sparge_predict_flexprefill_pooled_cut<<<(slots + 127) / 128, 128, 0, side>>>(p, blocks, f.heads, f.countP,
                                                                                 f.sortedP, f.cuts);
    checkLaunch("sparge_predict_flexprefill_pooled_cut");
  }
  check(cudaMemsetAsync(f.pooledOn, 0, size_t(slots) * blocks, side), "cudaMemsetAsync");
  const unsigned chunks = unsigned((blocks + kMarkThreads * kMarkSteps - 1) / (kMarkThreads * kMarkSteps));
  sparge_predict_flexprefill_mark_pooled<<<dim3(chunks, slots), kMarkThreads, 0, side>>>(
      p, blocks, f.heads, f.countP, f.cuts, f.pooled, f.pooledOn);
  checkLaunch("sparge_predict_flexprefill_mark_pooled");
}

// The last query block's lines: their sums, descending values, block sums and γ counts, and the block's mean
// query (for the JS distance).
void lineBranch(const MethodLaunch& m, const FlexScratch& f) {
  const Problem& p = m.problem;
  // Upstream scales Q (by D^-1/2: the entry's scale) in the input type first.
  launchLastQueries(m, f.L, f.Lpad, float(m.scale), f.lastQ);
  launchLastScores(m, f.lastQ, f.L, f.Lpad, 1.f, f.S, f.partial);
  endPhase("last-query scores", m.stream);
  const LineSums sums{f.vertical, f.slash, p.Nkv, float(f.L), 0, 0};
  launchLineSums(m, f.S, f.L, f.partial, f.rowMax, f.rowSum, sums);
  const bool select = f.selectLines;
  if (!select) sortDescending(f.sortLines, f.vertical, f.sortedV, nullptr, m.stream);  // and the slash sums
  endPhase("line sorts", m.stream);
  sparge_predict_flexprefill_block_sums<<<dim3((f.nbk + kBlockSumWarps - 1) / kBlockSumWarps, slotCount(p)),
                                          kBlockSumWarps * 32, sizeof(float) * 2 * f.B * kBlockSumWarps,
                                          m.stream>>>(p, f.B, f.nbk, f.vertical, f.slash, f.vBlock, f.sBlock);
  checkLaunch("sparge_predict_flexprefill_block_sums");
  launchTileMeans(m, TileMeans{f.lastQ, f.L, f.L, true, false, 0.f, f.meanLast, f.Lpad});
  CoverRows rows{};
  rows.row[0] = CoverRow{select ? f.vertical : f.sortedV, p.Nkv, 1.0, f.countV};
  rows.row[1] = CoverRow{select ? f.slash : f.sortedS, p.Nkv, 1.0, f.countS};
  rows.n = 2;
  (select ? launchCoverSelect : launchCoverCounts)(m, rows, f.gamma);
  endPhase("block sums, line cover counts", m.stream);
}

// The two branches' streams and the events that fork them off the launch's stream and join them back, one
// set per host thread and device, released when the thread ends (errors ignored then: at process exit the
// CUDA runtime may already be gone). Both streams have the greatest priority, so that the launch's other
// work does not come between; the pooled branch, which ends last, is issued first (its block means read all
// of Q and K, a memory-bound start that the compute-bound line scores overlap). kernels/NOTES.md compares
// the orders.
struct BranchStreams {
  cudaStream_t lines = nullptr, pooled = nullptr;
  cudaEvent_t fork = nullptr, linesDone = nullptr, pooledDone = nullptr;
  BranchStreams() = default;
  BranchStreams(const BranchStreams&) = delete;
  BranchStreams& operator=(const BranchStreams&) = delete;
  ~BranchStreams() {
    for (cudaEvent_t e : {fork, linesDone, pooledDone})
      if (e) cudaEventDestroy(e);
    for (cudaStream_t s : {lines, pooled})
      if (s) cudaStreamDestroy(s);
  }
};

void makeStream(cudaStream_t& s, int priority) {
  if (!s)
    check(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, priority),
          "cudaStreamCreate (FlexPrefill)");
}
void makeEvent(cudaEvent_t& e) {
  if (!e) check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate (FlexPrefill)");
}

BranchStreams& branchStreams() {
  thread_local std::map<int, BranchStreams> all;
  int dev = 0, greatest = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  check(cudaDeviceGetStreamPriorityRange(nullptr, &greatest), "cudaDeviceGetStreamPriorityRange");
  BranchStreams& b = all[dev];  // each handle made once, so that a failed creation is retried alone
  makeStream(b.lines, greatest);
  makeStream(b.pooled, greatest);
  makeEvent(b.fork);
  makeEvent(b.linesDone);
  makeEvent(b.pooledDone);
  return b;
}

// Every statistic and γ count: the lines and the pooled scores side by side, each on its own stream.
void computeStats(const MethodLaunch& m, const FlexScratch& f) {
  const Problem& p = m.problem;
  const int slots = slotCount(p);
  BranchStreams& b = branchStreams();
  check(cudaEventRecord(b.fork, m.stream), "cudaEventRecord (FlexPrefill)");
  for (cudaStream_t s : {b.lines, b.pooled})
    check(cudaStreamWaitEvent(s, b.fork, 0), "cudaStreamWaitEvent (FlexPrefill)");
  MethodLaunch lines = m;
  lines.stream = b.lines;
  pooledBranch(m, f, b.pooled);
  lineBranch(lines, f);
  check(cudaEventRecord(b.linesDone, b.lines), "cudaEventRecord (FlexPrefill)");
  check(cudaEventRecord(b.pooledDone, b.pooled), "cudaEventRecord (FlexPrefill)");
  for (cudaEvent_t e : {b.linesDone, b.pooledDone})
    check(cudaStreamWaitEvent(m.stream, e, 0), "cudaStreamWaitEvent (FlexPrefill)");
  endPhase("branches joined", m.stream);
  withElem(m.qkv.et, [&](auto tag) {
    sparge_predict_flexprefill_js<decltype(tag)><<<slots, kJsThreads, sizeof(float) * f.nbk, m.stream>>>(
        p, f.B, f.nbk, f.L, f.meanLast, f.avgK, f.vBlock, f.js);
  });
  checkLaunch("sparge_predict_flexprefill_js");
  endPhase("JS distance", m.stream);
}

void select(const MethodLaunch& m, const FlexScratch& f, MethodRows& out) {
  const Problem& p = m.problem;
  const int slots = slotCount(p);
  if (f.stats) {
    sparge_predict_flexprefill_line_blocks<<<slots, 256, 0, m.stream>>>(
        p, f.B, f.nbk, f.heads, f.js, f.countV, f.countS, f.vBlock, f.sBlock, f.vOn, f.sOn);
    checkLaunch("sparge_predict_flexprefill_line_blocks");
    endPhase("block choice", m.stream);
  }
  sparge_predict_flexprefill_tiles<<<dim3(unsigned((p.nq + kTileRows - 1) / kTileRows), slots), kTileThreads,
                                     0, m.stream>>>(p, f.B, f.nbq, f.nbk, f.heads, f.js, f.vOn, f.sOn,
                                                    f.pooledOn, f.vBlock, f.pooled, out);
  checkLaunch("sparge_predict_flexprefill_tiles");
  endPhase("tiles", m.stream);
}

}  // namespace

void predictFlexPrefill(const MethodLaunch& launch, MethodRows& out, DeviceBuffer& scratch) {
  const Problem& p = launch.problem;
  if (p.nHeads == 0 || p.B == 0) return;
  FlexScratch f;
  f.B = std::max(p.BQ, p.BK);
  f.nbq = int(core::ceilDiv(p.Nq, f.B));
  f.nbk = int(core::ceilDiv(p.Nkv, f.B));
  std::vector<double> gamma;
  const std::vector<FlexHead> heads = headParams(launch, f.B, f.nbk, gamma);
  for (const FlexHead& h : heads) f.stats = f.stats || !h.shortSequence;
  f.selectLines = coverSelectFits(int(p.Nkv));
  f.selectPooled = coverSelectFits(f.nbq * f.nbk);
  f.L = std::min(f.B, p.Nq);
  f.Lpad = (f.L + 15) / 16 * 16;
  carveScratch(scratch, "FlexPrefill scratch", [&](Carve& c) { layout(c, f, p); });
  uploadAsync(f.heads, heads, launch.stream);
  uploadAsync(f.gamma, gamma, launch.stream);
  endPhase("parameters", launch.stream);
  if (f.stats) computeStats(launch, f);
  select(launch, f, out);
}

}  // namespace sparge::cuda::predictors

// MInference's block predictor on the GPU (core/src/method_minference.cpp, docs/methods.md): per head either
// vertical-slash lines from the last 64 queries' attention, mapped onto the tiles they cross with the token
// pairs they cover, or block-sparse top-k over pooled Q·Kᵀ. The statistics (line sums, pooled scores) come
// first and do not depend on the head's line counts or top-k; the selection follows.
#include <algorithm>
#include <cmath>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <string>
#include <vector>

#include "common/cuda_util.h"
#include "common/upload.h"
#include "predictors/line_common.h"
#include "predictors/line_device.cuh"
#include "predictors/line_methods.h"
#include "sparge/core/error.h"
#include "sparge/core/method.h"

namespace sparge::cuda::predictors {
namespace {

using namespace lines;

// Upstream's constants (as the CPU predictor): the last 64 queries are scored; the first 30 key columns and
// the 100 diagonals nearest the main one are always kept; at least 30 columns and 50 diagonals are chosen.
constexpr int kLastQueries = 64, kInitColumns = 30, kLocalDiagonals = 100;
constexpr long long kMinVertical = 30, kMinSlash = 50;

// One query head's parameters as the kernels read them.
struct MinfHead {
  int lines = 1;  // vertical_slash (else block_sparse)
  int dense = 0;
  long long columns = 0, diagonals = 0, topk = 0;  // clamped as the CPU predictor clamps them
};

// Where each array lives in the scratch buffer (nullptr in the sizing pass).
struct MinfScratch {
  MinfHead* heads = nullptr;
  // vertical_slash
  void *lastQ = nullptr, *S = nullptr;
  float *rowMax = nullptr, *rowSum = nullptr, *vertical = nullptr, *slash = nullptr;
  float2* partial = nullptr;
  int* colPrefix = nullptr;
  uint32_t *colBits = nullptr, *diagBits = nullptr;  // chosen columns / diagonals, one bit each
  // block_sparse
  float *pq = nullptr, *pk = nullptr, *pooled = nullptr, *prob = nullptr, *sortedP = nullptr;
  int* idxP = nullptr;
  SegmentSort sortP;
  int L = 0, Lpad = 0, wordsK = 0, wordsQ = 0;
  bool lines = false, blocks = false;
};

void layout(Carve& c, MinfScratch& m, const Problem& p) {
  const int slots = slotCount(p);
  const size_t Nq = size_t(p.Nq), Nkv = size_t(p.Nkv);
  m.heads = c.take<MinfHead>(size_t(p.Hq));
  if (m.lines) {
    m.lastQ = c.take<uint16_t>(size_t(slots) * m.Lpad * p.D);
    m.S = c.take<uint16_t>(size_t(slots) * m.L * Nkv);
    m.partial = c.take<float2>(linePartialCount(p, m.L));
    m.rowMax = c.take<float>(size_t(slots) * m.L);
    m.rowSum = c.take<float>(size_t(slots) * m.L);
    m.vertical = c.take<float>(slots * Nkv);
    m.slash = c.take<float>(slots * Nq);
    m.colPrefix = c.take<int>(slots * (Nkv + 1));
    m.colBits = c.take<uint32_t>(size_t(slots) * m.wordsK);
    m.diagBits = c.take<uint32_t>(size_t(slots) * m.wordsQ);
  }
  if (m.blocks) {
    const size_t tiles = size_t(slots) * p.nq * p.nk;
    m.pq = c.take<float>(size_t(slots) * p.nq * p.D);
    m.pk = c.take<float>(size_t(p.B) * p.Hkv * p.nk * p.D);
    m.pooled = c.take<float>(tiles);
    m.prob = c.take<float>(tiles);
    m.sortedP = c.take<float>(tiles);
    m.idxP = c.take<int>(tiles);
    layoutSort(c, m.sortP, slots * p.nq, p.nk);
  }
}

// CTA per (slot, line family): bits of the head's `columns` best columns of vertical (blockIdx.y 0) or its
// `diagonals` best diagonals of slash (1), the first ranks of a stable descending sort (ties to the lower
// index, core's rankDescending) without sorting: a radix select finds the count-th key 8 bits a pass, then
// one pass in index order takes every smaller key and the first of the equal ones. Block-sparse heads get no
// lines (their words are zeroed).
constexpr int kSelectThreads = 1024;
__global__ void __launch_bounds__(kSelectThreads)
    sparge_predict_minference_top_lines(Problem p, const MinfHead* heads, const float* __restrict__ vertical,
                                        const float* __restrict__ slash, int wordsK, int wordsQ,
                                        uint32_t* colBits, uint32_t* diagBits) {
  using Scan = cub::BlockScan<int, kSelectThreads>;
  __shared__ typename Scan::TempStorage scanTmp;
  __shared__ int hist[256];
  __shared__ uint32_t sPrefix;
  __shared__ int sNeed;
  const int s = blockIdx.x;
  const bool diag = blockIdx.y == 1;
  const MinfHead h = heads[slotHeads(p, s).hq];
  const int len = diag ? p.Nq : p.Nkv;
  const float* v = (diag ? slash : vertical) + (size_t)s * len;
  uint32_t* bits = diag ? diagBits + (size_t)s * wordsQ : colBits + (size_t)s * wordsK;
  const int k = (int)min((long long)len, h.lines ? (diag ? h.diagonals : h.columns) : 0LL);
  const bool partial = k > 0 && k < len;
  uint32_t prefix = 0, mask = 0;
  int need = k;  // the count-th key is the need-th of those under prefix
  for (int shift = 24; partial && shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < 256; b += blockDim.x) hist[b] = 0;
    __syncthreads();
    for (int x = threadIdx.x; x < len; x += blockDim.x) {
      const uint32_t key = descendingKey(v[x]);
      if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 255u], 1);
    }
    __syncthreads();
    const int mine = threadIdx.x < 256 ? hist[threadIdx.x] : 0;
    int before;
    Scan(scanTmp).ExclusiveSum(mine, before);
    if (threadIdx.x < 256 && before < need && before + mine >= need) {
      sPrefix = prefix | (uint32_t(threadIdx.x) << shift);
      sNeed = need - before;
    }
    __syncthreads();
    prefix = sPrefix;
    need = sNeed;
    mask |= 255u << shift;
  }
  // prefix: the count-th key; need: how many keys equal to it are taken, lowest index first.
  int carry = 0;
  for (int base = 0; base < len; base += kSelectThreads) {
    const int x = base + threadIdx.x;
    const uint32_t key = x < len ? descendingKey(v[x]) : 0u;
    const int equal = partial && x < len && key == prefix;
    int equalBefore, equalTotal;
    Scan(scanTmp).ExclusiveSum(equal, equalBefore, equalTotal);
    const bool on = x < len && (partial ? key < prefix || (equal && carry + equalBefore < need) : k > 0);
    const uint32_t word = __ballot_sync(0xffffffffu, on);
    if ((threadIdx.x & 31) == 0 && x < len) bits[x >> 5] = word;
    carry += equalTotal;
    __syncthreads();
  }
}

__device__ __forceinline__ int bitAt(const uint32_t* words, long long x) {
  return (words[x >> 5] >> (x & 31)) & 1u;
}

// Queries of [q0, q1) that see key c (core's queriesSeeing, in closed form: q − left <= c <= q + right).
__device__ __forceinline__ long long seeing(const Problem& p, long long c, long long q0, long long q1) {
  const long long right = p.causal ? 0 : p.window.right;
  const long long lo = right >= 0 ? max(q0, c - right) : q0;
  const long long hi = p.window.left >= 0 ? min(q1 - 1, c + p.window.left) : q1 - 1;
  return max(0LL, hi - lo + 1);
}

// core's diagonalVisible: pair (q, q − o) allowed whatever q is.
__device__ __forceinline__ bool diagonalVisible(const Problem& p, long long o) {
  const long long right = p.causal ? 0 : p.window.right;
  return (right < 0 || o >= -right) && (p.window.left < 0 || o <= p.window.left);
}

// CTA per slot: the token pairs the chosen lines cover (core's coveredPairs: columns plus diagonals minus
// the pairs on both), and the head's dense flag.
constexpr int kPairThreads = 1024;
__global__ void __launch_bounds__(kPairThreads)
    sparge_predict_minference_pairs(Problem p, const MinfHead* heads, const uint32_t* colBits,
                                    const uint32_t* diagBits, int wordsK, int wordsQ, int* colPrefix,
                                    MethodRows out) {
  using Scan = cub::BlockScan<int, kPairThreads>;
  using Reduce = cub::BlockReduce<long long, kPairThreads>;
  __shared__ typename Scan::TempStorage scanTmp;
  __shared__ typename Reduce::TempStorage reduceTmp;
  const int s = blockIdx.x;
  const SlotHeads sh = slotHeads(p, s);
  const MinfHead h = heads[sh.hq];
  if (threadIdx.x == 0) out.denseHead[sh.bhq] = uint8_t(h.dense);
  if (!h.lines) {
    if (threadIdx.x == 0) out.elementPairs[sh.bhq] = NAN;
    return;
  }
  const uint32_t* cols = colBits + (size_t)s * wordsK;
  const uint32_t* diags = diagBits + (size_t)s * wordsQ;
  int* prefix = colPrefix + (size_t)s * (p.Nkv + 1);  // prefix[x]: chosen columns < x
  const int chunk = (p.Nkv + kPairThreads - 1) / kPairThreads;
  const int c0 = min(p.Nkv, (int)threadIdx.x * chunk), c1 = min(p.Nkv, c0 + chunk);
  int mine = 0, before = 0, total = 0;
  long long pairs = 0;
  for (int c = c0; c < c1; ++c)
    if (bitAt(cols, c)) {
      ++mine;
      pairs += seeing(p, c, 0, p.Nq);
    }
  Scan(scanTmp).ExclusiveSum(mine, before, total);
  for (int c = c0; c < c1; ++c) {
    prefix[c] = before;
    before += bitAt(cols, c);
  }
  if (threadIdx.x == 0) prefix[p.Nkv] = total;
  __syncthreads();
  for (int o = threadIdx.x; o < p.Nq; o += blockDim.x) {
    if (!bitAt(diags, o) || !diagonalVisible(p, o)) continue;
    pairs += max(0LL, min((long long)p.Nq, (long long)p.Nkv + o) - o);
    pairs -= prefix[min(p.Nq - o, p.Nkv)];
  }
  pairs = Reduce(reduceTmp).Sum(pairs);
  if (threadIdx.x == 0) out.elementPairs[sh.bhq] = (double)pairs;
}

// Bits of word w (diagonals 32w .. 32w+31) from diagonal a on / up to diagonal b (32-bit arithmetic: the
// tile kernel's hottest code, and every diagonal, break and word index fits an int).
__device__ __forceinline__ uint32_t bitsFrom(int w, int a) {
  const int first = 32 * w;
  return a <= first ? ~0u : a > first + 31 ? 0u : ~0u << (a - first);
}
__device__ __forceinline__ uint32_t bitsTo(int w, int b) {
  const int first = 32 * w;
  return b >= first + 31 ? ~0u : b < first ? 0u : (2u << (b - first)) - 1u;
}

// Σ of o over the set bits of word w: 32w per bit plus the bit positions, summed bit by bit of the position.
__device__ __forceinline__ long long diagonalSum(int w, uint32_t bits) {
  const int positions = __popc(bits & 0xAAAAAAAAu) + 2 * __popc(bits & 0xCCCCCCCCu) +
                        4 * __popc(bits & 0xF0F0F0F0u) + 8 * __popc(bits & 0xFF00FF00u) +
                        16 * __popc(bits & 0xFFFF0000u);
  return 32LL * w * __popc(bits) + positions;
}

// The pairs of tile [q0, q1) x [k0, kEnd] on the chosen visible diagonals, and whether a local (forced) or
// another (selected) diagonal crosses it. Every diagonal o in [q0 − kEnd, q1 − 1 − k0] crosses the tile, over
// keys max(q0 − o, k0) .. min(q1 − 1 − o, kEnd): linear in o on either side of o = q0 − k0 and of
// o = q1 − 1 − kEnd, so the sum needs only the count and the sum of the chosen o on each side, a word of
// 32 diagonals at a time (the pairs core's mapping counts one diagonal at a time).
__device__ long long diagonalCover(const Problem& p, const uint32_t* bits, long long q0, long long q1,
                                   long long k0, long long kEnd, bool& forced, bool& sel) {
  const int oA = int(max(0LL, q0 - kEnd));
  long long oMax = min((long long)p.Nq - 1, q1 - 1 - k0);
  if (p.window.left >= 0) oMax = min(oMax, (long long)p.window.left);  // diagonals past the window: unseen
  const int oB = int(oMax);
  if (oA > oB) return 0;
  // lo = q0 − o up to o = loBreak, k0 after it; hi = kEnd up to o = hiBreak, q1 − 1 − o from it.
  const int loBreak = int(q0 - k0), hiBreak = int(q1 - 1 - kEnd);
  long long n = 0, nLe = 0, sumLe = 0, nGe = 0, sumGe = 0;
  for (int w = oA >> 5; w <= oB >> 5; ++w) {
    const uint32_t on = bits[w] & bitsFrom(w, oA) & bitsTo(w, oB);
    if (!on) continue;
    forced = forced || (on & bitsTo(w, kLocalDiagonals - 1)) != 0;
    sel = sel || (on & bitsFrom(w, kLocalDiagonals)) != 0;
    n += __popc(on);
    const uint32_t le = on & bitsTo(w, loBreak), ge = on & bitsFrom(w, hiBreak);
    nLe += __popc(le);
    sumLe += diagonalSum(w, le);
    nGe += __popc(ge);
    sumGe += diagonalSum(w, ge);
  }
  const long long sumHi = nGe * (q1 - 1) - sumGe + (n - nGe) * kEnd;
  const long long sumLo = nLe * q0 - sumLe + (n - nLe) * k0;
  return sumHi - sumLo + n;
}

// Thread per tile of a slot: selected / forced by the lines that cross it and its covered share
// (vertical_slash), or the pooled probability with nothing selected yet (block_sparse).
__global__ void __launch_bounds__(256)
    sparge_predict_minference_tiles(Problem p, const MinfHead* heads, const uint8_t* blockFlags,
                                    const uint32_t* colBits, const uint32_t* diagBits, int wordsK, int wordsQ,
                                    const float* prob, MethodRows out) {
  const long long x = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  const int s = blockIdx.y;
  if (x >= (long long)p.nq * p.nk) return;
  const SlotHeads sh = slotHeads(p, s);
  const MinfHead h = heads[sh.hq];
  const size_t at = (size_t)sh.bhq * p.nq * p.nk + x;
  const int i = int(x) / p.nk, j = int(x) % p.nk;  // 32-bit division: a slot's tiles fit an int
  bool sel = false, forced = false;
  float score = 0.f;
  if (!h.lines) {
    score = prob[(size_t)s * p.nq * p.nk + x];
  } else if (blockFlags[x] & kBlockValid) {
    const long long q0 = (long long)i * p.BQ, q1 = min((long long)p.Nq, q0 + p.BQ);
    const long long k0 = (long long)j * p.BK, kEnd = min((long long)p.Nkv, k0 + p.BK) - 1;
    long long covered = 0;
    forEachBit(colBits + (size_t)s * wordsK, k0, kEnd, [&](long long c) {
      const long long n = seeing(p, c, q0, q1);
      if (n == 0) return;
      (c < kInitColumns ? forced : sel) = true;
      covered += n;
    });
    covered += diagonalCover(p, diagBits + (size_t)s * wordsQ, q0, q1, k0, kEnd, forced, sel);
    const long long area = visibleArea(p, q0, q1, k0, kEnd);
    score = area > 0 ? (float)fmin(1.0, (double)covered / (double)area) : 0.f;
  }
  out.selected[at] = sel;
  out.methodForced[at] = forced;
  out.score[at] = score;
}

// block_sparse: thread per (row, rank), rows along the grid's x (its y allows only 65,535); the first topk
// ranks of a row that are not −inf are selected.
__global__ void sparge_predict_minference_top_blocks(Problem p, const MinfHead* heads, const float* sorted,
                                                     const int* idx, MethodRows out) {
  const int r = blockIdx.y * blockDim.x + threadIdx.x, row = blockIdx.x;  // row: slot * nq + i
  if (r >= p.nk) return;
  const int s = row / p.nq, i = row % p.nq;
  const SlotHeads sh = slotHeads(p, s);
  const MinfHead h = heads[sh.hq];
  const size_t x = (size_t)row * p.nk + r;
  if (h.lines || r >= h.topk || sorted[x] == -INFINITY) return;
  out.selected[((size_t)sh.bhq * p.nq + i) * p.nk + idx[x]] = 1;
}

std::vector<MinfHead> headParams(const MethodLaunch& m) {
  const Problem& p = m.problem;
  if (!m.params || m.params->size() < size_t(p.Hq))
    throw Error("CUDA MInference",
                "per-head parameters for " + std::to_string(p.Hq) + " query heads expected");
  std::vector<MinfHead> out(size_t(p.Hq));
  for (int hq = 0; hq < p.Hq; ++hq) {
    const core::HeadParams& hp = (*m.params)[size_t(hq)];
    MinfHead& h = out[size_t(hq)];
    h.lines = hp.minference.pattern == core::MInferencePattern::VerticalSlash;
    h.dense = hp.dense ? 1 : 0;
    h.columns = std::min<long long>(p.Nkv, std::max<long long>(hp.minference.verticalSize, kMinVertical));
    h.diagonals = std::min<long long>(p.Nq, std::max<long long>(hp.minference.slashSize, kMinSlash));
    h.topk = hp.minference.topk;
  }
  return out;
}

// The statistics that do not depend on the line counts or top-k: line sums, the pooled scores and their
// softmax and row orders.
void computeStats(const MethodLaunch& m, const MinfScratch& x) {
  const Problem& p = m.problem;
  if (x.lines) {
    launchLastQueries(m, x.L, x.Lpad, 1.f, x.lastQ);
    launchLastScores(m, x.lastQ, x.L, x.Lpad, float(m.scale), x.S, x.partial);
    endPhase("last-query scores", m.stream);
    LineSums ls{x.vertical, x.slash, p.Nq, 1.f, kInitColumns, kLocalDiagonals};
    launchLineSums(m, x.S, x.L, x.partial, x.rowMax, x.rowSum, ls);
  }
  if (x.blocks) {
    // Upstream pads the sequence with zeros and averages over the whole tile.
    launchTileMeans(m, TileMeans{nullptr, p.Nq, p.BQ, true, true, 0.f, x.pq});
    launchTileMeans(m, TileMeans{nullptr, p.Nkv, p.BK, false, true, 0.f, x.pk});
    endPhase("tile means", m.stream);
    launchPooledDots(m, x.pq, x.pk, p.nq, p.nk, m.blockFlags, x.pooled);
    launchRowSoftmax(x.pooled, slotCount(p) * p.nq, p.nk, x.prob, m.stream);
    endPhase("pooled scores", m.stream);
    sortDescending(x.sortP, x.pooled, x.sortedP, x.idxP, m.stream);
    endPhase("block sorts", m.stream);
  }
}

void select(const MethodLaunch& m, const MinfScratch& x, MethodRows& out) {
  const Problem& p = m.problem;
  const int slots = slotCount(p);
  if (x.lines) {
    sparge_predict_minference_top_lines<<<dim3(slots, 2), kSelectThreads, 0, m.stream>>>(
        p, x.heads, x.vertical, x.slash, x.wordsK, x.wordsQ, x.colBits, x.diagBits);
    checkLaunch("sparge_predict_minference_top_lines");
    endPhase("line selection", m.stream);
  }
  sparge_predict_minference_pairs<<<slots, kPairThreads, 0, m.stream>>>(p, x.heads, x.colBits, x.diagBits,
                                                                        x.wordsK, x.wordsQ, x.colPrefix, out);
  checkLaunch("sparge_predict_minference_pairs");
  endPhase("token pairs", m.stream);
  const long long tiles = (long long)p.nq * p.nk;
  sparge_predict_minference_tiles<<<dim3(unsigned((tiles + 255) / 256), slots), 256, 0, m.stream>>>(
      p, x.heads, m.blockFlags, x.colBits, x.diagBits, x.wordsK, x.wordsQ, x.prob, out);
  checkLaunch("sparge_predict_minference_tiles");
  if (x.blocks) {
    sparge_predict_minference_top_blocks<<<dim3(slots * p.nq, (p.nk + 255) / 256), 256, 0, m.stream>>>(
        p, x.heads, x.sortedP, x.idxP, out);
    checkLaunch("sparge_predict_minference_top_blocks");
  }
  endPhase("tiles", m.stream);
}

}  // namespace

void predictMInference(const MethodLaunch& launch, MethodRows& out, DeviceBuffer& scratch) {
  const Problem& p = launch.problem;
  if (p.nHeads == 0 || p.B == 0) return;
  const std::vector<MinfHead> heads = headParams(launch);
  MinfScratch x;
  for (const MinfHead& h : heads) (h.lines ? x.lines : x.blocks) = true;
  x.L = std::min(kLastQueries, p.Nq);
  x.Lpad = (x.L + 15) / 16 * 16;
  x.wordsK = (p.Nkv + 31) / 32;
  x.wordsQ = (p.Nq + 31) / 32;
  carveScratch(scratch, "MInference scratch", [&](Carve& c) { layout(c, x, p); });
  uploadAsync(x.heads, heads, launch.stream);
  endPhase("parameters", launch.stream);
  computeStats(launch, x);
  select(launch, x, out);
}

}  // namespace sparge::cuda::predictors

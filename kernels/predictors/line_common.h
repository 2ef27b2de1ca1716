// Private to the line predictors (line_methods.h): the device steps MInference and FlexPrefill share (the
// last queries' scores on the tensor cores, vertical and slash sums, pooled tile means and dot products, row
// softmax, segmented descending sorts, coverage counts) and the scratch carving they both use.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/cuda_util.h"
#include "common/sort_key.h"
#include "predictors/method_rows.h"

#if defined(__CUDACC__)
#define SPARGE_LINE_HD __host__ __device__
#else
#define SPARGE_LINE_HD
#endif

namespace sparge::cuda::predictors::lines {

// Carves typed arrays out of one scratch buffer: a first pass with a null base only sums the sizes.
struct Carve {
  char* base = nullptr;
  size_t used = 0;
  template <typename T>
  T* take(size_t count) {
    used = (used + 255) & ~size_t(255);
    T* p = base ? reinterpret_cast<T*>(base + used) : nullptr;
    used += count * sizeof(T);
    return p;
  }
};

// Runs layout(carve) twice: to size `scratch` (grown to fit), then over it.
template <typename Layout>
void carveScratch(DeviceBuffer& scratch, const char* what, Layout&& layout) {
  Carve sizing;
  layout(sizing);
  scratch.reserve(sizing.used, what);
  Carve carve{static_cast<char*>(scratch.get())};
  layout(carve);
}

// Ends a phase for the installed LinePhaseProbe (line_methods.h), if any.
void endPhase(const char* phase, cudaStream_t s);

// Slots are the (batch item, listed head) pairs a launch writes: slot s = b * nHeads + h, query head
// heads[h]. Every per-slot array below is indexed by slot.
inline int slotCount(const Problem& p) {
  return p.B * p.nHeads;
}

// Rows [Nq − L, Nq) of each slot's Q times `mul`, rounded to the input type, into out [slot][Lpad][D]
// (rows from L on are zero; Lpad = L rounded up to 16).
void launchLastQueries(const MethodLaunch& m, int L, int Lpad, float mul, void* out);

// S[slot][r][k] = T(T(lastQ[r] · K[k]) · postScale) for r < L and every key, fp32 sums on the tensor cores;
// with it, per row and chunk of keys, the max and Σ exp(s − max) over the keys its query sees
// (partial: linePartialCount(p, L) pairs, lineScoreChunks(p) a row, one per kLineScoreKeys keys).
constexpr int kLineScoreKeys = 128;
SPARGE_LINE_HD inline int lineScoreChunks(const Problem& p) {
  return (p.Nkv + kLineScoreKeys - 1) / kLineScoreKeys;
}
size_t linePartialCount(const Problem& p, int L);
void launchLastScores(const MethodLaunch& m, const void* lastQ, int L, int Lpad, float postScale, void* S,
                      float2* partial);

// The softmax of each row of S over the keys its query sees (its max and sum from the score kernel's
// partials, into rowMax/rowSum: [slot][L] scratch), summed per key column into vertical [slot][Nkv] and per
// diagonal o = query − key (0 <= o < nSlash) into slash [slot][nSlash], query by query in order as the CPU
// does, then divided by `divisor`; the first `infColumns` columns and `infDiagonals` diagonals are set to
// +inf (always kept).
struct LineSums {
  float* vertical = nullptr;
  float* slash = nullptr;
  int nSlash = 0;
  float divisor = 1.f;
  int infColumns = 0, infDiagonals = 0;
};
void launchLineSums(const MethodLaunch& m, const void* S, int L, const float2* partial, float* rowMax,
                    float* rowSum, const LineSums& out);

// Tile means of rows as core's meanRows: per sequence and tile of `tile` rows, the fp32 sum in row order
// divided by `tile` (fullTile) or by the rows present, rounded to the input type, then (postScale != 0)
// times postScale and rounded again. Sequences: querySlots ? the slots' query heads of Q : every (b, KV
// head) of K; `x` null reads launch's Q or K; otherwise x is [seq][rows][D] with `rows` rows each.
struct TileMeans {
  const void* x = nullptr;
  int rows = 0;  // rows per sequence (Nq or Nkv when x is null)
  int tile = 0;
  bool querySlots = true;
  bool fullTile = true;
  float postScale = 0.f;
  float* out = nullptr;  // [seq][ceil(rows / tile)][D]
  int stride = 0;        // rows from one sequence of x to the next (0: rows)
};
void launchTileMeans(const MethodLaunch& m, const TileMeans& t);

// out[slot][i][j] = T(pq[slot][i] · pk[kv head of slot][j]) (fp32, in index order, no fused multiply-add,
// as the CPU's dot), −inf where flags[i * nTk + j] lacks kBlockValid.
void launchPooledDots(const MethodLaunch& m, const float* pq, const float* pk, int nTq, int nTk,
                      const uint8_t* flags, float* out);

// Softmax of each row of x [rows][len] (an all −inf row gives zeros).
void launchRowSoftmax(const float* x, int rows, int len, float* out, cudaStream_t s);

// Segmented sorts order by descendingKey (common/sort_key.h): a stable ascending sort of (segment, key) ranks
// each segment as core's rankDescending does.
using cuda::descendingKey;
using cuda::fromDescendingKey;

// Descending sort of nSeg segments of `len` floats each, with each key's index in its segment; equal keys
// keep ascending index. Segments of up to 4,096 values, and keys-only ones of up to 32,768: a CTA's block
// radix sort each (no scratch); longer ones: one device-wide stable radix sort over 64-bit (segment,
// descendingKey) keys, since a CTA per long segment leaves most of the GPU idle when there are few
// (kernels/NOTES.md).
struct SegmentSort {
  int nSeg = 0, len = 0;
  int endBit = 32;                 // the key bits that differ: 32 plus those of the segment index
  bool keysOnly = false;           // values alone (no indices): half the traffic of the long sort
  bool keyBlock = false;           // keys only, sorted by a CTA a segment (the device allows its memory)
  uint64_t* keys = nullptr;        // [nSeg * len] scratch
  uint64_t* sortedKeys = nullptr;  // [nSeg * len] scratch
  int* iota = nullptr;             // [nSeg * len] scratch
  void* temp = nullptr;
  size_t tempBytes = 0;
};
// Carves a sort's scratch for nSeg segments of `len`. A keysOnly sort gives the sorted values alone
// (sortedIdx null; −0 comes back as +0 and NaN as a NaN, which leaves any running sum over them unchanged).
void layoutSort(Carve& c, SegmentSort& s, int nSeg, int len, bool keysOnly = false);
void sortDescending(const SegmentSort& s, const float* keys, float* sortedKeys, int* sortedIdx,
                    cudaStream_t stream);

// Where a count cuts its row: the descendingKey of the last value counted, how many of the values equal to it
// are counted, and whether that is all of them (a count of 0: {0, 0, true}).
struct CoverCut {
  uint32_t kth;
  int need;
  bool all;
};

// Per slot of each row: how many leading values of a descending row [slot][len] (NaN last) keep their exact
// running sum (sparge/core/cover_sum.h) <= the slot's threshold, thresholds[query head] · mul: core's
// coverCount less its +1. All rows in one launch. launchCoverCounts takes rows sorted by sortDescending;
// launchCoverSelect takes them in any order and sorts nothing (rows of up to 65,536 values, on a device that
// allows its shared memory: coverSelectFits).
struct CoverRow {
  const float* values = nullptr;
  int len = 0;
  double mul = 1.0;
  int* count = nullptr;
  CoverCut* cut = nullptr;  // launchCoverSelect writes it where given
};
struct CoverRows {
  CoverRow row[3];
  int n = 0;
};
void launchCoverCounts(const MethodLaunch& m, const CoverRows& rows, const double* thresholds);
bool coverSelectFits(int len);
void launchCoverSelect(const MethodLaunch& m, const CoverRows& rows, const double* thresholds);

// flags [nbq][nbk] of the square blocks of side B (FlexPrefill's), the same for every head: kBlockValid
// where the block holds a visible pair (core::blockValid).
void launchSquareFlags(const MethodLaunch& m, int B, int nbq, int nbk, uint8_t* flags);

}  // namespace sparge::cuda::predictors::lines

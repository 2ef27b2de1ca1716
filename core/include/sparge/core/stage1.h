// Stage 1 of SpargeAttn on the CPU (docs/method.md): block statistics, selection, final mask.
// Split in two so that a parameter change re-runs only the cheap selection: BlockStats depend on the
// data, the geometry and smooth_k only (not on θ, τ, top-k), so the tuner and the GUI cache them.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "sparge/core/params.h"
#include "sparge/core/result.h"
#include "sparge/core/types.h"

namespace sparge::core {

// θ-independent statistics of one (batch, query head).
struct BlockStats {
  int nq = 0, nk = 0;
  Geometry geometry;
  bool causal = false;
  Window window;  // the entry's local window (unbounded: none); with `causal`, decides block validity
  std::vector<float> selfSimQ;  // [nq] s = ||mean unit vector||², NaN for partial or zero-row blocks
  std::vector<float> selfSimK;  // [nk]
  // [nq * nk] compressed scores half(half(pool_q · pool_kᵀ) · D^-0.5), before any masking.
  std::vector<float> scores;
  // [d] keyTokenMean of K with smooth_k (Stage 2 quantizes K with it); empty without.
  std::vector<float> keyMean;
};

// K's per-head token mean in the input precision (fp32 sum, rounded to the input type): what SpargeAttn
// subtracts from K before pooling and before quantizing K (smooth_k).
std::vector<float> keyTokenMean(const float* k, int64_t nKv, int64_t d, DType inputType);

// Inputs are row-major [Nq, D] and [Nkv, D] float32 holding values of `inputType` (the stage mirrors
// SpargeAttn's half-precision rounding; float32 captures are treated as float16, as upstream casts).
BlockStats computeBlockStats(const float* q, int64_t nQ, const float* k, int64_t nKv, int64_t d,
                             DType inputType, const Geometry& geometry, bool smoothK, bool causal,
                             const Window& window = {});

// Validity of block (i, j): true when it holds at least one token pair (query, key) that
// visibleKeys(query, nKv, causal, window) allows (top-left aligned). Without causal or window: every
// block inside the grid.
bool blockValid(int i, int j, const Geometry& g, int64_t nQ, int64_t nKv, bool causal,
                const Window& window = {});
// Number of valid token pairs in block (i, j).
double blockValidArea(int i, int j, const Geometry& g, int64_t nQ, int64_t nKv, bool causal,
                      const Window& window = {});
// True when block (i, j) holds a valid pair with key == query (top-left aligned): the diagonal blocks
// that `diagonal` keeps on (for a window, the blocks at the centre of its band).
bool blockOnDiagonal(int i, int j, const Geometry& g, int64_t nQ, int64_t nKv, bool causal,
                     const Window& window = {});

// blockValid / blockValidArea for every block of an entry's grid. The same for every head of an entry, so
// engines compute it once per geometry and reuse it for every head and run.
struct BlockValidity {
  int nq = 0, nk = 0;
  std::vector<uint8_t> valid;  // [nq * nk]
  std::vector<double> area;    // [nq * nk], valid token pairs
};
BlockValidity computeBlockValidity(const Geometry& g, int64_t nQ, int64_t nKv, bool causal,
                                   const Window& window = {});

// Sparsity counts of one head with exact denominators: valid blocks and areas from `validity`, the Stage-1
// mask and the PV-skip map ([nq * nk] each).
SparsityCounts countSparsity(const BlockValidity& validity, const uint8_t* mask, const uint8_t* pvSkipped);

struct Stage1Mask {
  std::vector<uint8_t> mask;      // [nq * nk], 1 = selected
  std::vector<uint8_t> reasons;   // [nq * nk], BlockReason bits
  std::vector<float> pooledProb;  // [nq * nk], P̂ = softmax of the masked scores (half-rounded)
  std::vector<uint8_t> similarQ;  // [nq]
  std::vector<uint8_t> similarK;  // [nk]
  // Methods that choose single tokens: the valid token pairs they compute themselves
  // (HeadResult::elementPairs).
  double elementPairs = std::numeric_limits<double>::quiet_NaN();
};

// Blocks kept on whatever Stage 1 selects. `sink` is SpargeAttn's (K block 0); `diagonal` is an
// extension of Sparge Studio (the blocks holding key == query, see blockOnDiagonal).
struct ForcedBlocks {
  bool sink = false;
  bool diagonal = false;
};

// Selection and the final map M in SpargeAttn's order: forced columns/rows, top-CDF or top-k
// selection, validity (causal and window), sink, diagonal. `params.dense` selects every valid block.
Stage1Mask selectBlocks(const BlockStats& stats, const HeadParams& params, const ForcedBlocks& forced,
                        int64_t nQ, int64_t nKv);

// Delta-encoded LUT (SpargeAttn's kernel input) for one row of the mask: lut[0] absolute, then differences.
void encodeLutRow(const uint8_t* maskRow, int nk, int32_t* lut, int32_t* validCount);

}  // namespace sparge::core

// Per-head results of a CUDA engine run cut from the run's arrays once they are on the host: plain C++ (no
// CUDA), so that the engine can build them on several threads and partly while the attention kernel runs.
#pragma once

#include <cstdint>
#include <vector>

#include "sparge/core/params.h"
#include "sparge/core/result.h"
#include "sparge/core/stage1.h"

namespace sparge::cuda {

// launchError's layout: per (b*Hq+hq, q-block) kSums doubles {Σ|O-R|, Σ|R|, Σ O·R, Σ O², Σ R², Σ(O-R)²,
// count, non-finite count}.
constexpr int kSums = 8;
// The sums of one head (nq q-blocks from perBlock) and whether any of them is non-finite.
core::ErrorSums headSums(const double* perBlock, int nq);
bool nonFiniteIn(const double* perBlock, int nq);
// errorSparse of a head from the exact-numerics pass's per-block sums; true when those sums make the head
// non-finite (it was not before).
bool fillSparsityPart(core::HeadResult& hr, const double* exactPerBlock, int nq);

// errorQuant of one (geometry, numerics, smooth-K): dense, every valid block, chosen numerics. Fixed for
// an entry, so computed once per head.
struct QuantErrorCache {
  std::vector<core::ErrorSums> sums;  // [B*Hq]
  std::vector<uint8_t> nonFinite;     // [B*Hq]: NaN/Inf in that output or its reference
  std::vector<uint8_t> done;          // [Hq]
};

// Mean true attention mass per block of geometry g (an nq x nk grid) from one head's reference mass per
// 64x64 tile (launchReference's mass64: [ceil(nQ/64)][ceil(nKv/64)]).
std::vector<float> blockMassOf(const float* mass64, int64_t nQ, int64_t nKv, const core::Geometry& g, int nq,
                               int nk);

// One run's arrays on the host. Per-head arrays are indexed by b*Hq + hq (simK by b*Hkv + hk), grids are
// [nq][nk] per head.
struct HostRun {
  int B = 0, Hq = 0, Hkv = 0, nq = 0, nk = 0;
  const core::RunConfig* config = nullptr;
  const core::BlockValidity* validity = nullptr;  // of the run's geometry
  const uint8_t* inputNonFinite = nullptr;        // NaN/Inf in this head's Q or its K/V
  // Stage 1, on the host as soon as the selection ran:
  const uint8_t* mask = nullptr;
  const uint8_t* reasons = nullptr;
  const float* prob = nullptr;
  const float* simQ = nullptr;  // SpargeAttn's self-similarity (null for the other methods)
  const float* simK = nullptr;
  const double* elementPairs = nullptr;  // [B*Hq], the other methods' token pairs (null for SpargeAttn)
  // Stage 2 and the errors, on the host once the attention ran:
  const uint8_t* skip = nullptr;
  const int* emptyRows = nullptr;
  bool errors = false;                     // the errors below were computed
  const double* deployed = nullptr;        // launchError sums of the deployed output
  bool quantized = false;                  // numerics other than None: with errors, the two below are set
  const double* sparse = nullptr;          // the exact-numerics pass's sums (errorSparse); null: not run yet
  const QuantErrorCache* quant = nullptr;  // errorQuant
  const std::vector<std::vector<float>>* blockMass = nullptr;  // refBlockMass per b*Hq + hq
};

// The parts of head (b, h) that Stage 1 decides: identity, parameters, mask, reasons, P̂, similarity, the
// reference's block mass, and whether its inputs are finite.
void fillSelection(core::HeadResult& hr, const HostRun& run, int b, int h);
// The parts the attention pass decides: PV skips, sparsity, empty rows and the error split.
void fillAttention(core::HeadResult& hr, const HostRun& run, int b, int h);

}  // namespace sparge::cuda

// What an engine run produces per head and per entry: masks, reasons, counters, sparsity, error.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "sparge/core/params.h"
#include "sparge/core/types.h"

namespace sparge::core {

// Why a block is on or off, as bit flags per (q-block, k-block). Several may be set.
enum BlockReason : uint8_t {
  kReasonSelected = 1 << 0,   // chosen by the top-CDF / top-k selection of its row
  kReasonForcedRow = 1 << 1,  // its Q block is not self-similar: whole row forced on
  kReasonForcedCol = 1 << 2,  // its K block is not self-similar: whole column forced on
  kReasonSink = 1 << 3,       // attention sink (K block 0)
  kReasonCausalOff = 1 << 4,  // removed (or never valid): outside the causal rule or the entry's window
  kReasonDenseHead = 1 << 5,  // the head is marked dense (is_sparse = false)
  kReasonDiagonal = 1 << 6,   // holds key == query and `diagonal` is on (an extension, not SpargeAttn's)
  // Kept by a method's own rule whatever its threshold (docs/methods.md): XAttention's first and diagonal
  // blocks, MInference's first columns and local diagonals, FlexPrefill's first column and diagonal, MoBA's
  // current block.
  kReasonMethod = 1 << 7,
};

// Block and token-area counts. Denominators are exact: with causal attention only blocks holding at
// least one (query, key) pair with key <= query count, and the area counts real token pairs (partial
// edge blocks by their true size, causal blocks by their valid triangle).
struct SparsityCounts {
  int64_t validBlocks = 0;       // blocks with >= 1 valid token pair
  int64_t selectedBlocks = 0;    // Stage 1 mask (valid blocks only)
  int64_t computedPvBlocks = 0;  // selected and PV computed
  int64_t skippedPvBlocks = 0;   // selected, QK^T computed, PV skipped (Stage 2)
  double validArea = 0;          // token pairs
  double selectedArea = 0;
  double computedPvArea = 0;

  // Fraction of valid blocks not selected by Stage 1.
  double stage1() const { return validBlocks ? 1.0 - double(selectedBlocks) / double(validBlocks) : 0.0; }
  // Fraction of selected blocks whose PV product was skipped.
  double pvSkipRate() const {
    return selectedBlocks ? double(skippedPvBlocks) / double(selectedBlocks) : 0.0;
  }
  // Fraction of valid blocks whose PV was not computed (Stage 1 and Stage 2 together).
  double total() const { return validBlocks ? 1.0 - double(computedPvBlocks) / double(validBlocks) : 0.0; }
  double stage1Area() const { return validArea > 0 ? 1.0 - selectedArea / validArea : 0.0; }
  double totalArea() const { return validArea > 0 ? 1.0 - computedPvArea / validArea : 0.0; }

  SparsityCounts& operator+=(const SparsityCounts& o);
};

// Error of a sparse output O against the dense fp32 reference Oref, kept as sums so that heads can
// be aggregated exactly.
struct ErrorSums {
  double absDiff = 0;  // Σ|O - Oref|
  double absRef = 0;   // Σ|Oref|
  double dot = 0;      // Σ O·Oref
  double normO = 0;    // Σ O²
  double normRef = 0;  // Σ Oref²
  double sqDiff = 0;   // Σ (O - Oref)²
  int64_t count = 0;   // number of elements

  // NaN when the sums are (non-finite outputs), 0 for an all-zero reference.
  double l1() const { return absRef > 0 || absRef != absRef ? absDiff / absRef : 0.0; }
  double cosSim() const;
  double rmse() const;
  ErrorSums& operator+=(const ErrorSums& o);
};

struct HeadResult {
  int64_t batch = 0;
  int64_t head = 0;  // query head
  HeadParams params;
  int nq = 0, nk = 0;               // block grid
  std::vector<uint8_t> blockMask;   // [nq * nk], 1 = block selected by Stage 1 (QK^T computed)
  std::vector<uint8_t> pvSkipped;   // [nq * nk], 1 = QK^T computed, PV skipped
  std::vector<uint8_t> reasons;     // [nq * nk], BlockReason bits
  std::vector<float> pooledProb;    // [nq * nk], compressed attention map P̂ (NaN for all-masked rows)
  std::vector<uint8_t> similarQ;    // [nq], 1 = Q block self-similar (s > θ)
  std::vector<uint8_t> similarK;    // [nk]
  std::vector<float> selfSimQ;      // [nq], the similarity s itself (NaN for partial/zero-row blocks)
  std::vector<float> selfSimK;      // [nk]
  std::vector<float> refBlockMass;  // [nq * nk], mean true attention mass per block (dense reference)
  std::vector<float> qBlockL1;      // [nq], Σ|O-Oref| / Σ|Oref| within each Q block
  // Methods that choose single tokens (MInference's vertical and slash lines, MoBA's per-token gate): the
  // valid token pairs the method itself would compute; NaN for methods that choose blocks.
  double elementPairs = std::numeric_limits<double>::quiet_NaN();
  std::vector<float> output;        // [Nq * Dv] when RunOptions::keepOutput
  SparsityCounts sparsity;
  // Errors against the dense fp32 reference, split by cause (each as sums, so heads aggregate):
  ErrorSums error;        // deployed: this sparse run in the chosen numerics (report key `l1`)
  ErrorSums errorSparse;  // sparsity alone: same Stage-1 mask and λ, exact numerics (`l1_sparse`)
  ErrorSums errorQuant;   // quantization alone: every valid block, no skip, chosen numerics (`l1_quant`)
  // Its INT8 Q·Kᵀ part: every valid block, INT8 scores as deployed, P·V and O in fp32 (`l1_quant_qk`), so
  // that the share of the P·V numerics (FP8 or fp16) shows; count 0 where not measured (exact heads, the
  // CUDA engine).
  ErrorSums errorQuantQk;
  // With Numerics::None (the run's, or the head's own: RunConfig::numericsFor), errorSparse equals error
  // and errorQuant is all zero.
  int64_t emptyRows = 0;      // query rows with no attended key (output set to 0)
  bool hasNonFinite = false;  // NaN/Inf in this head's inputs or output
};

// Wall-clock or device time per stage of one run, in milliseconds; `clock` says which clock.
struct StageTimes {
  double predictMs = 0;
  double quantizeMs = 0;  // operands of quantized numerics (INT8 Q/K, FP8 V); 0 for exact numerics
  double sparseMs = 0;
  double referenceMs = 0;  // dense fp32 reference (0 when it came from the cache)
  double metricsMs = 0;
  double totalMs = 0;
  bool referenceCached = false;
  bool referenceInSparse = false;  // computed in the same pass as the sparse run: its time is inside sparseMs
  std::string clock = "wall";      // "wall" (host steady_clock), "cuda-event", "cupti"
  // The host's side of the call (steady clock, ms), from engines that split it (the CUDA engine; else 0):
  // hostMs is the wall time of Engine::run, nearly all of it in the three parts below.
  double hostMs = 0;
  double hostQueueMs = 0;    // checks, parameter uploads, queuing kernels and copies
  double hostWaitMs = 0;     // blocked on the device: kernels and copies not hidden behind host work
  double hostResultsMs = 0;  // building the per-head results (partly while the attention kernel runs)
  double copyMs = 0;         // device-to-host copies of the run's maps and sums (device clock)
  int64_t copyBytes = 0;     // bytes those copies moved

  // Sums the times of runs over disjoint heads (the ranks of one entry); the reference counts as cached only
  // when it was in both.
  StageTimes& operator+=(const StageTimes& o);
};

struct EntryResult {
  EntryInfo info;
  RunConfig config;
  std::string engine;             // engine name, for example "cpu (2 threads)"
  std::vector<HeadResult> heads;  // ordered by (batch, head)
  SparsityCounts sparsity;        // sums over heads
  ErrorSums error;                // sums over heads (deployed)
  ErrorSums errorSparse;          // sums over heads (sparsity alone)
  ErrorSums errorQuant;           // sums over heads (quantization alone)
  ErrorSums errorQuantQk;         // sums over heads (its INT8 Q·Kᵀ part, where measured)
  StageTimes times;
  std::vector<std::string> warnings;
  // An early result of quantized numerics (RunOptions::onDeployed): every figure but the sparsity part of
  // the error split, whose exact-numerics pass has not run yet (errorSparse's count is 0).
  bool splitPending = false;

  const HeadResult* find(int64_t batch, int64_t head) const;
};

// Recomputes the entry-level sums from `heads`.
void aggregate(EntryResult& result);
// One result from runs of one entry over disjoint heads (the ranks of a job, or the numerics of a mixed
// run): the first part's entry, configuration and engine; heads in (batch, head) order; each warning once;
// stage times summed; the entry sums recomputed.
EntryResult joinHeadRuns(std::vector<EntryResult> parts);

// Query rows of `info` that no key is visible to at all (a window that ends before the keys do, causal
// rows beyond Nkv + left): their output is 0 in dense attention as well.
int64_t rowsWithoutKeys(const EntryInfo& info);
// The warning for a head with empty rows (emptyRows > 0), both engines': rows the entry's window leaves
// without keys (`windowRows`, from rowsWithoutKeys) are told apart from rows whose selected blocks hold no
// visible key, and only the latter get a hint, one that can help them (--sink, --diagonal, τ / top-k).
std::string emptyRowsWarning(const EntryResult& result, const HeadResult& head, int64_t windowRows);

// What an engine's run() returns when RunOptions::onDeployed stopped it at the early result `shown`: the
// same result without its heads, marked splitPending.
EntryResult withoutHeads(const EntryResult& shown);

}  // namespace sparge::core

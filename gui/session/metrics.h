// Per-head figures derived from results, shared by the views and the overview: the error budget test,
// the quantization share of the error, the work-ratio speed-up estimate and head ordering.
#pragma once

#include <cstdint>
#include <vector>

#include "sparge/core/result.h"

namespace sparge::gui {

// Error budget of the auto-tuner: l1 bounds θ/τ (or top-k), l2 bounds λ.
struct Budget {
  double l1 = 0.07;
  double l2 = 0.08;
  bool operator==(const Budget&) const = default;
};

// True when a head's deployed error exceeds the budget (L1 > l1, or > l2 when its PV skip is active).
bool overBudget(const core::SparsityCounts& sparsity, const core::ErrorSums& deployed, const Budget& b);
inline bool overBudget(const core::HeadResult& h, const Budget& b) {
  return overBudget(h.sparsity, h.error, b);
}

// Share of the error that quantization causes: l1_quant / (l1_sparse + l1_quant), in [0, 1]; 0 when
// both are 0 (exact numerics, dense head).
double quantShare(const core::ErrorSums& sparse, const core::ErrorSums& quant);

// Upper bound of the kernel speed-up from the work removed: dense work over executed work, counting
// QKᵀ on Stage-1 selected blocks and PV on computed blocks (work per block ∝ D and Dv). Stage 1 and
// memory traffic are not included. NaN when nothing is computed.
double estimatedSpeedup(const core::SparsityCounts& s, int64_t headDim, int64_t headDimV);

// One query head's figures summed over batch items (sums, so every ratio stays exact).
struct HeadFigures {
  core::SparsityCounts sparsity;
  core::ErrorSums error, errorSparse, errorQuant;  // deployed, sparsity alone, quantization alone
  bool nonFinite = false;
};
HeadFigures figuresOf(const core::EntryResult& result, int64_t head);

enum class HeadSort { Index, Sparsity, Error };
// Order of result heads for the grid and the table: indices into result.heads.
std::vector<size_t> sortHeads(const core::EntryResult& result, HeadSort key, bool descending);

}  // namespace sparge::gui

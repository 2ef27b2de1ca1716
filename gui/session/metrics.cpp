#include "metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace sparge::gui {

bool overBudget(const core::SparsityCounts& sparsity, const core::ErrorSums& deployed, const Budget& b) {
  double bound = sparsity.skippedPvBlocks > 0 ? b.l2 : b.l1;
  return deployed.l1() > bound;
}

double quantShare(const core::ErrorSums& sparse, const core::ErrorSums& quant) {
  double s = sparse.l1(), q = quant.l1();
  return s + q > 0 ? q / (s + q) : 0.0;
}

double estimatedSpeedup(const core::SparsityCounts& s, int64_t headDim, int64_t headDimV) {
  double d = static_cast<double>(headDim), dv = static_cast<double>(headDimV);
  double executed = double(s.selectedBlocks) * d + double(s.computedPvBlocks) * dv;
  if (!(executed > 0)) return std::nan("");
  return double(s.validBlocks) * (d + dv) / executed;
}

HeadFigures figuresOf(const core::EntryResult& result, int64_t head) {
  HeadFigures f;
  for (const auto& h : result.heads) {
    if (h.head != head) continue;
    f.sparsity += h.sparsity;
    f.error += h.error;
    f.errorSparse += h.errorSparse;
    f.errorQuant += h.errorQuant;
    f.nonFinite = f.nonFinite || h.hasNonFinite;
  }
  return f;
}

std::vector<size_t> sortHeads(const core::EntryResult& result, HeadSort key, bool descending) {
  std::vector<size_t> order(result.heads.size());
  std::iota(order.begin(), order.end(), size_t{0});
  auto value = [&](size_t i) -> double {
    const auto& h = result.heads[i];
    switch (key) {
      case HeadSort::Sparsity:
        return h.sparsity.total();
      case HeadSort::Error:
        return h.error.l1();
      case HeadSort::Index:
      default:
        return static_cast<double>(h.batch * 1000000 + h.head);
    }
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    double va = value(a), vb = value(b);
    return descending ? va > vb : va < vb;
  });
  return order;
}

}  // namespace sparge::gui

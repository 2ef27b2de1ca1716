// Comparing variants on one entry (`sparge compare`): each variant is tuned per head against the same budget
// and re-run with its tuned parameters; per head the blocks' mean self-similarity and the sparsity reached,
// per entry the totals, Stage 1's cost and the winner. A variant is a token order and a block predictor
// (docs/permutation.md, docs/methods.md); the variant list is the product of the two axes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sparge/core/engine.h"
#include "sparge/core/token_grid.h"
#include "sparge/core/tuner.h"

namespace sparge::core {

struct CompareVariant {
  std::string label;  // "hilbert", "xattention", "hilbert + xattention"
  Permutation permute = Permutation::None;
  Method method = Method::SpargeAttn;
};
// One variant per pair of a token order and a method, orders outermost, in the order given. Labels name the
// axes that have more than one value.
std::vector<CompareVariant> compareVariants(const std::vector<Permutation>& permutes,
                                            const std::vector<Method>& methods = {Method::SpargeAttn});

// Mean self-similarity of blocks (the s of Stage 1: Q blocks as they are, K blocks after smoothing), over the
// blocks where it is defined (not the partial last block, not a block with an all-zero row).
struct SelfSimilarity {
  double sumQ = 0, sumK = 0;
  int64_t blocksQ = 0, blocksK = 0;
  double meanQ() const;  // NaN without blocks
  double meanK() const;
  void add(const HeadResult& h);
};

// One query head under one variant (summed over batch items).
struct VariantHead {
  SelfSimilarity similarity;
  TunedHead tuned;         // the tuner's parameters and achieved figures
  SparsityCounts reached;  // the re-run with exactly the tuned parameters
  ErrorSums error;         // its deployed error
};

struct CompareHead {
  int64_t head = 0;
  std::vector<VariantHead> variants;  // one per CompareVariant
  int winner = -1;                    // largest total sparsity reached (ties: the first); -1 when none
                                      // reached any (every variant dense) or none ran
  bool tie = false;                   // another variant reached the same
};

struct CompareEntry {
  EntryInfo info;                          // as captured (the grid, no permutation)
  std::vector<CompareHead> heads;          // ordered by head
  std::vector<EntryResult> runs;           // per variant: the re-run with the tuned parameters, every head
  std::vector<SelfSimilarity> similarity;  // per variant, over every head
  int winner = -1;  // largest total sparsity over the heads (ties: the first; -1: none)
  bool tie = false;
  std::vector<int> headsWon;  // per variant: heads it wins (a tie counts for each tied variant)
  // The dense pass on the same engine, heads and numerics (every block computed, no Stage 1), its Stage 2
  // time on the engine's clock: the yardstick of each variant's Stage 1 time (runs[i].times.predictMs).
  double denseMs = 0;
  double stage1Share(size_t variant) const;  // predictMs / denseMs; NaN without a dense time
};

// A variant's cell of the per-head tables: the blocks' self-similarity where SpargeAttn's Stage 1 has one,
// then the sparsity reached ("0.546 / 0.176, 31.2 %" or "31.2 %").
std::string variantHeadCell(const VariantHead& v);

// Tunes and re-runs every variant on `entry` (as loaded from the capture) with `engine`. Throws
// sparge::Error when a variant cannot apply (an entry without a grid, a causal entry) before any tuning.
CompareEntry compareEntry(Engine& engine, std::shared_ptr<const EntryData> entry,
                          const std::vector<CompareVariant>& variants, const TuneOptions& options,
                          const TuneCallbacks& callbacks = {});

// Reports over several entries, written atomically: JSON (machine) holding per variant the run report of
// the re-runs (reportJson), CSV (one row per entry, head and variant, and per entry and variant) and Markdown
// (people). writeCompareReport picks by the path's extension: .md, .csv, else JSON.
std::string compareJson(const std::vector<CompareEntry>& entries, const std::vector<CompareVariant>& variants,
                        const TuneOptions& options, const std::string& capturePath);
std::string compareCsv(const std::vector<CompareEntry>& entries, const std::vector<CompareVariant>& variants);
std::string compareMarkdown(const std::vector<CompareEntry>& entries,
                            const std::vector<CompareVariant>& variants, const TuneOptions& options,
                            const std::string& capturePath);
void writeCompareReport(const std::string& path, const std::vector<CompareEntry>& entries,
                        const std::vector<CompareVariant>& variants, const TuneOptions& options,
                        const std::string& capturePath);

}  // namespace sparge::core

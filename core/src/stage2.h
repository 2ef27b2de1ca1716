// Stage 2 of one head cut into query tiles that any thread can run (core/src/block_attention.cpp): the CPU
// engine prepares the operands of every head of a run, then spreads all their tiles over its threads. The
// buffers live in these objects and are reused from run to run.
#pragma once

#include <cstdint>
#include <vector>

#include "sparge/core/cpu_engine.h"
#include "sparge/core/quant.h"
#include "tile_kernels.h"

namespace sparge::core {

// What a head's operands are made from: equal keys (key 0 is never equal) give equal operands, so a run
// whose heads, geometry and smooth_k match the previous one's reuses them.
struct OperandsKey {
  uint64_t entry = 0;  // the engine's count of entries set: a new entry never matches an old one
  int64_t batch = 0, head = 0;
  Geometry geometry;
  bool smoothK = false;
  bool operator==(const OperandsKey&) const = default;
};

// One head's operands in every numerics a set of passes needs, laid out for the tile kernels: K transposed
// per key block ([d][keys of the block], zero-padded to `blockCols`), V with its rows padded to whole key
// blocks and its columns to `width` (zeros).
struct Stage2Operands {
  OperandsKey key;                             // what the operands below were made from
  const tile::Kernels* kernels = nullptr;      // and for which variant (its column step sets the padding)
  unsigned families = 0;                       // which of the groups below are ready (bits of Family)
  int blockCols = 0;                           // key-block width padded to the kernels' column step
  int width = 0;                               // value width padded to the kernels' column step
  std::vector<float> qScaled, kExact, vExact;  // exact scores: (q · scale · log2e) · kᵀ; exact P·V
  Int8Rows q8, k8;                             // INT8 scales per tile of Q and K (their codes: staging)
  int pairs = 0;                               // head dim in code pairs (rounded up)
  std::vector<int32_t> q8Pairs, k8Pairs;       // the codes as int16 pairs: Q [rows][pairs], K transposed
  float int8Factor = 0;                        // sm_scale · log2e in fp32, as the kernel folds it
  std::vector<float> vHalf;                    // fp16 V (sm80)
  Fp8Columns v8;                               // e4m3 V and its per-channel scales (sm89/sm90)
};

// What the tiles of one output hold from earlier runs, so that a run keeps the tiles whose inputs did not
// change (a slider move changes a few rows of a few heads' masks) instead of running them again: a tile's
// output rows, skip flags and counts depend only on the operands, the pass's numerics and λ, and its own mask
// row.
struct TileHistory {
  OperandsKey key;
  const tile::Kernels* kernels = nullptr;
  Numerics numerics = Numerics::None;
  bool exactPv = false;
  double lambda = 0;
  std::vector<uint8_t> mask;       // [nq * nk] the mask rows the kept tiles ran with
  std::vector<uint8_t> kept;       // [nq] 1: the tile's rows of the output are those of its mask row
  std::vector<int32_t> emptyRows;  // [nq]
  std::vector<uint8_t> nonFinite;  // [nq]
};

// Online-softmax state of one pass over one query tile.
struct PassState {
  int visits = 0;  // key blocks of this tile's row in the pass's mask
  int t = 0;       // index of the next visited block
  std::vector<float> m, l, acc, mNew, alpha;
  std::vector<float> partSum, partMax;  // block mass: per row and visited block
  std::vector<int> visited;             // key block of each visited index (block mass)
};

// P·V of one key block for rows whose new running maxima are `mNew`, kept so that a second pass with the
// same maxima reuses it (the dense reference and the sparse run agree on most blocks).
struct BlockProduct {
  bool valid = false;
  std::vector<float> mNew, rowSum, g;
};

// Scores of one key block of the current query tile in one numerics family: base-2 logits, -inf where masked.
struct BlockScores {
  std::vector<float> s, rowMax;
};

// One worker's buffers, reused by every tile it runs.
struct TileScratch {
  BlockScores scores[2];     // exact, int8
  BlockProduct products[4];  // by numerics; [3]: INT8 scores, exact P·V (PassSpec::exactPv)
  std::vector<PassState> passes;
  std::vector<float> p, offset, mass;
  std::vector<int> lo, hi, loBlock, hiBlock;  // visible keys per row: global, then block-local
};

class HeadStage2 {
 public:
  // Prepares `head`'s operands for `passes` (keeping those of the previous call when `key` is the same and
  // not 0) and sizes outs[p] for pass p, reusing this object's buffers and those of the outputs. `head` and
  // the masks must outlive the tiles.
  // With histories[p] (may be null), the tiles of pass p whose inputs equal those of the run that last wrote
  // outs[p] are kept as they are.
  void prepare(const HeadOperands& head, const Geometry& g, const std::vector<PassSpec>& passes,
               const std::vector<AttentionOutput*>& outs, const OperandsKey& key = {},
               const std::vector<TileHistory*>& histories = {});
  int tiles() const { return nq_; }
  // Whether tile i runs at all (some pass does not keep it), and the key blocks it visits (for scheduling).
  bool tileRuns(int i) const { return runs_[size_t(i)] != 0; }
  int64_t tileCost(int i) const { return cost_[size_t(i)]; }
  // Whether pass p runs tile i (its rows of the output change in this run).
  bool passRuns(size_t p, int i) const { return passes_[p].runs[size_t(i)] != 0; }
  // Every pass over query tile i; tiles may run at the same time on different threads.
  void runTile(int i, TileScratch& scratch);
  // Adds up what the tiles counted (empty rows, non-finite scores) into the outputs; after every tile ran.
  void finish();

 private:
  friend class TileRun;
  struct Pass {
    PassSpec spec;
    AttentionOutput* out = nullptr;
    TileHistory* history = nullptr;  // the caller's, or `own` (nothing kept)
    TileHistory own;
    std::vector<uint8_t> runs;  // [nq] 1: this pass runs tile i
  };
  void preparePass(Pass& hp, const OperandsKey& key);
  HeadOperands h_;
  Geometry g_;
  const tile::Kernels* kernels_ = nullptr;
  int nq_ = 0, nk_ = 0;
  std::vector<Pass> passes_;
  std::vector<int64_t> cost_;
  std::vector<uint8_t> runs_;  // [nq] some pass runs tile i
  Stage2Operands ops_;
};

}  // namespace sparge::core

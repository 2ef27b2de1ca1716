// The Hopper attention kernel's compile-time traits (tile shapes, consumers, registers, pipeline stages,
// shared-memory layout, split rule) per (element type, head dim, numerics, dense walk, key block), and the
// kernel parameters (Sm90Params) built from the launch arguments.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include "attention/attention_params.cuh"
#include "sparge/core/types.h"

// Only the sm_90a pass compiles the kernel bodies; the other passes would warn about the constants they use.
#pragma nv_diag_suppress 177

namespace sparge::cuda::sm90 {

using core::Numerics;

constexpr int kBQ = 64;  // query rows of a consumer's tile (wgmma m64)
constexpr int kProducerRegs = 24;
// Named barriers of the skip vote: a warpgroup's own meeting is kBarVote + consumer (1 .. consumers); the
// two halves of a 128x64 query block post their votes at kBarVote + consumers + 2 * (block's step % 2) +
// half (postVote / collectVote).
constexpr int kBarVote = 1;

// BK_: keys of a block. 128: the 64x128 geometry, one LUT row per 64-row tile. 64: the 128x64 geometry
// (fp16/bf16 only), whose LUT rows cover 128 query rows: the CTA's two consumers hold the two halves of one
// row's query block, walk the same blocks and vote on PV skips together.
template <typename T_, int D_, Numerics N_, bool kDense_, int BK_ = 128, bool kVote_ = !kDense_>
struct Sm90Traits {
  using T = T_;  // input and output element type
  static constexpr int D = D_;
  static constexpr bool kDense = kDense_;  // the dense launch (every visible block, every tile on each)
  // Whether the walk holds the PV-skip vote: sparse walks, but for the int8-fp8 launches in which no head
  // votes (AttnArgs::votes), which run faster compiled without it than with it switched off at run time.
  static constexpr bool kVote = kVote_ && !kDense_;
  static constexpr bool kFp8 = N_ == Numerics::Int8Fp8;
  static constexpr int kBK = BK_;
  static_assert(kBK == 128 || (kBK == 64 && !kFp8), "64x128 in every numerics, 128x64 in fp16/bf16");
  static constexpr int kTilesPerRow = kBK == 64 ? 2 : 1;  // consumer tiles sharing a LUT row
  // Visited blocks at the end of a row that are never PV-skipped (docs/method.md: a 128-row diagonal spans
  // two 64-key blocks).
  static constexpr int kTail = kTilesPerRow;
  // Whether a consumer issues its pending block's P·V beside its next block's Q·Kᵀ (FlashAttention-3's
  // intra-warpgroup overlap): only fp16/bf16 at D 64. The softmax, not the tensor cores, bounds these
  // kernels, and the overlap holds O, the P·V block buffer (e4m3) or P (16-bit), and the scores at once
  // (up to 208 registers at D 128): more consumers with fewer registers and no overlap, each block's P·V
  // right after its own softmax and the other consumers' wgmmas filling the tensor cores meanwhile, keep
  // more warps of softmax in flight, which was faster everywhere but in fp16/bf16 at D 64, where four
  // consumers spill (kernels/NOTES.md, v15 and "Figures behind the rules in the code").
  static constexpr bool kPvBesideQk = (D == 64 && !kFp8) || kBK == 64;
  // Whether the walk holds two copies of a block's softmax: one for blocks whose keys are all visible, with
  // no mask and (int8-fp8) the row maxima taken from the integer scores, so that the 64 conversions to float
  // leave the path to the maxima and ptxas places them among the exponentials; one for the blocks a mask
  // cuts. Otherwise one copy checks at run time (and still takes integer maxima for visible blocks). Two
  // copies only where they were faster: int8-fp8, except its D 128 dense walk (kernels/NOTES.md, "Figures
  // behind the rules in the code").
  static constexpr bool kTwoSoftmaxCopies = kFp8 && !(kDense && D == 128);
  // Consumer warpgroups (query tiles) of a CTA. 128x64: the two halves of one LUT row's query block; their
  // 64-key blocks (scores 32 registers) leave room for the P·V overlap in 240 registers each.
  static constexpr int kConsumers = kBK == 64 ? 2 : D == 64 && kFp8 ? 4 : 3;
  static constexpr int kThreads = 128 * (1 + kConsumers);  // and the producer warpgroup
  static constexpr int kConsumerRegs = kConsumers == 4 ? 112 : kConsumers == 2 ? 240 : 160;
  // The launch gives the CTA the register file over its threads (in steps of 8); a consumer's setmaxnreg.inc
  // waits until the registers it asks for are free, so asking for more than the producer leaves hangs.
  static_assert(kProducerRegs + kConsumers * kConsumerRegs <= (1 + kConsumers) * (65536 / kThreads / 8 * 8),
                "the registers the launch gives the CTA");
  static constexpr int kElemBytes = kFp8 ? 1 : 2;  // Q and K elements
  static constexpr int kQkRowBytes = D * kElemBytes;
  static constexpr int kSlabBytes = kQkRowBytes < 128 ? kQkRowBytes : 128;  // one TMA box row, one swizzle
  static constexpr int kSlabs = kQkRowBytes / kSlabBytes;
  static constexpr int kQTileBytes = kBQ * kQkRowBytes;
  static constexpr int kKTileBytes = kBK * kQkRowBytes;
  static constexpr int kVTileBytes = kFp8 ? D * kBK : kBK * D * 2;  // e4m3 [D][keys] or 16-bit [keys][D]
  // The dense walk: 2 stages of 64 KB (fp16 D 128), which beat 3 (kernels/NOTES.md, v8e), 4 for smaller
  // tiles. Sparse walks, where each consumer waits for and releases every stage in order, also those
  // of blocks only other tiles visit, take as many stages as shared memory holds (up to 8): the deeper
  // the pipeline, the further one tile's walk may run ahead of the other's.
  // Whether the tensor cores sum P for the denominator: the int8-fp8 walk without the vote (λ >= 40 and no
  // counters, the op's default) runs P·V as m64n(D + 8) against its V tile and one more 8-channel atom whose
  // first channel is all ones (written once after each V stage, which TMA never touches), so column D of the
  // block buffer is the row's sum of the e4m3 P and the softmax has no FADDs. The walks the engines run for
  // their figures (with the vote) keep SpargeAttn's fp32 sums of the unrounded P, and so does the dense walk,
  // where the 6 % more P·V work cost more than the FADDs saved (kernels/NOTES.md, "The denominator on the
  // tensor cores").
  static constexpr bool kTensorRowSums = kFp8 && !kDense && !kVote;
  static constexpr int kVStageBytes = kVTileBytes + (kTensorRowSums ? 1024 : 0);
  static constexpr int kStageBytes = kKTileBytes + kVStageBytes;
  static constexpr int kSparseStages = (227 * 1024 - kConsumers * kQTileBytes - 2048) / kStageBytes;
  static constexpr int kStages =
      kDense ? (kKTileBytes + kVTileBytes > 32768 ? 2 : 4) : (kSparseStages < 8 ? kSparseStages : 8);
  // A sparse CTA whose tiles visit less than this share of their visible blocks splits the stages into one
  // ring per tile (splitWalks): each consumer then walks only its own blocks, never waiting for or passing
  // the other tiles', at the price of loading a block several visit more than once. The thresholds are
  // where split and union walks crossed on random masks (kernels/NOTES.md, v13 to v15, and "Figures behind
  // the rules in the code"); fp16/bf16 D 128 has 2 stages, too few for three rings.
  // 128x64: the consumers share their LUT row, so the union is every tile's walk and splitting would load
  // each block twice. int8-fp8 D 128 (three rings of two stages): its walk compiled without the split was
  // 4-6 % faster at half the blocks without a mask, 1-2 % with the causal one, and within 2 % either way at a
  // fifth and a tenth (kernels/NOTES.md, "The int8-fp8 D 128 walk without split rings").
  static constexpr bool kUnionOnly = kDense || kTilesPerRow > 1 || kStages < 2 * kConsumers ||
                                     (kFp8 && D == 128);
  static constexpr float kSplitBelow = kUnionOnly ? 0.f : 0.7f;
  static constexpr bool kSplittable = kSplitBelow > 0.f;
  static constexpr int kQkSteps = kQkRowBytes / 32;  // wgmma k-steps of 32 bytes
  static constexpr int kPSteps = kFp8 ? kBK / 32 : kBK / 16;
  static constexpr int kNT = kBK / 8, kDT = D / 8;
  static constexpr int kBlkTiles = kDT + (kTensorRowSums ? 1 : 0);  // the e4m3 block buffer (+ the row sums)
  // Q tiles, K stages, V stages (each with its ones atom after it where the tensor cores sum P; all 1024-byte
  // aligned), the barriers, then one 16-byte step record a stage.
  static constexpr int kOffK = kConsumers * kQTileBytes;
  static constexpr int kOffV = kOffK + kStages * kKTileBytes;
  static constexpr int kOffBar = kOffV + kStages * kVStageBytes;
  static constexpr int kQBars = kSplittable ? kConsumers : 1;  // one Q barrier a ring
  static constexpr int kBarBytes = 8 * (kQBars + 4 * kStages);
  static constexpr int kOffStep = (kOffBar + kBarBytes + 15) / 16 * 16;
  // Two sets of vote words per LUT row (one word per warpgroup voting on it), used in turns.
  static constexpr int kVoteSetBytes = 4 * kTilesPerRow;
  static constexpr int kOffVote = kOffStep + 16 * kStages;
  static constexpr int kSmemBytes = kOffVote + 8 * kConsumers + 1024;  // + alignment slack
  static_assert(kSmemBytes <= 227 * 1024, "fits the shared memory of an sm_90 CTA");
  static_assert(kQTileBytes % 1024 == 0 && kKTileBytes % 1024 == 0 && kVTileBytes % 1024 == 0,
                "aligned tiles");
};

template <typename T>
struct Sm90Params {
  KParams<T> k;
  CUtensorMap q, kmap, v;
  float splitBelow;  // Tr::kSplitBelow, or AttnArgs::sm90SplitBelow when that is set (for measuring)
};

}  // namespace sparge::cuda::sm90

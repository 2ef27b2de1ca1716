// Compile-time tile traits of the mma.sync attention family (attention_sm80.cu) for each numerics: tile
// shapes, warp layout, shared-memory tiles and MMA step counts.
#pragma once

#include "sparge/core/types.h"

namespace sparge::cuda {

// One CTA owns a BQ-row query tile and walks BK-key blocks; each warp owns MT m-tiles of 16 query rows and
// every key of a block. MT = 2 halves the K/V shared-memory reads per MMA (v2 in kernels/NOTES.md).
// Q and K are fp16/bf16 (exact numerics) or INT8; V is fp16/bf16 [BK][D] (exact, int8-fp16) or e4m3
// [D][BK] (int8-fp8, keys contiguous per channel). Shared tiles are rows of 16-byte chunks.
template <int D_, int BQ_, int BK_, int MT_, core::Numerics N_>
struct AttnTraits {
  static constexpr int D = D_, BQ = BQ_, BK = BK_, MT = MT_;
  static constexpr core::Numerics N = N_;
  static constexpr bool kQuant = N != core::Numerics::None;
  static constexpr bool kVFp8 = N == core::Numerics::Int8Fp8;
  static constexpr int kWarpRows = 16 * MT;
  static constexpr int kWarps = BQ / kWarpRows;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kQkChunks = D * (kQuant ? 1 : 2) / 16;  // 16-byte chunks per Q or K row
  static constexpr int kQkSteps = kQkChunks / 2;               // MMA k-steps of Q·Kᵀ (32 bytes each)
  static constexpr int kNT = BK / 8;                           // n-tiles of S per warp
  static constexpr int kDT = D / 8;                            // n-tiles of O per warp
  static constexpr int kVRows = kVFp8 ? D : BK;
  static constexpr int kVChunks = kVFp8 ? BK / 16 : D / 8;
  static constexpr int kPSteps = kVFp8 ? BK / 32 : BK / 16;  // MMA k-steps of P·V
  // Last LUT entries that carry the element masks and are never PV-skipped (core::Geometry::tailBlocks).
  static constexpr int kTail = BQ > BK ? BQ / BK : 1;
  // O n-tiles per P·V pass: the quantized numerics keep a fresh per-block buffer of the pass's channels in
  // registers beside the output, which at D 256 (128 fp32 output registers a row pair) only fits 64 channels
  // at a time. Each channel still sums its keys in the same order, so the values are those of one pass.
  static constexpr int kPvDT = kQuant && D > 128 ? 8 : kDT;
  static constexpr int kQBytes = BQ * kQkChunks * 16;
  static constexpr int kKBytes = BK * kQkChunks * 16;
  static constexpr int kVBytes = kVRows * kVChunks * 16;
  // Pipelined: Q tile + two K tiles + one V tile; K of block t+1 and V of block t load during Q·Kᵀ of block
  // t.
  static constexpr int kPipelinedBytes = kQBytes + 2 * kKBytes + kVBytes;
  // sm_86 and sm_89 allow 99 KB of shared memory a block. Where the pipelined layout of D 256 exceeds that,
  // K and V of a block take turns in one buffer (no load overlaps Q·Kᵀ or P·V, but every card runs it).
  static constexpr int kPortableSmemBytes = 99 * 1024;
  static constexpr bool kKvShared = D > 128 && kPipelinedBytes > kPortableSmemBytes;
  static constexpr int kKvBytes = kKBytes > kVBytes ? kKBytes : kVBytes;
  static constexpr int kSmemBytes = kKvShared ? kQBytes + kKvBytes : kPipelinedBytes;
  static_assert(D == 64 || D == 128 || D == 256, "head dim 64, 128 or 256");
  static_assert(BQ % kWarpRows == 0 && BK % 32 == 0, "tiles are multiples of the MMA shapes");
  static_assert(kDT % kPvDT == 0 && kPvDT % 2 == 0, "P·V passes cover whole pairs of O n-tiles");
  static_assert(D <= 128 || kSmemBytes <= kPortableSmemBytes, "D 256 tiles fit every sm_80+ card");
};

}  // namespace sparge::cuda

// Compile-time tile traits of the Stage-2 attention kernels, shared by the mma.sync path
// (attention_sm80.cu) and a future Hopper wgmma/TMA path (attention_sm90.cu, not written yet).
#pragma once

namespace sparge::cuda {

// One CTA owns a BQ-row query tile and walks BK-key blocks. Each warp owns MT m-tiles of 16 query
// rows and 1/KS of the keys of a block. MT = 2 halves the K/V shared-memory reads per MMA (v1, with
// 16 rows per warp, was bound by them); KS = 2 keeps the per-warp S tile at 32x64 for 64x128 tiles
// (the two warps of a row group exchange row maxima every block and add their O at the end).
template <int D_, int BQ_, int BK_, int MT_ = 1, int KS_ = 1>
struct AttnTraits {
  static constexpr int D = D_, BQ = BQ_, BK = BK_, MT = MT_, KS = KS_;
  static constexpr int kWarpRows = 16 * MT;
  static constexpr int kRowGroups = BQ / kWarpRows;
  static constexpr int kWarps = kRowGroups * KS;
  static constexpr int kWarpKeys = BK / KS;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kChunks = D / 8;       // 16-byte chunks per row
  static constexpr int kNT = kWarpKeys / 8;   // n-tiles of S per warp
  static constexpr int kDT = D / 8;           // n-tiles of O per warp
  static constexpr int kKS = D / 16;          // k-steps of Q·Kᵀ
  static constexpr int kPS = kWarpKeys / 16;  // k-steps of P·V
  // Last LUT entries that carry the element masks and are never PV-skipped (SPARGE_SPEC.md §4.3).
  static constexpr int kTail = BQ > BK ? BQ / BK : 1;
  // Q tile + two K tiles + one V tile: K of block t+1 and V of block t load during Q·Kᵀ of block t.
  static constexpr int kSmemBytes = (BQ + 3 * BK) * D * 2;
  static_assert(D == 64 || D == 128, "head dim 64 or 128");
  static_assert(BQ % (16 * MT) == 0 && BK % (16 * KS) == 0 && BK % 16 == 0, "tiles are multiples of 16");
};

}  // namespace sparge::cuda

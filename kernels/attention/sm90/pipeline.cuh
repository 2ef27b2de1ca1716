// The Hopper attention kernel's K/V stage ring: shared-memory addresses of each walk's stages and barriers,
// the walk's cursor, and the step records the producer leaves in the stages for the consumers.
#pragma once

#include <cstdint>

#include "attention/sm90/hopper_sync.cuh"
#include "attention/sm90/kernel_traits.cuh"

namespace sparge::cuda::sm90 {

#ifdef SPARGE_SM90A_DEVICE

// A walk's position in its ring: stage and phase parity.
struct StageCursor {
  int s = 0;
  uint32_t phase = 0;
};

// Shared-memory addresses of the pipeline, as one walk sees them: its stages are first .. first + ring - 1
// (all of them for the union walk; one tile's ring in split walks), numbered from 0, and its Q arrives on
// barrier qBar.
template <class Tr>
struct Pipe {
  uint32_t base;
  int first = 0, ring = Tr::kStages, qBar = 0;

  // Tile w's view: its own ring and Q barrier when the CTA splits, else the whole pipeline.
  __device__ __forceinline__ Pipe walkOf(int w, bool split) const {
    constexpr int kRing = Tr::kStages / Tr::kConsumers;
    return split ? Pipe{base, w * kRing, kRing, w} : *this;
  }
  __device__ __forceinline__ uint32_t q(int c) const { return base + c * Tr::kQTileBytes; }
  __device__ __forceinline__ uint32_t k(int s) const {
    return base + Tr::kOffK + (first + s) * Tr::kKTileBytes;
  }
  __device__ __forceinline__ uint32_t v(int s) const {
    return base + Tr::kOffV + (first + s) * Tr::kVStageBytes;
  }
  __device__ __forceinline__ uint32_t fullQ(int bar) const { return base + Tr::kOffBar + 8 * bar; }
  __device__ __forceinline__ uint32_t fullQ() const { return fullQ(qBar); }
  __device__ __forceinline__ uint32_t fullK(int s) const {
    return base + Tr::kOffBar + 8 * (Tr::kQBars + first + s);
  }
  __device__ __forceinline__ uint32_t fullV(int s) const { return fullK(s) + 8 * Tr::kStages; }
  __device__ __forceinline__ uint32_t emptyK(int s) const { return fullK(s) + 16 * Tr::kStages; }
  __device__ __forceinline__ uint32_t emptyV(int s) const { return fullK(s) + 24 * Tr::kStages; }
  __device__ __forceinline__ uint32_t step(int s) const { return base + Tr::kOffStep + 16 * (first + s); }
  // The walk's steps fill the ring's stages in turn; each round flips the phase parity.
  __device__ __forceinline__ int after(int s) const { return s + 1 == ring ? 0 : s + 1; }
  __device__ __forceinline__ void advance(StageCursor& c) const {
    c.s = after(c.s);
    c.phase ^= c.s == 0;
  }
  // The vote words of the CTA's LUT row r (each consumer's own row in 64x128).
  __device__ __forceinline__ uint32_t vote(int r) const {
    return base + Tr::kOffVote + 2 * Tr::kVoteSetBytes * r;
  }
};

// A union step as the producer recorded it in the step's stage: every lane reads the same record; the
// shuffles say so, keeping the wgmma issue off divergent paths.
struct StepRecord {
  int j;
  int mask;  // bit w: tile w visits the block
  float kScale;
  bool last;
};

// Waits for stage s to hold its step's K (the record came with it) and reads the record.
template <class Tr>
__device__ __forceinline__ StepRecord awaitStep(const Pipe<Tr>& pp, int s, uint32_t phase) {
  sm90::mbarWait(pp.fullK(s), phase);
  const int4 r = sm90::ldShared16(pp.step(s));
  return StepRecord{__shfl_sync(0xffffffffu, r.x, 0), __shfl_sync(0xffffffffu, r.y, 0),
                    __int_as_float(__shfl_sync(0xffffffffu, r.z, 0)), __shfl_sync(0xffffffffu, r.w, 0) != 0};
}

// A step that this tile does not visit, once its K stage is full: the consumer releases K, waits for V and
// releases it, like a visit without work. That keeps every consumer within one phase of every stage: a parity
// wait only tells the last two phases apart, so a consumer that fell two phases behind (or ran two ahead)
// would misread a stage.
template <class Tr>
__device__ __forceinline__ void passStage(const Pipe<Tr>& pp, int s, uint32_t phase) {
  sm90::mbarArrive(pp.emptyK(s));
  sm90::mbarWait(pp.fullV(s), phase);
  sm90::mbarArrive(pp.emptyV(s));
}

#endif  // SPARGE_SM90A_DEVICE

}  // namespace sparge::cuda::sm90

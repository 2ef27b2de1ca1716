// The Hopper attention kernel's consumer state and wgmma issue (mainloop MMA): Q·Kᵀ of a block, P·V of the
// pending one beside it, the e4m3 block's add, and the release of the pending block's V stage.
#pragma once

#include "attention/parts/online_softmax.cuh"
#include "attention/sm90/pipeline.cuh"
#include "attention/sm90/wgmma_sm90.cuh"

namespace sparge::cuda::sm90 {

#ifdef SPARGE_SM90A_DEVICE

// ---------------------------------------------------------------------------------------------
// Consumers: one warpgroup per 64-row query tile.

// A thread's row maxima and sums before a block's softmax (undoIfSkipped).
struct RowsBefore {
  float m[2], l[2];
};
template <class Tr>
struct ConsumerState {
  float m[2], l[2];
  float acc[Tr::kDT][4];
  uint32_t pf[Tr::kPSteps][4];
  // The block whose P·V is still to issue (or whose V stage is still to release); with e4m3 P·V also the
  // rescale of O that its softmax deferred to the add of its block.
  float pendingAlpha[2];
  bool pending = false, pendingGemm = false;
  int pendingStage = 0;
  uint32_t pendingPhase = 0;
  // 128x64: the pending block's vote, posted and not yet collected (resolveVote), with what a skip undoes.
  bool voteOpen = false;
  uint32_t openWord = 0;
  int openBar = 0, openJ = 0;
  RowsBefore openBefore;
};

template <class Tr>
__device__ __forceinline__ void issueQK(float (&s)[Tr::kNT][4], int32_t (&si)[Tr::kNT][4], uint32_t sQ,
                                        uint32_t sK) {
  using namespace sm90;
  const uint64_t dq0 = kMajorDescriptorBytes<kBQ, Tr::kSlabBytes>(sQ, 0);
  const uint64_t dk0 = kMajorDescriptorBytes<Tr::kBK, Tr::kSlabBytes>(sK, 0);
#pragma unroll
  for (int ks = 0; ks < Tr::kQkSteps; ++ks) {
    const uint64_t dq = advanceDescriptor(dq0, kMajorStepBytes<kBQ, Tr::kSlabBytes>(ks * 32));
    const uint64_t dk = advanceDescriptor(dk0, kMajorStepBytes<Tr::kBK, Tr::kSlabBytes>(ks * 32));
    if constexpr (Tr::kFp8)
      WgmmaS8::run(si, dq, dk, ks > 0);
    else
      WgmmaSS<typename Tr::T, Tr::kBK>::run(s, dq, dk, ks > 0);
  }
}

// P·V of the pending block: e4m3 into a fresh fp32 block buffer (scaleD = 0 on the first k-step; with the
// row sums in its last tile, Tr::kTensorRowSums), 16-bit straight into O (`blk` unused).
template <class Tr>
__device__ __forceinline__ void issuePV(ConsumerState<Tr>& st, float (&blk)[Tr::kBlkTiles][4], uint32_t sV) {
  using namespace sm90;
  const uint64_t dv0 =
      Tr::kFp8 ? kMajorDescriptorBytes<Tr::D, 128>(sV, 0) : mnMajorDescriptor<Tr::kBK>(sV, 0);
#pragma unroll
  for (int kk = 0; kk < Tr::kPSteps; ++kk) {
    if constexpr (Tr::kFp8)  // with the ones atom as channels D .. D + 7 where the tensor cores sum P
      WgmmaE4m3<8 * Tr::kBlkTiles>::run(blk, st.pf[kk],
                                        advanceDescriptor(dv0, kMajorStepBytes<Tr::D, 128>(kk * 32)), kk > 0);
    else  // k-step kk of 16 keys: two 8-key groups of kSwizzleAtomBytes (mnMajorDescriptor)
      WgmmaRS<typename Tr::T, Tr::D>::run(st.acc, st.pf[kk],
                                          advanceDescriptor(dv0, kk * 2u * kSwizzleAtomBytes), 1);
  }
}

// Q·Kᵀ of the consumer's block and P·V of its pending one, issued back to back (Q·Kᵀ first, each its own
// group). Returns once Q·Kᵀ is complete, with the P·V (into O for 16-bit P, into `blk` for e4m3) still
// running, so that the softmax of this block overlaps the P·V of the previous one (FlashAttention-3's
// intra-warpgroup overlap). Returns whether a P·V was issued; the caller waits for it (wgmmaWait<0>) before
// it touches O, `blk` or P. Without Tr::kPvBesideQk nothing is pending here and Q·Kᵀ goes out alone.
// `decidePending` runs once Q·Kᵀ is on its way and may still cancel the pending P·V (128x64: the vote
// across both halves, collected while Q·Kᵀ runs).
template <class Tr, class DecidePending>
__device__ __forceinline__ bool issueOwnStep(ConsumerState<Tr>& st, const Pipe<Tr>& pp, int s, int wg,
                                             float (&sc)[Tr::kNT][4], int32_t (&si)[Tr::kNT][4],
                                             float (&blk)[Tr::kBlkTiles][4], DecidePending&& decidePending) {
  using namespace sm90;
  constexpr bool kLateDecision = Tr::kTilesPerRow > 1;
  if constexpr (!kLateDecision)
    if (Tr::kPvBesideQk && st.pending && st.pendingGemm) mbarWait(pp.fullV(st.pendingStage), st.pendingPhase);
  wgmmaFence();
  issueQK<Tr>(sc, si, pp.q(wg), pp.k(s));
  wgmmaCommit();
  decidePending();
  const bool pv = Tr::kPvBesideQk && st.pending && st.pendingGemm;
  // One branch per case from issue to wait: ptxas then sees on every path which group is still running (with
  // two branches on the same condition it also follows the impossible mix and serialises the wgmmas).
  if (pv) {
    if constexpr (kLateDecision) mbarWait(pp.fullV(st.pendingStage), st.pendingPhase);
    issuePV<Tr>(st, blk, pp.v(st.pendingStage));
    wgmmaCommit();
    wgmmaWait<1>();
  } else {
    wgmmaWait<0>();
  }
  if constexpr (Tr::kFp8)
    fenceRegs(si);
  else
    fenceRegs(sc);
  return pv;
}

// After the pending block's P·V completed: an e4m3 block is added to O with the rescale its softmax deferred.
template <class Tr>
__device__ __forceinline__ void addPendingBlock(ConsumerState<Tr>& st, bool pv,
                                                const float (&blk)[Tr::kBlkTiles][4]) {
  if constexpr (Tr::kFp8)
    if (pv) {
      addBlockRescaled(st.acc, st.pendingAlpha, blk);
      if constexpr (Tr::kTensorRowSums) {  // channel D: the row sum in a quad's first lane, 0 in the others
        st.l[0] = fmaf(st.l[0], st.pendingAlpha[0], blk[Tr::kDT][0]);
        st.l[1] = fmaf(st.l[1], st.pendingAlpha[1], blk[Tr::kDT][2]);
      }
    }
}

// Releases the pending block's V stage once its P·V (if any) has completed.
template <class Tr>
__device__ __forceinline__ void releasePending(ConsumerState<Tr>& st, const Pipe<Tr>& pp) {
  if (!st.pending) return;
  if (!st.pendingGemm) sm90::mbarWait(pp.fullV(st.pendingStage), st.pendingPhase);  // keep the phases in step
  sm90::mbarArrive(pp.emptyV(st.pendingStage));
  st.pending = false;
}

#endif  // SPARGE_SM90A_DEVICE

}  // namespace sparge::cuda::sm90

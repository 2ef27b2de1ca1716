// The Hopper attention kernel's consumer softmax and PV-skip vote: row maxima against λ, the exponentials,
// undoing a skipped block's row sums, and the vote across a warpgroup (and across the two halves of a 128x64
// query block).
#pragma once

#include "attention/parts/online_softmax.cuh"
#include "attention/sm90/hopper_sync.cuh"
#include "attention/sm90/mainloop_mma.cuh"

namespace sparge::cuda::sm90 {

#ifdef SPARGE_SM90A_DEVICE

// What the softmax of a block knows of its keys' visibility: all visible, some masked, or checked at run
// time.
enum class BlockKeys { AllVisible, SomeMasked, Checked };

// Whether a block's PV-skip vote runs, the shared-memory word it meets in and this warp's byte of it.
struct BlockVote {
  bool on;
  uint32_t word, byte;
  int bar;         // the named barrier the voters meet at (128x64: this warpgroup's post)
  int partnerBar;  // 128x64: the other half's post
};

// Does any row of the tile rise above its running max by more than -λ (the PV-skip vote's question; the only
// quantized numerics of this family is int8-fp8, and its padded rows vote)? Row maxima in base-2 units.
template <class Tr>
__device__ __forceinline__ bool rowsRise(const ConsumerState<Tr>& st, const float (&rmax)[2], float lambda,
                                         int row0, int nQ) {
  return maxRise<Tr::kFp8>(rmax, st.m, row0, nQ) + lambda > 0.f;
}

// The block's softmax: new running max (alpha) and the exponentials in place.
template <class Tr>
__device__ __forceinline__ void exponentiateBlock(ConsumerState<Tr>& st, float (&s)[Tr::kNT][4],
                                                  const float (&rmax)[2], float sc, float (&alpha)[2]) {
  float muse[2];
  // With the tensor cores' row sums, l takes alpha with O at the block's add (addPendingBlock).
  constexpr RowSum kSum = Tr::kTensorRowSums ? RowSum::None : RowSum::Fp32;
  updateRowMax<!Tr::kTensorRowSums>(st.m, st.l, rmax, muse, alpha);
  exponentiate<kSum>(s, muse, sc, Tr::kFp8 ? kFp8POffset : 0.f, st.l);
}

// Both orders below run the exponentials also for a skipped block and then undo them, so that no branch on
// the skip splits the softmax (a branch there was slower, kernels/NOTES.md). That is exact: a skip means that
// no row's max rose (its rise is at most -λ < 0), so the max and alpha stay and only the row sums took the
// block; they go back, with the max (rows outside the tile, which do not vote, may have moved it).
template <class Tr>
__device__ __forceinline__ RowsBefore rowsBefore(const ConsumerState<Tr>& st) {
  return RowsBefore{{st.m[0], st.m[1]}, {st.l[0], st.l[1]}};
}
template <class Tr>
__device__ __forceinline__ void undoIfSkipped(ConsumerState<Tr>& st, const RowsBefore& b, bool skip) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    st.m[r] = skip ? b.m[r] : st.m[r];
    st.l[r] = skip ? b.l[r] : st.l[r];
  }
}

// int8-fp8: the softmax, then the vote (the warpgroup's only meeting). Returns the skip.
template <class Tr>
__device__ __forceinline__ bool softmaxThenVote(ConsumerState<Tr>& st, float (&s)[Tr::kNT][4],
                                                const float (&rmax)[2], float sc, const BlockVote& vote,
                                                float lambda, int row0, int nQ, float (&alpha)[2]) {
  const bool rises = vote.on && rowsRise(st, rmax, lambda, row0, nQ);
  const RowsBefore before = rowsBefore(st);
  exponentiateBlock<Tr>(st, s, rmax, sc, alpha);
  if (!vote.on || sm90::warpgroupAny(vote.word, vote.byte, vote.bar, rises)) return false;
  // Undone on this branch, as measured (a select on the skip compiles to other code here).
  undoIfSkipped(st, before, true);
  return true;
}

// fp16/bf16: the vote (or, without one, a plain meeting of the warpgroup: ptxas then keeps the exponentials
// after the wait) before the wait for the previous P·V; the softmax after it (softmaxAfterVote).
template <class Tr>
__device__ __forceinline__ bool voteFirst(const ConsumerState<Tr>& st, const float (&rmax)[2],
                                          const BlockVote& vote, float lambda, int row0, int nQ, int wg) {
  if (!vote.on) {
    sm90::barSync(kBarVote + wg, 128);
    return false;
  }
  return !sm90::warpgroupAny(vote.word, vote.byte, vote.bar, rowsRise(st, rmax, lambda, row0, nQ));
}
template <class Tr>
__device__ __forceinline__ void softmaxAfterVote(ConsumerState<Tr>& st, float (&s)[Tr::kNT][4],
                                                 const float (&rmax)[2], float sc, bool skip,
                                                 float (&alpha)[2]) {
  const RowsBefore before = rowsBefore(st);
  exponentiateBlock<Tr>(st, s, rmax, sc, alpha);
  undoIfSkipped(st, before, skip);
}

// Once the previous P·V completed: O takes the block's rescale (16-bit; e4m3 defers it to the block's add)
// and P goes into the registers the next P·V reads.
template <class Tr>
__device__ __forceinline__ void finishSoftmax(ConsumerState<Tr>& st, const float (&s)[Tr::kNT][4],
                                              const float (&alpha)[2]) {
  if constexpr (Tr::kFp8) {
    st.pendingAlpha[0] = alpha[0];
    st.pendingAlpha[1] = alpha[1];
    packPE4m3(s, st.pf);
  } else {
    scaleRows(st.acc, alpha);  // a branch here would serialise the wgmma issue
    packP16<typename Tr::T>(s, st.pf);
  }
}

// Per-consumer constants of the walk.
struct ConsumerCtx {
  int wg, i, n, row0, col0, qRow0, qLast;
  size_t rowIdx;
  float lambda;
  bool skipOn;
  uint32_t voteWord, voteByte;  // the first set of vote words and this warp's byte in it
  int voteBar, votePartnerBar;  // the named barriers of the vote (the first set)
};

// Marks block j's P·V as skipped in the LUT row's map (one thread of the row's first tile writes it).
template <class Tr>
__device__ __forceinline__ void markPvSkipped(const KParams<typename Tr::T>& p, const ConsumerCtx& cx,
                                              int j) {
  if (threadIdx.x % 128 == 0 && cx.wg % Tr::kTilesPerRow == 0 && p.pvSkipped)
    p.pvSkipped[cx.rowIdx * p.nk + j] = 1;
}

// 128x64: collects the pending block's vote (postVote went out in its softmax) just before its P·V would
// issue, so that a half waits for the other only once it needs the answer; a skip puts the row maxima and
// sums back, keeps the P·V from issuing and is counted. Nothing to do where a tile votes alone (64x128).
template <class Tr>
__device__ __forceinline__ void resolveVote(ConsumerState<Tr>& st, const KParams<typename Tr::T>& p,
                                            const ConsumerCtx& cx) {
  if constexpr (Tr::kTilesPerRow > 1) {
    if (!st.voteOpen) return;
    st.voteOpen = false;
    const bool skip = __shfl_sync(0xffffffffu, (int)!sm90::collectVote(st.openWord, st.openBar), 0) != 0;
    undoIfSkipped(st, st.openBefore, skip);
    st.pendingGemm = !skip;
    if (skip) markPvSkipped<Tr>(p, cx, st.openJ);
  }
}

#endif  // SPARGE_SM90A_DEVICE

}  // namespace sparge::cuda::sm90

// The Hopper attention kernel's consumer walk: each own block's Q·Kᵀ, softmax and vote, P·V and stage
// releases in ring order, passes over the other tiles' blocks, and the tile's epilogue (the shared store).
#pragma once

#include <cmath>

#include "attention/parts/epilogue.cuh"
#include "attention/sm90/mainloop_mma.cuh"
#include "attention/sm90/softmax_vote.cuh"
#include "attention/sm90/tile_scheduler.cuh"

namespace sparge::cuda::sm90 {

#ifdef SPARGE_SM90A_DEVICE

// Issues the pending block's P·V now (alone), once its vote is in, waits for it, adds it (e4m3) and releases
// its V stage.
template <class Tr>
__device__ __forceinline__ void finishPending(ConsumerState<Tr>& st, const Pipe<Tr>& pp,
                                              const KParams<typename Tr::T>& p, const ConsumerCtx& cx) {
  using namespace sm90;
  resolveVote(st, p, cx);
  const bool pv = st.pending && st.pendingGemm;
  if (pv) {
    mbarWait(pp.fullV(st.pendingStage), st.pendingPhase);
    wgmmaFence();
    float blk[Tr::kBlkTiles][4];
    issuePV<Tr>(st, blk, pp.v(st.pendingStage));
    wgmmaCommit();
    wgmmaWait<0>();
    addPendingBlock<Tr>(st, true, blk);
  }
  releasePending<Tr>(st, pp);
}

// The own block once its Q·Kᵀ completed (beside the previous block's P·V where the consumer overlaps them):
// scores to float, masks, row maxima, the skip vote and (int8-fp8) the softmax; once that P·V completed, its
// add (e4m3) and V release, then (fp16/bf16) the softmax, this block's rescale of O and its P. Returns
// whether this block's P·V is skipped. The exponentials go where they were faster (kernels/NOTES.md,
// "Figures behind the rules in the code"): fp16/bf16 after the vote, int8-fp8 before it; one order per
// numerics.
template <class Tr, BlockKeys kKeys>
__device__ __forceinline__ bool softmaxOwnBlock(const KParams<typename Tr::T>& p, const Pipe<Tr>& pp,
                                                const ConsumerCtx& cx, ConsumerState<Tr>& st, int j,
                                                const BlockVote& vote, float scale, bool pv,
                                                float (&sc)[Tr::kNT][4], const int32_t (&si)[Tr::kNT][4],
                                                float (&blk)[Tr::kBlkTiles][4]) {
  using namespace sm90;
  float rmax[2], alpha[2];
  // The masked copy checks visibility again although its caller did: without the check (an unconditional
  // mask) ptxas spilled 8 bytes more, and the copy measured is this one.
  const bool visible =
      kKeys == BlockKeys::AllVisible || p.vis.fullyVisible(cx.qRow0, cx.qLast, j * Tr::kBK, Tr::kBK);
  if (Tr::kFp8 && kKeys != BlockKeys::SomeMasked && visible) {
    rowMaxInt(si, rmax);
    intToFloat(si, sc);
  } else {
    if constexpr (Tr::kFp8) intToFloat(si, sc);
    if (!visible) maskFragment(sc, cx.row0, j * Tr::kBK + cx.col0, p.vis);
    rowMax(sc, rmax);
  }
  rmax[0] *= scale;
  rmax[1] *= scale;
  bool skip = false;  // the vote is warpgroup-wide; the shuffles tell the compiler the result is uniform
  if constexpr (Tr::kFp8) {
    skip = __shfl_sync(
        0xffffffffu, (int)softmaxThenVote<Tr>(st, sc, rmax, scale, vote, cx.lambda, cx.row0, p.Nq, alpha), 0);
    fenceRegs(sc);  // the softmax stays above the wait, beside the P·V
    fenceRegs(st.l);
    // Without a vote the softmax and the wait share one basic block, and ptxas hoisted the wait to its top;
    // a warpgroup barrier keeps it below where that was faster: the dense walks and the D 128 sparse walk
    // (the D 64 sparse walk without the vote was faster without it, kernels/NOTES.md).
    if constexpr (Tr::kDense || (!Tr::kVote && Tr::D == 128)) barSync(kBarVote + cx.wg, 128);
    wgmmaWait<0>();  // the previous block's P·V
    fenceRegs(blk);
    addPendingBlock<Tr>(st, pv, blk);
    releasePending<Tr>(st, pp);
  } else if constexpr (Tr::kTilesPerRow > 1) {
    // 128x64: the vote across both halves of the query block in two parts. A half posts its answer once it
    // has its row maxima and collects the other's only when the block's P·V is about to issue (resolveVote,
    // at its next own step, behind the next Q·Kᵀ), so the exponentials, O's rescale, P, the wait for the next
    // K and that Q·Kᵀ run in between.
    // One meeting before the exponentials held both halves in step at every block, which was slower
    // (kernels/NOTES.md, "Figures behind the rules in the code").
    if (vote.on)
      postVote(vote.byte, vote.bar, rowsRise(st, rmax, cx.lambda, cx.row0, p.Nq));
    else
      barSync(kBarVote + cx.wg, 128);
    wgmmaWait<0>();  // the previous block's P·V (into O)
    fenceRegs(st.acc);
    releasePending<Tr>(st, pp);
    st.voteOpen = vote.on;
    st.openWord = vote.word;
    st.openBar = vote.partnerBar;
    st.openJ = j;
    st.openBefore = rowsBefore(st);
    exponentiateBlock<Tr>(st, sc, rmax, scale, alpha);
    // O's rescale and P as if the block were kept: a skip leaves this half's maxima where they were
    // (alpha 1), so resolveVote only puts the maxima and row sums back.
    finishSoftmax<Tr>(st, sc, alpha);
    return false;
  } else {
    skip = __shfl_sync(0xffffffffu, (int)voteFirst<Tr>(st, rmax, vote, cx.lambda, cx.row0, p.Nq, cx.wg), 0);
    wgmmaWait<0>();  // the previous block's P·V (into O)
    fenceRegs(st.acc);
    releasePending<Tr>(st, pp);
    softmaxAfterVote<Tr>(st, sc, rmax, scale, skip, alpha);
  }
  // Also after a skip: its alpha is 1 (the max did not move) and its P goes unused.
  finishSoftmax<Tr>(st, sc, alpha);
  return skip;
}

// One block of the consumer's own tile, step `rec` in stage s (K full): Q·Kᵀ and the pending P·V, K released,
// the softmax; the block becomes the pending one (its P·V goes out with the next own block's Q·Kᵀ, or at
// once without Tr::kPvBesideQk).
template <class Tr>
__device__ __forceinline__ void ownStep(const Sm90Params<typename Tr::T>& prm, const Pipe<Tr>& pp,
                                        const ConsumerCtx& cx, ConsumerState<Tr>& st, const StepRecord& rec,
                                        int s, uint32_t phase, int t, float qScale) {
  using namespace sm90;
  const KParams<typename Tr::T>& p = prm.k;
  float sc[Tr::kNT][4], blk[Tr::kBlkTiles][4];
  int32_t si[Tr::kNT][4];
  const bool pv = issueOwnStep<Tr>(st, pp, s, cx.wg, sc, si, blk, [&] { resolveVote(st, p, cx); });
  mbarArrive(pp.emptyK(s));
  const float scale = Tr::kFp8 ? p.scaleLog2 * (qScale * rec.kScale) : p.scaleLog2;
  const uint32_t slot = Tr::kVoteSetBytes * (t & 1);          // the vote words alternate
  const int barSet = Tr::kTilesPerRow > 1 ? 2 * (t & 1) : 0;  // and so do 128x64's barriers
  const BlockVote vote{Tr::kVote && cx.skipOn && skipEligible(t, cx.n, Tr::kTail), cx.voteWord + slot,
                       cx.voteByte + slot, cx.voteBar + barSet, cx.votePartnerBar + barSet};
  bool skip;
  if constexpr (Tr::kTwoSoftmaxCopies) {
    skip =
        p.vis.fullyVisible(cx.qRow0, cx.qLast, rec.j * Tr::kBK, Tr::kBK)
            ? softmaxOwnBlock<Tr, BlockKeys::AllVisible>(p, pp, cx, st, rec.j, vote, scale, pv, sc, si, blk)
            : softmaxOwnBlock<Tr, BlockKeys::SomeMasked>(p, pp, cx, st, rec.j, vote, scale, pv, sc, si, blk);
  } else {
    skip = softmaxOwnBlock<Tr, BlockKeys::Checked>(p, pp, cx, st, rec.j, vote, scale, pv, sc, si, blk);
  }
  st.pending = true;
  st.pendingGemm = !skip;
  st.pendingStage = s;
  st.pendingPhase = phase;
  if (skip) markPvSkipped<Tr>(p, cx, rec.j);
  if constexpr (!Tr::kPvBesideQk) finishPending<Tr>(st, pp, p, cx);
}

// The consumer's walk: every step of its ring in order, from the records the producer left in the stages;
// work on its own blocks, a pass on the other tiles' (union walk only). The pending block's P·V waits for the
// next own block unless passes come close to its stage first: the producer waits for the V release before it
// reloads a stage, so the consumer must finish the pending block before it passes that stage. (The inner
// loop keeps the own block's wgmmas out of a branch on the record: ptxas then serialised every wgmma, C7520.)
template <class Tr, bool kDense>
__device__ __forceinline__ void consume(const Sm90Params<typename Tr::T>& prm, const Pipe<Tr>& pp,
                                        const ConsumerCtx& cx, ConsumerState<Tr>& st) {
  using namespace sm90;
  const KParams<typename Tr::T>& p = prm.k;
  const float qScale = Tr::kFp8 && cx.i < p.nq ? p.qScale[cx.rowIdx] : 1.f;
  mbarWait(pp.fullQ(), 0);
  bool last = false;
  StageCursor at;
  for (int t = 0; t < cx.n; ++t, pp.advance(at)) {
    StepRecord rec;
    for (;; pp.advance(at)) {  // other tiles' blocks up to this tile's next one
      rec = awaitStep(pp, at.s, at.phase);
      if ((rec.mask >> cx.wg) & 1) break;
      // One step before the pending block's stage is due again: finishing it now lets the producer reload
      // that stage while this step passes (finishing when it is due left the reload in the open: fp16 D 128
      // has 3 stages).
      if (st.pending && pp.after(at.s) == st.pendingStage) finishPending<Tr>(st, pp, p, cx);
      passStage(pp, at.s, at.phase);
    }
    last = rec.last;
    ownStep<Tr>(prm, pp, cx, st, rec, at.s, at.phase, t, qScale);
  }
  finishPending<Tr>(st, pp, p, cx);  // the last block's P·V
  for (; !last; pp.advance(at)) {    // other tiles' remaining blocks
    last = awaitStep(pp, at.s, at.phase).last;
    passStage(pp, at.s, at.phase);
  }
}

template <class Tr, bool kDense>
__device__ __forceinline__ void consumerTile(const Sm90Params<typename Tr::T>& prm, const Pipe<Tr>& pp,
                                             const CtaTiles<Tr, kDense>& tp, int wg, bool split) {
  const KParams<typename Tr::T>& p = prm.k;
  const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
  ConsumerCtx cx;
  cx.wg = wg;
  cx.i = pick(tp.i, wg);
  cx.n = tp.n(wg);
  cx.qRow0 = cx.i * kBQ;
  cx.qLast = min(cx.qRow0 + kBQ, p.Nq) - 1;
  cx.row0 = cx.qRow0 + warp * 16 + (lane >> 2);
  cx.col0 = 2 * (lane & 3);
  cx.rowIdx = tp.lutRow(p, wg);
  cx.lambda = INFINITY;
  cx.skipOn = false;
  // 128x64: the two halves of a query block vote together (each posts at its own barrier and collects at
  // the other's; a warpgroup's plain meeting keeps kBarVote + wg).
  const int half = wg % Tr::kTilesPerRow;
  cx.voteWord = pp.vote(wg / Tr::kTilesPerRow);
  cx.voteByte = cx.voteWord + 4 * half + warp;
  cx.voteBar = Tr::kTilesPerRow > 1 ? kBarVote + Tr::kConsumers + half : kBarVote + wg;
  cx.votePartnerBar = Tr::kTilesPerRow > 1 ? kBarVote + Tr::kConsumers + 1 - half : cx.voteBar;
  if constexpr (!kDense) {
    const HeadParamsDev hp = p.params[tp.hq];
    cx.lambda = hp.lambda;
    cx.skipOn = !hp.dense && isfinite(hp.lambda);
  }
  ConsumerState<Tr> st;
  st.m[0] = st.m[1] = -INFINITY;
  st.l[0] = st.l[1] = 0.f;
#pragma unroll
  for (int dt = 0; dt < Tr::kDT; ++dt) st.acc[dt][0] = st.acc[dt][1] = st.acc[dt][2] = st.acc[dt][3] = 0.f;
  // A split walk's consumer meets only its own ring; the union walk's passes every step, also with no
  // blocks of its own.
  if (split ? cx.n > 0 : !tp.empty()) consume<Tr, kDense>(prm, pp.walkOf(wg, split), cx, st);
  if (cx.i >= tp.tiles) return;
  typename Tr::T* gO = p.o + (size_t)tp.bhq * p.Nq * Tr::D;
  const float* vScale = Tr::kFp8 ? p.vScale + (size_t)tp.bhk * Tr::D : nullptr;
  storeRows<typename Tr::T, Tr::kDT>(gO, Tr::D, st.acc, st.l, cx.row0, cx.col0, p.Nq, vScale,
                                     p.emptyRows ? p.emptyRows + tp.bhq : nullptr);
}

#endif  // SPARGE_SM90A_DEVICE

}  // namespace sparge::cuda::sm90

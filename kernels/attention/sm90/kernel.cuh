// Stage 2 on Hopper (sm_90a) for the 64x128 geometry (and 128x64, below), with FlashAttention-3's structure:
// a CTA holds three (four for int8-fp8 at D 64) adjacent 64-row query tiles, one per consumer warpgroup (each
// with its own LUT row), and a producer warp that loads K and V blocks with TMA into a multi-stage
// shared-memory pipeline guarded by mbarriers. The producer walks the sorted union of the tiles' LUT rows;
// every stage carries a record of its step (key block, which consumers need it, the block's K scale, whether
// it is the last), so one load serves several tiles when their rows agree (dense attention, and neighbouring
// rows of real data) and the consumers never read the LUT (its loads would sit on their critical path). At
// D 64, where the rows visit few blocks, a CTA instead splits the stages into one ring per tile, each
// streamed by its own producer thread (splitWalks). In fp16/bf16 at D 64 each consumer issues Q·Kᵀ of its
// block with P·V of its previous block, and its row maxima, PV-skip vote and softmax run beside that P·V;
// elsewhere registers are spent on more consumers instead, each block's P·V follows its own softmax
// (kPvBesideQk), and the other consumers keep the tensor cores busy meanwhile. The consumers do not take
// turns on the tensor cores (FA3's ping-pong): with two consumers and the P·V overlap inside each, turns were
// no faster in dense walks and slower in sparse ones (kernels/NOTES.md, "Figures behind the rules in the
// code"). Register reallocation gives each consumer 160 registers (112 with four). Numerics: fp16/bf16 exact
// (wgmma m64n128k16, P·V m64nDk16 with V transposed by the descriptor), and int8-fp8 (wgmma s8 m64n128k32, P
// rounded to e4m3, P·V e4m3 m64nDk32 into a fresh per-block fp32 buffer; the walk without the vote adds a
// ones channel to V so that the same wgmma sums P for the denominator). The 128x64 geometry (fp16/bf16) runs
// the same kernel with 64-key blocks (wgmma m64n64k16 for Q·Kᵀ): a CTA holds the two 64-row halves of
// one LUT row's 128-row query block, in two consumers of 240 registers with the P·V overlap, which walk the
// same blocks and vote on PV skips together (each half posts its answer after its row maxima and collects the
// other's just before the block's P·V). Masks, the PV-skip vote (per query tile), empty rows and the output
// go through the shared parts. Only the sm_90a image has a body; other images trap (the launcher never
// selects them).
#pragma once

#include "attention/sm90/consumer.cuh"
#include "attention/sm90/mainloop_load.cuh"
#include "attention/sm90/tile_scheduler.cuh"

namespace sparge::cuda::sm90 {

#ifdef SPARGE_SM90A_DEVICE

// The ones atom after each V stage (Tr::kTensorRowSums): 8 channels x 128 keys of e4m3, channel 0 all 1.0
// (0x38), the others 0. Its rows are uniform, so the 128-byte swizzle leaves them as they are, and so does
// the token order inside each group of 16 that the e4m3 V layout permutes.
template <class Tr>
__device__ __forceinline__ void writeOnesAtoms(const Pipe<Tr>& pp) {
  constexpr int kChunks = sm90::kSwizzleAtomBytes / 16;
  for (int i = threadIdx.x; i < Tr::kStages * kChunks; i += blockDim.x) {
    const int chunk = i % kChunks, word = chunk < 128 / 16 ? 0x38383838 : 0;
    sm90::stShared16(pp.v(i / kChunks) + Tr::kVTileBytes + 16 * chunk, word, word, word, word);
  }
  sm90::fenceProxyAsync();  // read next by wgmma (the async proxy)
}

template <class Tr, bool kDense>
__device__ __forceinline__ void attention90(const Sm90Params<typename Tr::T>& prm) {
  extern __shared__ unsigned char smemRaw[];
  const Pipe<Tr> pp{((uint32_t)__cvta_generic_to_shared(smemRaw) + 1023u) & ~1023u};
  const CtaTiles<Tr, kDense> tp = CtaTiles<Tr, kDense>::make(prm.k);
  const bool split = splitWalks<Tr, kDense>(prm, tp);
  if (threadIdx.x == 0) {
    for (int c = 0; c < Tr::kQBars; ++c) sm90::mbarInit(pp.fullQ(c), 1);
    const int readers = split ? 128 : 128 * Tr::kConsumers;  // consumer threads that release a stage
    for (int s = 0; s < Tr::kStages; ++s) {
      sm90::mbarInit(pp.fullK(s), 1);
      sm90::mbarInit(pp.fullV(s), 1);
      sm90::mbarInit(pp.emptyK(s), readers);
      sm90::mbarInit(pp.emptyV(s), readers);
    }
    sm90::fenceBarrierInit();
  }
  if constexpr (Tr::kTensorRowSums) writeOnesAtoms(pp);
  __syncthreads();
  // Warp-uniform by construction (a shuffle from lane 0): lets the compiler give each role its own registers.
  const int wg = __shfl_sync(0xffffffffu, (int)threadIdx.x / 128, 0);
  if (wg == 0) {
    sm90::regDealloc<kProducerRegs>();
    if (split) {  // lane 0 of warp w streams tile w's ring
      const int w = threadIdx.x / 32;
      if (threadIdx.x % 32 == 0 && w < Tr::kConsumers && tp.n(w) > 0)
        produce<Tr, kDense>(prm, pp.walkOf(w, true), tp.only(w), true);
    } else if (threadIdx.x == 0 && !tp.empty()) {
      produce<Tr, kDense>(prm, pp, tp, false);
    }
  } else {
    sm90::regAlloc<Tr::kConsumerRegs>();
    consumerTile<Tr, kDense>(prm, pp, tp, wg - 1, split);
  }
}

#endif  // SPARGE_SM90A_DEVICE

template <class Tr>
__global__ void __launch_bounds__(Tr::kThreads, 1)
    sparge_sparse_attention_sm90(const __grid_constant__ Sm90Params<typename Tr::T> p) {
#ifdef SPARGE_SM90A_DEVICE
  attention90<Tr, false>(p);
#else
  __trap();  // only the sm_90a image is ever launched
#endif
}

template <class Tr>
__global__ void __launch_bounds__(Tr::kThreads, 1)
    sparge_dense_attention_sm90(const __grid_constant__ Sm90Params<typename Tr::T> p) {
#ifdef SPARGE_SM90A_DEVICE
  attention90<Tr, true>(p);
#else
  __trap();
#endif
}

}  // namespace sparge::cuda::sm90

// Hopper (sm_90a) synchronisation and copy primitives of the warp-specialised attention family: mbarriers
// (init, arrive, expect-tx, parity wait), TMA tile loads completing on an mbarrier, named barriers, votes
// within a warpgroup and across two, and register reallocation between producer and consumer warpgroups.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "attention/sm90/wgmma_sm90.cuh"

namespace sparge::cuda::sm90 {

#ifdef SPARGE_SM90A_DEVICE

__device__ __forceinline__ void mbarInit(uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}
// Makes the initialised barriers visible to the async proxy (TMA) before the CTA-wide barrier that follows.
__device__ __forceinline__ void fenceBarrierInit() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void mbarArrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbarArriveExpectTx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// Waits until the phase with the given parity has completed. The suspend-time hint lets the thread sleep in
// try_wait until the phase completes (or the hint, 10 ms, runs out) instead of polling: without it the
// producer's wait for a free stage polls and takes issue slots from the consumer warps beside it
// (kernels/NOTES.md). Building with SPARGE_PIPELINE_WATCHDOG turns a pipeline hang into a trap
// after ~2^26 polls (a debugging aid: the trap path costs the consumers their register budget, so release
// builds wait without a bound).
constexpr uint32_t kMbarSuspendNs = 10000000;
__device__ __forceinline__ void mbarWait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
#ifdef SPARGE_PIPELINE_WATCHDOG
  for (uint32_t polls = 0;; ++polls) {
#else
  for (;;) {
#endif
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;\nselp.u32 %0, 1, 0, "
        "p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity), "n"(kMbarSuspendNs)
        : "memory");
    if (done) return;
#ifdef SPARGE_PIPELINE_WATCHDOG
    if (polls > (1u << 26)) __trap();
#endif
  }
}

// A 16-byte record in shared memory (the producer's per-stage step records). The "memory" clobbers keep
// them in program order with the mbarrier operations that publish (arrive, release) and receive (try_wait,
// acquire) them.
__device__ __forceinline__ void stShared16(uint32_t addr, int a, int b, int c, int d) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(a), "r"(b), "r"(c), "r"(d)
               : "memory");
}
__device__ __forceinline__ int4 ldShared16(uint32_t addr) {
  int4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}

// TMA: a box of a 3-d tensor map at coordinates (c0 innermost, c1, c2) into shared memory; completes as
// bytes on `bar`. Coordinates past the tensor's extent read zeros.
__device__ __forceinline__ void tmaLoad3d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1,
                                          int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, "
      "%5}], "
      "[%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}
__device__ __forceinline__ void prefetchTensorMap(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// Named barriers (id 1..15; 0 is __syncthreads) among `count` threads.
__device__ __forceinline__ void barSync(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
// A vote's first half: whether `pred` holds for any lane of the warp, stored as the warp's byte of its vote
// words (every lane stores the same value).
__device__ __forceinline__ void storeWarpAny(uint32_t byte, bool pred) {
  const uint32_t any = __any_sync(0xffffffffu, pred) ? 1u : 0u;
  asm volatile("st.shared.u8 [%0], %1;\n" ::"r"(byte), "r"(any) : "memory");
}
// True iff `pred` holds for any thread of the four warps of a warpgroup, which meet at named barrier `id`:
// each warp's answer goes to its byte (`byte`, precomputed by the caller) of the shared-memory word `word`
// before the barrier, the word is read after it (bar.red.or.pred was slower in the int8-fp8 attention
// kernel, voting once a block: kernels/NOTES.md). Callers alternate between two words: a warp writes a word again
// only after the next meeting, which every warp reaches after it read the word.
__device__ __forceinline__ bool warpgroupAny(uint32_t word, uint32_t byte, int id, bool pred) {
  storeWarpAny(byte, pred);
  barSync(id, 128);
  uint32_t all;
  asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(all) : "r"(word) : "memory");
  return all != 0;
}

// The same question across the two warpgroups of a 128-row query block, in two halves so that neither waits
// for the other before it has to: postVote writes the warp's answer (its byte of the two words at `word`) and
// arrives at the poster's barrier without waiting; collectVote, called later, waits at the partner's barrier
// (the partner's 128 threads arrive, this warpgroup's 128 wait) and reads all eight bytes. bar.arrive makes
// the poster's stores visible to the threads that complete the barrier; this warpgroup's own four bytes are
// visible too, since its warps all take part in the partner's barrier after their own stores. Callers
// alternate between two sets of words and barriers: a warpgroup posts to a set again only after it collected
// the partner's next post, which the partner makes after it collected from this set.
__device__ __forceinline__ void barArrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void postVote(uint32_t byte, int ownBar, bool pred) {
  storeWarpAny(byte, pred);
  barArrive(ownBar, 256);
}
__device__ __forceinline__ bool collectVote(uint32_t word, int partnerBar) {
  barSync(partnerBar, 256);
  uint64_t all;
  asm volatile("ld.shared.u64 %0, [%1];\n" : "=l"(all) : "r"(word) : "memory");
  return all != 0;
}

template <int kRegs>
__device__ __forceinline__ void regAlloc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void regDealloc() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

#endif  // SPARGE_SM90A_DEVICE

}  // namespace sparge::cuda::sm90

// Hopper (sm_90a) synchronisation and copy primitives of the warp-specialised attention family: mbarriers
// (init, arrive, expect-tx, parity wait), TMA tile loads completing on an mbarrier, named barriers and
// warpgroup-wide votes, and register reallocation between producer and consumer warpgroups.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "wgmma_sm90.cuh"

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
// producer's wait for a free stage polled every ~9 cycles and took ~20 % of its scheduler's issue slots from
// the consumer warps beside it. Building with SPARGE_PIPELINE_WATCHDOG turns a pipeline hang into a trap
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
// True iff `pred` holds for any thread of kWarps warps (one warpgroup, or the two warpgroups of a 128-row
// query block), which meet at named barrier `id`: each warp's answer goes to its byte (`byte`, precomputed by
// the caller) of the kWarps / 4 shared-memory words from `word` before the barrier, the words are read after
// it. (bar.red.or.pred measured ~9 % slower in the int8-fp8 attention kernel, voting once a block.) Callers
// alternate between two sets of words: a warp writes a set again only after the next meeting, which every
// warp reaches after it read the set.
template <int kWarps>
__device__ __forceinline__ bool warpsAny(uint32_t word, uint32_t byte, int id, bool pred) {
  static_assert(kWarps == 4 || kWarps == 8, "one or two warpgroups");
  const uint32_t any = __any_sync(0xffffffffu, pred) ? 1u : 0u;
  asm volatile("st.shared.u8 [%0], %1;\n" ::"r"(byte), "r"(any) : "memory");  // every lane: the same value
  barSync(id, 32 * kWarps);
  if constexpr (kWarps == 4) {
    uint32_t all;
    asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(all) : "r"(word) : "memory");
    return all != 0;
  } else {
    uint64_t all;
    asm volatile("ld.shared.u64 %0, [%1];\n" : "=l"(all) : "r"(word) : "memory");
    return all != 0;
  }
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

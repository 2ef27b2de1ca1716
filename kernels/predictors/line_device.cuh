// Private to the line predictors: which keys a query sees (core::visibleKeys), the slot-to-head mapping and
// the element-type dispatch, for their .cu files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "common/launch.h"

namespace sparge::cuda::predictors::lines {

// core::visibleKeys: [first, last] of the keys query q sees (empty when first > last).
struct Visible {
  long long first, last;
};
__device__ __forceinline__ Visible visibleOf(long long q, const Problem& p) {
  Visible r{0, p.Nkv - 1LL};
  const long long right = p.causal ? 0 : p.window.right;
  if (right >= 0) r.last = min(r.last, q + right);
  if (p.window.left >= 0) r.first = max(0LL, q - p.window.left);
  return r;
}

// Visible pairs in queries [q0, q1) x keys [k0, k1] (core::blockValidArea). Both ends of a query's range
// never decrease as the query grows, so when the first query reaches k1 and the last starts by k0 every query
// sees the whole span.
__device__ __forceinline__ long long visibleArea(const Problem& p, long long q0, long long q1, long long k0,
                                                 long long k1) {
  if (q0 >= q1 || k0 > k1) return 0;
  if (visibleOf(q0, p).last >= k1 && visibleOf(q1 - 1, p).first <= k0) return (q1 - q0) * (k1 - k0 + 1);
  long long area = 0;
  for (long long q = q0; q < q1; ++q) {
    const Visible v = visibleOf(q, p);
    area += max(0LL, min(v.last, k1) - max(v.first, k0) + 1);
  }
  return area;
}

// Calls f(x) for every set bit x in [a, b] of a bit array (bit x of word x / 32), in increasing order.
template <typename F>
__device__ __forceinline__ void forEachBit(const uint32_t* words, long long a, long long b, F&& f) {
  for (long long w = a >> 5; a <= b && w <= (b >> 5); ++w) {
    uint32_t bits = words[w];
    if (w == (a >> 5)) bits &= ~0u << (a & 31);
    if (w == (b >> 5) && (b & 31) != 31) bits &= (1u << ((b & 31) + 1)) - 1u;
    while (bits) {
      const int at = __ffs(bits) - 1;
      bits &= bits - 1u;
      f(w * 32 + at);
    }
  }
}

// The query head and the (batch, query head) and (batch, KV head) indices of slot s.
struct SlotHeads {
  int hq, bhq, bhk;
};
__device__ __forceinline__ SlotHeads slotHeads(const Problem& p, int s) {
  const int b = s / p.nHeads, hq = p.heads[s % p.nHeads];
  return {hq, b * p.Hq + hq, b * p.Hkv + hq / (p.Hq / p.Hkv)};
}

// Calls f (host side) with a value of the launch's element type (its type is what the caller instantiates).
template <typename F>
void withElem(ElemType t, F&& f) {
  if (t == ElemType::F16)
    f(__half{});
  else
    f(__nv_bfloat16{});
}

}  // namespace sparge::cuda::predictors::lines

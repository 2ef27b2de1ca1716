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

// Σ over q in [qa, qb) of max(0, a + s·q), s in {−1, 0, 1}.
__device__ __forceinline__ long long clampedLinearSum(long long qa, long long qb, long long a, int s) {
  if (s == 0) return a > 0 ? a * (qb - qa) : 0;
  if (s > 0)
    qa = max(qa, 1 - a);  // a + q > 0
  else
    qb = min(qb, a);  // a − q > 0
  if (qa >= qb) return 0;
  const long long n = qb - qa;
  return n * a + s * ((qa + qb - 1) * n / 2);
}

// Visible pairs in queries [q0, q1) x keys [k0, k1] (core::blockValidArea), in closed form: query q sees
// keys max(k0, q − left) .. min(k1, q + right) of the block, each end constant or q plus a constant, and
// switching at most once (at q = k0 + left and q = k1 − right), so the count is linear in q between those
// two points and the sum over each piece an arithmetic series.
__device__ __forceinline__ long long visibleArea(const Problem& p, long long q0, long long q1, long long k0,
                                                 long long k1) {
  k1 = min(k1, p.Nkv - 1LL);
  if (q0 >= q1 || k0 > k1) return 0;
  const long long right = p.causal ? 0 : p.window.right, left = p.window.left;
  const long long loBreak = left >= 0 ? k0 + left : q1, hiBreak = right >= 0 ? k1 - right : q0;
  long long cuts[4] = {q0, min(q1, max(q0, min(loBreak, hiBreak))), min(q1, max(q0, max(loBreak, hiBreak))),
                       q1};
  long long area = 0;
  for (int i = 0; i < 3; ++i) {
    const long long qa = cuts[i], qb = cuts[i + 1];
    if (qa >= qb) continue;
    const bool loMoves = left >= 0 && qa >= loBreak, hiMoves = right >= 0 && qa < hiBreak;
    const long long a = (hiMoves ? right : k1) + (loMoves ? left : -k0) + 1;
    area += clampedLinearSum(qa, qb, a, int(hiMoves) - int(loMoves));
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

// Lane t of an mma quad holds the head-dim slice [t·D/4, (t+1)·D/4) of its rows: k-step s takes elements
// 4s .. 4s+3 of the slice (its fragment's k indices 2t, 2t+1 and 2t+8, 2t+9). The same permutation of the
// head dim on both operands leaves the dot products' terms unchanged and lets each lane read its slice of a
// row in 16-byte loads. Rows outside [0, n) read as zero.
template <typename T, int D>
__device__ __forceinline__ void sliceOf(const T* base, long long row, int t, long long n,
                                        uint32_t (&w)[D / 8]) {
  const uint4* src = reinterpret_cast<const uint4*>(base + (size_t)row * D + t * (D / 4));
#pragma unroll
  for (int i = 0; i < D / 32; ++i) {
    const uint4 v = row >= 0 && row < n ? src[i] : make_uint4(0u, 0u, 0u, 0u);
    w[4 * i] = v.x;
    w[4 * i + 1] = v.y;
    w[4 * i + 2] = v.z;
    w[4 * i + 3] = v.w;
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

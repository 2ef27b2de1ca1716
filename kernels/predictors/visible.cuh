// Which keys a query sees on the device (and on the host, for launch geometry): core::visibleKeys (top-left
// aligned causal rule, FlashAttention's window) and core's keysSeenBy over a run of queries, in int.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>

#include "common/launch.h"

namespace sparge::cuda::predictors {

struct KeySpan {
  int first = 0, last = -1;  // empty when first > last
  __host__ __device__ __forceinline__ bool empty() const { return first > last; }
};

// The rule's window: `right` is 0 for causal entries whatever the window says, < 0 unbounded.
struct Visibility {
  int nKv = 0, left = -1, right = -1;
  __host__ __device__ __forceinline__ KeySpan keysOf(int q) const {
    KeySpan r{0, nKv - 1};
    if (right >= 0) r.last = std::min(r.last, q + right);
    if (left >= 0) r.first = std::max(0, q - left);
    return r;
  }
  // The union of keysOf(q) over q in [q0, q1) (visible ranges only move right as q grows).
  __host__ __device__ __forceinline__ KeySpan keysSeenBy(int q0, int q1) const {
    KeySpan out{1, 0};
    bool any = false;
    for (int q = q0; q < q1; ++q) {
      const KeySpan r = keysOf(q);
      if (r.empty()) continue;
      out.first = any ? std::min(out.first, r.first) : r.first;
      out.last = any ? std::max(out.last, r.last) : r.last;
      any = true;
    }
    return out;
  }
};

inline Visibility visibilityOf(const Problem& p) {
  return Visibility{p.Nkv, (int)p.window.left, p.causal ? 0 : (int)p.window.right};
}

}  // namespace sparge::cuda::predictors

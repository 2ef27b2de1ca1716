// The MoBA-style gate on the GPU (core/src/method_moba.cpp is the rule): the block-mean keys, then per query
// token q · mean(K block) on the tensor cores, its own block plus the top-k others among the blocks it sees
// (ties to the lower block), the tiles any of a tile's queries chose, and the token pairs the choices cover.
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "common/cuda_util.h"
#include "common/device_common.cuh"
#include "common/head_dim.h"
#include "common/mma_sm80.cuh"
#include "common/upload.h"
#include "predictors/method_kernels.h"
#include "predictors/visible.cuh"
#include "sparge/core/error.h"
#include "stages/stage1_parts.cuh"

namespace sparge::cuda::predictors {
namespace {

constexpr int kTokens = 64;  // query tokens per CTA: a whole part of one tile (BQ is 64 or 128)
// Other blocks per token up to which its running best blocks stay in registers
// (sparge_predict_moba_gate_regs); heads with more go to sparge_predict_moba_gate's score rows, where a warp
// takes the best block kSmallTopk times, or above that bisects the scores' bits for the cut.
constexpr int kRegisterTopk = 8;
constexpr int kSmallTopk = 8;

// Mean of each BK-token key block, summed in fp32 in token order and rounded to the input type, as the CPU
// predictor's meanRows. One thread per (channel, block, batch and KV head).
template <typename T>
__global__ void sparge_predict_moba_keys(const T* __restrict__ k, int Nkv, int D, int BK, int nk,
                                         T* __restrict__ gateKeys) {
  const int c = threadIdx.x, j = blockIdx.x, bhk = blockIdx.y;
  const int r0 = j * BK, r1 = min(Nkv, r0 + BK);
  const T* base = k + (size_t)bhk * Nkv * D;
  float sum = 0.f;
  for (int r = r0; r < r1; ++r) sum += Elem<T>::toF(base[(size_t)r * D + c]);
  gateKeys[((size_t)bhk * nk + j) * D + c] = Elem<T>::fromF(sum / float(r1 - r0));
}

// fp32 as an unsigned key that orders as the floats do (-0 as +0: equal floats tie).
__device__ __forceinline__ unsigned orderKey(float x) {
  const unsigned u = __float_as_uint(x == 0.f ? 0.f : x);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

struct GateArgs {
  const int* heads;
  int Hq, Hkv, nHeads, Nq, Nkv, BQ, BK, nk;
  Visibility vis;
  const int64_t* topk;  // per query head
  MethodRows out;
  unsigned long long* pairs;  // [B*Hq]
};

// Per CTA: counts[nk] (choices of the CTA's tokens), own[nk] and other[nk] flags.
struct TileChoice {
  int* counts;
  uint8_t *own, *other;
};

// The tallies at `at` (nk counts, then the two nk flag rows), cleared by the CTA; the caller syncs.
__device__ TileChoice tileChoiceAt(unsigned char* at, int nk) {
  TileChoice tc;
  tc.counts = reinterpret_cast<int*>(at);
  tc.own = reinterpret_cast<uint8_t*>(tc.counts + nk);
  tc.other = tc.own + nk;
  for (int j = threadIdx.x; j < nk; j += blockDim.x) tc.counts[j] = tc.own[j] = tc.other[j] = 0;
  return tc;
}

// Token t chose block j: its tile's tallies and the pairs of the block it sees.
__device__ __forceinline__ long long choose(const TileChoice& tc, int j, bool own, KeySpan r, int BK) {
  atomicAdd(&tc.counts[j], 1);
  (own ? tc.own : tc.other)[j] = 1;
  return max(0, min(r.last, (j + 1) * BK - 1) - max(r.first, j * BK) + 1);
}

// A CTA's tallies of query tile i into the rows (the counts are integers: exact in any order) and its pairs.
__device__ void writeTileChoice(const GateArgs& g, const TileChoice& tc, int bh, int i,
                                unsigned long long ctaPairs) {
  const size_t rowOff = ((size_t)bh * ((g.Nq + g.BQ - 1) / g.BQ) + i) * g.nk;
  for (int j = threadIdx.x; j < g.nk; j += blockDim.x) {
    if (tc.counts[j]) atomicAdd(&g.out.score[rowOff + j], float(tc.counts[j]));
    if (tc.own[j]) g.out.methodForced[rowOff + j] = 1;
    if (tc.other[j]) g.out.selected[rowOff + j] = 1;
  }
  if (threadIdx.x == 0) atomicAdd(&g.pairs[bh], ctaPairs);
}

// A token's score row as keys for warpNthOf: the blocks of [j0, j1] other than `own`, lane-strided, read from
// shared memory at every pass (rows too long for registers). `own` hands in key 0, which is never counted
// above a cut and so never changes it (at most it opens more bits to the bisection): no branch at each key.
struct ScoreRowKeys {
  const float* s;
  int j0, j1, own;

  template <class F>
  __device__ __forceinline__ void each(F&& f) const {
    for (int j = j0 + (threadIdx.x & 31); j <= j1; j += 32) f(j != own ? orderKey(s[j]) : 0u);
  }
  template <class P>
  __device__ __forceinline__ int count(P&& p) const {
    int c = 0;
    each([&](uint32_t k) { c += p(k); });
    return c;
  }
};

// The blocks of [j0, j1] other than `own` whose key is above `cut`, then those equal to it, lowest first,
// until `want` are chosen. Called by the whole warp; returns the lane's pairs.
__device__ long long chooseByCut(const TileChoice& tc, const float* s, int j0, int j1, int own, unsigned cut,
                                 int want, KeySpan r, int BK) {
  const int lane = threadIdx.x & 31;
  long long pairs = 0;
  const int above = ScoreRowKeys{s, j0, j1, own}.count([&](uint32_t k) { return k > cut; });
  int ties = want - __reduce_add_sync(0xffffffffu, above);
  for (int base = j0; base <= j1; base += 32) {
    const int j = base + lane;
    const bool in = j <= j1 && j != own;
    const unsigned key = in ? orderKey(s[j]) : 0u;
    const unsigned tie = __ballot_sync(0xffffffffu, in && key == cut);
    const bool take = in && (key > cut || (key == cut && __popc(tie & ((1u << lane) - 1u)) < ties));
    if (take) pairs += choose(tc, j, false, r, BK);
    ties -= __popc(tie);
  }
  return pairs;
}

// The `want`-th largest key of the blocks of [j0, j1] other than `own` (want <= their count), by bisection.
// Rows of up to 32·E blocks go into registers first, E a lane (key 0 where a lane has no block, as in
// ScoreRowKeys), so that the passes read no shared memory. Called by the whole warp.
template <int E>
__device__ __forceinline__ unsigned cutInRegisters(const float* s, int j0, int j1, int own, int want) {
  const int lane = threadIdx.x & 31;
  uint32_t key[E];
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const int j = j0 + 32 * e + lane;
    key[e] = j <= j1 && j != own ? orderKey(s[j]) : 0u;
  }
  return warpNthOf<true>(KeysInRegisters<E>{key}, want);
}
__device__ unsigned cutOf(const float* s, int j0, int j1, int own, int want) {
  const int n = j1 - j0 + 1;
  if (n <= 32 * 8) return cutInRegisters<8>(s, j0, j1, own, want);
  if (n <= 32 * 16) return cutInRegisters<16>(s, j0, j1, own, want);
  return warpNthOf<true>(ScoreRowKeys{s, j0, j1, own}, want);
}

// One token's choice from its gate scores s[nk] (the warp's row; taken blocks are overwritten with NaN).
__device__ long long chooseBlocks(const GateArgs& g, const TileChoice& tc, float* s, int t, int64_t topk) {
  const int lane = threadIdx.x & 31;
  const KeySpan r = g.vis.keysOf(t);
  if (r.empty()) return 0;
  if (topk <= 0) return 0;
  const int own = t < g.Nkv && r.first <= t && t <= r.last ? t / g.BK : -1;
  const int j0 = r.first / g.BK, j1 = r.last / g.BK;
  long long pairs = 0;
  if (own >= 0 && lane == 0) pairs += choose(tc, own, true, r, g.BK);
  const int others = j1 - j0 + 1 - (own >= 0 ? 1 : 0);
  const int64_t rest = topk - (own >= 0 ? 1 : 0);
  const int want = rest < others ? (int)rest : others;
  if (want == others) {
    for (int j = j0 + lane; j <= j1; j += 32)
      if (j != own) pairs += choose(tc, j, false, r, g.BK);
  } else if (want <= kSmallTopk) {
    for (int n = 0; n < want; ++n) {  // the best remaining block, ties to the lower one
      unsigned best = 0;
      int bestJ = INT_MAX;
      for (int j = j0 + lane; j <= j1; j += 32) {
        const unsigned key = j != own && !isnan(s[j]) ? orderKey(s[j]) : 0u;
        if (key > best) best = key, bestJ = j;
      }
      const unsigned top = __reduce_max_sync(0xffffffffu, best);
      if (top == 0) break;  // no block left (NaN scores)
      const int j = (int)__reduce_min_sync(0xffffffffu, best == top ? (unsigned)bestJ : UINT_MAX);
      if (lane == 0) {
        pairs += choose(tc, j, false, r, g.BK);
        s[j] = NAN;
      }
      __syncwarp();
    }
  } else if (want > 0) {
    pairs += chooseByCut(tc, s, j0, j1, own, cutOf(s, j0, j1, own, want), want, r, g.BK);
  }
  return pairs;
}

// One CTA per 64 query tokens of one head (y = b * nHeads + head index), W warps: each warp scores 16 tokens
// at a time against every block mean with m16n8k16 (fp32 sums in another order than the CPU's), into its
// [16][nk] row of shared memory, then chooses each token's blocks. Dynamic smem: W*16*nk floats, then the
// tile tallies.
template <typename T, int D>
__global__ void __launch_bounds__(128)
    sparge_predict_moba_gate(const T* __restrict__ q, const T* __restrict__ gateKeys, const GateArgs g) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int W = blockDim.x >> 5, warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gr = lane >> 2,
            tq = lane & 3;
  float* scores = reinterpret_cast<float*>(smem) + (size_t)warp * 16 * g.nk;
  const TileChoice tc = tileChoiceAt(smem + (size_t)W * 16 * g.nk * sizeof(float), g.nk);
  __shared__ unsigned long long ctaPairs;
  if (threadIdx.x == 0) ctaPairs = 0;
  __syncthreads();
  const int y = blockIdx.y, b = y / g.nHeads, hq = g.heads[y % g.nHeads], bh = b * g.Hq + hq;
  const T* qh = q + (size_t)bh * g.Nq * D;
  const T* kh = gateKeys + (size_t)(b * g.Hkv + hq / (g.Hq / g.Hkv)) * g.nk * D;
  const int64_t topk = g.topk[hq];
  if (topk <= kRegisterTopk + 1) return;  // sparge_predict_moba_gate_regs's head
  long long pairs = 0;
  for (int grp = warp; grp < kTokens / 16; grp += W) {
    const int t0 = blockIdx.x * kTokens + grp * 16;
    if (t0 >= g.Nq) break;
    uint32_t a[D / 16][4];
#pragma unroll
    for (int s = 0; s < D / 16; ++s) {
      const int col = s * 16 + 2 * tq;
      a[s][0] = pairAt<T, D>(qh, t0 + gr, col, g.Nq);
      a[s][1] = pairAt<T, D>(qh, t0 + gr + 8, col, g.Nq);
      a[s][2] = pairAt<T, D>(qh, t0 + gr, col + 8, g.Nq);
      a[s][3] = pairAt<T, D>(qh, t0 + gr + 8, col + 8, g.Nq);
    }
    for (int j0 = 0; j0 < g.nk; j0 += 8) {
      float c[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int s = 0; s < D / 16; ++s) {
        const int col = s * 16 + 2 * tq;
        sm80::Mma<T>::run(c, a[s], pairAt<T, D>(kh, j0 + gr, col, g.nk),
                          pairAt<T, D>(kh, j0 + gr, col + 8, g.nk));
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = gr + 8 * (e >> 1), col = j0 + 2 * tq + (e & 1);
        if (col < g.nk) scores[row * g.nk + col] = c[e];
      }
    }
    __syncwarp();
    for (int r = 0; r < 16 && t0 + r < g.Nq; ++r)
      pairs += chooseBlocks(g, tc, scores + r * g.nk, t0 + r, topk);
    __syncwarp();
  }
  for (int o = 16; o > 0; o >>= 1) pairs += __shfl_xor_sync(0xffffffffu, pairs, o);
  if (lane == 0) atomicAdd(&ctaPairs, (unsigned long long)pairs);
  __syncthreads();
  writeTileChoice(g, tc, bh, blockIdx.x * kTokens / g.BQ, ctaPairs);
}

// ---- The per-token choice in registers (heads whose top-k leaves at most kRegisterTopk other blocks) ----

// A token's best candidates so far, best first: (orderKey, block), key 0 = empty. Blocks arrive in
// increasing order, so a newcomer goes in front of an entry only when strictly better: ties to the lower.
template <int K>
struct BestBlocks {
  unsigned key[K];
  int id[K];
  __device__ __forceinline__ void clear() {
#pragma unroll
    for (int e = 0; e < K; ++e) key[e] = 0u, id[e] = INT_MAX;
  }
  __device__ __forceinline__ void offer(unsigned k, int j) {
    if (k <= key[K - 1]) return;
    key[K - 1] = k;
    id[K - 1] = j;
#pragma unroll
    for (int e = K - 1; e > 0; --e)
      if (key[e] > key[e - 1]) {
        const unsigned tk = key[e];
        key[e] = key[e - 1], key[e - 1] = tk;
        const int ti = id[e];
        id[e] = id[e - 1], id[e - 1] = ti;
      }
  }
  __device__ __forceinline__ void pop() {
#pragma unroll
    for (int e = 0; e + 1 < K; ++e) key[e] = key[e + 1], id[e] = id[e + 1];
    key[K - 1] = 0u, id[K - 1] = INT_MAX;
  }
};

// One token's rule: the blocks it may choose ([j0, j1] less `own`) and how many besides its own.
struct TokenRule {
  KeySpan keys;
  int j0, j1, own, want;
  bool ownChosen;
};

__device__ __forceinline__ TokenRule ruleOf(const GateArgs& g, int t, int tileEnd, int64_t topk) {
  TokenRule u{KeySpan{1, 0}, 1, 0, -1, 0, false};
  if (t >= tileEnd) return u;
  u.keys = g.vis.keysOf(t);
  if (u.keys.empty() || topk <= 0) return TokenRule{u.keys, 1, 0, -1, 0, false};
  const KeySpan& r = u.keys;
  u.own = t < g.Nkv && r.first <= t && t <= r.last ? t / g.BK : -1;
  u.ownChosen = u.own >= 0;
  u.j0 = r.first / g.BK, u.j1 = r.last / g.BK;
  const int others = u.j1 - u.j0 + 1 - (u.ownChosen ? 1 : 0);
  const int64_t rest = topk - (u.ownChosen ? 1 : 0);
  u.want = rest < others ? (int)rest : others;
  return u;
}

// The quad that holds a token's scores (lanes 4g..4g+3) merges its four candidate lists: `want` times the
// best head of the four (ties to the lower block) is chosen and its lane moves on. Returns lane 4g's pairs.
template <int K>
__device__ long long mergeQuad(const GateArgs& g, const TileChoice& tc, BestBlocks<K>& best,
                               const TokenRule& u) {
  const bool leader = (threadIdx.x & 3) == 0;
  long long pairs = 0;
  if (u.ownChosen && leader) pairs += choose(tc, u.own, true, u.keys, g.BK);
#pragma unroll
  for (int n = 0; n < K; ++n) {
    unsigned bk = best.key[0];
    int bi = best.id[0];
#pragma unroll
    for (int o = 1; o <= 2; o <<= 1) {
      const unsigned ok = __shfl_xor_sync(0xffffffffu, bk, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (ok > bk || (ok == bk && oi < bi)) bk = ok, bi = oi;
    }
    if (n >= u.want || bk == 0u) continue;  // uniform within the quad
    if (leader) pairs += choose(tc, bi, false, u.keys, g.BK);
    if (best.id[0] == bi) best.pop();
  }
  return pairs;
}

// Warp fragments of M m16 tiles of tokens (16 M tokens from t0, zero past tileEnd) with the channels of
// each pair of k-steps permuted so that every lane reads 8 consecutive channels at once: k-step 2p takes
// channels 32p + 8tq + {0..3}, k-step 2p+1 channels 32p + 8tq + {4..7} (the same permutation for the keys,
// so the dot products are unchanged but for the order of the fp32 sums).
template <typename T, int D, int M>
__device__ __forceinline__ void loadTokens(uint32_t (&a)[M][D / 16][4], const T* qh, int t0, int tileEnd) {
  const int lane = threadIdx.x & 31, gr = lane >> 2, tq = lane & 3;
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int t = t0 + m * 16 + gr + 8 * half;
#pragma unroll
      for (int p = 0; p < D / 32; ++p) {
        const uint4 v = t < tileEnd ? *reinterpret_cast<const uint4*>(qh + (size_t)t * D + p * 32 + tq * 8)
                                    : make_uint4(0, 0, 0, 0);
        a[m][2 * p][half] = v.x, a[m][2 * p][2 + half] = v.y;
        a[m][2 * p + 1][half] = v.z, a[m][2 * p + 1][2 + half] = v.w;
      }
    }
}

// One CTA per query tile of one head (y = b * nHeads + head index), a warp per 16 M of its tokens: the gate
// scores of 8 blocks at a time on the tensor cores, each offered to its token's running best K in the
// registers of the lane that holds it, then each quad's merge. No score rows: shared memory holds only the
// tile's tallies (nk ints and 2 nk flags).
template <typename T, int D, int M, int K>
__global__ void __launch_bounds__(256)
    sparge_predict_moba_gate_regs(const T* __restrict__ q, const T* __restrict__ gateKeys, const GateArgs g) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gr = lane >> 2, tq = lane & 3;
  const int y = blockIdx.y, b = y / g.nHeads, hq = g.heads[y % g.nHeads], bh = b * g.Hq + hq;
  const int64_t topk = g.topk[hq];
  if (topk > kRegisterTopk + 1) return;  // sparge_predict_moba_gate's head
  const TileChoice tc = tileChoiceAt(smem, g.nk);
  __shared__ unsigned long long ctaPairs;
  if (threadIdx.x == 0) ctaPairs = 0;
  __syncthreads();
  const int i = blockIdx.x, tileEnd = min(g.Nq, (i + 1) * g.BQ), t0 = i * g.BQ + warp * 16 * M;
  const T* qh = q + (size_t)bh * g.Nq * D;
  const T* kh = gateKeys + (size_t)(b * g.Hkv + hq / (g.Hq / g.Hkv)) * g.nk * D;
  long long pairs = 0;
  if (t0 < tileEnd) {
    TokenRule rule[M][2];
    int lo = INT_MAX, hi = -1;
#pragma unroll
    for (int m = 0; m < M; ++m)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        rule[m][h] = ruleOf(g, t0 + m * 16 + gr + 8 * h, tileEnd, topk);
        if (rule[m][h].want > 0) lo = min(lo, rule[m][h].j0), hi = max(hi, rule[m][h].j1);
      }
    lo = __reduce_min_sync(0xffffffffu, (unsigned)lo);
    hi = (int)__reduce_max_sync(0xffffffffu, (unsigned)(hi + 1)) - 1;
    uint32_t a[M][D / 16][4];
    loadTokens<T, D, M>(a, qh, t0, tileEnd);
    BestBlocks<K> best[M][2];
#pragma unroll
    for (int m = 0; m < M; ++m) best[m][0].clear(), best[m][1].clear();
    for (int jb = hi >= 0 ? lo / 8 * 8 : 0; jb <= hi; jb += 8) {
      float c[M][4] = {};
      const int row = jb + gr;
#pragma unroll
      for (int p = 0; p < D / 32; ++p) {
        const uint4 v = row < g.nk ? *reinterpret_cast<const uint4*>(kh + (size_t)row * D + p * 32 + tq * 8)
                                   : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int m = 0; m < M; ++m) {
          sm80::Mma<T>::run(c[m], a[m][2 * p], v.x, v.y);
          sm80::Mma<T>::run(c[m], a[m][2 * p + 1], v.z, v.w);
        }
      }
#pragma unroll
      for (int m = 0; m < M; ++m)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const TokenRule& u = rule[m][e >> 1];
          const int j = jb + 2 * tq + (e & 1);
          if (j >= u.j0 && j <= u.j1 && j != u.own && !isnan(c[m][e]))
            best[m][e >> 1].offer(orderKey(c[m][e]), j);
        }
    }
#pragma unroll
    for (int m = 0; m < M; ++m)
#pragma unroll
      for (int h = 0; h < 2; ++h) pairs += mergeQuad<K>(g, tc, best[m][h], rule[m][h]);
  }
  for (int o = 16; o > 0; o >>= 1) pairs += __shfl_xor_sync(0xffffffffu, pairs, o);
  if (lane == 0) atomicAdd(&ctaPairs, (unsigned long long)pairs);
  __syncthreads();
  writeTileChoice(g, tc, bh, i, ctaPairs);
}

// Each tile's choice counts into the share of its queries, and the pair counts into doubles.
__global__ void sparge_predict_moba_shares(const int* __restrict__ heads, int Hq, int nHeads, int Nq, int BQ,
                                           int nq, int nk, const unsigned long long* __restrict__ pairs,
                                           MethodRows out) {
  const int i = blockIdx.x, y = blockIdx.y, b = y / nHeads, bh = b * Hq + heads[y % nHeads];
  const float rows = float(min(BQ, Nq - i * BQ));
  float* score = out.score + ((size_t)bh * nq + i) * nk;
  for (int j = threadIdx.x; j < nk; j += blockDim.x) score[j] /= rows;
  if (i == 0 && threadIdx.x == 0) out.elementPairs[bh] = double(pairs[bh]);
}

// Warps per CTA (4, 2 or 1, each with the score rows of 16 tokens in shared memory) that keep the most warps
// on an SM, more warps a CTA on ties: a warp chooses one token at a time, each step of its bisection waiting
// for a warp-wide sum, so warps in flight are what hides that. Throws when no count fits.
int gateWarps(const void* kernel, int nk, size_t* smem) {
  cudaFuncAttributes attrs{};
  check(cudaFuncGetAttributes(&attrs, kernel), "cudaFuncGetAttributes(sparge_predict_moba_gate)");
  const size_t limit = deviceSharedMemoryOptin() - attrs.sharedSizeBytes;  // less the kernel's static part
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)limit),
        "cudaFuncSetAttribute(sparge_predict_moba_gate)");
  const auto bytesOf = [nk](int w) {
    return (size_t)w * 16 * nk * sizeof(float) + (size_t)nk * (sizeof(int) + 2);
  };
  int best = 0, bestOnSm = 0;
  for (int w : {4, 2, 1}) {
    const size_t bytes = bytesOf(w);
    int ctas = 0;
    if (bytes <= limit)
      check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas, kernel, w * 32, bytes),
            "cudaOccupancyMaxActiveBlocksPerMultiprocessor(sparge_predict_moba_gate)");
    if (w * ctas > bestOnSm) best = w, bestOnSm = w * ctas, *smem = bytes;
  }
  if (best == 0)
    throw Error("MoBA gate", std::to_string(nk) + " key blocks need " + std::to_string(bytesOf(1) / 1024) +
                                 " KB of shared memory a block; this GPU allows " +
                                 std::to_string(limit / 1024) + " KB: use --engine cpu");
  return best;
}

// The register kernel for every head whose top-k leaves at most kRegisterTopk other blocks (M m16 tiles of
// tokens a warp: 2 up to D 128, 1 at 256, for the registers), K the largest such count rounded up.
template <typename T, int D>
void gateInRegisters(const MethodLaunch& l, const T* gateKeys, const GateArgs& g, int64_t maxTopk) {
  constexpr int M = D <= 128 ? 2 : 1;
  const size_t smem = (size_t)g.nk * (sizeof(int) + 2);
  auto kernel = maxTopk <= 3 ? sparge_predict_moba_gate_regs<T, D, M, 2>
                             : sparge_predict_moba_gate_regs<T, D, M, kRegisterTopk>;
  if (smem > 48 * 1024)
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
          "cudaFuncSetAttribute(sparge_predict_moba_gate_regs)");
  const Problem& p = l.problem;
  kernel<<<dim3(p.nq, p.B * p.nHeads), p.BQ / (16 * M) * 32, smem, l.stream>>>(static_cast<const T*>(l.qkv.q),
                                                                               gateKeys, g);
  checkLaunch("sparge_predict_moba_gate_regs");
}

template <typename T, int D>
void gateInRows(const MethodLaunch& l, const T* gateKeys, const GateArgs& g) {
  size_t smem = 0;
  auto kernel = sparge_predict_moba_gate<T, D>;
  const int warps = gateWarps(reinterpret_cast<const void*>(kernel), g.nk, &smem);
  const Problem& p = l.problem;
  dim3 grid((p.Nq + kTokens - 1) / kTokens, p.B * p.nHeads);
  kernel<<<grid, warps * 32, smem, l.stream>>>(static_cast<const T*>(l.qkv.q), gateKeys, g);
  checkLaunch("sparge_predict_moba_gate");
}

// Heads with few choices per token in registers, the others (when there are any) through score rows.
template <typename T, int D>
void gate(const MethodLaunch& l, const T* gateKeys, const GateArgs& g, const std::vector<int64_t>& topk) {
  int64_t fewest = std::numeric_limits<int64_t>::max(), most = 0;
  for (int64_t k : topk) fewest = std::min(fewest, k), most = std::max(most, k);
  if (fewest <= kRegisterTopk + 1)
    gateInRegisters<T, D>(l, gateKeys, g, std::min<int64_t>(most, kRegisterTopk + 1));
  if (most > kRegisterTopk + 1) gateInRows<T, D>(l, gateKeys, g);
}

template <typename T>
void gateKeysOf(const MethodLaunch& l, T* gateKeys) {
  const Problem& p = l.problem;
  sparge_predict_moba_keys<T><<<dim3(p.nk, p.B * p.Hkv), p.D, 0, l.stream>>>(
      static_cast<const T*>(l.qkv.k), p.Nkv, p.D, p.BK, p.nk, gateKeys);
  checkLaunch("sparge_predict_moba_keys");
}

}  // namespace

void mobaSelect(const MethodLaunch& l, MethodRows& rows, DeviceBuffer& scratch) {
  const Problem& p = l.problem;
  const size_t keysBytes = ((size_t)p.B * p.Hkv * p.nk * p.D * 2 + 15) / 16 * 16;
  const size_t topkBytes = sizeof(int64_t) * p.Hq, pairBytes = sizeof(unsigned long long) * p.B * p.Hq;
  scratch.reserve(keysBytes + topkBytes + pairBytes, "MoBA gate keys");
  auto* base = scratch.as<unsigned char>();
  auto* topk = reinterpret_cast<int64_t*>(base + keysBytes);
  auto* pairs = reinterpret_cast<unsigned long long*>(base + keysBytes + topkBytes);
  std::vector<int64_t> hostTopk(size_t(p.Hq));
  for (int h = 0; h < p.Hq; ++h) hostTopk[size_t(h)] = (*l.params)[size_t(h)].moba.topk;
  uploadAsync(topk, hostTopk, l.stream);
  check(cudaMemsetAsync(pairs, 0, pairBytes, l.stream), "memset");
  GateArgs g{p.heads, p.Hq, p.Hkv,           p.nHeads, p.Nq, p.Nkv, p.BQ,
             p.BK,    p.nk, visibilityOf(p), topk,     rows, pairs};
  withHeadDim(p.D, "MoBA gate", [&](auto d) {
    constexpr int D = decltype(d)::value;
    if (l.qkv.et == ElemType::F16) {
      gateKeysOf<__half>(l, reinterpret_cast<__half*>(base));
      gate<__half, D>(l, reinterpret_cast<const __half*>(base), g, hostTopk);
    } else {
      gateKeysOf<__nv_bfloat16>(l, reinterpret_cast<__nv_bfloat16*>(base));
      gate<__nv_bfloat16, D>(l, reinterpret_cast<const __nv_bfloat16*>(base), g, hostTopk);
    }
  });
  sparge_predict_moba_shares<<<dim3(p.nq, p.B * p.nHeads), 128, 0, l.stream>>>(p.heads, p.Hq, p.nHeads, p.Nq,
                                                                               p.BQ, p.nq, p.nk, pairs, rows);
  checkLaunch("sparge_predict_moba_shares");
}

}  // namespace sparge::cuda::predictors

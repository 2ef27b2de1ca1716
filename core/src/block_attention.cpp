// Block-sparse attention in fp32 with SpargeAttn's PV skip (SPARGE_SPEC.md §4.3-4.4) and exact
// element-level causal masking. Used for the sparse run and, with every valid block and no skipping,
// for the dense fp32 reference, so that both share one code path.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "sparge/core/cpu_engine.h"
#include "sparge/core/stage1.h"

namespace sparge::core {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr double kLog2e = 1.4426950408889634;

// 2^x for x <= 0, exactly 0 below -126 (masked logits are -inf). Branch-free so that the compiler
// vectorises the loops that call it; relative error ~2e-7 (degree-6 polynomial on [-0.5, 0.5]).
inline float exp2NonPositive(float x) {
  const float xc = x < -126.0f ? -126.0f : x;
  const float magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to the nearest integer
  const float n = (xc + magic) - magic;
  const float f = xc - n;
  float p = 1.5403530393381606e-4f;
  p = p * f + 1.3333558146428443e-3f;
  p = p * f + 9.6181291076284772e-3f;
  p = p * f + 5.5504108664821580e-2f;
  p = p * f + 2.4022650695910071e-1f;
  p = p * f + 6.9314718055994531e-1f;
  p = p * f + 1.0f;
  const int32_t bits = (int32_t(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return x < -126.0f ? 0.0f : p * scale;
}

}  // namespace

// Compiled for AVX-512, AVX2+FMA and baseline x86-64; the loader picks the best the CPU has.
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) AttentionOutput
blockSparseAttention(const float* q, const float* k, const float* v, int64_t nQ, int64_t nKv, int64_t d,
                     int64_t dv, double scale, bool causal, const Geometry& g, const uint8_t* mask,
                     double lambda, bool wantBlockMass) {
  const int BQ = g.blockQ, BK = g.blockK;
  const int nq = int(ceilDiv(nQ, BQ)), nk = int(ceilDiv(nKv, BK));
  const int64_t nKvPad = int64_t(nk) * BK;
  const int tail = g.tailBlocks();

  AttentionOutput out;
  out.out.assign(size_t(nQ) * dv, 0.0f);
  out.pvSkipped.assign(size_t(nq) * nk, 0);
  if (wantBlockMass) out.blockMass.assign(size_t(nq) * nk, 0.0f);

  // K transposed to [d][nKvPad] with zero padding: the score loop then runs over contiguous keys.
  std::vector<float> kt(size_t(d) * nKvPad, 0.0f);
  for (int64_t r = 0; r < nKv; ++r)
    for (int64_t c = 0; c < d; ++c) kt[size_t(c) * nKvPad + r] = k[r * d + c];

  const float c2 = float(scale * kLog2e);  // logits in base 2, as the kernels compute them
  std::vector<float> qs(size_t(BQ) * d), s(size_t(BQ) * BK), acc(size_t(BQ) * dv);
  std::vector<float> m(BQ), l(BQ), rowMax(BQ);
  std::vector<int> cols;
  // For the block mass of the reference: per row and visited block, the partial sum and the max used.
  std::vector<float> partSum, partMax;

  for (int i = 0; i < nq; ++i) {
    const int64_t r0 = int64_t(i) * BQ;
    const int rows = int(std::min<int64_t>(BQ, nQ - r0));
    for (int r = 0; r < rows; ++r)
      for (int64_t c = 0; c < d; ++c) qs[size_t(r) * d + c] = q[(r0 + r) * d + c] * c2;
    std::fill(m.begin(), m.end(), kNegInf);
    std::fill(l.begin(), l.end(), 0.0f);
    std::fill(acc.begin(), acc.end(), 0.0f);

    cols.clear();
    for (int j = 0; j < nk; ++j)
      if (mask[size_t(i) * nk + j]) cols.push_back(j);
    const int n = int(cols.size());
    if (wantBlockMass) {
      partSum.assign(size_t(rows) * n, 0.0f);
      partMax.assign(size_t(rows) * n, kNegInf);
    }

    for (int t = 0; t < n; ++t) {
      const int j = cols[t];
      const int64_t k0 = int64_t(j) * BK;
      // S = Qs · K_jᵀ
      for (int r = 0; r < rows; ++r) {
        float* srow = s.data() + size_t(r) * BK;
        std::fill(srow, srow + BK, 0.0f);
        const float* qrow = qs.data() + size_t(r) * d;
        for (int64_t c = 0; c < d; ++c) {
          const float qv = qrow[c];
          const float* krow = kt.data() + size_t(c) * nKvPad + k0;
          for (int x = 0; x < BK; ++x) srow[x] += qv * krow[x];
        }
        // Element masks: keys past the end, and (causal, top-left) keys after the query.
        const int64_t query = r0 + r;
        int validCols = int(std::min<int64_t>(BK, nKv - k0));
        if (causal) validCols = int(std::clamp<int64_t>(query - k0 + 1, 0, validCols));
        for (int x = validCols; x < BK; ++x) srow[x] = kNegInf;
        float mx = kNegInf;
        for (int x = 0; x < validCols; ++x) mx = std::max(mx, srow[x]);
        rowMax[r] = mx;
      }
      // PV skip (§4.4): one decision for the whole Q tile, from the largest rise of any row's max.
      // Block 0 of the row and the tail blocks are never skipped.
      const bool eligible = t > 0 && t < n - tail;
      if (eligible) {
        float delta = kNegInf;
        for (int r = 0; r < rows; ++r) {
          if (rowMax[r] == kNegInf) continue;  // nothing visible in this block for this row
          delta =
              std::max(delta, m[r] == kNegInf ? std::numeric_limits<float>::infinity() : rowMax[r] - m[r]);
        }
        if (double(delta) + lambda <= 0.0) {
          out.pvSkipped[size_t(i) * nk + j] = 1;
          continue;
        }
      }
      for (int r = 0; r < rows; ++r) {
        const float mNew = std::max(m[r], rowMax[r]);
        if (mNew == kNegInf) continue;  // the row has seen no visible key yet
        const float alpha = exp2NonPositive(m[r] - mNew);
        float* srow = s.data() + size_t(r) * BK;
        float sum = 0.0f;
        for (int x = 0; x < BK; ++x) {
          srow[x] = exp2NonPositive(srow[x] - mNew);
          sum += srow[x];
        }
        l[r] = l[r] * alpha + sum;
        m[r] = mNew;
        float* arow = acc.data() + size_t(r) * dv;
        for (int64_t e = 0; e < dv; ++e) arow[e] *= alpha;
        const int validCols = int(std::min<int64_t>(BK, nKv - k0));
        for (int x = 0; x < validCols; ++x) {
          const float p = srow[x];
          const float* vrow = v + (k0 + x) * dv;
          for (int64_t e = 0; e < dv; ++e) arow[e] += p * vrow[e];
        }
        if (wantBlockMass) {
          partSum[size_t(r) * n + t] = sum;
          partMax[size_t(r) * n + t] = mNew;
        }
      }
    }

    for (int r = 0; r < rows; ++r) {
      float* dst = out.out.data() + (r0 + r) * dv;
      const float* arow = acc.data() + size_t(r) * dv;
      if (l[r] > 0.0f) {
        const float inv = 1.0f / l[r];
        for (int64_t e = 0; e < dv; ++e) dst[e] = arow[e] * inv;
      } else {
        ++out.emptyRows;  // no visible key among the selected blocks: output defined as 0
      }
    }
    if (wantBlockMass) {
      for (int t = 0; t < n; ++t) {
        double mass = 0;
        for (int r = 0; r < rows; ++r) {
          if (l[r] <= 0.0f || partMax[size_t(r) * n + t] == kNegInf) continue;
          mass += double(partSum[size_t(r) * n + t]) * std::exp2(double(partMax[size_t(r) * n + t]) - m[r]) /
                  l[r];
        }
        out.blockMass[size_t(i) * nk + cols[t]] = float(mass / rows);
      }
    }
  }
  (void)nKvPad;
  return out;
}

}  // namespace sparge::core

// Stage 2 on the CPU: block-sparse attention with SpargeAttn's PV skip, exact element masks and the three
// numerics (docs/numerics.md). One query tile at a time; per key block the scores come from one matrix
// product per numerics family and every pass (deployed run, exact-numerics run, dense references) that
// visits the block consumes them with its own online softmax.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "gemm.h"
#include "sparge/core/cpu_engine.h"
#include "sparge/core/half.h"
#include "sparge/core/quant.h"
#include "sparge/core/stage1.h"

namespace sparge::core {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr double kLog2e = 1.4426950408889634;
// Upstream's FP8 offset: P = 2^(s - m + 8.807) spans e4m3's [0, 448] before the conversion.
constexpr float kFp8Offset = 8.807f;
// Keys per tensor-core step of the sm80 P·V (m16n8k16): the fp16 accumulator is rounded after each.
constexpr int kFp16Step = 16;

bool quantized(Numerics n) {
  return n != Numerics::None;
}

// The numerics of a pass's P·V product and output (its scores follow PassSpec::numerics).
Numerics pvNumerics(const PassSpec& p) {
  return p.exactPv ? Numerics::None : p.numerics;
}

// 2^x for x < 128, exactly 0 below -126 (masked logits are -inf). Branch-free so that the compiler
// vectorises the loops that call it; relative error ~2e-7 (degree-6 polynomial on [-0.5, 0.5]).
inline float exp2Fast(float x) {
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

// The element loops below are compiled for AVX-512, AVX2+FMA and baseline x86-64; the loader picks one.
// Reductions keep 16 partial results whatever the vector width, so every variant gives the same bits.
#define SPARGE_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
constexpr int kLanes = 16;
// GCC warns that passing 64-byte vectors changes the ABI without AVX-512; these helpers are always inlined
// into the cloned loops, so no call ever passes one.
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float Lanes __attribute__((vector_size(kLanes * sizeof(float))));

[[gnu::always_inline]] inline Lanes loadLanes(const float* p) {
  Lanes v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

[[gnu::always_inline]] inline Lanes splat(float x) {
  return Lanes{} + x;
}

[[gnu::always_inline]] inline float sumOfLanes(const Lanes& v) {
  float s = 0.0f;
  for (int k = 0; k < kLanes; ++k) s += v[k];
  return s;
}

// Largest of x[0, n) (-inf when empty), and in *probe a value that is NaN when some x is NaN or infinite.
[[gnu::always_inline]] inline float maxAndProbe(const float* x, int n, float* probe) {
  Lanes m = splat(kNegInf), p = Lanes{};
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const Lanes v = loadLanes(x + i);
    m = v > m ? v : m;
    p += v * 0.0f;  // inf · 0 and NaN · 0 are NaN
  }
  float mx = kNegInf;
  for (int k = 0; k < kLanes; ++k) mx = m[k] > mx ? m[k] : mx;
  float pr = sumOfLanes(p);
  for (; i < n; ++i) {
    mx = x[i] > mx ? x[i] : mx;
    pr += x[i] * 0.0f;
  }
  *probe += pr;
  return mx;
}

// s [rows, ld]: keys outside [lo[r], hi[r]] (block-local, inclusive; empty when lo > hi) become -inf and
// rowMax[r] is the largest visible score. Returns true when a visible score is NaN or infinite.
SPARGE_VECTOR_CLONES bool maskAndMax(float* s, int rows, int cols, int ld, const int* lo, const int* hi,
                                     float* rowMax) {
  float probe = 0.0f;
  for (int r = 0; r < rows; ++r) {
    float* row = s + size_t(r) * ld;
    const int a = std::max(lo[r], 0), b = std::min(hi[r], cols - 1);
    if (a > b) {
      for (int x = 0; x < cols; ++x) row[x] = kNegInf;
      rowMax[r] = kNegInf;
      continue;
    }
    rowMax[r] = maxAndProbe(row + a, b - a + 1, &probe);
    for (int x = 0; x < a; ++x) row[x] = kNegInf;
    for (int x = b + 1; x < cols; ++x) row[x] = kNegInf;
  }
  return !(probe == probe);
}

// s · factor for the INT8 scores (one dequantisation factor per query tile and key block).
SPARGE_VECTOR_CLONES void scaleScores(float* s, int rows, int cols, int ld, float factor) {
  for (int r = 0; r < rows; ++r)
    for (int x = 0; x < cols; ++x) s[size_t(r) * ld + x] *= factor;
}

enum class PRounding { None, Fp16, E4m3 };

// p = 2^(s + offset[r]) into p [rows, ldp] (s [rows, lds]); rowSum[r] = Σ p before rounding (None, E4m3: the
// FP8 kernels sum the fp32 P) or after it (Fp16: the sm80 kernel sums the fp16 P); then p is rounded as the
// P·V operand.
template <PRounding R>
inline void exponentiateRows(const float* s, int lds, float* p, int ldp, int rows, int cols,
                             const float* offset, float* rowSum) {
  for (int r = 0; r < rows; ++r) {
    const float* srow = s + size_t(r) * lds;
    float* prow = p + size_t(r) * ldp;
    const float off = offset[r];
    for (int x = 0; x < cols; ++x) {
      const float e = exp2Fast(srow[x] + off);
      prow[x] = R == PRounding::Fp16 ? roundToHalf(e) : e;
    }
    Lanes acc{};
    int x = 0;
    for (; x + kLanes <= cols; x += kLanes) acc += loadLanes(prow + x);
    float sum = sumOfLanes(acc);
    for (; x < cols; ++x) sum += prow[x];
    rowSum[r] = sum;
    if (R == PRounding::E4m3)
      for (int y = 0; y < cols; ++y) prow[y] = roundToE4m3(prow[y]);
  }
}

SPARGE_VECTOR_CLONES void exponentiate(const float* s, int lds, float* p, int ldp, int rows, int cols,
                                       const float* offset, PRounding rounding, float* rowSum) {
  switch (rounding) {
    case PRounding::None:
      return exponentiateRows<PRounding::None>(s, lds, p, ldp, rows, cols, offset, rowSum);
    case PRounding::Fp16:
      return exponentiateRows<PRounding::Fp16>(s, lds, p, ldp, rows, cols, offset, rowSum);
    case PRounding::E4m3:
      return exponentiateRows<PRounding::E4m3>(s, lds, p, ldp, rows, cols, offset, rowSum);
  }
}

SPARGE_VECTOR_CLONES void roundToHalfInPlace(float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = roundToHalf(x[i]);
}

// m_new = max(m, rowMax) and alpha = 2^(m - m_new) per row; a row that has seen no visible key yet keeps
// m = -inf, alpha 1 and gets nothing added. Returns whether some row has seen a key.
SPARGE_VECTOR_CLONES bool advanceMaxima(const float* m, const float* rowMax, int rows, float* mNew,
                                        float* alpha) {
  int any = 0;
  for (int r = 0; r < rows; ++r) {
    mNew[r] = m[r] > rowMax[r] ? m[r] : rowMax[r];
    alpha[r] = mNew[r] == kNegInf ? 1.0f : exp2Fast(m[r] - mNew[r]);
    any |= int(mNew[r] != kNegInf);
  }
  return any != 0;
}

// acc = acc · alpha[r] + g, row-wise ([rows, dv]).
SPARGE_VECTOR_CLONES void rescaleAdd(float* acc, const float* g, const float* alpha, int rows, int dv) {
  for (int r = 0; r < rows; ++r)
    for (int e = 0; e < dv; ++e)
      acc[size_t(r) * dv + e] = acc[size_t(r) * dv + e] * alpha[r] + g[size_t(r) * dv + e];
}

// The operands of one head in every numerics a set of passes needs.
struct Operands {
  // Exact scores: (q · scale · log2e) · kᵀ.
  std::vector<float> qScaled;
  // INT8 scores: codes of Q per query tile and of (smoothed) K per key block, fp32-exact products.
  Int8Rows q8, k8;
  float int8Factor = 0;  // sm_scale · log2e in fp32, as the kernel folds it with the two block scales
  // P·V operands: fp16 V (sm80) and e4m3 V with per-channel scales (sm89/sm90).
  std::vector<float> vHalf;
  Fp8Columns v8;
};

Operands prepareOperands(const HeadOperands& h, const Geometry& g, const std::vector<PassSpec>& passes) {
  Operands o;
  bool exact = false, int8 = false, fp16 = false, fp8 = false;
  for (const PassSpec& p : passes) {
    exact |= p.numerics == Numerics::None;
    int8 |= quantized(p.numerics);
    fp16 |= pvNumerics(p) == Numerics::Int8Fp16;
    fp8 |= pvNumerics(p) == Numerics::Int8Fp8;
  }
  if (exact) {
    const float c2 = float(h.scale * kLog2e);  // logits in base 2, as the kernels compute them
    o.qScaled.resize(size_t(h.nQ * h.d));
    for (size_t i = 0; i < o.qScaled.size(); ++i) o.qScaled[i] = h.q[i] * c2;
  }
  if (int8) {
    o.q8 = quantizeRowsInt8(h.q, h.nQ, h.d, g.blockQ, nullptr, h.dtype);
    o.k8 = quantizeRowsInt8(h.k, h.nKv, h.d, g.blockK, h.keyMean, h.dtype);
    o.int8Factor = float(h.scale) * float(kLog2e);
  }
  if (fp16) {
    o.vHalf.resize(size_t(h.nKv * h.dv));
    for (size_t i = 0; i < o.vHalf.size(); ++i) o.vHalf[i] = roundToHalf(h.v[i]);
  }
  if (fp8) o.v8 = quantizeColumnsFp8(h.v, h.nKv, h.dv, h.nKv);
  return o;
}

// Online-softmax state of one pass over one query tile.
struct PassState {
  const PassSpec* spec = nullptr;
  AttentionOutput* out = nullptr;
  int visits = 0;  // key blocks of this tile's row in the pass's mask
  int t = 0;       // index of the next visited block
  std::vector<float> m, l, acc, mNew, alpha;
  std::vector<float> partSum, partMax;  // block mass: per row and visited block
  std::vector<int> visited;             // key block of each visited index (block mass)
};

// P·V of one key block for rows whose new running maxima are `mNew`: kept so that a second pass with the
// same maxima reuses it (the dense reference and the sparse run agree on most blocks).
struct BlockProduct {
  bool valid = false;
  std::vector<float> mNew, rowSum, g;
};

// Scores of one key block of the current query tile in one numerics family. Every block is scored by its own
// matrix product of a fixed shape: the product's rounding depends on its shape, and a block's scores must not
// depend on which other blocks a run visits (a cached reference must not change the sparse run's bits).
struct BlockScores {
  std::vector<float> s;       // [BQ, BK], base-2 logits, -inf where masked
  std::vector<float> rowMax;  // [BQ]
};

class TileRunner {
 public:
  TileRunner(const HeadOperands& h, const Geometry& g, const Operands& ops, std::vector<PassState>& passes)
      : h_(h), g_(g), ops_(ops), passes_(passes), nk_(int(ceilDiv(h.nKv, g.blockK))) {
    for (BlockScores& b : scores_) {
      b.s.resize(size_t(g.blockQ) * g.blockK);
      b.rowMax.resize(g.blockQ);
    }
    p_.resize(size_t(g.blockQ) * g.blockK);
    for (auto* v : {&offset_, &rowSum_}) v->resize(g.blockQ);
    for (auto* v : {&lo_, &hi_, &loBlock_, &hiBlock_}) v->resize(g.blockQ);
  }

  void run(int i);

 private:
  void startTile(int i);
  void scoreBlock(int j, bool int8);
  void visit(PassState& p, int j);
  const BlockProduct& product(const PassState& p);
  void finishTile(PassState& p, int i);
  const BlockScores& scoresOf(Numerics n) const { return scores_[quantized(n) ? 1 : 0]; }

  const HeadOperands& h_;
  const Geometry& g_;
  const Operands& ops_;
  std::vector<PassState>& passes_;
  int nk_;
  int r0_ = 0, rows_ = 0, k0_ = 0, cols_ = 0;
  BlockScores scores_[2];  // exact, int8
  std::vector<float> p_, offset_, rowSum_;
  std::vector<int> lo_, hi_, loBlock_, hiBlock_;  // visible keys per row: global, then block-local
  BlockProduct shared_[4];                        // by numerics; [3]: INT8 scores, exact P·V
};

void TileRunner::startTile(int i) {
  r0_ = i * g_.blockQ;
  rows_ = int(std::min<int64_t>(g_.blockQ, h_.nQ - r0_));
  for (PassState& p : passes_) {
    p.visits = 0;
    for (int j = 0; j < nk_; ++j) p.visits += p.spec->mask[size_t(i) * nk_ + j] ? 1 : 0;
    p.t = 0;
    p.m.assign(rows_, kNegInf);
    p.l.assign(rows_, 0.0f);
    p.acc.assign(size_t(rows_) * h_.dv, 0.0f);
    p.mNew.resize(rows_);
    p.alpha.resize(rows_);
    if (p.spec->wantBlockMass) {
      p.partSum.assign(size_t(rows_) * p.visits, 0.0f);
      p.partMax.assign(size_t(rows_) * p.visits, kNegInf);
      p.visited.clear();
    }
  }
}

void TileRunner::scoreBlock(int j, bool int8) {
  BlockScores& b = scores_[int8 ? 1 : 0];
  const int BK = g_.blockK, d = int(h_.d);
  float* s = b.s.data();
  if (int8) {
    gemm::multiply(rows_, cols_, d, ops_.q8.codes.data() + size_t(r0_) * d, d,
                   ops_.k8.codes.data() + size_t(k0_) * d, d, true, s, BK, false);
    // The kernel's factor: (sm_scale · log2e) · (q_scale · k_scale), in fp32.
    scaleScores(s, rows_, cols_, BK, ops_.int8Factor * (ops_.q8.scales[r0_ / g_.blockQ] * ops_.k8.scales[j]));
  } else {
    gemm::multiply(rows_, cols_, d, ops_.qScaled.data() + size_t(r0_) * d, d, h_.k + size_t(k0_) * d, d, true,
                   s, BK, false);
  }
  for (int r = 0; r < rows_; ++r) {
    loBlock_[r] = lo_[r] - k0_;
    hiBlock_[r] = hi_[r] - k0_;
  }
  if (maskAndMax(s, rows_, cols_, BK, loBlock_.data(), hiBlock_.data(), b.rowMax.data()))
    for (PassState& p : passes_) p.out->nonFinite = true;
}

const BlockProduct& TileRunner::product(const PassState& p) {
  const Numerics n = pvNumerics(*p.spec);
  BlockProduct& bp = shared_[p.spec->exactPv ? 3 : int(n)];
  if (bp.valid && std::equal(p.mNew.begin(), p.mNew.end(), bp.mNew.begin())) return bp;
  const int BK = g_.blockK;
  const int dv = int(h_.dv);
  // Rows that have seen no visible key yet (m = -inf) get P = 0.
  for (int r = 0; r < rows_; ++r)
    offset_[r] =
        p.mNew[r] == kNegInf ? kNegInf : (n == Numerics::Int8Fp8 ? -p.mNew[r] + kFp8Offset : -p.mNew[r]);
  const PRounding rounding = n == Numerics::Int8Fp8
                                 ? PRounding::E4m3
                                 : (n == Numerics::Int8Fp16 ? PRounding::Fp16 : PRounding::None);
  bp.rowSum.resize(rows_);
  exponentiate(scoresOf(p.spec->numerics).s.data(), BK, p_.data(), BK, rows_, cols_, offset_.data(), rounding,
               bp.rowSum.data());
  bp.g.resize(size_t(rows_) * dv);
  if (n == Numerics::Int8Fp16) {
    // fp16 accumulation in a fresh per-block buffer, rounded after every 16-key tensor-core step.
    for (int c0 = 0; c0 < cols_; c0 += kFp16Step) {
      gemm::multiply(rows_, dv, std::min(kFp16Step, cols_ - c0), p_.data() + c0, BK,
                     ops_.vHalf.data() + size_t(k0_ + c0) * dv, dv, false, bp.g.data(), dv, c0 > 0);
      roundToHalfInPlace(bp.g.data(), bp.g.size());
    }
  } else {
    const float* v = n == Numerics::Int8Fp8 ? ops_.v8.codes.data() : h_.v;
    gemm::multiply(rows_, dv, cols_, p_.data(), BK, v + size_t(k0_) * dv, dv, false, bp.g.data(), dv, false);
  }
  bp.mNew = p.mNew;
  bp.valid = true;
  return bp;
}

void TileRunner::visit(PassState& p, int j) {
  const int t = p.t++;
  const float* mx = scoresOf(p.spec->numerics).rowMax.data();
  // PV skip (docs/method.md): one decision for the whole query tile, from the largest rise of any row's
  // running max. The first visited block and the tail blocks are never skipped.
  const bool eligible = t > 0 && t < p.visits - g_.tailBlocks();
  if (eligible) {
    float delta = kNegInf;
    for (int r = 0; r < rows_; ++r) {
      if (mx[r] == kNegInf) continue;  // nothing visible in this block for this row
      delta = std::max(delta, p.m[r] == kNegInf ? std::numeric_limits<float>::infinity() : mx[r] - p.m[r]);
    }
    // The quantized kernels vote with the zero rows that pad a partial last query tile too: their scores are
    // 0, so after the first block their maxima rise by exactly 0, and such a tile skips only when λ = 0.
    if (quantized(p.spec->numerics) && rows_ < g_.blockQ) delta = std::max(delta, 0.0f);
    if (double(delta) + p.spec->lambda <= 0.0) {
      p.out->pvSkipped[size_t(r0_ / g_.blockQ) * nk_ + j] = 1;
      return;
    }
  }
  const bool anyRow = advanceMaxima(p.m.data(), mx, rows_, p.mNew.data(), p.alpha.data());
  if (!anyRow) return;
  const BlockProduct& bp = product(p);
  for (int r = 0; r < rows_; ++r) {
    if (p.mNew[r] == kNegInf) continue;
    p.l[r] = p.l[r] * p.alpha[r] + bp.rowSum[r];
  }
  rescaleAdd(p.acc.data(), bp.g.data(), p.alpha.data(), rows_, int(h_.dv));
  p.m.swap(p.mNew);
  p.mNew.resize(rows_);
  if (p.spec->wantBlockMass) {
    const int slot = int(p.visited.size());
    p.visited.push_back(j);
    for (int r = 0; r < rows_; ++r) {
      p.partSum[size_t(r) * p.visits + slot] = bp.rowSum[r];
      p.partMax[size_t(r) * p.visits + slot] = p.m[r];
    }
  }
}

void TileRunner::finishTile(PassState& p, int i) {
  const Numerics n = pvNumerics(*p.spec);
  const int64_t dv = h_.dv;
  for (int r = 0; r < rows_; ++r) {
    float* dst = p.out->out.data() + (r0_ + r) * dv;
    const float* arow = p.acc.data() + size_t(r) * dv;
    if (!(p.l[r] > 0.0f)) {
      ++p.out->emptyRows;  // no visible key among the computed blocks: output defined as 0
      continue;
    }
    const float inv = 1.0f / p.l[r];
    for (int64_t e = 0; e < dv; ++e) {
      float o = arow[e] * inv;
      if (n == Numerics::Int8Fp8) o *= ops_.v8.scales[size_t(e)];
      // The deployed kernel writes O in the input's half type.
      dst[e] = quantized(n) ? roundToInput(o, h_.dtype) : o;
    }
  }
  if (!p.spec->wantBlockMass) return;
  for (size_t slot = 0; slot < p.visited.size(); ++slot) {
    double mass = 0;
    for (int r = 0; r < rows_; ++r) {
      const float pm = p.partMax[size_t(r) * p.visits + slot];
      if (!(p.l[r] > 0.0f) || pm == kNegInf) continue;
      mass += double(p.partSum[size_t(r) * p.visits + slot]) * std::exp2(double(pm) - p.m[r]) / p.l[r];
    }
    p.out->blockMass[size_t(i) * nk_ + p.visited[slot]] = float(mass / rows_);
  }
}

void TileRunner::run(int i) {
  startTile(i);
  for (int r = 0; r < rows_; ++r) {
    const KeyRange kr = visibleKeys(r0_ + r, h_.nKv, h_.causal, h_.window);
    lo_[r] = int(kr.first);
    hi_[r] = int(kr.last);
  }
  for (int j = 0; j < nk_; ++j) {
    bool need[2] = {false, false};  // exact, int8: some pass visits block j in that family
    for (const PassState& p : passes_)
      if (p.spec->mask[size_t(i) * nk_ + j]) need[quantized(p.spec->numerics) ? 1 : 0] = true;
    if (!need[0] && !need[1]) continue;
    k0_ = j * g_.blockK;
    cols_ = int(std::min<int64_t>(g_.blockK, h_.nKv - k0_));
    for (int f = 0; f < 2; ++f)
      if (need[f]) scoreBlock(j, f == 1);
    for (BlockProduct& bp : shared_) bp.valid = false;
    for (PassState& p : passes_)
      if (p.spec->mask[size_t(i) * nk_ + j]) visit(p, j);
  }
  for (PassState& p : passes_) finishTile(p, i);
}

}  // namespace

std::vector<AttentionOutput> stage2Passes(const HeadOperands& h, const Geometry& g,
                                          const std::vector<PassSpec>& passes) {
  const int nq = int(ceilDiv(h.nQ, g.blockQ)), nk = int(ceilDiv(h.nKv, g.blockK));
  std::vector<AttentionOutput> outs(passes.size());
  std::vector<PassState> states(passes.size());
  for (size_t p = 0; p < passes.size(); ++p) {
    outs[p].out.assign(size_t(h.nQ * h.dv), 0.0f);
    outs[p].pvSkipped.assign(size_t(nq) * nk, 0);
    if (passes[p].wantBlockMass) outs[p].blockMass.assign(size_t(nq) * nk, 0.0f);
    states[p].spec = &passes[p];
    states[p].out = &outs[p];
  }
  const Operands ops = prepareOperands(h, g, passes);
  for (size_t p = 0; p < passes.size(); ++p)
    if (pvNumerics(passes[p]) == Numerics::Int8Fp8) outs[p].zeroVChannels = ops.v8.zeroChannels;
  TileRunner runner(h, g, ops, states);
  for (int i = 0; i < nq; ++i) runner.run(i);
  return outs;
}

AttentionOutput blockSparseAttention(const float* q, const float* k, const float* v, int64_t nQ, int64_t nKv,
                                     int64_t d, int64_t dv, double scale, bool causal, const Geometry& g,
                                     const uint8_t* mask, double lambda, bool wantBlockMass) {
  const HeadOperands h{.q = q,
                       .k = k,
                       .v = v,
                       .nQ = nQ,
                       .nKv = nKv,
                       .d = d,
                       .dv = dv,
                       .scale = scale,
                       .causal = causal,
                       .window = {},
                       .dtype = DType::Float32,
                       .keyMean = nullptr};
  const PassSpec p{
      .numerics = Numerics::None, .mask = mask, .lambda = lambda, .wantBlockMass = wantBlockMass};
  return std::move(stage2Passes(h, g, {p}).front());
}

}  // namespace sparge::core

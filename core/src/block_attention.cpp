// Stage 2 on the CPU: block-sparse attention with SpargeAttn's PV skip, exact element masks and the three
// numerics (docs/numerics.md). One query tile at a time; per key block the scores come from one product per
// numerics family and every pass (deployed run, exact-numerics run, dense references) that visits the block
// consumes them with its own online softmax. The inner loops are the tile kernels (tile_kernels.h).
#include <algorithm>
#include <cmath>
#include <limits>

#include "sparge/core/half.h"
#include "sparge/core/quant.h"
#include "sparge/core/stage1.h"
#include "stage2.h"

namespace sparge::core {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr double kLog2e = 1.4426950408889634;
// Upstream's FP8 offset: P = 2^(s - m + 8.807) spans e4m3's [0, 448] before the conversion.
constexpr float kFp8Offset = 8.807f;

bool quantized(Numerics n) {
  return n != Numerics::None;
}

// The numerics of a pass's P·V product and output (its scores follow PassSpec::numerics).
Numerics pvNumerics(const PassSpec& p) {
  return p.exactPv ? Numerics::None : p.numerics;
}

int roundUp(int64_t x, int step) {
  return int((x + step - 1) / step * step);
}

// K [nKv, d] as [key block][d][blockCols], zero beyond the last key.
void transposeKeys(const float* k, int64_t nKv, int64_t d, int blockK, int blockCols, int nk,
                   std::vector<float>& out) {
  out.assign(size_t(nk) * d * blockCols, 0.0f);
  for (int64_t key = 0; key < nKv; ++key) {
    float* dst = out.data() + size_t(key / blockK) * d * blockCols + key % blockK;
    for (int64_t c = 0; c < d; ++c) dst[size_t(c) * blockCols] = k[key * d + c];
  }
}

// V [nKv, dv] with rows padded to nk whole blocks and columns to `width`, each value through `f`.
template <class F>
void padValues(const float* v, int64_t nKv, int64_t dv, int rows, int width, std::vector<float>& out, F f) {
  out.assign(size_t(rows) * width, 0.0f);
  for (int64_t r = 0; r < nKv; ++r)
    for (int64_t c = 0; c < dv; ++c) out[size_t(r) * width + c] = f(v[r * dv + c]);
}

// Two INT8 codes (held as floats) as the int16 halves of one 32-bit word, the first in the low half.
int32_t codePair(float lo, float hi) {
  return int32_t(uint32_t(uint16_t(int16_t(lo))) | (uint32_t(uint16_t(int16_t(hi))) << 16));
}

void prepareInt8(const HeadOperands& h, const Geometry& g, int nk, Stage2Operands& o) {
  quantizeRowsInt8(h.q, h.nQ, h.d, g.blockQ, nullptr, h.dtype, o.q8);
  quantizeRowsInt8(h.k, h.nKv, h.d, g.blockK, h.keyMean, h.dtype, o.k8);
  const int64_t d = h.d;
  o.pairs = int((d + 1) / 2);
  auto code = [d](const std::vector<float>& codes, int64_t row, int64_t c) {
    return c < d ? codes[size_t(row * d + c)] : 0.0f;
  };
  o.q8Pairs.resize(size_t(h.nQ) * o.pairs);
  for (int64_t r = 0; r < h.nQ; ++r)
    for (int c = 0; c < o.pairs; ++c)
      o.q8Pairs[size_t(r) * o.pairs + c] =
          codePair(code(o.q8.codes, r, 2 * c), code(o.q8.codes, r, 2 * c + 1));
  o.k8Pairs.assign(size_t(nk) * o.pairs * o.blockCols, 0);
  for (int64_t key = 0; key < h.nKv; ++key) {
    int32_t* dst = o.k8Pairs.data() + size_t(key / g.blockK) * o.pairs * o.blockCols + key % g.blockK;
    for (int c = 0; c < o.pairs; ++c)
      dst[size_t(c) * o.blockCols] = codePair(code(o.k8.codes, key, 2 * c), code(o.k8.codes, key, 2 * c + 1));
  }
  o.int8Factor = float(h.scale) * float(kLog2e);
  // The float codes were only the staging of the pairs: the operands stay in memory between runs.
  std::vector<float>().swap(o.q8.codes);
  std::vector<float>().swap(o.k8.codes);
}

// The operand groups of the numerics families (Stage2Operands::families).
enum Family : unsigned { kExact = 1, kInt8 = 2, kFp16 = 4, kFp8 = 8 };

void prepareOperands(const HeadOperands& h, const Geometry& g, const std::vector<PassSpec>& passes, int nk,
                     const tile::Kernels& kern, const OperandsKey& key, Stage2Operands& o) {
  if (key.entry == 0 || !(key == o.key) || o.kernels != &kern) o.families = 0;
  o.key = key;
  o.kernels = &kern;
  unsigned need = 0;
  for (const PassSpec& p : passes) {
    if (quantized(p.numerics)) need |= kInt8;
    const Numerics pv = pvNumerics(p);
    need |= pv == Numerics::None ? kExact : pv == Numerics::Int8Fp16 ? kFp16 : kFp8;
  }
  need &= ~o.families;
  o.families |= need;
  o.blockCols = roundUp(g.blockK, kern.columnStep);
  o.width = roundUp(h.dv, kern.columnStep);
  const int rows = nk * g.blockK;
  if (need & kExact) {
    const float c2 = float(h.scale * kLog2e);  // logits in base 2, as the kernels compute them
    o.qScaled.resize(size_t(h.nQ * h.d));
    for (size_t i = 0; i < o.qScaled.size(); ++i) o.qScaled[i] = h.q[i] * c2;
    transposeKeys(h.k, h.nKv, h.d, g.blockK, o.blockCols, nk, o.kExact);
    padValues(h.v, h.nKv, h.dv, rows, o.width, o.vExact, [](float x) { return x; });
  }
  if (need & kInt8) prepareInt8(h, g, nk, o);
  if (need & kFp16)
    padValues(h.v, h.nKv, h.dv, rows, o.width, o.vHalf, [](float x) { return roundToHalf(x); });
  if (need & kFp8) quantizeColumnsFp8(h.v, h.nKv, h.dv, rows, o.width, o.v8);
}

}  // namespace

// The passes of one query tile: scores per key block and family, the PV skip, the online softmax.
class TileRun {
 public:
  TileRun(HeadStage2& head, TileScratch& sc, int i);
  void run();

 private:
  void scoreBlock(int j, bool int8);
  void visit(size_t pass, int j);
  const BlockProduct& product(const PassState& st, const PassSpec& spec);
  void finish(size_t pass);
  const BlockScores& scoresOf(Numerics n) const { return sc_.scores[quantized(n) ? 1 : 0]; }
  // Pass `pass` runs this tile and visits key block j.
  bool visits(size_t pass, int j) const {
    const HeadStage2::Pass& hp = hs_.passes_[pass];
    return hp.runs[size_t(i_)] && hp.spec.mask[size_t(i_) * hs_.nk_ + j] != 0;
  }

  HeadStage2& hs_;
  TileScratch& sc_;
  const HeadOperands& h_;
  const Geometry& g_;
  const Stage2Operands& ops_;
  const tile::Kernels& kern_;
  const int i_, r0_, rows_;
  int k0_ = 0, cols_ = 0;
};

TileRun::TileRun(HeadStage2& head, TileScratch& sc, int i)
    : hs_(head),
      sc_(sc),
      h_(head.h_),
      g_(head.g_),
      ops_(head.ops_),
      kern_(*head.kernels_),
      i_(i),
      r0_(i * head.g_.blockQ),
      rows_(int(std::min<int64_t>(head.g_.blockQ, head.h_.nQ - int64_t(i) * head.g_.blockQ))) {
  const size_t tileScores = size_t(g_.blockQ) * ops_.blockCols, tileOut = size_t(g_.blockQ) * ops_.width;
  for (BlockScores& b : sc_.scores) {
    b.s.resize(tileScores);
    b.rowMax.resize(g_.blockQ);
  }
  for (BlockProduct& bp : sc_.products) {
    bp.rowSum.resize(g_.blockQ);
    bp.g.resize(tileOut);
  }
  sc_.p.resize(tileScores);
  sc_.offset.resize(g_.blockQ);
  for (auto* v : {&sc_.lo, &sc_.hi, &sc_.loBlock, &sc_.hiBlock}) v->resize(g_.blockQ);
  for (int r = 0; r < rows_; ++r) {
    const KeyRange kr = visibleKeys(r0_ + r, h_.nKv, h_.causal, h_.window);
    sc_.lo[r] = int(kr.first);
    sc_.hi[r] = int(kr.last);
  }
  sc_.passes.resize(hs_.passes_.size());
  for (size_t p = 0; p < hs_.passes_.size(); ++p) {
    HeadStage2::Pass& hp = hs_.passes_[p];
    if (!hp.runs[size_t(i)]) continue;
    hp.history->kept[size_t(i)] = 0;  // until this tile is complete (a cancelled run keeps nothing half-done)
    hp.history->nonFinite[size_t(i)] = 0;
    std::fill_n(hp.out->pvSkipped.begin() + ptrdiff_t(i) * hs_.nk_, hs_.nk_, uint8_t(0));
    PassState& st = sc_.passes[p];
    st.visits = 0;
    for (int j = 0; j < hs_.nk_; ++j) st.visits += visits(p, j) ? 1 : 0;
    st.t = 0;
    st.m.assign(rows_, kNegInf);
    st.l.assign(rows_, 0.0f);
    st.acc.assign(size_t(rows_) * ops_.width, 0.0f);
    st.mNew.resize(rows_);
    st.alpha.resize(rows_);
    if (hs_.passes_[p].spec.wantBlockMass) {
      st.partSum.assign(size_t(rows_) * st.visits, 0.0f);
      st.partMax.assign(size_t(rows_) * st.visits, kNegInf);
      st.visited.clear();
    }
  }
}

void TileRun::scoreBlock(int j, bool int8) {
  BlockScores& b = sc_.scores[int8 ? 1 : 0];
  const int d = int(h_.d), bc = ops_.blockCols;
  if (int8) {
    // The kernel's factor: (sm_scale · log2e) · (q_scale · k_scale), in fp32, on exact int32 sums.
    const float factor = ops_.int8Factor * (ops_.q8.scales[size_t(i_)] * ops_.k8.scales[size_t(j)]);
    const int pairs = ops_.pairs;
    kern_.multiplyInt8(rows_, bc, pairs, ops_.q8Pairs.data() + size_t(r0_) * pairs, pairs,
                       ops_.k8Pairs.data() + size_t(j) * pairs * bc, bc, factor, b.s.data(), bc);
  } else {
    kern_.multiply(rows_, bc, d, ops_.qScaled.data() + size_t(r0_) * d, d,
                   ops_.kExact.data() + size_t(j) * d * bc, bc, 1.0f, false, b.s.data(), bc);
  }
  for (int r = 0; r < rows_; ++r) {
    sc_.loBlock[r] = sc_.lo[r] - k0_;
    sc_.hiBlock[r] = std::min(sc_.hi[r] - k0_, cols_ - 1);  // the padding past the block is never visible
  }
  if (kern_.maskAndMax(b.s.data(), bc, rows_, bc, sc_.loBlock.data(), sc_.hiBlock.data(), b.rowMax.data()))
    for (HeadStage2::Pass& p : hs_.passes_)
      if (p.runs[size_t(i_)]) p.history->nonFinite[size_t(i_)] = 1;
}

const BlockProduct& TileRun::product(const PassState& st, const PassSpec& spec) {
  const Numerics n = pvNumerics(spec);
  BlockProduct& bp = sc_.products[spec.exactPv ? 3 : int(n)];
  if (bp.valid && std::equal(st.mNew.begin(), st.mNew.end(), bp.mNew.begin())) return bp;
  // Rows that have seen no visible key yet (m = -inf) get P = 0.
  for (int r = 0; r < rows_; ++r)
    sc_.offset[r] =
        st.mNew[r] == kNegInf ? kNegInf : (n == Numerics::Int8Fp8 ? -st.mNew[r] + kFp8Offset : -st.mNew[r]);
  const tile::PRounding rounding = n == Numerics::Int8Fp8    ? tile::PRounding::E4m3
                                   : n == Numerics::Int8Fp16 ? tile::PRounding::Fp16
                                                             : tile::PRounding::None;
  const int bc = ops_.blockCols, w = ops_.width;
  kern_.exponentiate(scoresOf(spec.numerics).s.data(), bc, sc_.p.data(), bc, rows_, bc, sc_.offset.data(),
                     rounding, bp.rowSum.data());
  // P·V over the block's keys (V rows past the last key are 0, as are their probabilities); the sm80 kernel
  // accumulates in a fresh fp16 buffer, rounded after every 16-key tensor-core step.
  const float* v = n == Numerics::Int8Fp8
                       ? ops_.v8.codes.data()
                       : (n == Numerics::Int8Fp16 ? ops_.vHalf.data() : ops_.vExact.data());
  kern_.multiply(rows_, w, g_.blockK, sc_.p.data(), bc, v + size_t(k0_) * w, w, 1.0f, n == Numerics::Int8Fp16,
                 bp.g.data(), w);
  bp.mNew.assign(st.mNew.begin(), st.mNew.end());
  bp.valid = true;
  return bp;
}

void TileRun::visit(size_t pass, int j) {
  const PassSpec& spec = hs_.passes_[pass].spec;
  PassState& st = sc_.passes[pass];
  const int t = st.t++;
  const float* mx = scoresOf(spec.numerics).rowMax.data();
  // PV skip (docs/method.md): one decision for the whole query tile, from the largest rise of any row's
  // running max. The first visited block and the tail blocks are never skipped.
  const bool eligible = t > 0 && t < st.visits - g_.tailBlocks();
  if (eligible) {
    float delta = kNegInf;
    for (int r = 0; r < rows_; ++r) {
      if (mx[r] == kNegInf) continue;  // nothing visible in this block for this row
      delta = std::max(delta, st.m[r] == kNegInf ? std::numeric_limits<float>::infinity() : mx[r] - st.m[r]);
    }
    // The quantized kernels vote with the zero rows that pad a partial last query tile too: their scores are
    // 0, so after the first block their maxima rise by exactly 0, and such a tile skips only when λ = 0.
    if (quantized(spec.numerics) && rows_ < g_.blockQ) delta = std::max(delta, 0.0f);
    if (double(delta) + spec.lambda <= 0.0) {
      hs_.passes_[pass].out->pvSkipped[size_t(i_) * hs_.nk_ + j] = 1;
      return;
    }
  }
  if (!kern_.advanceMaxima(st.m.data(), mx, rows_, st.mNew.data(), st.alpha.data())) return;
  const BlockProduct& bp = product(st, spec);
  for (int r = 0; r < rows_; ++r)
    if (st.mNew[r] != kNegInf) st.l[r] = st.l[r] * st.alpha[r] + bp.rowSum[r];
  kern_.rescaleAdd(st.acc.data(), bp.g.data(), ops_.width, st.alpha.data(), rows_, ops_.width);
  st.m.swap(st.mNew);
  if (spec.wantBlockMass) {
    const int slot = int(st.visited.size());
    st.visited.push_back(j);
    for (int r = 0; r < rows_; ++r) {
      st.partSum[size_t(r) * st.visits + slot] = bp.rowSum[r];
      st.partMax[size_t(r) * st.visits + slot] = st.m[r];
    }
  }
}

void TileRun::finish(size_t pass) {
  HeadStage2::Pass& hp = hs_.passes_[pass];
  const PassState& st = sc_.passes[pass];
  const Numerics n = pvNumerics(hp.spec);
  TileHistory& th = *hp.history;
  // The deployed kernels multiply by the FP8 V scales and write O in the input's half type.
  th.emptyRows[size_t(i_)] =
      kern_.normalizeRows(st.acc.data(), ops_.width, st.l.data(), rows_, int(h_.dv),
                          n == Numerics::Int8Fp8 ? ops_.v8.scales.data() : nullptr, quantized(n), h_.dtype,
                          hp.out->out.data() + size_t(r0_) * h_.dv, int(h_.dv));
  const size_t row = size_t(i_) * hs_.nk_;
  std::copy_n(hp.spec.mask + row, hs_.nk_, th.mask.begin() + ptrdiff_t(row));
  th.kept[size_t(i_)] = 1;
  if (!hp.spec.wantBlockMass) return;
  sc_.mass.resize(size_t(st.visits));
  kern_.blockMass(st.partSum.data(), st.partMax.data(), st.visits, st.m.data(), st.l.data(), rows_,
                  sc_.mass.data());
  for (size_t slot = 0; slot < st.visited.size(); ++slot)
    hp.out->blockMass[size_t(i_) * hs_.nk_ + st.visited[slot]] = sc_.mass[slot] / float(rows_);
}

void TileRun::run() {
  const size_t n = hs_.passes_.size();
  for (int j = 0; j < hs_.nk_; ++j) {
    bool need[2] = {false, false};  // exact, int8: some pass visits block j in that family
    for (size_t p = 0; p < n; ++p)
      if (visits(p, j)) need[quantized(hs_.passes_[p].spec.numerics) ? 1 : 0] = true;
    if (!need[0] && !need[1]) continue;
    k0_ = j * g_.blockK;
    cols_ = int(std::min<int64_t>(g_.blockK, h_.nKv - k0_));
    for (int f = 0; f < 2; ++f)
      if (need[f]) scoreBlock(j, f == 1);
    for (BlockProduct& bp : sc_.products) bp.valid = false;
    for (size_t p = 0; p < n; ++p)
      if (visits(p, j)) visit(p, j);
  }
  for (size_t p = 0; p < n; ++p)
    if (hs_.passes_[p].runs[size_t(i_)]) finish(p);
}

// The pass's history (reset when what its tiles depend on besides their mask rows changed), which tiles it
// runs, and its output sized.
void HeadStage2::preparePass(Pass& hp, const OperandsKey& key) {
  TileHistory& th = *hp.history;
  const size_t blocks = size_t(nq_) * nk_, outSize = size_t(h_.nQ * h_.dv);
  AttentionOutput& o = *hp.out;
  // Block masses are not kept: a pass that wants them runs every tile.
  const bool same = key.entry != 0 && th.key == key && th.kernels == kernels_ &&
                    th.numerics == hp.spec.numerics && th.exactPv == hp.spec.exactPv &&
                    th.lambda == hp.spec.lambda && !hp.spec.wantBlockMass && th.mask.size() == blocks &&
                    o.out.size() == outSize && o.pvSkipped.size() == blocks;
  if (!same) {
    th.key = key;
    th.kernels = kernels_;
    th.numerics = hp.spec.numerics;
    th.exactPv = hp.spec.exactPv;
    th.lambda = hp.spec.lambda;
    th.mask.assign(blocks, 0);
    th.kept.assign(size_t(nq_), 0);
    th.emptyRows.assign(size_t(nq_), 0);
    th.nonFinite.assign(size_t(nq_), 0);
  }
  o.out.resize(outSize);  // every row is written by its tile
  o.pvSkipped.resize(blocks);
  o.blockMass.assign(hp.spec.wantBlockMass ? blocks : 0, 0.0f);
  hp.runs.assign(size_t(nq_), 1);
  for (int i = 0; i < nq_; ++i) {
    const uint8_t* row = hp.spec.mask + size_t(i) * nk_;
    if (th.kept[size_t(i)] && std::equal(row, row + nk_, th.mask.begin() + ptrdiff_t(i) * nk_)) {
      hp.runs[size_t(i)] = 0;
      continue;
    }
    runs_[size_t(i)] = 1;
    cost_[size_t(i)] += std::count_if(row, row + nk_, [](uint8_t m) { return m != 0; });
  }
}

void HeadStage2::prepare(const HeadOperands& head, const Geometry& g, const std::vector<PassSpec>& passes,
                         const std::vector<AttentionOutput*>& outs, const OperandsKey& key,
                         const std::vector<TileHistory*>& histories) {
  h_ = head;
  g_ = g;
  kernels_ = &tile::kernels();
  nq_ = int(ceilDiv(head.nQ, g.blockQ));
  nk_ = int(ceilDiv(head.nKv, g.blockK));
  passes_.resize(passes.size());
  cost_.assign(size_t(nq_), 0);
  runs_.assign(size_t(nq_), 0);
  for (size_t p = 0; p < passes.size(); ++p) {
    Pass& hp = passes_[p];
    hp.spec = passes[p];
    hp.out = outs[p];
    hp.history = p < histories.size() && histories[p] ? histories[p] : &hp.own;
    if (hp.history == &hp.own) hp.own.key = OperandsKey{};  // nothing is kept without a caller's history
    preparePass(hp, key);
  }
  prepareOperands(head, g, passes, nk_, *kernels_, key, ops_);
  for (size_t p = 0; p < passes.size(); ++p)
    outs[p]->zeroVChannels =
        pvNumerics(passes[p]) == Numerics::Int8Fp8 ? ops_.v8.zeroChannels : std::vector<int64_t>{};
}

void HeadStage2::runTile(int i, TileScratch& scratch) {
  TileRun(*this, scratch, i).run();
}

void HeadStage2::finish() {
  for (Pass& p : passes_) {
    p.out->emptyRows = 0;
    p.out->nonFinite = false;
    for (int i = 0; i < nq_; ++i) {
      p.out->emptyRows += p.history->emptyRows[size_t(i)];
      p.out->nonFinite = p.out->nonFinite || p.history->nonFinite[size_t(i)] != 0;
    }
  }
}

std::vector<AttentionOutput> stage2Passes(const HeadOperands& h, const Geometry& g,
                                          const std::vector<PassSpec>& passes) {
  std::vector<AttentionOutput> outs(passes.size());
  std::vector<AttentionOutput*> ptrs;
  for (AttentionOutput& o : outs) ptrs.push_back(&o);
  HeadStage2 head;
  head.prepare(h, g, passes, ptrs);
  TileScratch scratch;
  for (int i = 0; i < head.tiles(); ++i)
    if (head.tileRuns(i)) head.runTile(i, scratch);
  head.finish();
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

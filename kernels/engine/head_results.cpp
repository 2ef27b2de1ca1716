// Per-head results of a CUDA engine run from its host arrays (head_results.h).
#include "engine/head_results.h"

#include <algorithm>
#include <cmath>

namespace sparge::cuda {

bool nonFiniteIn(const double* perBlock, int nq) {
  for (int i = 0; i < nq; ++i) {
    const double* s = perBlock + (size_t)i * kSums;
    if (s[7] > 0) return true;
    for (int k = 0; k < 7; ++k)
      if (!std::isfinite(s[k])) return true;
  }
  return false;
}

core::ErrorSums headSums(const double* perBlock, int nq) {
  core::ErrorSums e;
  for (int i = 0; i < nq; ++i) {
    const double* s = perBlock + (size_t)i * kSums;
    e.absDiff += s[0];
    e.absRef += s[1];
    e.dot += s[2];
    e.normO += s[3];
    e.normRef += s[4];
    e.sqDiff += s[5];
    e.count += (int64_t)s[6];
  }
  return e;
}

std::vector<float> blockMassOf(const float* mass64, int64_t nQ, int64_t nKv, const core::Geometry& g, int nq,
                               int nk) {
  const int nq64 = (int)core::ceilDiv(nQ, 64), nk64 = (int)core::ceilDiv(nKv, 64);
  std::vector<float> out((size_t)nq * nk, 0.f);
  for (int i = 0; i < nq; ++i) {
    const int rows = (int)std::min<int64_t>(g.blockQ, nQ - (int64_t)i * g.blockQ);
    const int qt0 = i * g.blockQ / 64, qt1 = std::min(nq64, (i + 1) * g.blockQ / 64);
    for (int j = 0; j < nk; ++j) {
      const int kt0 = j * g.blockK / 64, kt1 = std::min(nk64, (j + 1) * g.blockK / 64);
      double sum = 0;
      for (int qt = qt0; qt < qt1; ++qt)
        for (int kt = kt0; kt < kt1; ++kt) sum += mass64[(size_t)qt * nk64 + kt];
      out[(size_t)i * nk + j] = (float)(sum / rows);
    }
  }
  return out;
}

namespace {

template <typename T>
std::vector<T> slice(const T* v, size_t index, size_t size) {
  return std::vector<T>(v + index * size, v + (index + 1) * size);
}

// The three errors of head `bh`; with exact numerics the sparse error is the deployed one and the
// quantization error is zero.
void fillErrors(core::HeadResult& hr, const HostRun& run, size_t bh) {
  const int nq = run.nq;
  const double* deployed = run.deployed + bh * nq * kSums;
  hr.error = headSums(deployed, nq);
  hr.hasNonFinite = hr.hasNonFinite || nonFiniteIn(deployed, nq);
  hr.qBlockL1.resize(nq);
  for (int i = 0; i < nq; ++i) {
    const double* s = deployed + (size_t)i * kSums;
    hr.qBlockL1[i] = s[1] > 0 ? (float)(s[0] / s[1]) : 0.f;
  }
  if (!run.quantized) {
    hr.errorSparse = hr.error;
    hr.errorQuant = core::ErrorSums{};
    return;
  }
  hr.errorQuant = run.quant->sums[bh];
  hr.hasNonFinite = hr.hasNonFinite || run.quant->nonFinite[bh];
  if (run.sparse) fillSparsityPart(hr, run.sparse + bh * nq * kSums, nq);  // null: an early result
}

}  // namespace

bool fillSparsityPart(core::HeadResult& hr, const double* exactPerBlock, int nq) {
  hr.errorSparse = headSums(exactPerBlock, nq);
  const bool newlyNonFinite = !hr.hasNonFinite && nonFiniteIn(exactPerBlock, nq);
  hr.hasNonFinite = hr.hasNonFinite || newlyNonFinite;
  return newlyNonFinite;
}

void fillSelection(core::HeadResult& hr, const HostRun& run, int b, int h) {
  const size_t bh = (size_t)b * run.Hq + h;
  const size_t bhk = (size_t)b * run.Hkv + h / (run.Hq / run.Hkv);
  const size_t grid = (size_t)run.nq * run.nk;
  hr.batch = b;
  hr.head = h;
  hr.params = run.config->forHead(h);
  hr.nq = run.nq;
  hr.nk = run.nk;
  hr.blockMask = slice(run.mask, bh, grid);
  hr.reasons = slice(run.reasons, bh, grid);
  hr.pooledProb = slice(run.prob, bh, grid);
  if (run.elementPairs) hr.elementPairs = run.elementPairs[bh];
  if (run.simQ) {
    hr.selfSimQ = slice(run.simQ, bh, run.nq);
    hr.selfSimK = slice(run.simK, bhk, run.nk);
    hr.similarQ.resize(run.nq);
    hr.similarK.resize(run.nk);
    for (int i = 0; i < run.nq; ++i) hr.similarQ[i] = hr.selfSimQ[i] > float(hr.params.theta);
    for (int j = 0; j < run.nk; ++j) hr.similarK[j] = hr.selfSimK[j] > float(hr.params.theta);
  }
  hr.hasNonFinite = run.inputNonFinite[bh] != 0;
  if (run.errors) hr.refBlockMass = (*run.blockMass)[bh];
}

void fillAttention(core::HeadResult& hr, const HostRun& run, int b, int h) {
  const size_t bh = (size_t)b * run.Hq + h;
  const size_t grid = (size_t)run.nq * run.nk;
  hr.pvSkipped = slice(run.skip, bh, grid);
  hr.sparsity = core::countSparsity(*run.validity, run.mask + bh * grid, run.skip + bh * grid);
  hr.emptyRows = run.emptyRows[bh];
  if (run.errors) fillErrors(hr, run, bh);
}

}  // namespace sparge::cuda

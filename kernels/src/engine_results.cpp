// Per-head results of a CUDA engine run: masks, reasons, PV skips, P̂, similarity, sparsity, the error split,
// the reference's block mass, and the warnings that go with them.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "engine_state.h"

namespace sparge::cuda {

namespace {

// What every head's result is cut from, downloaded once per run.
struct HostMaps {
  std::vector<uint8_t> mask, reasons, skip;
  std::vector<float> prob;
  std::vector<int> empty;
  std::vector<float> simQ, simK;
};

HostMaps downloadMaps(CudaEngine::State& st, const RunPlan& plan) {
  HostMaps m;
  const size_t cells = plan.BH * plan.grid;
  download(m.mask, st.selection.mask, cells, "download mask");
  download(m.reasons, st.selection.reasons, cells, "download reasons");
  download(m.skip, st.pvSkipped, cells, "download PV-skip map");
  download(m.prob, st.selection.prob, cells, "download probabilities");
  download(m.empty, st.emptyRows, plan.BH, "download empty rows");
  const auto& c = plan.config;
  const Stage1Stats& stats = *st.stats.at(std::make_tuple(c.geometry.blockQ, c.geometry.blockK, c.smoothK));
  download(m.simQ, stats.simQ, plan.BH * plan.p.nq, "download self-similarity");
  download(m.simK, stats.simK, (size_t)st.B * st.Hkv * plan.p.nk, "download self-similarity");
  return m;
}

template <typename T>
std::vector<T> slice(const std::vector<T>& v, size_t index, size_t size) {
  return std::vector<T>(v.begin() + index * size, v.begin() + (index + 1) * size);
}

float halfBitsToFloat(uint16_t b, ElemType t) {
  if (t == ElemType::F16) return __half2float(*reinterpret_cast<__half*>(&b));
  return __bfloat162float(*reinterpret_cast<__nv_bfloat16*>(&b));
}

// Mean true attention mass per block of the run's geometry, from the reference's 64x64 tiles.
std::vector<float> blockMass(const CudaEngine::State& st, const RunPlan& plan,
                             const std::vector<float>& mass64, size_t bh) {
  const int nq64 = (int)core::ceilDiv(st.Nq, 64), nk64 = (int)core::ceilDiv(st.Nkv, 64);
  const core::Geometry& g = plan.config.geometry;
  std::vector<float> out(plan.grid, 0.f);
  for (int i = 0; i < plan.p.nq; ++i) {
    const int rows = std::min(g.blockQ, st.Nq - i * g.blockQ);
    const int qt0 = i * g.blockQ / 64, qt1 = std::min(nq64, (i + 1) * g.blockQ / 64);
    for (int j = 0; j < plan.p.nk; ++j) {
      const int kt0 = j * g.blockK / 64, kt1 = std::min(nk64, (j + 1) * g.blockK / 64);
      double sum = 0;
      for (int qt = qt0; qt < qt1; ++qt)
        for (int kt = kt0; kt < kt1; ++kt) sum += mass64[(bh * nq64 + qt) * nk64 + kt];
      out[(size_t)i * plan.p.nk + j] = (float)(sum / rows);
    }
  }
  return out;
}

// The three errors of head `bh`; with exact numerics the sparse error is the deployed one and the
// quantization error is zero.
void fillErrors(core::HeadResult& hr, const CudaEngine::State& st, const RunPlan& plan, const RunErrors& e,
                size_t bh) {
  const int nq = plan.p.nq;
  const double* deployed = &e.deployed[bh * nq * kSums];
  hr.error = headSums(deployed, nq);
  hr.hasNonFinite = hr.hasNonFinite || nonFiniteIn(deployed, nq);
  hr.qBlockL1.resize(nq);
  for (int i = 0; i < nq; ++i) {
    const double* s = deployed + (size_t)i * kSums;
    hr.qBlockL1[i] = s[1] > 0 ? (float)(s[0] / s[1]) : 0.f;
  }
  if (e.quant) {
    const double* exact = &e.sparse[bh * nq * kSums];
    hr.errorSparse = headSums(exact, nq);
    hr.errorQuant = e.quant->sums[bh];
    hr.hasNonFinite = hr.hasNonFinite || nonFiniteIn(exact, nq) || e.quant->nonFinite[bh];
  } else {
    hr.errorSparse = hr.error;
    hr.errorQuant = core::ErrorSums{};
  }
  hr.refBlockMass = blockMass(st, plan, e.mass64, bh);
}

std::vector<float> downloadOutput(const CudaEngine::State& st, size_t bh) {
  std::vector<uint16_t> bits((size_t)st.Nq * st.D);
  check(cudaMemcpy(bits.data(), st.o.as<uint16_t>() + bh * bits.size(), bits.size() * 2,
                   cudaMemcpyDeviceToHost),
        "download output");
  std::vector<float> out(bits.size());
  for (size_t x = 0; x < bits.size(); ++x) out[x] = halfBitsToFloat(bits[x], st.qkv.et);
  return out;
}

core::HeadResult headResult(CudaEngine::State& st, const RunPlan& plan, const HostMaps& m,
                            const core::BlockValidity& validity, int b, int h) {
  const size_t bh = (size_t)b * st.Hq + h;
  const size_t bhk = (size_t)b * st.Hkv + h / (st.Hq / st.Hkv);
  core::HeadResult hr;
  hr.batch = b;
  hr.head = h;
  hr.params = plan.config.forHead(h);
  hr.nq = plan.p.nq;
  hr.nk = plan.p.nk;
  hr.blockMask = slice(m.mask, bh, plan.grid);
  hr.reasons = slice(m.reasons, bh, plan.grid);
  hr.pvSkipped = slice(m.skip, bh, plan.grid);
  hr.pooledProb = slice(m.prob, bh, plan.grid);
  hr.selfSimQ = slice(m.simQ, bh, plan.p.nq);
  hr.selfSimK = slice(m.simK, bhk, plan.p.nk);
  hr.similarQ.resize(plan.p.nq);
  hr.similarK.resize(plan.p.nk);
  for (int i = 0; i < plan.p.nq; ++i) hr.similarQ[i] = hr.selfSimQ[i] > float(hr.params.theta);
  for (int j = 0; j < plan.p.nk; ++j) hr.similarK[j] = hr.selfSimK[j] > float(hr.params.theta);
  hr.sparsity = core::countSparsity(validity, hr.blockMask.data(), hr.pvSkipped.data());
  hr.emptyRows = m.empty[bh];
  hr.hasNonFinite = st.inputNonFinite[bh] != 0;
  return hr;
}

}  // namespace

core::EntryResult collectResults(CudaEngine::State& st, const core::EntryData& entry, const RunPlan& plan,
                                 const RunErrors* errors, const std::string& engineName) {
  const HostMaps maps = downloadMaps(st, plan);
  const core::BlockValidity& validity =
      st.validity.at(std::make_tuple(plan.config.geometry.blockQ, plan.config.geometry.blockK));
  core::EntryResult res;
  res.info = entry.info;
  res.config = plan.config;
  res.engine = engineName;
  if (entry.info.dtype == core::DType::Float32)
    res.warnings.push_back("float32 capture run in float16 on the GPU (SpargeAttn casts float32 to float16)");
  for (int b = 0; b < st.B; ++b) {
    for (int h : plan.heads) {
      core::HeadResult hr = headResult(st, plan, maps, validity, b, h);
      const size_t bh = (size_t)b * st.Hq + h;
      if (errors) fillErrors(hr, st, plan, *errors, bh);
      if (plan.options.keepOutput) hr.output = downloadOutput(st, bh);
      if (hr.emptyRows > 0)
        res.warnings.push_back("head " + std::to_string(h) + ": " + std::to_string(hr.emptyRows) +
                               " query rows see no key in their selected blocks (output set to 0)");
      if (hr.hasNonFinite)
        res.warnings.push_back(
            "head " + std::to_string(h) +
            ": NaN/Inf in the inputs, the output or the reference; its error figures are not "
            "meaningful");
      res.heads.push_back(std::move(hr));
    }
  }
  core::aggregate(res);
  return res;
}

}  // namespace sparge::cuda

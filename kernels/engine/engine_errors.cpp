// The error split of a CUDA engine run against the fp32 reference: deployed (this run), sparsity alone (the
// same mask and λ in exact numerics) and quantization alone (dense, every valid block, chosen numerics).
#include <cuda_runtime.h>

#include "engine/engine_state.h"

namespace sparge::cuda {

namespace {

// The dense fp32 reference of the plan's heads that have none yet (kept for the entry).
void ensureReference(CudaEngine::State& st, const core::EntryData& entry, const RunPlan& plan,
                     StageClock& clock) {
  std::vector<int> missing;
  for (int h : plan.heads)
    if (!st.refDone[h]) missing.push_back(h);
  if (missing.empty()) return;
  clock.reference.start();
  const int nq64 = (int)core::ceilDiv(st.Nq, 64), nk64 = (int)core::ceilDiv(st.Nkv, 64);
  st.oref.reserve(plan.BH * st.Nq * st.D * sizeof(float), "fp32 reference output");
  st.mass64.reserve(plan.BH * nq64 * nk64 * sizeof(float), "reference block mass");
  uploadHeads(st.scratchHeads, missing);
  Problem pr = plan.p;
  pr.heads = st.scratchHeads.as<int>();
  pr.nHeads = (int)missing.size();
  launchReference(st.qkv.et, pr, st.q.get(), st.k.get(), st.v.get(), entry.info.scale, st.oref.as<float>(),
                  st.mass64.as<float>(), 0);
  clock.reference.stop();
  clock.referenceRan = true;
  for (int h : missing) st.refDone[h] = 1;
  // The block mass depends on the entry alone: it comes to the host once, here, for refBlockMass.
  const size_t perHead = (size_t)nq64 * nk64;
  st.host.mass64.resize(plan.BH * perHead);
  for (int b = 0; b < st.B; ++b)
    for (int h : missing) {
      const size_t bh = (size_t)b * st.Hq + h;
      check(cudaMemcpy(st.host.mass64.data() + bh * perHead, st.mass64.as<float>() + bh * perHead,
                       perHead * sizeof(float), cudaMemcpyDeviceToHost),
            "download block mass");
    }
}

void reserveScratch(CudaEngine::State& st, const RunPlan& plan) {
  st.scratchO.reserve(plan.BH * st.Nq * st.D * 2, "error-split output");
  st.scratchSkip.reserve(plan.BH * plan.grid, "error-split PV-skip map");
  st.scratchEmpty.reserve(plan.BH * sizeof(int), "error-split empty rows");
  st.scratchSums.reserve(plan.BH * plan.p.nq * kSums * sizeof(double), "error sums");
}

// One extra attention launch into the scratch buffers, then its error sums into scratchSums.
void scratchRun(CudaEngine::State& st, const core::EntryData& entry, const RunPlan& plan, const Problem& p,
                core::Numerics numerics, const QuantOperands* quant, bool dense) {
  check(cudaMemsetAsync(st.scratchSkip.get(), 0, plan.BH * plan.grid), "memset");
  check(cudaMemsetAsync(st.scratchEmpty.get(), 0, plan.BH * sizeof(int)), "memset");
  const AttnArgs a =
      makeAttnArgs(st.qkv, entry.info.scale, st.selection, st.params.as<HeadParamsDev>(), st.scratchO.get(),
                   st.scratchSkip.as<uint8_t>(), st.scratchEmpty.as<int>(), numerics, quant, st.switches);
  launchAttention(st.qkv.et, p, a, dense, 0);
  launchError(st.qkv.et, p, st.scratchO.get(), st.oref.as<float>(), st.scratchSums.as<double>(), 0);
}

// errorQuant of the plan's heads, computed for the heads that have none in this configuration's cache.
const QuantErrorCache& quantErrors(CudaEngine::State& st, const core::EntryData& entry, const RunPlan& plan,
                                   const QuantOperands* quant) {
  const core::RunConfig& c = plan.config;
  QuantErrorCache& cache =
      st.quantErrors[std::make_tuple(c.geometry.blockQ, c.geometry.blockK, (int)c.numerics, c.smoothK)];
  if (cache.done.empty()) {
    cache.sums.assign(plan.BH, core::ErrorSums{});
    cache.nonFinite.assign(plan.BH, 0);
    cache.done.assign(st.Hq, 0);
  }
  std::vector<int> missing;
  for (int h : plan.heads)
    if (!cache.done[h]) missing.push_back(h);
  if (missing.empty()) return cache;
  uploadHeads(st.scratchHeads, missing);
  Problem pm = plan.p;
  pm.heads = st.scratchHeads.as<int>();
  pm.nHeads = (int)missing.size();
  scratchRun(st, entry, plan, pm, c.numerics, quant, true);
  std::vector<double> sums;
  download(sums, st.scratchSums, plan.BH * plan.p.nq * kSums, "download error sums");
  for (int b = 0; b < st.B; ++b)
    for (int h : missing) {
      const size_t bh = (size_t)b * st.Hq + h;
      cache.sums[bh] = headSums(&sums[bh * plan.p.nq * kSums], plan.p.nq);
      cache.nonFinite[bh] = nonFiniteIn(&sums[bh * plan.p.nq * kSums], plan.p.nq);
    }
  for (int h : missing) cache.done[h] = 1;
  return cache;
}

}  // namespace

RunErrors computeErrors(CudaEngine::State& st, const core::EntryData& entry, const RunPlan& plan,
                        const QuantOperands* quant, StageClock& clock, bool withSplit) {
  ensureReference(st, entry, plan, clock);
  RunErrors out;
  clock.errors.start();
  st.errSums.reserve(plan.BH * plan.p.nq * kSums * sizeof(double), "error sums");
  launchError(st.qkv.et, plan.p, st.o.get(), st.oref.as<float>(), st.errSums.as<double>(), 0);
  if (plan.quantized()) {
    reserveScratch(st, plan);
    out.quant = &quantErrors(st, entry, plan, quant);
    if (withSplit) scratchRun(st, entry, plan, plan.p, core::Numerics::None, nullptr, plan.allDense);
    out.split = withSplit;
  }
  clock.errors.stop();
  return out;
}

void computeSplit(CudaEngine::State& st, const core::EntryData& entry, const RunPlan& plan,
                  StageClock& clock) {
  clock.split.start();
  scratchRun(st, entry, plan, plan.p, core::Numerics::None, nullptr, plan.allDense);
  clock.split.stop();
}

}  // namespace sparge::cuda

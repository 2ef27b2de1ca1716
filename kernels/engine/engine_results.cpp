// Per-head results of a CUDA engine run: the run's arrays come to page-locked host buffers asynchronously
// (the selection's while the attention kernel runs), then every head's result is cut from them on several
// threads (head_results.cpp), with the warnings that go with them.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <optional>
#include <string>

#include "engine/engine_state.h"
#include "sparge/core/error.h"
#include "sparge/core/parallel.h"

namespace sparge::cuda {

namespace {

// Threads that cut the per-head results: the work is memory-bound, a few threads saturate it.
int assemblyThreads() {
  return core::bulkThreads();
}

// Queues copies of the plan's heads of a per-head array ([B*Hq] x `perHead` bytes) into the same places of
// the pinned buffer `dst`, one copy per run of consecutive heads.
void copyHeads(CudaEngine::State& st, PinnedBuffer& dst, const void* src, size_t perHead, const RunPlan& plan,
               cudaStream_t stream, const char* what) {
  dst.reserve(plan.BH * perHead, what);
  const auto* from = static_cast<const uint8_t*>(src);
  auto* to = dst.as<uint8_t>();
  const std::vector<int>& hs = plan.heads;
  for (int b = 0; b < st.B; ++b)
    for (size_t i = 0; i < hs.size();) {
      size_t j = i + 1;
      while (j < hs.size() && hs[j] == hs[j - 1] + 1) ++j;
      const size_t offset = ((size_t)b * st.Hq + hs[i]) * perHead, bytes = (j - i) * perHead;
      check(cudaMemcpyAsync(to + offset, from + offset, bytes, cudaMemcpyDeviceToHost, stream), what);
      st.copies.bytes += (int64_t)bytes;
      i = j;
    }
}

float halfBitsToFloat(uint16_t b, ElemType t) {
  if (t == ElemType::F16) return __half2float(*reinterpret_cast<__half*>(&b));
  return __bfloat162float(*reinterpret_cast<__nv_bfloat16*>(&b));
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

// Waits for the stop event of `copy` and returns the copy's device time; a kernel or copy that failed on the
// way is reported as what it is.
double waitFor(prof::EventTimer& copy, const char* what) {
  try {
    return copy.elapsedMs();
  } catch (const Error& e) {
    throw Error(std::string("cuda: ") + what, e.problem());
  }
}

// The run's arrays as head_results.cpp reads them; `blockMass` is the run geometry's refBlockMass cache.
HostRun hostRun(const CudaEngine::State& st, const RunPlan& plan, const RunErrors* errors,
                const std::vector<std::vector<float>>* blockMass) {
  const core::RunConfig& c = plan.config;
  const auto geometry = std::make_tuple(c.geometry.blockQ, c.geometry.blockK);
  HostRun r;
  r.B = st.B, r.Hq = st.Hq, r.Hkv = st.Hkv, r.nq = plan.p.nq, r.nk = plan.p.nk;
  r.config = &c;
  r.validity = &st.validity.at(geometry);
  r.inputNonFinite = st.inputNonFinite.data();
  r.mask = st.copies.mask.as<uint8_t>();
  r.reasons = st.copies.reasons.as<uint8_t>();
  r.prob = st.copies.prob.as<float>();
  if (c.method == core::Method::SpargeAttn) {
    const HostCaches::Similarity& sim =
        st.host.similarity.at(std::make_tuple(c.geometry.blockQ, c.geometry.blockK, c.smoothK));
    r.simQ = sim.q.data();
    r.simK = sim.k.data();
  } else {
    r.elementPairs = st.copies.elementPairs.as<double>();
  }
  r.skip = st.copies.skip.as<uint8_t>();
  r.emptyRows = st.copies.emptyRows.as<int>();
  r.quantized = plan.quantized();
  if (!errors) return r;
  r.errors = true;
  r.deployed = st.copies.deployedSums.as<double>();
  r.sparse = errors->split ? st.copies.sparseSums.as<double>() : nullptr;
  r.quant = errors->quant;
  r.blockMass = blockMass;
  return r;
}

// refBlockMass of head bh in the run's geometry into `mass`, from the reference's 64x64 tiles (once a head).
void ensureBlockMass(std::vector<float>& mass, const CudaEngine::State& st, const RunPlan& plan, size_t bh) {
  if (!mass.empty()) return;
  const size_t perHead = (size_t)core::ceilDiv(st.Nq, 64) * core::ceilDiv(st.Nkv, 64);
  mass = blockMassOf(st.host.mass64.data() + bh * perHead, st.Nq, st.Nkv, plan.config.geometry, plan.p.nq,
                     plan.p.nk);
}

void addNonFiniteWarning(core::EntryResult& res, const core::HeadResult& hr) {
  res.warnings.push_back("head " + std::to_string(hr.head) +
                         ": NaN/Inf in the inputs, the output or the reference; its error figures are not "
                         "meaningful");
}

void addWarnings(core::EntryResult& res, const core::HeadResult& hr, std::optional<int64_t>& windowRows) {
  if (hr.emptyRows > 0) {
    if (!windowRows) windowRows = core::rowsWithoutKeys(res.info);
    res.warnings.push_back(core::emptyRowsWarning(res, hr, *windowRows));
  }
  if (hr.hasNonFinite) addNonFiniteWarning(res, hr);
}

}  // namespace

void queueSelectionCopies(CudaEngine::State& st, const RunPlan& plan, StageClock& clock) {
  SideStream& side = st.copies.side;
  side.after(0);
  clock.selectionCopy.start(side.get());
  copyHeads(st, st.copies.mask, st.selection.mask.get(), plan.grid, plan, side.get(), "copy mask");
  copyHeads(st, st.copies.reasons, st.selection.reasons.get(), plan.grid, plan, side.get(), "copy reasons");
  copyHeads(st, st.copies.prob, st.selection.prob.get(), plan.grid * sizeof(float), plan, side.get(),
            "copy probabilities");
  if (plan.config.method != core::Method::SpargeAttn)
    copyHeads(st, st.copies.elementPairs, st.methodStage1.elementPairs().get(), sizeof(double), plan,
              side.get(), "copy element pairs");
  clock.selectionCopy.stop(side.get());
}

void queueAttentionCopies(CudaEngine::State& st, const RunPlan& plan, const RunErrors* errors,
                          StageClock& clock) {
  const size_t sums = (size_t)plan.p.nq * kSums * sizeof(double);
  clock.attentionCopy.start();
  copyHeads(st, st.copies.skip, st.pvSkipped.get(), plan.grid, plan, 0, "copy PV-skip map");
  copyHeads(st, st.copies.emptyRows, st.emptyRows.get(), sizeof(int), plan, 0, "copy empty rows");
  if (errors) copyHeads(st, st.copies.deployedSums, st.errSums.get(), sums, plan, 0, "copy error sums");
  if (errors && errors->split)
    copyHeads(st, st.copies.sparseSums, st.scratchSums.get(), sums, plan, 0, "copy error sums");
  clock.attentionCopy.stop();
}

void addSplit(CudaEngine::State& st, const RunPlan& plan, core::EntryResult& res) {
  const int nq = plan.p.nq;
  std::vector<double> sums;
  download(sums, st.scratchSums, plan.BH * nq * kSums, "download error sums");
  for (core::HeadResult& hr : res.heads)
    if (fillSparsityPart(hr, &sums[((size_t)hr.batch * st.Hq + hr.head) * nq * kSums], nq))
      addNonFiniteWarning(res, hr);
  res.splitPending = false;
  core::aggregate(res);
}

core::EntryResult collectResults(CudaEngine::State& st, const core::EntryData& entry, const RunPlan& plan,
                                 const RunErrors* errors, const std::string& engineName, StageClock& clock,
                                 HostClock::time_point start) {
  core::EntryResult res;
  res.info = entry.info;
  res.config = plan.config;
  res.engine = engineName;
  if (entry.info.dtype == core::DType::Float32)
    res.warnings.push_back("float32 capture run in float16 on the GPU (SpargeAttn casts float32 to float16)");
  std::vector<std::vector<float>>* mass = nullptr;  // heads without one get theirs in the first pass
  if (errors) {
    mass = &st.host.blockMass[std::make_tuple(plan.config.geometry.blockQ, plan.config.geometry.blockK)];
    mass->resize(plan.BH);
  }
  const HostRun run = hostRun(st, plan, errors, mass);
  const int nh = (int)plan.heads.size();
  res.heads.resize((size_t)st.B * nh);
  core::StageTimes& t = res.times;
  t.hostQueueMs = msSince(start);
  auto t0 = HostClock::now();
  t.copyMs += waitFor(clock.selectionCopy, "selection");
  t.hostWaitMs += msSince(t0);
  t0 = HostClock::now();
  core::parallelFor((int64_t)res.heads.size(), assemblyThreads(), [&](int64_t x) {
    const int b = (int)(x / nh), h = plan.heads[x % nh];
    const size_t bh = (size_t)b * st.Hq + h;
    if (mass) ensureBlockMass((*mass)[bh], st, plan, bh);
    fillSelection(res.heads[x], run, b, h);
  });
  t.hostResultsMs += msSince(t0);
  t0 = HostClock::now();
  t.copyMs += waitFor(clock.attentionCopy, "attention and errors");  // and their copies
  t.copyBytes = st.copies.bytes;
  t.hostWaitMs += msSince(t0);
  t0 = HostClock::now();
  core::parallelFor((int64_t)res.heads.size(), assemblyThreads(),
                    [&](int64_t x) { fillAttention(res.heads[x], run, (int)(x / nh), plan.heads[x % nh]); });
  std::optional<int64_t> windowRows;  // counted once, when a head has empty rows
  for (core::HeadResult& hr : res.heads) {
    if (plan.options.keepOutput) hr.output = downloadOutput(st, (size_t)hr.batch * st.Hq + hr.head);
    addWarnings(res, hr, windowRows);
  }
  core::aggregate(res);
  t.hostResultsMs += msSince(t0);
  return res;
}

}  // namespace sparge::cuda

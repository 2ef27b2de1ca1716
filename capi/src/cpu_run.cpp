// The C API's CPU backend: the caller's host tensors converted to an entry of the CPU engine (exactly the
// stored half values), one engine run per numerics group of heads, and the outputs written back in the
// caller's layout and precision.
#include <memory>

#include "call.h"
#include "sparge/core/capture.h"
#include "sparge/core/cpu_engine.h"
#include "sparge/core/half.h"
#include "sparge/core/stage1.h"

namespace sparge::capi {
namespace {

float loadElem(const uint16_t* p, core::DType t) {
  return t == core::DType::BFloat16 ? core::bf16ToFloat(*p) : core::halfToFloat(*p);
}

// [B, H, N, D] with strides `s` -> float32 HND, contiguous.
void gather(const void* src, const Strides& s, int B, int H, int N, int D, core::DType t,
            core::FloatBuffer& dst) {
  dst.resize(size_t(B) * H * N * D);
  const auto* base = static_cast<const uint16_t*>(src);
  float* out = dst.data();
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int n = 0; n < N; ++n) {
        const uint16_t* row = base + b * s.batch + h * s.head + n * s.token;
        for (int d = 0; d < D; ++d) *out++ = loadElem(row + d, t);
      }
}

std::shared_ptr<core::EntryData> makeEntry(const Resolved& r, const RunArgs& a) {
  auto e = std::make_shared<core::EntryData>();
  core::EntryInfo& i = e->info;
  i.name = "sparge_attn_run";
  i.batch = r.B;
  i.headsQ = r.Hq;
  i.headsKV = r.Hkv;
  i.tokensQ = r.Nq;
  i.tokensKV = r.Nkv;
  i.headDim = i.headDimV = r.D;
  i.dtype = r.dtype;
  i.causal = r.causal;
  i.window = r.window;
  i.scale = r.scale;
  gather(a.q, r.q, r.B, r.Hq, r.Nq, r.D, r.dtype, e->q);
  gather(a.k, r.k, r.B, r.Hkv, r.Nkv, r.D, r.dtype, e->k);
  gather(a.v, r.v, r.B, r.Hkv, r.Nkv, r.D, r.dtype, e->v);
  return e;
}

void writeOutput(const Resolved& r, const core::HeadResult& hr, void* o) {
  auto* row0 = static_cast<uint16_t*>(o) + hr.batch * r.o.batch + hr.head * r.o.head;
  const bool bf16 = r.dtype == core::DType::BFloat16;
  for (int n = 0; n < r.Nq; ++n) {
    uint16_t* row = row0 + n * r.o.token;
    const float* x = hr.output.data() + size_t(n) * r.D;
    for (int d = 0; d < r.D; ++d) row[d] = bf16 ? core::floatToBf16(x[d]) : core::floatToHalf(x[d]);
  }
}

void writeMaps(const Resolved& r, const core::HeadResult& hr, const sparge_attn_outputs& out) {
  const size_t bh = size_t(hr.batch) * r.Hq + size_t(hr.head), grid = size_t(r.nq) * r.nk;
  if (out.block_mask) std::copy(hr.blockMask.begin(), hr.blockMask.end(), out.block_mask + bh * grid);
  if (out.pv_skipped) std::copy(hr.pvSkipped.begin(), hr.pvSkipped.end(), out.pv_skipped + bh * grid);
  if (out.lut || out.lut_count) {
    std::vector<int32_t> lut(size_t(r.nk));
    for (int i = 0; i < r.nq; ++i) {
      int32_t count = 0;
      core::encodeLutRow(hr.blockMask.data() + size_t(i) * r.nk, r.nk, lut.data(), &count);
      if (out.lut) std::copy(lut.begin(), lut.end(), out.lut + (bh * r.nq + i) * r.nk);
      if (out.lut_count) out.lut_count[bh * r.nq + i] = count;
    }
  }
  if (out.head_stats) {
    int64_t* s = out.head_stats + bh * SPARGE_ATTN_STATS;
    s[SPARGE_ATTN_STAT_VALID_BLOCKS] = hr.sparsity.validBlocks;
    s[SPARGE_ATTN_STAT_SELECTED_BLOCKS] = hr.sparsity.selectedBlocks;
    s[SPARGE_ATTN_STAT_COMPUTED_PV] = hr.sparsity.computedPvBlocks;
    s[SPARGE_ATTN_STAT_SKIPPED_PV] = hr.sparsity.skippedPvBlocks;
    s[SPARGE_ATTN_STAT_EMPTY_ROWS] = hr.emptyRows;
  }
}

// One engine run over the heads whose `exact` flag is `exactHeads`, in their numerics.
void runGroup(const Resolved& r, const RunArgs& a, core::CpuEngine& engine, bool exactHeads) {
  core::RunConfig config;
  config.geometry = r.geometry;
  config.numerics = exactHeads ? core::Numerics::None : r.numerics;
  config.smoothK = r.smoothK;
  config.sink = r.sink;
  config.diagonal = r.diagonal;
  config.perHead = a.heads->params;
  core::RunOptions options;
  options.keepOutput = true;
  options.computeError = false;
  for (int h = 0; h < r.Hq; ++h)
    if (bool(a.heads->exact[size_t(h)]) == exactHeads) options.heads.push_back(h);
  if (options.heads.empty()) return;
  const core::EntryResult res = engine.run(config, options);
  for (const core::HeadResult& hr : res.heads) {
    writeOutput(r, hr, a.o);
    writeMaps(r, hr, a.outputs);
  }
}

}  // namespace

void runOnCpu(const Resolved& r, const RunArgs& a) {
  for (const void* p : {a.q, a.k, a.v, static_cast<const void*>(a.o)})
    if (pointerOnDevice(p))
      throw Failure(SPARGE_ATTN_ERROR_INVALID_ARGUMENT,
                    "the plan runs on the CPU but a tensor is in device memory: make the plan with "
                    "SPARGE_ATTN_BACKEND_CUDA, or pass host tensors");
  core::CpuEngine engine(r.cpuThreads);
  engine.setEntry(makeEntry(r, a));
  runGroup(r, a, engine, false);
  runGroup(r, a, engine, true);
}

}  // namespace sparge::capi

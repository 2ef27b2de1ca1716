// The finish every device block predictor shares (method_kernels.h): from MethodRows, the geometry's block
// flags and the forced blocks, the final mask, reasons, score, delta LUT and block counts, one warp per row,
// exactly as core's finishMask and Stage 1's selection write them.
#include <cuda_runtime.h>

#include "common/cuda_util.h"
#include "predictors/method_kernels.h"
#include "sparge/core/result.h"
#include "stages/stage1_parts.cuh"

namespace sparge::cuda::predictors {
namespace {

constexpr int kFinishWarps = 4;

// One warp per (query block, head, batch item). Dynamic smem: one final-mask row of nk bytes per warp.
__global__ void __launch_bounds__(kFinishWarps * 32)
    sparge_predict_method_finish(const MethodRows rows, const FinishArgs a,
                                 const uint8_t* __restrict__ blocks, const int* __restrict__ heads, int Hq,
                                 int nq, int nk, int nHeads, int total) {
  extern __shared__ uint8_t finRows[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int row = blockIdx.x * kFinishWarps + warp;
  if (row >= total) return;  // the whole warp
  const int i = row % nq, hq = heads[(row / nq) % nHeads], b = row / (nq * nHeads);
  const int bh = b * Hq + hq;
  const size_t rowOff = ((size_t)bh * nq + i) * nk;
  const bool dense = a.params[hq].dense || rows.denseHead[bh];
  constexpr uint8_t kOn = core::kReasonSelected | core::kReasonMethod | core::kReasonDenseHead |
                          core::kReasonSink | core::kReasonDiagonal;
  uint8_t* fin = finRows + warp * nk;
  for (int j = lane; j < nk; j += 32) {
    const uint8_t flags = blocks[(size_t)i * nk + j];
    uint8_t r = (rows.selected[rowOff + j] ? core::kReasonSelected : 0) |
                (rows.methodForced[rowOff + j] ? core::kReasonMethod : 0) |
                (dense ? core::kReasonDenseHead : 0) | (a.forced.sink && j == 0 ? core::kReasonSink : 0) |
                (a.forced.diagonal && (flags & kBlockOnDiagonal) ? core::kReasonDiagonal : 0);
    bool on = (r & kOn) != 0;
    if (!(flags & kBlockValid)) {
      r |= core::kReasonCausalOff;
      on = false;
    }
    a.reasons[rowOff + j] = r;
    a.mask[rowOff + j] = on ? 1 : 0;
    a.prob[rowOff + j] = rows.score[rowOff + j];
    fin[j] = on ? 1 : 0;
  }
  __syncwarp();
  writeDeltaLut(fin, nk, a.lut + rowOff, a.validCount + (size_t)bh * nq + i);
}

}  // namespace

void launchFinish(const MethodLaunch& l, const MethodRows& rows, const FinishArgs& a) {
  const Problem& p = l.problem;
  const int total = p.nq * p.nHeads * p.B;
  if (total == 0) return;
  const size_t smem = (size_t)kFinishWarps * p.nk;
  if (smem > 48 * 1024)
    check(cudaFuncSetAttribute(sparge_predict_method_finish, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               (int)smem),
          "cudaFuncSetAttribute(sparge_predict_method_finish)");
  const int grid = (total + kFinishWarps - 1) / kFinishWarps;
  sparge_predict_method_finish<<<grid, kFinishWarps * 32, smem, l.stream>>>(
      rows, a, l.blockFlags, p.heads, p.Hq, p.nq, p.nk, p.nHeads, total);
  checkLaunch("sparge_predict_method_finish");
}

}  // namespace sparge::cuda::predictors

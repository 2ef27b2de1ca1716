// The finish every device block predictor shares (method_kernels.h): from MethodRows, the geometry's block
// flags and the forced blocks, the final mask, reasons, score, delta LUT and block counts, one warp per row,
// exactly as core's finishMask and Stage 1's selection write them.
#include <cuda_runtime.h>

#include <cstdint>

#include "common/cuda_util.h"
#include "predictors/method_kernels.h"
#include "sparge/core/result.h"
#include "stages/stage1_parts.cuh"

namespace sparge::cuda::predictors {
namespace {

constexpr int kFinishWarps = 4;
// Blocks a lane takes at once on the vector path: 8-byte loads and stores of the byte rows, two float4 of
// the scores.
constexpr int kFinishVec = 8;

// One block's reasons and whether it is on, as core's finishMask decides them.
struct FinishRule {
  uint8_t common;  // the bits every block of the row shares: the dense head
  bool sink, diagonal;
  __device__ __forceinline__ uint8_t reasons(bool selected, bool forced, uint8_t flags, int j) const {
    uint8_t r = common | (selected ? core::kReasonSelected : 0) | (forced ? core::kReasonMethod : 0) |
                (sink && j == 0 ? core::kReasonSink : 0) |
                (diagonal && (flags & kBlockOnDiagonal) ? core::kReasonDiagonal : 0);
    return flags & kBlockValid ? r : uint8_t(r | core::kReasonCausalOff);
  }
  __device__ __forceinline__ static bool on(uint8_t r) {
    constexpr uint8_t kOn = core::kReasonSelected | core::kReasonMethod | core::kReasonDenseHead |
                            core::kReasonSink | core::kReasonDiagonal;
    return (r & kOn) != 0 && !(r & core::kReasonCausalOff);
  }
};

// One warp per (query block, head, batch item). Dynamic smem: one final-mask row of nk bytes per warp.
// Vec: nk a multiple of kFinishVec and every row 16-byte aligned, each lane taking kFinishVec consecutive
// blocks a step (the byte rows in 8-byte words); otherwise a block a lane.
template <bool Vec>
__global__ void __launch_bounds__(kFinishWarps * 32)
    sparge_predict_method_finish(const MethodRows rows, const FinishArgs a,
                                 const uint8_t* __restrict__ blocks, const int* __restrict__ heads, int Hq,
                                 int nq, int nk, int nHeads, int total) {
  extern __shared__ __align__(16) uint8_t finRows[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int row = blockIdx.x * kFinishWarps + warp;
  if (row >= total) return;  // the whole warp
  const int i = row % nq, hq = heads[(row / nq) % nHeads], b = row / (nq * nHeads);
  const int bh = b * Hq + hq;
  const size_t rowOff = ((size_t)bh * nq + i) * nk;
  const bool dense = a.params[hq].dense || rows.denseHead[bh];
  const FinishRule rule{uint8_t(dense ? core::kReasonDenseHead : 0), a.forced.sink != 0,
                        a.forced.diagonal != 0};
  uint8_t* fin = finRows + warp * nk;
  const uint8_t* flagRow = blocks + (size_t)i * nk;
  if constexpr (Vec) {
    for (int j0 = lane * kFinishVec; j0 < nk; j0 += 32 * kFinishVec) {
      union Bytes {
        uint2 word;
        uint8_t b[kFinishVec];
      } sel, forced, flags, reasons, mask;
      union Scores {
        float4 v[2];
        float f[kFinishVec];
      } score;
      sel.word = *reinterpret_cast<const uint2*>(rows.selected + rowOff + j0);
      forced.word = *reinterpret_cast<const uint2*>(rows.methodForced + rowOff + j0);
      flags.word = *reinterpret_cast<const uint2*>(flagRow + j0);
      score.v[0] = *reinterpret_cast<const float4*>(rows.score + rowOff + j0);
      score.v[1] = *reinterpret_cast<const float4*>(rows.score + rowOff + j0 + 4);
#pragma unroll
      for (int e = 0; e < kFinishVec; ++e) {
        reasons.b[e] = rule.reasons(sel.b[e] != 0, forced.b[e] != 0, flags.b[e], j0 + e);
        mask.b[e] = FinishRule::on(reasons.b[e]) ? 1 : 0;
      }
      *reinterpret_cast<uint2*>(a.reasons + rowOff + j0) = reasons.word;
      *reinterpret_cast<uint2*>(a.mask + rowOff + j0) = mask.word;
      *reinterpret_cast<float4*>(a.prob + rowOff + j0) = score.v[0];
      *reinterpret_cast<float4*>(a.prob + rowOff + j0 + 4) = score.v[1];
      *reinterpret_cast<uint2*>(fin + j0) = mask.word;
    }
  } else {
    for (int j = lane; j < nk; j += 32) {
      const uint8_t r =
          rule.reasons(rows.selected[rowOff + j] != 0, rows.methodForced[rowOff + j] != 0, flagRow[j], j);
      const uint8_t on = FinishRule::on(r) ? 1 : 0;
      a.reasons[rowOff + j] = r;
      a.mask[rowOff + j] = on;
      a.prob[rowOff + j] = rows.score[rowOff + j];
      fin[j] = on;
    }
  }
  __syncwarp();
  writeDeltaLut(fin, nk, a.lut + rowOff, a.validCount + (size_t)bh * nq + i);
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

template <bool Vec>
void finish(const MethodLaunch& l, const MethodRows& rows, const FinishArgs& a, int total) {
  const Problem& p = l.problem;
  const size_t smem = (size_t)kFinishWarps * p.nk;
  auto kernel = sparge_predict_method_finish<Vec>;
  if (smem > 48 * 1024)
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
          "cudaFuncSetAttribute(sparge_predict_method_finish)");
  const int grid = (total + kFinishWarps - 1) / kFinishWarps;
  kernel<<<grid, kFinishWarps * 32, smem, l.stream>>>(rows, a, l.blockFlags, p.heads, p.Hq, p.nq, p.nk,
                                                      p.nHeads, total);
  checkLaunch("sparge_predict_method_finish");
}

}  // namespace

void launchFinish(const MethodLaunch& l, const MethodRows& rows, const FinishArgs& a) {
  const Problem& p = l.problem;
  const int total = p.nq * p.nHeads * p.B;
  if (total == 0) return;
  // Rows start at multiples of nk entries: with nk a multiple of 8 and 16-byte aligned bases, every row's
  // byte words and float4 are aligned.
  const bool vec = p.nk % kFinishVec == 0 && aligned16(rows.selected) && aligned16(rows.methodForced) &&
                   aligned16(rows.score) && aligned16(l.blockFlags) && aligned16(a.reasons) &&
                   aligned16(a.mask) && aligned16(a.prob);
  if (vec)
    finish<true>(l, rows, a, total);
  else
    finish<false>(l, rows, a, total);
}

}  // namespace sparge::cuda::predictors

// Launchers of the whole call's own kernels (call_kernels.cu, stages/stats_quant.cu): per-run uploads by
// value, the block flags of a geometry derived on the device, layout copies, per-head counters, and Stage 1's
// statistics fused with the INT8 quantization of Q and K. None allocates or synchronises, so a whole call
// can be captured in a CUDA graph.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "call/block_rules.h"
#include "common/launch.h"
#include "common/upload.h"  // per-run uploads by value

namespace sparge::cuda {

// BlockFlags (launch.h) of every block of the rule's grid: valid, and on the diagonal. [nq][nk].
void launchBlockFlags(const BlockRule& rule, int nq, int nk, uint8_t* flags, cudaStream_t s);

// Strides of a [B][H][N][D] tensor in elements; D's stride is 1, rows 16-byte aligned.
struct Strides4 {
  int64_t batch, head, token;
};
// dst = src element for element (2-byte elements), B x H x N rows of D.
void launchLayoutCopy(const void* src, Strides4 srcStrides, void* dst, Strides4 dstStrides, int B, int H,
                      int N, int D, cudaStream_t s);

// Per (b*Hq + hq): {valid blocks, selected blocks, blocks with P·V computed, blocks with P·V skipped, rows
// with no key} into stats[bh][5]. pvSkipped and emptyRows may be null (counted as 0).
struct HeadStatsArgs {
  const uint8_t* flags = nullptr;       // [nq][nk] BlockFlags
  const int32_t* validCount = nullptr;  // [B*Hq][nq]
  const uint8_t* pvSkipped = nullptr;   // [B*Hq][nq][nk]
  const int* emptyRows = nullptr;       // [B*Hq]
  int64_t* stats = nullptr;
};
void launchHeadStats(const HeadStatsArgs& a, int BH, int nq, int nk, cudaStream_t s);

// How the caller reads the self-similarity s. Value: s itself. FlagBelowZero: only as s > θ with every θ < 0
// (each head's simthreshd1 negative, as SpargeAttn's top-k default): blocks that cannot give a NaN are
// written s = 0 instead of their value, which passes every such θ as the value does, and the pass skips the
// norms and units (block_pass.cuh, blockStatsPassSimFlag); the flags, pooled rows and INT8 tiles are the same
// bits.
enum class SimUse { Value, FlagBelowZero };

// stages/stats_quant.cu: launchBlockStats (launch.h) of x = Q or K, and when q8 is given, in the same pass,
// its INT8 tiles of BS rows as launchQuantize writes them (q8 [BH][nb*BS][D], scale [BH][nb]). km (the K
// mean, or null) smooths both, as the separate stages do.
void launchBlockPass(ElemType t, const void* x, int BH, int N, int D, int BS, const void* km, void* pooled,
                     float* selfSim, int8_t* q8, float* scale, SimUse use, cudaStream_t s);

}  // namespace sparge::cuda

// Host-side launchers of the CUDA kernels (one family per .cu file); plain C++ so that the engine
// and the benchmark compile as C++.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "sparge/core/types.h"

namespace sparge::cuda {

enum class ElemType { F16, BF16 };

// Which Stage-2 kernel family runs a launch: the launcher's choice (attentionSm90Selected), or the mma.sync
// family everywhere (for comparing the two on a Hopper GPU).
enum class AttnFamily { Auto, Sm80 };

// Switches for measuring and testing kernel variants without rebuilding; none changes results. Whoever
// builds the launch arguments (the engine, the benchmark) reads them once, when it is constructed; the
// launchers themselves read no environment.
struct KernelSwitches {
  AttnFamily family = AttnFamily::Auto;  // SPARGE_ATTN_KERNEL=sm80: the mma.sync family
  float sm90SplitBelow = -1.f;   // SPARGE_SM90_SPLIT_BELOW=X: the Hopper split rule; < 0: the kernel's
  bool selectCtaPerRow = false;  // SPARGE_SELECT_CTA set: Stage 1's CTA-per-row selection for every row
  static KernelSwitches fromEnvironment();
};

// Per query head, as the kernels read them.
struct HeadParamsDev {
  double theta = 0.6;   // similarity flag: s > θ (compared in double, as the CPU does)
  float tau = 0.98f;    // CDF mode: keep while cdf <= float(τ)
  float topk = 0.5f;    // top-k mode: n = trunc(float(ρ) · nk)
  float lambda = 50.f;  // PV skip threshold (base 2); +inf disables
  int mode = 0;         // 0 = CDF, 1 = top-k
  int dense = 0;        // 1 = every valid block, no skip
  int pad = 0;
};

// Every per-head array is indexed by the full (batch, query head) index b*Hq + hq; kernels visit only
// the heads listed in `heads` (query-head numbers, nHeads of them) for every batch item.
struct Problem {
  int B = 1, Hq = 1, Hkv = 1;
  int Nq = 0, Nkv = 0, D = 64;
  int BQ = 128, BK = 64;  // geometry
  int nq = 0, nk = 0;
  bool causal = false;
  core::Window window;         // local window (core::visibleKeys defines what a query sees)
  const int* heads = nullptr;  // device array
  int nHeads = 0;
};

// --- predict.cu (Stage 1) ---
// km[bh][d] = T(mean over tokens of K), one per (batch, KV head). `scratch`: B*Hkv*D doubles.
void launchKeyMean(ElemType t, const void* k, int BH, int N, int D, double* scratch, void* km,
                   cudaStream_t s);
// Pools blocks of BS rows: pooled [BH][nb][D] (T), selfSim [BH][nb] (float, NaN rule). `km` may be null.
void launchBlockStats(ElemType t, const void* x, int BH, int N, int D, int BS, const void* km, void* pooled,
                      float* selfSim, cudaStream_t s);
// scores[b*Hq+hq][i][j] = T(T(pq·pk) · D^-0.5) for all heads.
void launchScores(ElemType t, const Problem& p, const void* pooledQ, const void* pooledK, void* scores,
                  cudaStream_t s);
// What the host knows of each block of a geometry before any selection (core::blockValid and
// core::blockOnDiagonal with the entry's causal flag and window), so that both engines agree on them.
enum BlockFlags : uint8_t { kBlockValid = 1, kBlockOnDiagonal = 2 };
// Inputs and outputs of the selection, per (b*Hq+hq) unless noted.
struct SelectArgs {
  const void* scores = nullptr;           // [nq][nk] (T), from launchScores
  const float* selfSimQ = nullptr;        // [nq]
  const float* selfSimK = nullptr;        // per (b*Hkv+hk): [nk]
  const uint8_t* blocks = nullptr;        // [nq][nk] BlockFlags, the same for every head
  const HeadParamsDev* params = nullptr;  // per query head
  bool sink = false;                      // K block 0 always on
  bool diagonal = false;                  // blocks flagged kBlockOnDiagonal always on
  uint8_t* mask = nullptr;                // [nq][nk]
  uint8_t* reasons = nullptr;             // [nq][nk], core::BlockReason bits
  float* prob = nullptr;                  // [nq][nk]
  int32_t* lut = nullptr;                 // [nq][nk] delta LUT
  int32_t* validCount = nullptr;          // [nq]
  bool ctaPerRow = false;                 // every row through the CTA-per-row kernel (KernelSwitches)
};
// Selection, final mask, reasons, pooled probabilities and the delta LUT for the listed heads, in
// core::selectBlocks' order: forced columns/rows, selection, sink, diagonal, then invalid blocks off.
void launchSelect(ElemType t, const Problem& p, const SelectArgs& a, cudaStream_t s);

// --- quantize.cu: operands of the quantized numerics (SpargeAttn's scales and rounding) ---
// Q and K are quantized per tile of the run's geometry (Q per BQ rows, K per BK rows after subtracting the
// per-head token mean km), scale = amax/127 + 1e-7, round half away from zero. V depends on the numerics:
// Int8Fp16 keeps fp16 V; Int8Fp8 stores e4m3 V (per-channel scale amax/2.25) in the layout the attention
// family reads. All buffers live in one workspace of quantWorkspaceBytes() bytes.
struct QuantOperands {
  const int8_t* q8 = nullptr;     // [B*Hq][nq*BQ][D], zero rows past Nq
  const float* qScale = nullptr;  // [B*Hq][nq]
  const int8_t* k8 = nullptr;     // [B*Hkv][nk*BK][D], zero rows past Nkv
  const float* kScale = nullptr;  // [B*Hkv][nk]
  const void* v = nullptr;        // Int8Fp16: fp16 [B*Hkv][Nkv][D]; Int8Fp8: e4m3, family layout
  const float* vScale = nullptr;  // Int8Fp8: [B*Hkv][D]
};
size_t quantWorkspaceBytes(const Problem& p, core::Numerics n);
// Fills the workspace from q, k, v (T) and km (T, [B*Hkv][D], from launchKeyMean); returns views into it.
QuantOperands launchQuantize(ElemType t, const Problem& p, core::Numerics n, const void* q, const void* k,
                             const void* km, const void* v, void* workspace, cudaStream_t s);
// The same in parts, for a caller that quantizes Q and K elsewhere (launchBlockPass): where the operands will
// lie in the workspace, and V alone (int8-fp16 with fp16 inputs points ops.v at v itself).
QuantOperands quantOperandViews(const Problem& p, core::Numerics n, void* workspace);
void launchQuantizeV(ElemType t, const Problem& p, core::Numerics n, const void* v, void* workspace,
                     QuantOperands& ops, cudaStream_t s);

// --- attention_sm80.cu (Stage 2, mma.sync) ---
struct AttnArgs {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;                      // [B*Hq][Nq][D], T
  float scaleLog2 = 0;                    // softmax scale · log2(e)
  const int32_t* lut = nullptr;           // [B*Hq][nq][nk] delta LUT (sparse only)
  const int32_t* validCount = nullptr;    // [B*Hq][nq]
  const HeadParamsDev* params = nullptr;  // per query head: λ and dense (sparse only)
  uint8_t* pvSkipped = nullptr;           // [B*Hq][nq][nk], written with 1 where PV was skipped
  int* emptyRows = nullptr;               // [B*Hq], rows with no attended key
  // Numerics other than None read `quant` (from launchQuantize) instead of q, k, v.
  core::Numerics numerics = core::Numerics::None;
  QuantOperands quant;
  AttnFamily family = AttnFamily::Auto;  // KernelSwitches::family
  float sm90SplitBelow = -1.f;           // KernelSwitches::sm90SplitBelow
  // false: no head of the launch runs the PV-skip vote (each is dense or has λ = +inf), so that the Hopper
  // int8-fp8 sparse walk can run its instantiation without the vote.
  bool votes = true;
};
// dense = true: every block holding a visible key (causal, window), no PV skip (kernels named
// sparge_dense_*).
void launchAttention(ElemType t, const Problem& p, const AttnArgs& a, bool dense, cudaStream_t s);

// --- attention_sm90.cu (Stage 2, Hopper: TMA, warp-specialised wgmma; head dims 64 and 128) ---
// launchAttention uses it when the current device is sm_90 and the geometry is 64x128 with numerics None or
// Int8Fp8, or 128x64 with numerics None, unless the family is AttnFamily::Sm80 (the mma.sync family then runs
// instead, for comparison).
bool attentionSm90Selected(const Problem& p, core::Numerics n = core::Numerics::None,
                           AttnFamily family = AttnFamily::Auto);
void launchAttentionSm90(ElemType t, const Problem& p, const AttnArgs& a, bool dense, cudaStream_t s);
// Number of sm90 launches so far in this process (lets tests prove that the wgmma kernel ran).
int64_t attentionSm90LaunchCount();

// --- reference.cu (dense fp32 reference) ---
// oref [B*Hq][Nq][D] fp32; mass64 [B*Hq][ceil(Nq/64)][ceil(Nkv/64)]: Σ over real query rows of each
// 64-row tile of the attention probability inside each 64-key tile.
void launchReference(ElemType t, const Problem& p, const void* q, const void* k, const void* v, double scale,
                     float* oref, float* mass64, cudaStream_t s);

// --- error.cu ---
// Per (b*Hq+hq, q-block of BQ rows): 8 doubles {Σ|O-R|, Σ|R|, Σ O·R, Σ O², Σ R², Σ(O-R)², count, nonfinite}.
void launchError(ElemType t, const Problem& p, const void* o, const float* oref, double* sums,
                 cudaStream_t s);

// --- bench helpers (predict.cu) ---
void launchRandomFill(ElemType t, void* x, int64_t n, uint64_t seed, float stddev, cudaStream_t s);

}  // namespace sparge::cuda

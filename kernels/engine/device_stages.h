// Device buffers and launches of the stages of one attention call (Stage 1, quantization, attention
// arguments), shared by the CUDA engine and the benchmark so that both run exactly the same call.
#pragma once

#include <cstddef>
#include <vector>

#include "common/cuda_util.h"
#include "common/launch.h"
#include "sparge/core/stage1.h"

namespace sparge::cuda {

// Q, K, V on the device: Q [B*Hq][Nq][D], K and V [B*Hkv][Nkv][D], all of element type `et`.
struct DeviceQkv {
  ElemType et = ElemType::F16;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
};

// The problem the kernels read, for a geometry and causal/window rule; `heads`/`nHeads` are set by the
// caller.
Problem makeProblem(int B, int Hq, int Hkv, int Nq, int Nkv, int D, const core::Geometry& g, bool causal,
                    const core::Window& window);

// Per-head K token mean [B*Hkv][D] (smooth-K), computed once per K; all zeros when smoothing is off, so the
// quantizer always subtracts something.
class KeyMean {
 public:
  const void* get(const DeviceQkv& x, const Problem& p, bool smoothK, cudaStream_t s);
  void refresh() { meanDone_ = false; }  // the next get() computes the mean again (a benchmarked call does)

 private:
  DeviceBuffer mean_, zeros_, scratch_;
  bool meanDone_ = false, zerosDone_ = false;
};

// The θ-independent Stage-1 statistics of one geometry and smooth-K setting: pooled Q/K, self-similarity,
// compressed scores.
struct Stage1Stats {
  DeviceBuffer pooledQ, pooledK, simQ, simK, scores;
  // `km` null: no smoothing.
  void compute(const DeviceQkv& x, const Problem& p, const void* km, cudaStream_t s);
};

// BlockFlags of every block of `validity`'s grid: its validity, and whether it holds key == query.
std::vector<uint8_t> blockFlags(const core::BlockValidity& validity, const core::Geometry& g, int64_t nQ,
                                int64_t nKv, bool causal, const core::Window& window);

// Blocks that Stage 1 keeps on whatever it selects (core::ForcedBlocks).
struct ForcedOn {
  bool sink = false;
  bool diagonal = false;
};

// Outputs of a selection (mask, reasons, P̂, LUT, counts) and the geometry's block flags on the device.
class DeviceSelection {
 public:
  // Uploads the block flags of geometry `g` (blockFlags) unless they are the ones uploaded last.
  void setBlocks(const std::vector<uint8_t>& flags, const core::Geometry& g);
  void select(const DeviceQkv& x, const Problem& p, const Stage1Stats& stats, const HeadParamsDev* params,
              ForcedOn forced, const KernelSwitches& switches, cudaStream_t s);
  // The outputs sized for `p` (select does it; the other methods' predictors write them too).
  void reserveOutputs(const Problem& p);
  const uint8_t* blocks() const { return blocks_.as<uint8_t>(); }  // the flags of setBlocks
  DeviceBuffer mask, reasons, prob, lut, validCount;

 private:
  DeviceBuffer blocks_;
  int blocksQ_ = 0, blocksK_ = 0;
  size_t blocksSize_ = 0;
};

// The operands of quantized numerics, in one reusable workspace.
class DeviceQuant {
 public:
  const QuantOperands& run(const DeviceQkv& x, const Problem& p, core::Numerics n, const void* km,
                           cudaStream_t s);

 private:
  DeviceBuffer workspace_;
  QuantOperands ops_;
};

// Arguments of one attention launch over `sel`'s LUT, writing o, the PV-skip map and the empty-row counts.
// `quant` null: exact numerics.
AttnArgs makeAttnArgs(const DeviceQkv& x, double scale, const DeviceSelection& sel,
                      const HeadParamsDev* params, void* o, uint8_t* pvSkipped, int* emptyRows,
                      core::Numerics numerics, const QuantOperands* quant, const KernelSwitches& switches);

// A head's parameters as the kernels read them (a dense head never skips: λ = +inf).
HeadParamsDev toDeviceParams(const core::HeadParams& x);

// Uploads a list of query heads for Problem::heads.
void uploadHeads(DeviceBuffer& dst, const std::vector<int>& heads);

}  // namespace sparge::cuda

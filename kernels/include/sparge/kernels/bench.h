// Kernel benchmark on random device data (used by `sparge bench`): the whole call (Stage 1 + quantization +
// attention) and its parts, our dense kernel and cuDNN's fused attention, each min / median / max.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sparge/core/method.h"
#include "sparge/core/params.h"
#include "sparge/core/types.h"

namespace sparge::cuda {

struct BenchCase {
  int64_t batch = 1;
  int64_t heads = 32;
  int64_t tokens = 4096;  // Nq = Nkv
  int64_t headDim = 128;
  bool causal = false;
  std::vector<double> topks{1.0, 0.5, 0.2, 0.1};
  core::Geometry geometry = core::kGeometry64x128;
  core::DType dtype = core::DType::Float16;
  core::Numerics numerics = core::Numerics::None;
  double lambda = 50.0;  // pvthreshd (SpargeAttn's top-k API default)
  double theta = -0.1;   // simthreshd1 (top-k API default: the similarity filter is off)
  int repeat = 10;
  int warmup = 2;  // untimed runs before timing, at least
  // ... and untimed running for at least this long, so that every measurement starts in the state sustained
  // load leaves the GPU in (clocks come down under sustained load; short bursts after idle run faster:
  // kernels/NOTES.md, "Figures behind the rules in the code").
  int warmupMs = 200;
  // Idle time before each timed measurement, for comparing with tools that start each measurement after idle
  // (a heavy measurement can slow the next one: kernels/NOTES.md, "Figures behind the rules in the code").
  // 0: no pause.
  int pauseMs = 0;
  bool cudnn = true;  // also time cuDNN's fused attention
  // Block predictors whose Stage 1 is timed beside the dense walk (SpargeAttn's is BenchResult::stage1), each
  // with `methodParams` (their defaults unless set).
  std::vector<core::Method> methods;
  core::HeadParams methodParams;
  bool mmaSyncOnly = false;  // Stage 2 on the mma.sync family also where the Hopper kernel would run
};

struct TimeStats {
  double medianMs = 0, minMs = 0, maxMs = 0;
};

struct BenchSparse {
  double topk = 0;
  TimeStats
      call;  // the whole call as deployed (kernels/call/whole_call.h: Stage 1 fused with Q/K quantization)
  TimeStats stage2;             // attention alone
  int64_t validBlocks = 0;      // exact (causal) denominator, summed over B*H
  int64_t selectedBlocks = 0;   // Stage-1 mask
  int64_t skippedPvBlocks = 0;  // Stage-2 PV skips
  double density() const { return validBlocks ? double(selectedBlocks) / double(validBlocks) : 0; }
};

// Stage 1 of one block predictor other than SpargeAttn's on the benchmark's data.
struct BenchMethod {
  core::Method method = core::Method::XAttention;
  TimeStats stage1;  // a fresh Stage 1: statistics, selection, finish (mask, reasons, LUT)
  TimeStats select;  // with the statistics cached (a knob move); the same as stage1 for methods caching none
  double density = 0;  // selected blocks over valid blocks
};

struct BenchResult {
  BenchCase config;
  std::string device;
  std::string attentionKernel;  // family that ran Stage 2: "sm90" (wgmma) or "sm80" (mma.sync)
  TimeStats stage1;             // statistics + selection + LUT (a fresh call)
  TimeStats stage1Select;       // selection + LUT only (a slider move)
  TimeStats quantize;           // operands of the numerics (zero for exact numerics)
  TimeStats dense;              // quantization + our kernel over every valid block, no skip
  bool cudnnTimed = false;
  TimeStats cudnn;         // cuDNN's fused attention, same shape and mask (when cudnnTimed)
  std::string cudnnLabel;  // "cuDNN 9.19.0 fused SDPA (float16)", or why it was not timed
  std::vector<BenchSparse> sparse;
  std::vector<BenchMethod> methods;  // BenchCase::methods, in order
  double denseFlops = 0;             // 4·B·H·Nq·Nkv·D, halved when causal
  double blockFlops = 0;             // flops of one (q-block, k-block) QK^T + PV pair
};

// Name of the current device, or throws sparge::Error when no device is usable.
std::string benchDeviceName();
// Default geometry for the current device: 64x128 on sm90, 128x64 otherwise.
core::Geometry benchDefaultGeometry();
// Runs one configuration; throws sparge::Error (no device, out of memory, unsupported head dim).
BenchResult runBench(const BenchCase& c);

}  // namespace sparge::cuda

// SpargeAttn's whole call on the caller's device pointers (the C API's CUDA backend and the benchmark): the
// K mean, Stage 1's statistics fused with the INT8 quantization of Q and K, the selection, V's quantization,
// Stage 2 per numerics group of heads and the optional outputs, every buffer in one caller-provided
// workspace, every launch on the caller's stream or on two streams forked from it and joined back into it
// within the call (Q's pass and V's quantization run beside K's): no allocation, no synchronisation, no host
// copy, so that a call can be captured in a CUDA graph. A host thread's first call on a device makes those
// two streams and their events, kept for its later calls. The launchers are the engine's (launch.h) plus
// call_launch.h's.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "call/call_launch.h"
#include "common/launch.h"

namespace sparge::cuda {

// What a call computes, apart from its data and per-head parameters.
struct CallShape {
  int B = 1, Hq = 1, Hkv = 1, Nq = 0, Nkv = 0, D = 64;
  ElemType et = ElemType::F16;
  core::Geometry geometry;
  bool causal = false;
  core::Window window;
  core::Numerics numerics = core::Numerics::Int8Fp8;
  double scale = 0;  // softmax scale of Stage 2
  bool smoothK = true, sink = false, diagonal = false;
  Strides4 q, k, v, o;      // of [B][H][N][D] tensors; contiguous ones are read and written in place
  KernelSwitches switches;  // kernel variants (defaults for the C API, which reads no environment)
};

// Optional outputs on the device (null: not wanted).
struct CallOutputs {
  uint8_t* mask = nullptr;       // [B*Hq][nq][nk]
  int32_t* lut = nullptr;        // [B*Hq][nq][nk]
  int32_t* lutCount = nullptr;   // [B*Hq][nq]
  uint8_t* pvSkipped = nullptr;  // [B*Hq][nq][nk]
  int64_t* headStats = nullptr;  // [B*Hq][5], launchHeadStats's order
};

struct CallArgs {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  const HeadParamsDev* params = nullptr;  // host memory, [Hq]
  const uint8_t* exact = nullptr;         // host memory, [Hq]: 1 = exact numerics for this head; may be null
  CallOutputs out;
  void* workspace = nullptr;  // wholeCallWorkspaceBytes(shape) bytes, 256-byte aligned
  cudaStream_t stream = nullptr;
};

class WholeCall {
 public:
  explicit WholeCall(const CallShape& shape);  // host work only
  const CallShape& shape() const { return shape_; }
  const Problem& problem() const { return p_; }
  size_t workspaceBytes() const { return total_; }
  // Queues the call on a.stream; throws sparge::Error when a launch fails.
  void run(const CallArgs& a) const;

  // Where each buffer lies in the workspace (byte offsets).
  struct Slots {
    size_t upload, flags, km, kmScratch, q, k, v, o, pooledQ, pooledK, simQ, simK, scores;
    size_t mask, reasons, prob, lut, validCount, pvSkipped, emptyRows, quant;
  };

 private:
  struct Ptrs;
  struct Groups;
  Ptrs resolve(const CallArgs& a) const;
  void stage1(const CallArgs& a, const Ptrs& x, const Groups& g, QuantOperands* ops) const;
  void select(const CallArgs& a, const Ptrs& x) const;
  void stage2(const CallArgs& a, const Ptrs& x, const Groups& g, const QuantOperands& ops) const;
  void finish(const CallArgs& a, const Ptrs& x) const;

  CallShape shape_;
  Problem p_;
  Slots at_{};
  size_t total_ = 0;
  bool copyQ_ = false, copyK_ = false, copyV_ = false, copyO_ = false;
};

}  // namespace sparge::cuda

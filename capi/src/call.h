// The C API's internal view of a call: the validated problem (Resolved), the per-head parameters of a run
// (RunHeads), the run's arguments, the backends behind a plan, and the failure type that carries a status
// across the C boundary.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "sparge/attention.h"
#include "sparge/core/params.h"
#include "sparge/core/types.h"

namespace sparge::capi {

// Thrown inside the library with the status the C caller receives; other exceptions map to a status by
// where they were caught (api.cpp).
class Failure : public std::runtime_error {
 public:
  Failure(sparge_attn_status status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  sparge_attn_status status() const { return status_; }

 private:
  sparge_attn_status status_;
};

// Strides of a [B, H, N, D] tensor, in elements (the D stride is 1).
struct Strides {
  int64_t batch = 0, head = 0, token = 0;
  bool operator==(const Strides&) const = default;
};

// A problem after validation: every default resolved, the strides of all four tensors explicit.
struct Resolved {
  int B = 1, Hq = 1, Hkv = 1, Nq = 0, Nkv = 0, D = 0;
  core::DType dtype = core::DType::Float16;
  core::Numerics numerics = core::Numerics::Int8Fp8;
  core::Geometry geometry;
  bool causal = false;
  core::Window window;
  double scale = 0;  // resolved: never 0
  bool smoothK = true, sink = false, diagonal = false;
  int cpuThreads = 0;
  Strides q, k, v, o;
  sparge_attn_backend backend = SPARGE_ATTN_BACKEND_CPU;  // resolved: CUDA or CPU
  int device = 0;                                         // CUDA
  int nq = 0, nk = 0;

  // Contiguous [B, H, N, D] strides of the tensor with `heads` heads and `tokens` tokens.
  static Strides hnd(int heads, int tokens, int d) {
    return {int64_t(heads) * tokens * d, int64_t(tokens) * d, d};
  }
};

// A run's per-head parameters in the engines' terms, validated.
struct RunHeads {
  std::vector<core::HeadParams> params;  // [Hq]
  std::vector<uint8_t> exact;            // [Hq], 1 = Stage 2 in exact numerics
  bool anyExact() const;
  bool anyQuantized() const;
};

struct RunArgs {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  const RunHeads* heads = nullptr;
  sparge_attn_outputs outputs{};  // all null when none were asked for
  void* workspace = nullptr;
  size_t workspaceBytes = 0;
  void* stream = nullptr;
};

// The CUDA side of a plan (cuda_plan.cpp; a stub in builds without CUDA).
class DevicePlan {
 public:
  virtual ~DevicePlan() = default;
  virtual size_t workspaceBytes() const = 0;
  virtual void run(const RunArgs& args) const = 0;
};

int cudaDeviceCount();
// True for memory the CUDA runtime knows as device (or managed) memory; false in builds without CUDA.
bool pointerOnDevice(const void* p);
// The device `requested` (-1: the current one), checked; throws Failure(NO_DEVICE) without one.
int resolveCudaDevice(int requested);
// SpargeAttn's geometry on that device: 64x128 on Hopper (sm_90), 128x64 elsewhere.
core::Geometry defaultCudaGeometry(int device);
// Checks that the device runs `r` (numerics, head dim) and lays out its workspace; host work only.
std::unique_ptr<DevicePlan> makeDevicePlan(const Resolved& r);

// cpu_run.cpp: the whole call on the CPU engine, host pointers.
void runOnCpu(const Resolved& r, const RunArgs& args);

// validate.cpp
Resolved resolveProblem(const sparge_attn_problem& p);
RunHeads resolveHeads(const Resolved& r, const sparge_attn_head_params* hp);
// Copies a caller's struct of `callerSize` bytes over `out` (filled with the defaults beforehand) and sets
// its struct_size: an older, smaller struct keeps the defaults of the fields it lacks; a newer, larger one
// must hold zeros past ours.
void readStruct(const void* in, uint32_t callerSize, size_t minSize, void* out, size_t ourSize,
                const char* what);

}  // namespace sparge::capi

// The C API's CUDA backend: the device and its checks at plan time, then each run's argument checks (memory
// of the plan's device, alignment, workspace) before the whole call (kernels/call/whole_call.h) is queued on
// the caller's stream.
#include <cuda_runtime.h>

#include <vector>

#include "call.h"
#include "call/whole_call.h"
#include "engine/device_stages.h"
#include "sparge/core/error.h"

namespace sparge::capi {
namespace {

int computeCapability(int device) {
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    cudaGetLastError();
    throw Failure(SPARGE_ATTN_ERROR_CUDA,
                  "cannot read the compute capability of CUDA device " + std::to_string(device));
  }
  return major * 10 + minor;
}

cuda::Strides4 strides4(const Strides& s) {
  return {s.batch, s.head, s.token};
}

// Sets the plan's device for the lifetime of the guard and restores the caller's.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device && cudaSetDevice(device) != cudaSuccess) {
      cudaGetLastError();
      throw Failure(SPARGE_ATTN_ERROR_CUDA, "cannot make CUDA device " + std::to_string(device) + " current");
    }
  }
  ~DeviceGuard() {
    int now = -1;
    if (previous_ >= 0 && cudaGetDevice(&now) == cudaSuccess && now != previous_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

class CudaPlan final : public DevicePlan {
 public:
  explicit CudaPlan(const Resolved& r) : r_(r), call_(shapeOf(r)) {}
  size_t workspaceBytes() const override { return call_.workspaceBytes(); }
  void run(const RunArgs& a) const override;

 private:
  static cuda::CallShape shapeOf(const Resolved& r);
  void checkPointer(const void* p, const char* what, bool aligned16) const;
  void checkArgs(const RunArgs& a) const;

  Resolved r_;
  cuda::WholeCall call_;
};

cuda::CallShape CudaPlan::shapeOf(const Resolved& r) {
  cuda::CallShape s;
  s.B = r.B;
  s.Hq = r.Hq;
  s.Hkv = r.Hkv;
  s.Nq = r.Nq;
  s.Nkv = r.Nkv;
  s.D = r.D;
  s.et = r.dtype == core::DType::BFloat16 ? cuda::ElemType::BF16 : cuda::ElemType::F16;
  s.geometry = r.geometry;
  s.causal = r.causal;
  s.window = r.window;
  s.numerics = r.numerics;
  s.scale = r.scale;
  s.smoothK = r.smoothK;
  s.sink = r.sink;
  s.diagonal = r.diagonal;
  s.q = strides4(r.q);
  s.k = strides4(r.k);
  s.v = strides4(r.v);
  s.o = strides4(r.o);
  return s;
}

void CudaPlan::checkPointer(const void* p, const char* what, bool aligned16) const {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    cudaGetLastError();
    attr.type = cudaMemoryTypeUnregistered;
  }
  const bool device = attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
  if (!device || attr.device != r_.device)
    throw Failure(SPARGE_ATTN_ERROR_INVALID_ARGUMENT,
                  std::string(what) + " is not memory of CUDA device " + std::to_string(r_.device) +
                      (device ? " (it is on device " + std::to_string(attr.device) + ")"
                              : " (host memory? the plan runs on the GPU: pass device pointers)"));
  if (aligned16 && reinterpret_cast<uintptr_t>(p) % 16 != 0)
    throw Failure(SPARGE_ATTN_ERROR_INVALID_ARGUMENT, std::string(what) + " must be 16-byte aligned");
}

void CudaPlan::checkArgs(const RunArgs& a) const {
  const size_t need = call_.workspaceBytes();
  if (!a.workspace || a.workspaceBytes < need)
    throw Failure(SPARGE_ATTN_ERROR_WORKSPACE,
                  "the workspace has " + std::to_string(a.workspace ? a.workspaceBytes : 0) +
                      " bytes; this plan "
                      "needs " +
                      std::to_string(need) + " (sparge_attn_plan_workspace_size)");
  if (reinterpret_cast<uintptr_t>(a.workspace) % 256 != 0)
    throw Failure(SPARGE_ATTN_ERROR_WORKSPACE, "the workspace must be 256-byte aligned");
  checkPointer(a.workspace, "workspace", false);
  checkPointer(a.q, "q", true);
  checkPointer(a.k, "k", true);
  checkPointer(a.v, "v", true);
  checkPointer(a.o, "o", true);
  const sparge_attn_outputs& o = a.outputs;
  if (o.block_mask) checkPointer(o.block_mask, "outputs.block_mask", false);
  if (o.lut) checkPointer(o.lut, "outputs.lut", false);
  if (o.lut_count) checkPointer(o.lut_count, "outputs.lut_count", false);
  if (o.pv_skipped) checkPointer(o.pv_skipped, "outputs.pv_skipped", false);
  if (o.head_stats) checkPointer(o.head_stats, "outputs.head_stats", false);
}

void CudaPlan::run(const RunArgs& a) const {
  const DeviceGuard guard(r_.device);
  checkArgs(a);
  std::vector<cuda::HeadParamsDev> params(size_t(r_.Hq));
  for (int h = 0; h < r_.Hq; ++h) params[size_t(h)] = cuda::toDeviceParams(a.heads->params[size_t(h)]);
  cuda::CallArgs c;
  c.q = a.q;
  c.k = a.k;
  c.v = a.v;
  c.o = a.o;
  c.params = params.data();
  c.exact = a.heads->exact.data();
  c.out.mask = a.outputs.block_mask;
  c.out.lut = a.outputs.lut;
  c.out.lutCount = a.outputs.lut_count;
  c.out.pvSkipped = a.outputs.pv_skipped;
  c.out.headStats = a.outputs.head_stats;
  c.workspace = a.workspace;
  c.stream = static_cast<cudaStream_t>(a.stream);
  try {
    call_.run(c);
  } catch (const Error& e) {
    throw Failure(SPARGE_ATTN_ERROR_CUDA, e.what());
  }
}

}  // namespace

int cudaDeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

bool pointerOnDevice(const void* p) {
  if (cudaDeviceCount() == 0) return false;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attr.type == cudaMemoryTypeDevice;
}

int resolveCudaDevice(int requested) {
  const int count = cudaDeviceCount();
  if (count == 0)
    throw Failure(SPARGE_ATTN_ERROR_NO_DEVICE,
                  "no usable CUDA device (driver or GPU missing): use SPARGE_ATTN_BACKEND_CPU (or AUTO)");
  int device = requested;
  if (device < 0 && cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    device = 0;
  }
  if (device >= count)
    throw Failure(SPARGE_ATTN_ERROR_INVALID_ARGUMENT, "problem.device " + std::to_string(device) +
                                                          " does not exist: this machine has " +
                                                          std::to_string(count) + " CUDA device(s)");
  return device;
}

core::Geometry defaultCudaGeometry(int device) {
  return computeCapability(device) == 90 ? core::kGeometry64x128 : core::kGeometry128x64;
}

std::unique_ptr<DevicePlan> makeDevicePlan(const Resolved& r) {
  const int cc = computeCapability(r.device);
  if (r.numerics == core::Numerics::Int8Fp8 && cc < 89)
    throw Failure(SPARGE_ATTN_ERROR_UNSUPPORTED,
                  "numerics int8-fp8 needs FP8 tensor cores (compute capability 8.9 or newer); CUDA device " +
                      std::to_string(r.device) + " is " + std::to_string(cc / 10) + "." +
                      std::to_string(cc % 10) + ": use SPARGE_ATTN_NUMERICS_INT8_FP16 or _NONE");
  if (cc < 80)
    throw Failure(SPARGE_ATTN_ERROR_UNSUPPORTED,
                  "the kernels need compute capability 8.0 or newer; CUDA device " +
                      std::to_string(r.device) + " is " + std::to_string(cc / 10) + "." +
                      std::to_string(cc % 10));
  return std::make_unique<CudaPlan>(r);
}

}  // namespace sparge::capi

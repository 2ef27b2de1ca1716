// The CUDA side of the C API in a build without CUDA: no device, and a clear error for a CUDA plan.
#include "call.h"

namespace sparge::capi {

int cudaDeviceCount() {
  return 0;
}

bool pointerOnDevice(const void*) {
  return false;
}

int resolveCudaDevice(int) {
  throw Failure(SPARGE_ATTN_ERROR_NO_DEVICE,
                "this libsparge_attn was built without CUDA: use SPARGE_ATTN_BACKEND_CPU (or AUTO)");
}

core::Geometry defaultCudaGeometry(int) {
  return core::kGeometry128x64;
}

std::unique_ptr<DevicePlan> makeDevicePlan(const Resolved&) {
  resolveCudaDevice(-1);
  return nullptr;
}

}  // namespace sparge::capi

// Host helpers for the CUDA engine (cuda_util.h).
#include "cuda_util.h"

#include <string>

#include "sparge/core/error.h"

namespace sparge::cuda {

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  cudaGetLastError();  // clear a sticky-free error so later calls are not poisoned
  throw Error(std::string("cuda: ") + what, std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e));
}

void checkLaunch(const char* kernel) {
  check(cudaGetLastError(), kernel);
}

void DeviceBuffer::reserve(size_t bytes, const char* what) {
  if (bytes <= n_) return;
  release();
  if (bytes == 0) return;
  cudaError_t e = cudaMalloc(&p_, bytes);
  if (e != cudaSuccess) {
    p_ = nullptr;
    cudaGetLastError();
    size_t freeB = 0, totalB = 0;
    cudaMemGetInfo(&freeB, &totalB);
    throw Error(std::string("cuda: ") + what,
                "out of GPU memory: asked for " + std::to_string(bytes >> 20) + " MiB, " +
                    std::to_string(freeB >> 20) + " MiB free of " + std::to_string(totalB >> 20) +
                    " MiB (try fewer heads or a smaller entry, or the CPU engine)");
  }
  n_ = bytes;
}

void DeviceBuffer::release() {
  if (p_) cudaFree(p_);
  p_ = nullptr;
  n_ = 0;
}

std::string deviceNameOrThrow() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw Error("cuda", std::string("no usable CUDA device: ") + cudaGetErrorString(e));
  }
  if (n == 0) throw Error("cuda", "no CUDA device found");
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, dev), "cudaGetDeviceProperties");
  if (p.major < 8)
    throw Error("cuda", std::string(p.name) + " has compute capability " + std::to_string(p.major) + "." +
                            std::to_string(p.minor) + "; the kernels need 8.0 or newer");
  return p.name;
}

int deviceComputeCapability() {
  int dev = 0, ma = 0, mi = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&ma, cudaDevAttrComputeCapabilityMajor, dev), "cudaDeviceGetAttribute");
  check(cudaDeviceGetAttribute(&mi, cudaDevAttrComputeCapabilityMinor, dev), "cudaDeviceGetAttribute");
  return ma * 10 + mi;
}

}  // namespace sparge::cuda

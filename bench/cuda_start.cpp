// CUDA's start-up in one process, as a rank of a multi-GPU job pays it once: the driver (cuInit), the
// device's primary context, a first device allocation and a page-locked host buffer like the engine's upload
// slots. Run several at once (tools/gpu/mpi_scaling.sh does, one per GPU) to see what processes starting together
// cost each other: that start-up is a fixed part of every rank's job time. CUDA_DEVICE_MAX_CONNECTIONS sets
// the hardware work queues the context makes (CUDA's default 8; sparge asks for 2).
#include <cuda.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>

namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

bool ok(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return true;
  const char* text = nullptr;
  cuGetErrorString(r, &text);
  std::fprintf(stderr, "cuda_start: %s failed: %s\n", what, text ? text : "unknown error");
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const char* label = argc > 1 ? argv[1] : "process";
  const Clock::time_point t0 = Clock::now();
  if (!ok(cuInit(0), "cuInit")) return 1;
  const double init = msSince(t0);
  CUdevice device;
  CUcontext context;
  if (!ok(cuDeviceGet(&device, 0), "cuDeviceGet") ||
      !ok(cuDevicePrimaryCtxRetain(&context, device), "context"))
    return 1;
  const double ctx = msSince(t0);
  void* d = nullptr;
  void* h = nullptr;
  if (cudaMalloc(&d, size_t(1) << 30) != cudaSuccess ||
      cudaHostAlloc(&h, size_t(64) << 20, 0) != cudaSuccess) {
    std::fprintf(stderr, "cuda_start: allocation failed: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  const double alloc = msSince(t0);
  std::printf("%s: driver %.0f ms, context %.0f ms, 1 GiB + 64 MiB page-locked %.0f ms; total %.0f ms\n",
              label, init, ctx - init, alloc - ctx, alloc);
  cudaFreeHost(h);
  cudaFree(d);
  cuDevicePrimaryCtxRelease(device);
  return 0;
}

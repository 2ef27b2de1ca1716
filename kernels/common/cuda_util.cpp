// Host helpers for the CUDA engine (cuda_util.h).
#include "common/cuda_util.h"

#include <string>

#include "common/head_dim.h"
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

namespace {

cudaError_t allocate(Memory m, void** p, size_t bytes) {
  return m == Memory::Device ? cudaMalloc(p, bytes) : cudaHostAlloc(p, bytes, cudaHostAllocDefault);
}

std::string outOfMemory(Memory m, size_t bytes) {
  if (m == Memory::PinnedHost)
    return "out of page-locked host memory: asked for " + std::to_string(bytes >> 20) +
           " MiB (close other programs or run fewer heads)";
  size_t freeB = 0, totalB = 0;
  cudaMemGetInfo(&freeB, &totalB);
  return "out of GPU memory: asked for " + std::to_string(bytes >> 20) + " MiB, " +
         std::to_string(freeB >> 20) + " MiB free of " + std::to_string(totalB >> 20) +
         " MiB (try fewer heads or a smaller entry, or the CPU engine)";
}

}  // namespace

template <Memory M>
void Buffer<M>::reserve(size_t bytes, const char* what) {
  if (bytes <= n_) return;
  release();
  if (bytes == 0) return;
  cudaError_t e = allocate(M, &p_, bytes);
  if (e != cudaSuccess) {
    p_ = nullptr;
    cudaGetLastError();
    throw Error(std::string("cuda: ") + what, outOfMemory(M, bytes));
  }
  n_ = bytes;
}

template <Memory M>
void Buffer<M>::release() {
  if (p_ && M == Memory::Device) cudaFree(p_);
  if (p_ && M == Memory::PinnedHost) {
    cudaDeviceSynchronize();  // an asynchronous copy of a cancelled run may still be writing here
    cudaFreeHost(p_);
  }
  p_ = nullptr;
  n_ = 0;
}

template class Buffer<Memory::Device>;
template class Buffer<Memory::PinnedHost>;

SideStream::~SideStream() {
  if (forked_) cudaEventDestroy(forked_);
  if (joined_) cudaEventDestroy(joined_);
  if (stream_) cudaStreamDestroy(stream_);
}

void SideStream::create() {
  if (!stream_)
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  if (!forked_) check(cudaEventCreateWithFlags(&forked_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  if (!joined_) check(cudaEventCreateWithFlags(&joined_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
}

cudaStream_t SideStream::get() {
  create();
  return stream_;
}

void SideStream::after(cudaStream_t s) {
  create();
  check(cudaEventRecord(forked_, s), "cudaEventRecord");
  check(cudaStreamWaitEvent(stream_, forked_, 0), "cudaStreamWaitEvent");
}

void SideStream::before(cudaStream_t s) {
  create();
  check(cudaEventRecord(joined_, stream_), "cudaEventRecord");
  check(cudaStreamWaitEvent(s, joined_, 0), "cudaStreamWaitEvent");
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

void throwUnsupportedHeadDim(long long d, const char* where) {
  throw Error(where, "head dim " + std::to_string(d) + " is not supported by the CUDA kernels (" +
                         kHeadDimsText + "); use --engine cpu");
}

size_t deviceSharedMemoryOptin() {
  int dev = 0, limit = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev),
        "cudaDeviceGetAttribute(shared memory)");
  return size_t(limit);
}

void requireSharedMemory(size_t bytes, const char* kernel, int headDim) {
  const size_t limit = deviceSharedMemoryOptin();
  if (bytes <= limit) return;
  throw Error("CUDA engine", std::string(kernel) + " at head dim " + std::to_string(headDim) + " needs " +
                                 std::to_string(bytes / 1024) +
                                 " KB of shared memory a block; this GPU allows " +
                                 std::to_string(limit / 1024) + " KB: use --engine cpu");
}

}  // namespace sparge::cuda

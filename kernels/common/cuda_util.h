// Host helpers for the CUDA engine: error checks that throw sparge::Error, RAII device and pinned host
// buffers, downloads.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace sparge::cuda {

// Throws sparge::Error("cuda: <what>", ...) when `e` is not cudaSuccess; out-of-memory gets a message
// saying how much was asked for and how much is free.
void check(cudaError_t e, const char* what);
// Checks the launch error of the kernel just queued.
void checkLaunch(const char* kernel);

// Where a Buffer's memory lives: on the device, or page-locked on the host (the target of asynchronous
// device-to-host copies, which run at full link speed and can overlap kernels).
enum class Memory { Device, PinnedHost };

// An allocation that frees itself; reserve() keeps the old block when it is large enough, so buffers are
// reused across runs.
template <Memory M>
class Buffer {
 public:
  Buffer() = default;
  ~Buffer() { release(); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  // Ensures at least `bytes`; `what` names the buffer in an out-of-memory message.
  void reserve(size_t bytes, const char* what);
  void release();
  template <typename T>
  T* as() const {
    return static_cast<T*>(p_);
  }
  void* get() const { return p_; }
  size_t bytes() const { return n_; }

 private:
  void* p_ = nullptr;
  size_t n_ = 0;
};
using DeviceBuffer = Buffer<Memory::Device>;
using PinnedBuffer = Buffer<Memory::PinnedHost>;

// A second stream for copies that run beside the kernels of the legacy default stream (it does not
// synchronise with it implicitly), created on first use, with the events that order it against others.
class SideStream {
 public:
  SideStream() = default;
  ~SideStream();
  SideStream(const SideStream&) = delete;
  SideStream& operator=(const SideStream&) = delete;
  cudaStream_t get();
  void after(cudaStream_t s);   // work queued here from now on waits for what `s` has queued so far
  void before(cudaStream_t s);  // work queued on `s` from now on waits for what was queued here so far

 private:
  void create();
  cudaStream_t stream_ = nullptr;
  cudaEvent_t forked_ = nullptr, joined_ = nullptr;
};

// Copies `count` elements of `dev` into `host` (resized), synchronously.
template <typename T>
void download(std::vector<T>& host, const DeviceBuffer& dev, size_t count, const char* what) {
  host.resize(count);
  if (count) check(cudaMemcpy(host.data(), dev.get(), count * sizeof(T), cudaMemcpyDeviceToHost), what);
}

std::string deviceNameOrThrow();
int deviceComputeCapability();     // major*10 + minor of the current device
size_t deviceSharedMemoryOptin();  // the most shared memory a block of the current device may opt in to

}  // namespace sparge::cuda

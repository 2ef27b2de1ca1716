// Host helpers for the CUDA engine: error checks that throw sparge::Error, RAII device buffers, downloads.
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

// A device allocation that frees itself; resize() keeps the old block when it is large enough, so
// buffers are reused across runs.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { release(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
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

// Copies `count` elements of `dev` into `host` (resized), synchronously.
template <typename T>
void download(std::vector<T>& host, const DeviceBuffer& dev, size_t count, const char* what) {
  host.resize(count);
  if (count) check(cudaMemcpy(host.data(), dev.get(), count * sizeof(T), cudaMemcpyDeviceToHost), what);
}

std::string deviceNameOrThrow();
int deviceComputeCapability();  // major*10 + minor of the current device

}  // namespace sparge::cuda

// Small host-to-device copies through kernel arguments: no pageable staging buffer and no copy engine, so
// a copy never waits for the stream to drain, takes a kernel's slot in stream order, and is kept by value
// in a captured CUDA graph.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

namespace sparge::cuda {

// Bytes a launch carries in its arguments (under the 4 KB argument limit every architecture allows).
inline constexpr size_t kUploadChunk = 3968;

// Copies `bytes` of host memory to device memory `dst`, in launches of up to kUploadChunk bytes; the host
// memory may be reused as soon as the call returns.
void launchUpload(void* dst, const void* src, size_t bytes, cudaStream_t s);

template <typename T>
void uploadAsync(T* dev, const std::vector<T>& host, cudaStream_t s) {
  if (!host.empty()) launchUpload(dev, host.data(), sizeof(T) * host.size(), s);
}

}  // namespace sparge::cuda

// Uploads by value (upload.h).
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "common/cuda_util.h"
#include "common/upload.h"

namespace sparge::cuda {
namespace {

struct UploadChunk {
  uint8_t* dst;
  uint32_t bytes;
  uint8_t data[kUploadChunk];
};

__global__ void sparge_other_upload(const UploadChunk c) {
  for (uint32_t i = threadIdx.x; i < c.bytes; i += blockDim.x) c.dst[i] = c.data[i];
}

}  // namespace

void launchUpload(void* dst, const void* src, size_t bytes, cudaStream_t s) {
  for (size_t off = 0; off < bytes; off += kUploadChunk) {
    UploadChunk c;
    c.dst = static_cast<uint8_t*>(dst) + off;
    c.bytes = uint32_t(std::min(kUploadChunk, bytes - off));
    std::memcpy(c.data, static_cast<const uint8_t*>(src) + off, c.bytes);
    sparge_other_upload<<<1, 256, 0, s>>>(c);
    checkLaunch("sparge_other_upload");
  }
}

}  // namespace sparge::cuda

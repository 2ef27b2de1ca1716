// The upload of an entry's tensors: converted to 16-bit on the host into two page-locked staging slots,
// one converted while the other's copy runs. Pageable copies went through the driver's own staging at a
// fraction of the link's speed, and every entry allocated (and faulted in) a fresh 16-bit copy of itself.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "common/cuda_util.h"
#include "common/launch.h"  // ElemType

namespace sparge::cuda {

class UploadStaging {
 public:
  UploadStaging() = default;
  ~UploadStaging();
  UploadStaging(const UploadStaging&) = delete;
  UploadStaging& operator=(const UploadStaging&) = delete;

  // Copies `heads` consecutive heads of `perHead` floats from `src` to `dst` as 16-bit values of type t,
  // and sets headNonFinite[i] to 1 for each head i holding NaN or ±Inf. The copies are queued on the legacy
  // default stream: kernels queued after this call see the data; the host does not wait for them.
  void upload(void* dst, const float* src, int64_t heads, size_t perHead, ElemType t, uint8_t* headNonFinite,
              const char* what);

 private:
  void uploadSlot(int s, void* dst, const float* src, size_t begin, size_t end, size_t perHead, ElemType t,
                  uint8_t* headNonFinite, const char* what);

  PinnedBuffer slot_[2];
  cudaEvent_t copied_[2] = {nullptr, nullptr};  // each slot's last copy
};

}  // namespace sparge::cuda

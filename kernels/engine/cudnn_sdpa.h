// cuDNN's fused scaled-dot-product attention (through the cudnn-frontend graph API) on device tensors: the
// dense baseline that speedups are quoted against. libcudnn.so.9 is loaded at run time ($SPARGE_CUDNN_LIBRARY
// names it explicitly), so a machine without cuDNN runs everything else and is told why.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "common/launch.h"

namespace sparge::cuda {

// Whether cuDNN can be used in this process: loaded once, never throws.
struct CudnnAvailability {
  bool ok = false;
  int version = 0;            // cudnnGetVersion(), e.g. 91900
  std::string path;           // the library that was opened
  std::string reason;         // why not, when !ok
  std::string label() const;  // "cuDNN 9.19.0"
};
const CudnnAvailability& cudnnAvailability();

struct SdpaShape {
  ElemType et = ElemType::F16;
  int B = 1, Hq = 1, Hkv = 1, Nq = 0, Nkv = 0, D = 64;
  bool causal = false;
  core::Window window;
  double scale = 0;
};

// One built cuDNN plan for a shape: Q [B][Hq][Nq][D], K and V [B][Hkv][Nkv][D], O like Q, all of `et`.
class CudnnSdpa {
 public:
  // Builds the graph and its plan; throws sparge::Error saying why cuDNN cannot (missing library, a shape or
  // mask cuDNN does not support, no engine for this GPU).
  explicit CudnnSdpa(const SdpaShape& shape);
  ~CudnnSdpa();
  CudnnSdpa(const CudnnSdpa&) = delete;
  CudnnSdpa& operator=(const CudnnSdpa&) = delete;

  void run(const void* q, const void* k, const void* v, void* o, cudaStream_t s);
  const std::string& label() const { return label_; }  // "cuDNN 9.19.0 fused SDPA (float16)"

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string label_;
};

}  // namespace sparge::cuda

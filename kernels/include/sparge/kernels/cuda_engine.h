// The CUDA engine: SpargeAttn Stage 1 and Stage 2 on the GPU, same results types as the CPU engine.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "sparge/core/engine.h"

namespace sparge::cuda {

// True when a CUDA device of compute capability >= 8.0 is present and the driver works; otherwise
// `why` (optional) says what is missing.
bool deviceUsable(std::string* why);

// Runs entries on the current CUDA device. Device copies of Q/K/V, the θ-independent Stage-1
// statistics (per geometry and smooth_k) and the dense fp32 reference (per head) are cached for the
// current entry, so a parameter change re-runs only the selection and the sparse kernel.
// Supported: head dim 64, 128 or 256 with Dv == D; other shapes throw sparge::Error (use the CPU engine).
class CudaEngine final : public core::Engine {
 public:
  CudaEngine();  // throws sparge::Error when no device is usable
  ~CudaEngine() override;
  CudaEngine(const CudaEngine&) = delete;
  CudaEngine& operator=(const CudaEngine&) = delete;

  std::string name() const override;
  bool isGpu() const override { return true; }
  std::optional<core::Target> deviceTarget() const override {
    return core::targetForComputeCapability(computeCapability_);
  }
  void setEntry(std::shared_ptr<const core::EntryData> entry) override;
  std::shared_ptr<const core::EntryData> entry() const override { return entry_; }
  core::EntryResult run(const core::RunConfig& config, const core::RunOptions& options) override;
  // "cudnn": cuDNN's fused SDPA on the current entry (every head, the entry's dtype, causal and window), with
  // why it is unavailable when it is (no libcudnn.so.9, a shape cuDNN does not support).
  std::vector<core::DenseBaseline> denseBaselines() override;
  double runDenseBaseline(const std::string& name) override;  // CUDA-event milliseconds

  struct State;  // device buffers and caches (cuda_engine.cpp)

 private:
  std::string deviceName_;
  int computeCapability_ = 0;
  std::shared_ptr<const core::EntryData> entry_;
  std::unique_ptr<State> state_;

  void ensureCudnn();  // uploads the entry and builds the cuDNN plan; throws sparge::Error with why not
};

}  // namespace sparge::cuda

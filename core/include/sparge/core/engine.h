// The Engine interface: one entry in, per-head results out. Implemented by CpuEngine (core) and
// CudaEngine (kernels); every view, export and test is engine-agnostic.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "sparge/core/capture.h"
#include "sparge/core/result.h"

namespace sparge::core {

// Set from another thread to stop a run early; the run then throws sparge::core::Cancelled.
using CancelFlag = std::atomic<bool>;

struct Cancelled : std::exception {
  const char* what() const noexcept override { return "cancelled"; }
};

struct RunOptions {
  std::vector<int64_t> heads;  // query heads to run (every batch item); empty = all heads
  bool keepOutput = false;     // keep O per head in HeadResult::output
  bool computeError = true;    // compare against the dense reference (computed once, cached)
  const CancelFlag* cancel = nullptr;
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual std::string name() const = 0;  // "cpu (2 threads)", "cuda: NVIDIA H100 80GB HBM3"
  virtual bool isGpu() const = 0;
  // Makes `entry` current and drops everything cached for the previous one.
  virtual void setEntry(std::shared_ptr<const EntryData> entry) = 0;
  virtual std::shared_ptr<const EntryData> entry() const = 0;
  // Stage 1 + Stage 2 (+ the dense reference the first time, + error metrics).
  virtual EntryResult run(const RunConfig& config, const RunOptions& options) = 0;
};

enum class EngineChoice { Auto, Cpu, Cuda };
EngineChoice parseEngineChoice(const std::string& text);  // "auto" | "cpu" | "cuda"; throws sparge::Error

}  // namespace sparge::core

// The Engine interface: one entry in, per-head results out. Implemented by CpuEngine (core) and
// CudaEngine (kernels); every view, export and test is engine-agnostic.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
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
  // With computeError and quantized numerics, also HeadResult::errorQuantQk (one more dense pass per head,
  // cached like the others). Engines that do not measure it leave its count at 0.
  bool quantBreakdown = false;
  const CancelFlag* cancel = nullptr;
  // Quantized numerics with computeError: called on the run's thread with the result as it stands before
  // the exact-numerics pass behind errorSparse (EntryResult::splitPending), so that a viewer shows the
  // deployed figures about half a run sooner; it is handed over, not copied (a result of 32 heads x 32K
  // carries tens of MB of maps). Returning true computes the split and run() returns the whole result.
  // Returning false ends the run there: run() returns a result without heads, marked splitPending (the
  // figures are the ones handed over). Engines without a separate pass for the split (the CPU engine
  // computes every pass per head) do not call it.
  std::function<bool(std::shared_ptr<const EntryResult>)> onDeployed;
};

// A dense attention implementation other than the engine's own kernels that it can time on the current entry,
// so that speedups are quoted against the fastest dense attention available (e.g. cuDNN's fused SDPA).
struct DenseBaseline {
  std::string name;   // short key, also the profiler stage: "cudnn"
  std::string label;  // for people: "cuDNN 9.19 fused SDPA (float16)"
  bool available = false;
  std::string reason;  // why it cannot run on this entry or machine (when not available)
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual std::string name() const = 0;  // "cpu (2 threads)", "cuda: NVIDIA H100 80GB HBM3"
  virtual bool isGpu() const = 0;
  // The kernel family SpargeAttn runs on this engine's GPU (none for the CPU engine): the GUI starts with
  // that target's tiles and numerics unless told otherwise.
  virtual std::optional<Target> deviceTarget() const { return std::nullopt; }
  // Makes `entry` current and drops everything cached for the previous one.
  virtual void setEntry(std::shared_ptr<const EntryData> entry) = 0;
  virtual std::shared_ptr<const EntryData> entry() const = 0;
  // Stage 1 + Stage 2 (+ the dense reference the first time, + error metrics).
  virtual EntryResult run(const RunConfig& config, const RunOptions& options) = 0;
  // The dense baselines this engine offers for the current entry (none by default).
  virtual std::vector<DenseBaseline> denseBaselines() { return {}; }
  // Runs baseline `name` once over every head of the current entry and returns its time in milliseconds on
  // the engine's clock (what StageTimes::clock names). Throws sparge::Error when it is not available.
  virtual double runDenseBaseline(const std::string& name);
};

enum class EngineChoice { Auto, Cpu, Cuda };
EngineChoice parseEngineChoice(const std::string& text);  // "auto" | "cpu" | "cuda"; throws sparge::Error

}  // namespace sparge::core

// Stages of an engine run, timing sources, and the kernel-name rules that attribute a kernel to a stage.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace sparge::prof {

// Where time goes in one engine run. Quantize prepares the operands of quantized numerics (INT8 Q/K, FP8
// V); Cudnn is cuDNN's fused dense attention timed on the same entry as a baseline. `Total` is not a kernel
// stage: it is the whole run.
enum class Stage { Predict, Quantize, Sparse, Dense, Cudnn, Reference, Metrics, Other, Total };

// Which clock produced a number. Every sample and every report carries one, so a reader can tell a CUPTI
// kernel duration from a host wall-clock figure.
enum class TimingSource { Cupti, CudaEvent, WallClock };

// "predict", "quantize", "sparse", "dense", "cudnn", "reference", "metrics", "other", "total"
const char* toString(Stage s);
const char* toString(
    TimingSource s);  // "cupti", "cuda-event", "wall" (the strings of core::StageTimes::clock)
std::optional<Stage> parseStage(std::string_view text);
// Accepts the strings above; also "cuda_event"/"cudaEvent" and "wallclock"/"wall-clock".
std::optional<TimingSource> parseTimingSource(std::string_view text);
// What the clock is, in words, for reports ("CUPTI activity timestamps (GPU global timer, ns)").
const char* describe(TimingSource s);

// One row of the attribution table: a kernel whose name contains `prefix` at an identifier start
// belongs to `stage`.
struct StageRule {
  std::string_view prefix;
  Stage stage;
};

// The table, in priority order (the CUDA engine names its kernels sparge_<stage>_*). The error
// reduction kernels (sparge_error_*) count as Metrics, next to the error metrics of the CPU engine.
std::span<const StageRule> stageRules();

// Attributes a (possibly mangled or demangled) kernel name to a stage: the leftmost rule prefix that
// starts an identifier wins. "Starts an identifier" means at position 0 or after a character that is not
// a letter or '_' — a digit is allowed because Itanium mangling writes the identifier length right before
// it (_ZN6sparge4cuda19sparge_predict_poolEv). Names matching no rule are `Other`.
Stage stageForKernel(std::string_view kernelName);

// The stage of the rule that matches, or nothing: tells a kernel that names itself `sparge_other_` apart
// from one no rule knows (which a run's `otherKernels` may claim).
std::optional<Stage> ruleStage(std::string_view kernelName);

// Demangles an Itanium C++ name ("_Z..."); returns the input unchanged when it is not mangled.
std::string demangle(const std::string& name);

}  // namespace sparge::prof

// Stage names, timing-source names, and the kernel-name attribution rules.
#include "sparge/profiler/stage.h"

#include <cxxabi.h>

#include <array>
#include <cstdlib>
#include <memory>

namespace sparge::prof {

namespace {

// Order matters only for names that contain two prefixes at the same position, which cannot happen; the
// leftmost match decides.
constexpr std::array<StageRule, 8> kRules{{
    {"sparge_predict_", Stage::Predict},
    {"sparge_quant_", Stage::Quantize},
    {"sparge_sparse_", Stage::Sparse},
    {"sparge_dense_", Stage::Dense},
    {"sparge_reference_", Stage::Reference},
    {"sparge_error_", Stage::Metrics},
    {"sparge_metrics_", Stage::Metrics},
    {"sparge_other_", Stage::Other},
}};

bool identifierChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = char(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = char(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

}  // namespace

const char* toString(Stage s) {
  switch (s) {
    case Stage::Predict:
      return "predict";
    case Stage::Quantize:
      return "quantize";
    case Stage::Sparse:
      return "sparse";
    case Stage::Dense:
      return "dense";
    case Stage::Cudnn:
      return "cudnn";
    case Stage::Reference:
      return "reference";
    case Stage::Metrics:
      return "metrics";
    case Stage::Other:
      return "other";
    case Stage::Total:
      return "total";
  }
  return "other";
}

const char* toString(TimingSource s) {
  switch (s) {
    case TimingSource::Cupti:
      return "cupti";
    case TimingSource::CudaEvent:
      return "cuda-event";
    case TimingSource::WallClock:
      return "wall";
  }
  return "wall";
}

const char* describe(TimingSource s) {
  switch (s) {
    case TimingSource::Cupti:
      return "CUPTI activity timestamps (GPU global timer, ns): kernel execution time only";
    case TimingSource::CudaEvent:
      return "CUDA events (cudaEventElapsedTime, GPU clock, ~0.5 us resolution): includes launch gaps";
    case TimingSource::WallClock:
      return "host std::chrono::steady_clock (wall clock)";
  }
  return "";
}

std::optional<Stage> parseStage(std::string_view text) {
  for (Stage s : {Stage::Predict, Stage::Quantize, Stage::Sparse, Stage::Dense, Stage::Cudnn,
                  Stage::Reference, Stage::Metrics, Stage::Other, Stage::Total}) {
    if (iequals(text, toString(s))) return s;
  }
  if (iequals(text, "error")) return Stage::Metrics;
  return std::nullopt;
}

std::optional<TimingSource> parseTimingSource(std::string_view text) {
  if (iequals(text, "cupti")) return TimingSource::Cupti;
  if (iequals(text, "cuda-event") || iequals(text, "cuda_event") || iequals(text, "cudaevent"))
    return TimingSource::CudaEvent;
  if (iequals(text, "wall") || iequals(text, "wallclock") || iequals(text, "wall-clock"))
    return TimingSource::WallClock;
  return std::nullopt;
}

std::span<const StageRule> stageRules() {
  return kRules;
}

std::optional<Stage> ruleStage(std::string_view name) {
  size_t best = std::string_view::npos;
  std::optional<Stage> stage;
  for (const StageRule& rule : kRules) {
    size_t pos = name.find(rule.prefix);
    while (pos != std::string_view::npos && pos > 0 && identifierChar(name[pos - 1])) {
      pos = name.find(rule.prefix, pos + 1);
    }
    if (pos != std::string_view::npos && pos < best) {
      best = pos;
      stage = rule.stage;
    }
  }
  return stage;
}

Stage stageForKernel(std::string_view name) {
  return ruleStage(name).value_or(Stage::Other);
}

std::string demangle(const std::string& name) {
  if (name.size() < 2 || name[0] != '_' || name[1] != 'Z') return name;
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status),
                                             std::free);
  return status == 0 && out ? std::string(out.get()) : name;
}

}  // namespace sparge::prof

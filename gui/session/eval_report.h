// The model-level evaluation report (eval.json, written by the Python package's sparge-eval): read strictly,
// so that a malformed file is an error message naming the file and the JSON path, never a crash.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace sparge::gui {

inline constexpr int kEvalVersion = 1;

// One head as the evaluation measured it over its inputs.
struct EvalHead {
  std::string entry;
  std::string module;
  std::optional<int64_t> layer;
  int64_t head = 0;
  std::string numerics;
  double sparsity = 0;
  // Mean and max over the inputs; NaN when the evaluation did not measure the head's error.
  double l1 = std::numeric_limits<double>::quiet_NaN();
  double l1Max = std::numeric_limits<double>::quiet_NaN();
  double budgetL1 = 0;
  bool overBudget = false;  // absent (not measured): false
  int64_t inputs = 0;
};

struct EvalSummary {
  std::string metric;  // perplexity | wer | psnr
  // Null in the file where the metric has none (PSNR has no dense value; WER against the dense transcript
  // has no relative change).
  std::optional<double> dense, sparse, relativeChange;
  std::optional<double> agreement;  // top1_agreement, token_agreement or ssim (whichever the model kind has)
  std::optional<double> meanKl;
  int64_t inputs = 0;
  std::string line;  // the one-line summary, shown verbatim
};

struct EvalReport {
  std::string params;  // the parameter file it evaluated (as written by sparge-eval)
  std::string engine, numerics, device;
  std::string modelName, modelKind;
  EvalSummary summary;
  std::vector<EvalHead> heads;
};

// Throws sparge::Error with where = "<source>:<json path>" for syntax errors, a wrong version, missing keys
// and wrong types; unknown keys are ignored (the format may grow).
EvalReport parseEvalReport(const std::string& text, const std::string& source);
EvalReport readEvalReport(const std::string& path);

// The conventional place of a parameter file's report: `<params stem>.eval.json` beside it
// (params.json -> params.eval.json).
std::string evalReportBeside(const std::string& paramsPath);

}  // namespace sparge::gui

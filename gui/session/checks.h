// What the loaded parameter file and evaluation report say about each head, for the views: heads that run
// in exact numerics (the exact fallback), heads that broke their budget on held-out inputs (the file's
// "held_out") and heads over budget in the model-level evaluation (eval.json), each with a sentence.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "eval_report.h"
#include "sparge/core/params_io.h"

namespace sparge::gui {

struct HeadMarks {
  bool exact = false;              // deployed in exact numerics
  bool heldOutOver = false;        // over its budget on some held-out input (sparge tune --validate)
  bool evalOver = false;           // over its budget in the evaluation report
  std::vector<std::string> lines;  // one per mark, for tooltips

  bool any() const { return exact || heldOutOver || evalOver; }
  bool bad() const { return heldOutOver || evalOver; }
};

class ChecksModel {
 public:
  void setParams(const std::string& path, core::ParamsFile file);
  void setEval(const std::string& path, EvalReport report);
  void clear();

  const std::optional<core::ParamsFile>& params() const { return params_; }
  const std::string& paramsPath() const { return paramsPath_; }
  const std::optional<EvalReport>& eval() const { return eval_; }
  const std::string& evalPath() const { return evalPath_; }
  uint64_t generation() const { return generation_; }  // changes with either file

  // The marks of `head` of entry `entry` (matched by name, else by layer, as parameters are).
  HeadMarks marks(const std::string& entry, std::optional<int64_t> layer, int64_t head) const;
  // The deployed budget of the loaded parameters (their l2); none without a file.
  std::optional<double> budget() const;
  // The heads of the loaded file's group for an entry that run in exact numerics (1) or the file's (0);
  // empty when the file has no group for it or none of its heads differs.
  std::vector<uint8_t> exactHeads(const std::string& entry, std::optional<int64_t> layer,
                                  int64_t headsQ) const;

 private:
  std::optional<core::ParamsFile> params_;
  std::string paramsPath_;
  std::optional<EvalReport> eval_;
  std::string evalPath_;
  uint64_t generation_ = 0;
};

}  // namespace sparge::gui

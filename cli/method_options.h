// --method and the options of the methods other than SpargeAttn (docs/methods.md), shared by run, tune and
// compare.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "sparge/core/params.h"

namespace sparge::cli {

struct MethodOptions {
  std::string method;  // empty: not given (SpargeAttn, or a parameter file's method)
  std::optional<double> xattnThreshold;
  std::optional<int> xattnStride;
  std::optional<std::string> minferencePattern;
  std::optional<int64_t> minferenceVertical, minferenceSlash, minferenceTopk;
  std::optional<double> flexGamma, flexTau;
  std::optional<int64_t> flexMinBudget, flexMaxBudget;
  std::optional<int64_t> mobaTopk;

  // --method, parsed; throws sparge::Error naming the accepted names.
  core::Method parsed() const;
  // The given options onto `p`; an option of another method than `m` is refused (it would do nothing).
  void apply(core::Method m, core::HeadParams& p) const;
  // Every given option onto its own method's parameters in `p` (several methods compared at once).
  void applyEach(core::HeadParams& p) const;
};

// The methods' fixed options that tune and compare do not search (stride, FlexPrefill's τ and budgets).
void addMethodFixedOptions(CLI::App& cmd, MethodOptions& o);
// `withKnobs`: also the options that set a method's knob (run); tune and compare search the knob themselves.
void addMethodChoiceOptions(CLI::App& cmd, MethodOptions& o, bool withKnobs);

}  // namespace sparge::cli

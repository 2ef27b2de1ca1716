// --method and the other methods' options (method_options.h).
#include "method_options.h"

#include <vector>

#include "sparge/core/error.h"

namespace sparge::cli {

core::Method MethodOptions::parsed() const {
  return method.empty() ? core::Method::SpargeAttn : core::parseMethod(method, "--method");
}

namespace {

template <class T>
void set(const std::optional<T>& value, T& target, const char* option, core::Method owner, core::Method m) {
  if (!value) return;
  if (owner != m)
    throw Error(option,
                std::string("belongs to --method ") + core::toString(owner) + ", not " + core::toString(m));
  target = *value;
}

}  // namespace

void MethodOptions::apply(core::Method m, core::HeadParams& p) const {
  using core::Method;
  set(xattnThreshold, p.xattention.threshold, "--xattn-threshold", Method::XAttention, m);
  set(xattnStride, p.xattention.stride, "--xattn-stride", Method::XAttention, m);
  if (minferencePattern) {
    core::MInferencePattern pattern =
        core::parseMInferencePattern(*minferencePattern, "--minference-pattern");
    set(std::optional(pattern), p.minference.pattern, "--minference-pattern", Method::MInference, m);
  }
  set(minferenceVertical, p.minference.verticalSize, "--minference-vertical", Method::MInference, m);
  set(minferenceSlash, p.minference.slashSize, "--minference-slash", Method::MInference, m);
  set(minferenceTopk, p.minference.topk, "--minference-topk", Method::MInference, m);
  set(flexGamma, p.flexprefill.gamma, "--flex-gamma", Method::FlexPrefill, m);
  set(flexTau, p.flexprefill.tau, "--flex-tau", Method::FlexPrefill, m);
  set(flexMinBudget, p.flexprefill.minBudget, "--flex-min-budget", Method::FlexPrefill, m);
  set(flexMaxBudget, p.flexprefill.maxBudget, "--flex-max-budget", Method::FlexPrefill, m);
  set(mobaTopk, p.moba.topk, "--moba-topk", Method::Moba, m);
}

void MethodOptions::applyEach(core::HeadParams& p) const {
  for (core::Method m : core::kAllMethods) {
    MethodOptions own;  // only the options of method m
    if (m == core::Method::XAttention) own.xattnThreshold = xattnThreshold, own.xattnStride = xattnStride;
    if (m == core::Method::MInference)
      own.minferencePattern = minferencePattern, own.minferenceVertical = minferenceVertical,
      own.minferenceSlash = minferenceSlash, own.minferenceTopk = minferenceTopk;
    if (m == core::Method::FlexPrefill)
      own.flexGamma = flexGamma, own.flexTau = flexTau, own.flexMinBudget = flexMinBudget,
      own.flexMaxBudget = flexMaxBudget;
    if (m == core::Method::Moba) own.mobaTopk = mobaTopk;
    own.apply(m, p);
  }
}

void addMethodFixedOptions(CLI::App& cmd, MethodOptions& o) {
  cmd.add_option("--xattn-stride", o.xattnStride, "XAttention: antidiagonal stride S (default 8)");
  cmd.add_option("--flex-tau", o.flexTau,
                 "FlexPrefill: JS-distance threshold of query-aware heads (default 0.1)");
  cmd.add_option("--flex-min-budget", o.flexMinBudget,
                 "FlexPrefill: min_budget in tokens (default: one block)");
  cmd.add_option("--flex-max-budget", o.flexMaxBudget, "FlexPrefill: max_budget in tokens (default: none)");
}

void addMethodChoiceOptions(CLI::App& cmd, MethodOptions& o, bool withKnobs) {
  cmd.add_option("--method", o.method,
                 "Block predictor of Stage 1: spargeattn (default) | xattention | minference | flexprefill | "
                 "moba (docs/methods.md)");
  addMethodFixedOptions(cmd, o);
  if (!withKnobs) return;
  cmd.add_option("--xattn-threshold", o.xattnThreshold, "XAttention: cumulative threshold τ (default 0.9)");
  cmd.add_option("--minference-pattern", o.minferencePattern,
                 "MInference: vertical_slash | block_sparse (default vertical_slash)");
  cmd.add_option("--minference-vertical", o.minferenceVertical, "MInference: vertical_size (default 1000)");
  cmd.add_option("--minference-slash", o.minferenceSlash, "MInference: slash_size (default 6096)");
  cmd.add_option("--minference-topk", o.minferenceTopk,
                 "MInference block_sparse: key blocks per row (default 100)");
  cmd.add_option("--flex-gamma", o.flexGamma, "FlexPrefill: coverage γ (default 0.9)");
  cmd.add_option("--moba-topk", o.mobaTopk, "MoBA: key blocks per query token, its own included (default 3)");
}

}  // namespace sparge::cli

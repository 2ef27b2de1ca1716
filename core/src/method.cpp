// Names of the block predictors and their parameters, and the range checks of each method's parameters.
#include "sparge/core/method.h"

#include <cmath>
#include <string>

#include "enum_names.h"
#include "sparge/core/error.h"
#include "sparge/core/params.h"

namespace sparge::core {

const char* toString(Method m) {
  switch (m) {
    case Method::SpargeAttn:
      return "spargeattn";
    case Method::XAttention:
      return "xattention";
    case Method::MInference:
      return "minference";
    case Method::FlexPrefill:
      return "flexprefill";
    case Method::Moba:
      return "moba";
  }
  return "?";
}

const char* methodLabel(Method m) {
  switch (m) {
    case Method::SpargeAttn:
      return "SpargeAttn";
    case Method::XAttention:
      return "XAttention";
    case Method::MInference:
      return "MInference";
    case Method::FlexPrefill:
      return "FlexPrefill";
    case Method::Moba:
      return "MoBA";
  }
  return "?";
}

Method parseMethod(const std::string& text, const char* where) {
  return parseByName(
      text, {Method::SpargeAttn, Method::XAttention, Method::MInference, Method::FlexPrefill, Method::Moba},
      where);
}

std::vector<Method> parseMethodList(const std::string& text, const char* where) {
  std::vector<Method> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string name =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (name.empty()) throw Error(where, "empty method name in '" + text + "'");
    const Method m = parseMethod(name, where);
    for (Method seen : out)
      if (seen == m) throw Error(where, "'" + name + "' is listed twice");
    out.push_back(m);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

const char* toString(MInferencePattern p) {
  return p == MInferencePattern::VerticalSlash ? "vertical_slash" : "block_sparse";
}

MInferencePattern parseMInferencePattern(const std::string& text, const char* where) {
  return parseByName(text, {MInferencePattern::VerticalSlash, MInferencePattern::BlockSparse}, where);
}

namespace {

void checkFraction(double v, const std::string& where, const char* name) {
  if (!(v >= 0.0 && v <= 1.0))
    throw Error(where, std::string(name) + " must lie in [0, 1]; got " + std::to_string(v));
}

void checkAtLeast(int64_t v, int64_t lo, const std::string& where, const char* name) {
  if (v < lo)
    throw Error(where,
                std::string(name) + " must be at least " + std::to_string(lo) + "; got " + std::to_string(v));
}

void validateMethodParams(const HeadParams& p, const std::string& where, Method method) {
  switch (method) {
    case Method::SpargeAttn:
      return;
    case Method::XAttention: {
      checkFraction(p.xattention.threshold, where, "XAttention's threshold");
      const int s = p.xattention.stride;
      if (s < 1 || s > 64 || (s & (s - 1)) != 0)
        throw Error(where,
                    "XAttention's stride must be a power of two from 1 to 64; got " + std::to_string(s));
      return;
    }
    case Method::MInference:
      checkAtLeast(p.minference.verticalSize, 1, where, "MInference's vertical_size");
      checkAtLeast(p.minference.slashSize, 1, where, "MInference's slash_size");
      checkAtLeast(p.minference.topk, 1, where, "MInference's topk");
      return;
    case Method::FlexPrefill:
      checkFraction(p.flexprefill.gamma, where, "FlexPrefill's gamma");
      if (!(p.flexprefill.tau >= 0.0) || !std::isfinite(p.flexprefill.tau))
        throw Error(where, "FlexPrefill's tau must be a finite number >= 0; got " +
                               std::to_string(p.flexprefill.tau));
      checkAtLeast(p.flexprefill.minBudget, 0, where, "FlexPrefill's min_budget");
      checkAtLeast(p.flexprefill.maxBudget, 0, where, "FlexPrefill's max_budget");
      return;
    case Method::Moba:
      checkAtLeast(p.moba.topk, 1, where, "MoBA's topk");
      return;
  }
}

}  // namespace

void validate(const HeadParams& p, const std::string& where, Method method) {
  if (!std::isfinite(p.theta))
    throw Error(where, "θ (simthreshd1) must be a finite number; got " + std::to_string(p.theta));
  if (p.mode == SelectMode::Cdf && !(p.tau >= 0.0 && p.tau <= 1.0))
    throw Error(where, "τ (cdfthreshd) must lie in [0, 1]; got " + std::to_string(p.tau));
  if (p.mode == SelectMode::TopK && !(p.topk > 0.0 && p.topk <= 1.0))
    throw Error(where, "top-k must be a fraction in (0, 1]; got " + std::to_string(p.topk));
  if (!(p.lambda >= 0.0) || std::isnan(p.lambda))
    throw Error(
        where,
        "λ (pvthreshd) must be >= 0 (a negative λ would skip blocks that raise the running max); got " +
            std::to_string(p.lambda));
  validateMethodParams(p, where, method);
}

}  // namespace sparge::core

// The methods' knobs (method_knob.h): ranges, setting and reading them, and their parameters as text.
#include "sparge/core/method_knob.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace sparge::core {
namespace {

int64_t keyBlocks(const EntryInfo& info, const Geometry& g) {
  return std::max<int64_t>(1, ceilDiv(info.tokensKV, g.blockK));
}

// A count in [1, n] from a share of n (rounded up, so that every share above 0 keeps something).
int64_t countOf(double share, int64_t n) {
  return std::clamp<int64_t>(int64_t(std::ceil(share * double(n) - 1e-9)), 1, n);
}

std::string num(double v) {
  std::ostringstream s;
  s.precision(4);
  s << v;
  return s.str();
}

}  // namespace

KnobRange knobRange(Method m, const HeadParams& base, const EntryInfo& info, const Geometry& g) {
  KnobRange r;
  switch (m) {
    case Method::SpargeAttn:
    case Method::XAttention:
    case Method::FlexPrefill:
      return r;
    case Method::MInference:
      // Counts: one step of the count is the finest useful interval.
      r.tolerance = base.minference.pattern == MInferencePattern::VerticalSlash
                        ? 0.5 / double(std::max<int64_t>(1, info.tokensKV))
                        : 0.5 / double(keyBlocks(info, g));
      return r;
    case Method::Moba:
      r.tolerance = 0.5 / double(keyBlocks(info, g));
      return r;
  }
  return r;
}

HeadParams withKnob(Method m, const HeadParams& base, double value, const EntryInfo& info,
                    const Geometry& g) {
  HeadParams p = base;
  value = std::clamp(value, 0.0, 1.0);
  switch (m) {
    case Method::SpargeAttn:
      if (p.mode == SelectMode::Cdf)
        p.tau = value;
      else
        p.topk = std::max(value, 1e-6);  // top-k must stay above 0
      break;
    case Method::XAttention:
      p.xattention.threshold = value;
      break;
    case Method::FlexPrefill:
      p.flexprefill.gamma = value;
      break;
    case Method::MInference: {
      MInferenceParams& mp = p.minference;
      if (mp.pattern == MInferencePattern::BlockSparse) {
        mp.topk = countOf(value, keyBlocks(info, g));
        break;
      }
      const double n = double(std::max<int64_t>(1, info.tokensKV));
      const double larger = double(std::max(base.minference.verticalSize, base.minference.slashSize));
      mp.verticalSize =
          std::max<int64_t>(1, int64_t(std::llround(value * n * base.minference.verticalSize / larger)));
      mp.slashSize =
          std::max<int64_t>(1, int64_t(std::llround(value * n * base.minference.slashSize / larger)));
      break;
    }
    case Method::Moba:
      p.moba.topk = countOf(value, keyBlocks(info, g));
      break;
  }
  return p;
}

double knobValue(Method m, const HeadParams& p, const EntryInfo& info, const Geometry& g) {
  switch (m) {
    case Method::SpargeAttn:
      return p.mode == SelectMode::Cdf ? p.tau : p.topk;
    case Method::XAttention:
      return p.xattention.threshold;
    case Method::FlexPrefill:
      return p.flexprefill.gamma;
    case Method::MInference:
      if (p.minference.pattern == MInferencePattern::BlockSparse)
        return std::min(1.0, double(p.minference.topk) / double(keyBlocks(info, g)));
      return std::min(1.0, double(std::max(p.minference.verticalSize, p.minference.slashSize)) /
                               double(std::max<int64_t>(1, info.tokensKV)));
    case Method::Moba:
      return std::min(1.0, double(p.moba.topk) / double(keyBlocks(info, g)));
  }
  return 0;
}

std::string knobName(Method m, const HeadParams& p) {
  switch (m) {
    case Method::SpargeAttn:
      return p.mode == SelectMode::Cdf ? "τ" : "topk";
    case Method::XAttention:
      return "threshold";
    case Method::FlexPrefill:
      return "γ";
    case Method::MInference:
      return p.minference.pattern == MInferencePattern::BlockSparse ? "topk share" : "line share";
    case Method::Moba:
      return "topk share";
  }
  return "?";
}

std::string describeMethodParams(Method m, const HeadParams& p) {
  switch (m) {
    case Method::SpargeAttn:
      return "θ " + num(p.theta) + (p.mode == SelectMode::Cdf ? " τ " + num(p.tau) : " topk " + num(p.topk));
    case Method::XAttention:
      return "threshold " + num(p.xattention.threshold) + " stride " + std::to_string(p.xattention.stride);
    case Method::FlexPrefill:
      return "γ " + num(p.flexprefill.gamma) + " τ " + num(p.flexprefill.tau);
    case Method::MInference:
      if (p.minference.pattern == MInferencePattern::BlockSparse)
        return "block_sparse topk " + std::to_string(p.minference.topk);
      return "vertical_slash " + std::to_string(p.minference.verticalSize) + "/" +
             std::to_string(p.minference.slashSize);
    case Method::Moba:
      return "topk " + std::to_string(p.moba.topk);
  }
  return "";
}

}  // namespace sparge::core

// Text for a tuner decision: the one place where the search's choices become words.
#include "sparge/core/tune_decision.h"

#include <ostream>
#include <sstream>

namespace sparge::core {
namespace {

std::string num(double v) {
  std::ostringstream s;
  s.precision(4);
  s << v;
  return s.str();
}

std::string point(const TuneDecision& d) {
  return "θ=" + num(d.theta) + (d.mode == SelectMode::Cdf ? " τ=" : " topk=") + num(d.sel);
}

std::string bin(const TuneDecision& d) {
  return "bin [" + num(d.binLow) + ", " + num(d.binHigh) + ")";
}

std::string sweep(const TuneDecision& d) {
  return std::to_string(d.thetaSwept) + " θ swept (" + std::to_string(d.thetaReused) +
         " reused as mask-identical)";
}

// A method other than SpargeAttn: its knob's bisection (after MInference's pattern choice).
std::string knobSelection(const TuneDecision& d) {
  std::string s = d.method == Method::MInference ? std::string("pattern ") + toString(d.pattern) + ", " : "";
  if (d.denseCause == TuneDecision::DenseCause::NoPointMetL1)
    return s + "dense: no knob value met l1 < " + num(d.l1Budget);
  if (d.denseCause == TuneDecision::DenseCause::LowSparsity)
    return s + "dense: best stage-1 sparsity " + num(d.stage1) + " <= " + num(d.minSparsity);
  return s + "knob " + num(d.sel) + " by bisection: stage-1 sparsity " + num(d.stage1) + " L1 " + num(d.l1);
}

// Why the (θ, τ / top-k) point is what it is, or why the head is dense.
std::string selection(const TuneDecision& d) {
  if (d.method != Method::SpargeAttn) return knobSelection(d);
  using C = TuneDecision::DenseCause;
  const bool together = d.entries > 1;
  switch (d.denseCause) {
    case C::NoPointMetL1:
      return together ? "dense: no θ met l1 < " + num(d.l1Budget) + " on any entry"
                      : "dense: no θ met l1 < " + num(d.l1Budget) + "; " + sweep(d);
    case C::LowSparsity:
      return together ? "dense: " + bin(d) + " mean sparsity " + num(d.binMeanSparsity) +
                            " <= " + num(d.minSparsity)
                      : "dense: best stage-1 sparsity " + num(d.stage1) + " <= " + num(d.minSparsity) +
                            " at θ=" + num(d.theta) + "; " + sweep(d);
    default:
      break;
  }
  if (!together)
    return "best of " + sweep(d) + ": " + point(d) + " stage-1 sparsity " + num(d.stage1) + " L1 " +
           num(d.l1);
  std::string s =
      bin(d) + " of " + std::to_string(d.binPoints) + " points, mean sparsity " + num(d.binMeanSparsity);
  if (d.basis == TuneDecision::Basis::FallbackPoint)
    s += "; the bin point failed l1 on some entry, fell back to the single point " + point(d);
  else
    s += ": " + point(d);
  if (d.denseCause == C::NoCandidateMetL1)
    s += "; neither the bin point nor " + std::to_string(d.singlePointsTried) +
         " single points met l1 on every entry: dense";
  if (d.denseCause == C::LowAchievedSparsity)
    s += "; achieved mean sparsity " + num(d.achievedSparsity) + " <= " + num(d.minSparsity) + ": dense";
  if (d.denseCause == C::FinalCheckFailed) s += "; final verification failed: dense";
  return s;
}

std::string lambda(const TuneDecision& d) {
  using L = TuneDecision::LambdaSource;
  switch (d.lambdaSource) {
    case L::None:
      return "";
    case L::Bisection:
      return "; λ=" + num(d.lambda) + " (smallest passing L1 < l2=" + num(d.l2Budget) + ")";
    case L::LargestOfEntries:
      return "; λ=" + num(d.lambda) + " (largest of the per-entry λ)";
    case L::Fixed:
      return "; λ fixed at " + num(d.lambda);
    case L::Max:
      return "; no smaller λ met l2=" + num(d.l2Budget) + ": λ=" + num(d.lambda);
    case L::PvSkipOff:
      return "; λ verification failed: PV skip off";
  }
  return "";
}

// Why the head was tuned in exact numerics, as a prefix; empty when it was not.
std::string exact(const TuneDecision& d) {
  using E = TuneDecision::ExactCause;
  const std::string quant = std::string(toString(d.quantNumerics));
  switch (d.exactCause) {
    case E::None:
      return "";
    case E::OwnQuantization:
      return "exact numerics (dense L1 in " + quant + " " + num(d.quantL1) + " >= l1 " + num(d.l1Budget) +
             "); ";
    case E::SameEntry:
      return "exact numerics (another head of its entry breaks l1 in " + quant + "; own " + num(d.quantL1) +
             "); ";
    case E::SameLayer:
      return "exact numerics (a head of its layer breaks l1 in " + quant + "; own " + num(d.quantL1) + "); ";
  }
  return "";
}

}  // namespace

const char* toString(TuneDecision::ExactCause c) {
  switch (c) {
    case TuneDecision::ExactCause::None:
      return "none";
    case TuneDecision::ExactCause::OwnQuantization:
      return "own-quantization";
    case TuneDecision::ExactCause::SameEntry:
      return "same-entry";
    case TuneDecision::ExactCause::SameLayer:
      return "same-layer";
  }
  return "?";
}

const char* toString(TuneDecision::Basis b) {
  switch (b) {
    case TuneDecision::Basis::None:
      return "none";
    case TuneDecision::Basis::BestPoint:
      return "best-point";
    case TuneDecision::Basis::BinPoint:
      return "bin-point";
    case TuneDecision::Basis::FallbackPoint:
      return "fallback-point";
  }
  return "?";
}

const char* toString(TuneDecision::DenseCause c) {
  switch (c) {
    case TuneDecision::DenseCause::None:
      return "none";
    case TuneDecision::DenseCause::NoPointMetL1:
      return "no-point-met-l1";
    case TuneDecision::DenseCause::LowSparsity:
      return "low-sparsity";
    case TuneDecision::DenseCause::NoCandidateMetL1:
      return "no-candidate-met-l1";
    case TuneDecision::DenseCause::LowAchievedSparsity:
      return "low-achieved-sparsity";
    case TuneDecision::DenseCause::FinalCheckFailed:
      return "final-check-failed";
  }
  return "?";
}

const char* toString(TuneDecision::LambdaSource s) {
  switch (s) {
    case TuneDecision::LambdaSource::None:
      return "none";
    case TuneDecision::LambdaSource::Bisection:
      return "bisection";
    case TuneDecision::LambdaSource::LargestOfEntries:
      return "largest-of-entries";
    case TuneDecision::LambdaSource::Fixed:
      return "fixed";
    case TuneDecision::LambdaSource::Max:
      return "max";
    case TuneDecision::LambdaSource::PvSkipOff:
      return "pv-skip-off";
  }
  return "?";
}

std::string describe(const TuneDecision& d) {
  return exact(d) + selection(d) + lambda(d);
}

std::ostream& operator<<(std::ostream& os, const TuneDecision& d) {
  return os << describe(d);
}

}  // namespace sparge::core

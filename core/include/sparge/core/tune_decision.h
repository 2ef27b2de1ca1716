// What the auto-tuner chose for one head and why, as data: the CLI prints it, the GUI shows it, the search
// itself never builds text. docs/method.md ("Tuner search") describes the stages these fields name.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

#include "sparge/core/params.h"

namespace sparge::core {

struct TuneDecision {
  // Where θ and τ / top-k come from.
  enum class Basis : uint8_t {
    None,           // no point was chosen (the head is dense: no θ met l1)
    BestPoint,      // one entry: the θ point with the largest stage-1 sparsity that met l1
    BinPoint,       // entries tuned together: the bin rule's combined point
    FallbackPoint,  // entries tuned together: the bin point failed somewhere; a single point met l1
                    // everywhere
  };
  // Why the head is dense (θ = τ = 1 exported); None for a sparse head.
  enum class DenseCause : uint8_t {
    None,          // the head is sparse
    NoPointMetL1,  // no θ of the sweep met l1 (on any entry)
    LowSparsity,   // best point (one entry) or best bin's mean (together): stage-1 sparsity <= minSparsity
    NoCandidateMetL1,     // together: neither the bin point nor the single points met l1 on every entry
    LowAchievedSparsity,  // together: the verified point's mean stage-1 sparsity <= minSparsity
    FinalCheckFailed,     // together: every exported candidate failed the final check
  };
  // Where the exported λ comes from.
  enum class LambdaSource : uint8_t {
    None,              // dense head
    Bisection,         // one entry: the smallest bisection λ that met l2
    LargestOfEntries,  // together: the largest of the per-entry bisection results, met l2 on every entry
    Fixed,             // λ search off: the fixed λ, met l1
    Max,        // no smaller λ met l2 (or the combined λ failed): the largest λ of the range, met l2
    PvSkipOff,  // the λ check failed: PV skip off, the verified (θ, τ / top-k) point kept
  };

  // Why the head was tuned in exact numerics (ExactFallback); None: in the options' numerics.
  enum class ExactCause : uint8_t {
    None,
    OwnQuantization,  // its own dense L1 in the tuned numerics (quantL1) reaches l1
    SameEntry,        // exact fallback per entry: another head of its entry's does
    SameLayer,        // exact fallback per layer: a head of an entry of its layer does
  };

  Method method = Method::SpargeAttn;  // other methods: `sel` is the method's knob (method_knob.h), no θ
  MInferencePattern pattern = MInferencePattern::VerticalSlash;  // MInference: the pattern chosen
  SelectMode mode = SelectMode::Cdf;  // names `sel`: τ or the top-k fraction
  int entries = 1;                    // entries tuned together (1: one entry, best-point search)
  Basis basis = Basis::None;
  DenseCause denseCause = DenseCause::None;
  LambdaSource lambdaSource = LambdaSource::None;
  ExactCause exactCause = ExactCause::None;
  Numerics quantNumerics = Numerics::None;  // the tuned numerics the fallback left (when exactCause is set)
  double quantL1 = 0;                       // the head's dense L1 in them (max over the entries)

  // The budgets and the is_sparse cut the search was judged against.
  double l1Budget = 0, l2Budget = 0, minSparsity = 0;
  // θ sweep (one entry): θ values swept, and how many of them reused a mask-identical θ's result.
  int thetaSwept = 0, thetaReused = 0;
  // The chosen (θ, τ / top-k) point before λ, with its stage-1 sparsity and L1 (best point of one entry).
  double theta = 0, sel = 0, stage1 = 0, l1 = 0;
  // Bin rule (together): the winning bin [binLow, binHigh), its point count and mean stage-1 sparsity.
  double binLow = 0, binHigh = 0, binMeanSparsity = 0;
  int binPoints = 0;
  int singlePointsTried = 0;    // together: single points tried after the bin point
  double achievedSparsity = 0;  // together: mean stage-1 sparsity of the verified point over the entries
  double lambda = 0;            // the exported λ (when lambdaSource is not None)

  bool dense() const { return denseCause != DenseCause::None; }
  bool operator==(const TuneDecision&) const = default;
};

const char* toString(TuneDecision::Basis b);
const char* toString(TuneDecision::DenseCause c);
const char* toString(TuneDecision::LambdaSource s);
const char* toString(TuneDecision::ExactCause c);

// One line for people, e.g. "bin [0.5, 0.625) of 3 points, mean sparsity 0.61: θ=0.5625 τ=0.97; λ=4.3
// (largest of the per-entry λ)".
std::string describe(const TuneDecision& d);
std::ostream& operator<<(std::ostream& os, const TuneDecision& d);

}  // namespace sparge::core

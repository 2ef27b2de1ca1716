// Each method's knob: the one value the tuner bisects against the budget and the curves sweep. Every knob is
// monotone the same way: a larger value keeps a superset of the blocks (docs/methods.md, "Tuning").
#pragma once

#include <string>

#include "sparge/core/params.h"

namespace sparge::core {

struct KnobRange {
  double lo = 0, hi = 1;
  double tolerance = 0.001;  // the bisection stops when the interval is narrower
};

// SpargeAttn: τ (or the top-k fraction) at the head's θ. XAttention: its threshold. FlexPrefill: γ.
// MInference vertical-slash: the share of the key length its larger line family covers, the ratio of
// vertical_size to slash_size kept from `base`; block-sparse: topk as a share of the key blocks. MoBA: topk
// as a share of the key blocks. All in [0, 1].
KnobRange knobRange(Method m, const HeadParams& base, const EntryInfo& info, const Geometry& g);
HeadParams withKnob(Method m, const HeadParams& base, double value, const EntryInfo& info, const Geometry& g);
double knobValue(Method m, const HeadParams& p, const EntryInfo& info, const Geometry& g);
// For people: "τ", "threshold", "γ", "line share", "topk share".
std::string knobName(Method m, const HeadParams& p);
// The method's parameters of `p` as text, for tables: "threshold 0.91 stride 8", "vertical_slash 120/610".
std::string describeMethodParams(Method m, const HeadParams& p);

}  // namespace sparge::core

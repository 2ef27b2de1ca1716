// Lossless encoding of run results and tuned groups. Each record lists its fields once (WireFields),
// and both directions use that list, so encoder and decoder cannot drift apart.
#include "sparge/scaleout/codec.h"

#include "sparge/scaleout/wire.h"

namespace sparge::scaleout {

// A field added to one of these records must be added to its WireFields below, or ranks would drop it
// silently; these sizes make the build fail until that is done (then update the size here). A small field
// can hide in padding (RunConfig::diagonal did): check the lists when a record changes.
static_assert(sizeof(core::EntryInfo) == 320,
              "EntryInfo changed: update its WireFields in scaleout/src/codec.cpp");
static_assert(sizeof(core::HeadParams) == 136,
              "HeadParams changed: update WireFields in scaleout/src/codec.cpp");
static_assert(sizeof(core::RunConfig) == 208,
              "RunConfig changed: update WireFields in scaleout/src/codec.cpp");
static_assert(sizeof(core::HeadResult) == 728,
              "HeadResult changed: update WireFields in scaleout/src/codec.cpp");
static_assert(sizeof(core::SparsityCounts) == 56, "SparsityCounts changed: update scaleout/src/codec.cpp");
static_assert(sizeof(core::ErrorSums) == 56,
              "ErrorSums changed: update WireFields in scaleout/src/codec.cpp");
static_assert(sizeof(core::StageTimes) == 136,
              "StageTimes changed: update WireFields in scaleout/src/codec.cpp");
static_assert(sizeof(core::EntryResult) == 1032,
              "EntryResult changed: update WireFields in scaleout/src/codec.cpp");
static_assert(sizeof(core::TunedGroup) == 144,
              "TunedGroup changed: update WireFields in scaleout/src/codec.cpp");
static_assert(sizeof(core::TunedHead) == 424,
              "TunedHead changed: update WireFields in scaleout/src/codec.cpp");
static_assert(sizeof(core::EntryAchieved) == 56, "EntryAchieved changed: update scaleout/src/codec.cpp");
static_assert(sizeof(core::ThetaPoint) == 64,
              "ThetaPoint changed: update WireFields in scaleout/src/codec.cpp");
static_assert(sizeof(core::TuneProbe) == 36,
              "TuneProbe changed: update WireFields in scaleout/src/codec.cpp");
static_assert(sizeof(core::TuneDecision) == 144, "TuneDecision changed: update scaleout/src/codec.cpp");
static_assert(sizeof(core::TunedOn) == 96, "TunedOn changed: update WireFields in scaleout/src/codec.cpp");

template <>
struct WireFields<core::Window> {
  template <class S, class F>
  static void visit(S& v, F&& f) {
    f(v.left, v.right);
  }
};

template <>
struct WireFields<core::Geometry> {
  template <class S, class F>
  static void visit(S& v, F&& f) {
    f(v.blockQ, v.blockK);
  }
};

template <>
struct WireFields<core::TokenGrid> {
  template <class S, class F>
  static void visit(S& v, F&& f) {
    f(v.frames, v.height, v.width, v.offset, v.tokens);
  }
};

template <>
struct WireFields<core::EntryInfo> {
  template <class S, class F>
  static void visit(S& v, F&& f) {
    f(v.name, v.batch, v.headsQ, v.headsKV, v.tokensQ, v.tokensKV, v.headDim, v.headDimV, v.dtype, v.layout,
      v.causal, v.window, v.scale, v.scaleFromFile, v.layer, v.step, v.module, v.kind, v.stack, v.grid,
      v.permutation);
  }
};

template <>
struct WireFields<core::XAttentionParams> {
  template <class S, class F>
  static void visit(S& v, F&& f) {
    f(v.threshold, v.stride);
  }
};

template <>
struct WireFields<core::MInferenceParams> {
  template <class S, class F>
  static void visit(S& v, F&& f) {
    f(v.pattern, v.verticalSize, v.slashSize, v.topk);
  }
};

template <>
struct WireFields<core::FlexPrefillParams> {
  template <class S, class F>
  static void visit(S& v, F&& f) {
    f(v.gamma, v.tau, v.minBudget, v.maxBudget);
  }
};

template <>
struct WireFields<core::MobaParams> {
  template <class S, class F>
  static void visit(S& v, F&& f) {
    f(v.topk);
  }
};

template <>
struct WireFields<core::HeadParams> {
  template <class S, class F>
  static void visit(S& v, F&& f) {
    f(v.theta, v.mode, v.tau, v.topk, v.lambda, v.dense, v.xattention, v.minference, v.flexprefill, v.moba);
  }
};

template <>
struct WireFields<core::RunConfig> {
  template <class S, class F>
  static void visit(S& v, F&& f) {
    f(v.method, v.geometry, v.numerics, v.smoothK, v.sink, v.diagonal, v.defaults, v.perHead,
      v.perHeadNumerics);
  }
};

template <>
struct WireFields<core::SparsityCounts> {
  template <class S, class F>
  static void visit(S& v, F&& f) {
    f(v.validBlocks, v.selectedBlocks, v.computedPvBlocks, v.skippedPvBlocks, v.validArea, v.selectedArea,
      v.computedPvArea);
  }
};

template <>
struct WireFields<core::ErrorSums> {
  template <class S, class F>
  static void visit(S& v, F&& f) {
    f(v.absDiff, v.absRef, v.dot, v.normO, v.normRef, v.sqDiff, v.count);
  }
};

template <>
struct WireFields<core::HeadResult> {
  template <class S, class F>
  static void visit(S& v, F&& f) {
    f(v.batch, v.head, v.params, v.nq, v.nk, v.blockMask, v.pvSkipped, v.reasons, v.pooledProb, v.similarQ,
      v.similarK, v.selfSimQ, v.selfSimK, v.refBlockMass, v.qBlockL1, v.output, v.sparsity, v.error,
      v.errorSparse, v.errorQuant, v.errorQuantQk, v.emptyRows, v.hasNonFinite, v.elementPairs);
  }
};

template <>
struct WireFields<core::StageTimes> {
  template <class S, class F>
  static void visit(S& v, F&& f) {
    f(v.predictMs, v.quantizeMs, v.sparseMs, v.referenceMs, v.metricsMs, v.totalMs, v.referenceCached,
      v.referenceInSparse, v.clock, v.hostMs, v.hostQueueMs, v.hostWaitMs, v.hostResultsMs, v.copyMs,
      v.copyBytes);
  }
};

template <>
struct WireFields<core::EntryResult> {
  template <class S, class F>
  static void visit(S& v, F&& f) {
    f(v.info, v.config, v.engine, v.heads, v.sparsity, v.error, v.errorSparse, v.errorQuant, v.errorQuantQk,
      v.times, v.warnings, v.splitPending);
  }
};

template <>
struct WireFields<core::EntryAchieved> {
  template <class S, class F>
  static void visit(S& v, F&& f) {
    f(v.entry, v.stage1, v.total, v.l1);
  }
};

template <>
struct WireFields<core::ThetaPoint> {
  template <class S, class F>
  static void visit(S& v, F&& f) {
    f(v.entry, v.theta, v.passed, v.sel, v.stage1, v.l1, v.probes, v.reusedFrom);
  }
};

template <>
struct WireFields<core::TuneProbe> {
  template <class S, class F>
  static void visit(S& v, F&& f) {
    f(v.entry, v.phase, v.dense, v.theta, v.sel, v.lambda, v.stage1, v.total, v.l1, v.pass);
  }
};

template <>
struct WireFields<core::TuneDecision> {
  template <class S, class F>
  static void visit(S& v, F&& f) {
    f(v.method, v.pattern, v.mode, v.entries, v.basis, v.denseCause, v.lambdaSource, v.l1Budget, v.l2Budget,
      v.minSparsity, v.thetaSwept, v.thetaReused, v.theta, v.sel, v.stage1, v.l1, v.binLow, v.binHigh,
      v.binMeanSparsity, v.binPoints, v.singlePointsTried, v.achievedSparsity, v.lambda, v.exactCause,
      v.quantNumerics, v.quantL1);
  }
};

template <>
struct WireFields<core::TunedHead> {
  template <class S, class F>
  static void visit(S& v, F&& f) {
    f(v.head, v.params, v.isSparse, v.exact, v.stage1Sparsity, v.totalSparsity, v.l1, v.l1Sparse, v.l1Quant,
      v.l1QuantQk, v.perEntry, v.probes, v.thetaPoints, v.trace, v.decision);
  }
};

template <>
struct WireFields<core::TunedOn> {
  template <class S, class F>
  static void visit(S& v, F&& f) {
    f(v.capture, v.entry, v.digest);
  }
};

template <>
struct WireFields<core::TunedGroup> {
  template <class S, class F>
  static void visit(S& v, F&& f) {
    f(v.name, v.entries, v.tunedOn, v.layer, v.headsQ, v.heads, v.complete, v.elapsedSeconds);
  }
};

std::string encodeResult(const core::EntryResult& result) {
  return encode(result);
}
core::EntryResult decodeResult(const std::string& data, const std::string& source) {
  return decode<core::EntryResult>(data, source);
}
std::string encodeGroup(const core::TunedGroup& group) {
  return encode(group);
}
core::TunedGroup decodeGroup(const std::string& data, const std::string& source) {
  return decode<core::TunedGroup>(data, source);
}

}  // namespace sparge::scaleout

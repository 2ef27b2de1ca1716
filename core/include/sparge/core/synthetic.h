// Seeded synthetic captures with known attention structure (local segments + a sink), for tests,
// benchmarks and demos when no real capture is at hand.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sparge/core/capture.h"

namespace sparge::core {

struct SynthSpec {
  std::string name = "synthetic";
  int64_t batch = 1;
  int64_t headsQ = 4;
  int64_t headsKV = 4;
  int64_t tokensQ = 1024;
  int64_t tokensKV = 1024;
  int64_t headDim = 64;
  int64_t headDimV = 64;
  bool causal = false;
  DType dtype = DType::Float16;
  Layout layout = Layout::HND;
  int64_t segment = 256;    // tokens per "topic": queries attend mostly inside their own segment
  int64_t sinkTokens = 16;  // the first tokens carry a direction every query shares
  double sharpness = 1.0;   // scales the logit gap; head h gets sharpness * (0.3 + 0.7 h / (H - 1))
  uint64_t seed = 1;
  // Outlier keys, as real models have them: in these KV heads, K channel 0 is ±outlierValue (random sign per
  // token, so smoothing K does not remove it) and Q channel 0 of their query heads is 0, so exact attention
  // is unchanged while each K block's INT8 scale grows to outlierValue / 127 and the other channels lose
  // their precision: INT8 Q·Kᵀ alone then breaks an L1 budget of a few percent.
  std::vector<int64_t> outlierKvHeads;
  double outlierValue = 150.0;
  // With a grid (sparge synth --grid T,H,W): an image / video entry instead. Its tokens are grid.offset
  // prompt tokens, then the grid in row-major (t, h, w) order; Q and K are smooth functions of the position
  // plus noise, so attention is local on the grid (tokensQ, tokensKV, segment and sinkTokens are not used).
  std::optional<TokenGrid> grid;
  double lengthScale = 2.0;       // cells over which Q and K stay alike along h and w
  double frameLengthScale = 1.5;  // the same along t
  double noise = 0.5;             // noise relative to the smooth part
};

// The largest sharpness whose values stay finite in float16 for every head dim the shape limits allow.
inline constexpr double kMaxSharpness = 1000.0;

// The entry `spec` describes, without its data: shape, dtype, layout, causal, scale.
EntryInfo syntheticEntryInfo(const SynthSpec& spec);

// What is wrong with `spec`, naming the field as `sparge synth` names its option (batch, heads, kv-heads,
// tokens, kv-tokens, dim, dim-v, segment, sharpness; several joined by '/' when their product is too large);
// empty `field` when nothing is: a dimension outside
// 1 … kMaxDimension, a tensor beyond kMaxTensorValues values, heads not a multiple of kv-heads, a segment
// below 1, a sharpness outside [0, kMaxSharpness] (NaN and infinities included).
struct SynthProblem {
  std::string field;
  std::string problem;
};
SynthProblem synthSpecProblem(const SynthSpec& spec);

// The memory makeSyntheticEntry holds at its peak: the data as float32 and the topic directions.
double syntheticEntryBytes(const SynthSpec& spec);

// Builds the entry in memory (values rounded to `dtype`, so writing and re-reading is exact). Throws
// sparge::Error for a spec with a problem (see synthSpecProblem).
EntryData makeSyntheticEntry(const SynthSpec& spec);

}  // namespace sparge::core

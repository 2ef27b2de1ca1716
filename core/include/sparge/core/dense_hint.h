// Parameter presets and the one-sentence explanation of a run or tune that came out (nearly) all dense,
// with the preset or option that shows sparsity; shared by `sparge run`, `sparge tune` and the GUI.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sparge/core/params.h"
#include "sparge/core/result.h"
#include "sparge/core/tuner.h"

namespace sparge::core {

enum class Preset {
  CdfDefaults,   // θ 0.6, τ 0.98, λ 50: SpargeAttn's CDF API defaults
  TopkDefaults,  // θ −0.1, top-k 0.5, λ 50: SpargeAttn's top-k API defaults
  FilterOff,     // θ −0.1: no block forced by the self-similarity filter (the rest unchanged)
  Tuned,         // the per-head values from `sparge tune` (applied by the caller)
};
const char* toString(Preset p);  // "SpargeAttn CDF defaults", ...
// `current` with the preset's values (Tuned returns `current`); dense is cleared.
HeadParams presetParams(Preset p, const HeadParams& current);
// The command-line options that select the preset ("--theta=-0.1 --topk 0.5 --lambda 50").
const char* presetOptions(Preset p);

// Below this total sparsity (fraction of valid blocks whose PV is not computed) a run counts as dense.
inline constexpr double kNearlyDense = 0.05;

struct DenseHint {
  std::string why;  // one sentence, e.g. "no K block is self-similar at θ 0.6: every column is forced on"
  std::optional<Preset> preset;  // the preset that shows sparsity, when one does
  std::string fix;               // the command-line options that apply the fix ("--theta=-0.1", "--sink")
  // The cause is the numerics: quantization alone costs some heads more than the budget, so no parameter
  // can help them (the sentence opens with that instead of "nearly all dense").
  bool quantization = false;
};

// Why the runs in `results` missed their budget or came out (nearly) all dense, the first cause that
// applies: with a `budget` (the l1 of the parameters run), heads that run quantized and whose quantization
// alone (l1_quant) reaches it; then, when the total sparsity is at most kNearlyDense, why the blocks were
// kept. nullopt when neither applies (or there is nothing to judge).
std::optional<DenseHint> denseRunHint(std::span<const EntryResult> results,
                                      std::optional<double> budget = std::nullopt);
// Why tuning could not give sparsity, the first cause that applies: heads whose quantization alone reaches
// l1 and that stayed in the tuned numerics (exact fallback off), named with their l1_quant; then, when every
// other head came out dense, what the search ran into. nullopt when neither applies. `causal`: the tuned
// entries are causal (without the sink or the diagonal blocks, rows that lose every key then count against
// the budget).
std::optional<DenseHint> denseTuneHint(const TuneResult& result, bool causal);
// One line naming the heads the exact fallback tuned in exact numerics, with their l1_quant and what that
// means for deployment; empty when there are none.
std::string exactFallbackNote(const TuneResult& result);

}  // namespace sparge::core

// Method parameters: per-head thresholds (θ, τ or top-k, λ) and the run-wide configuration.
#pragma once

#include <string>
#include <vector>

#include "sparge/core/method.h"
#include "sparge/core/types.h"

namespace sparge::core {

enum class SelectMode { Cdf, TopK };

// SpargeAttn's per-head hyperparameters, indexed by query head. Defaults are the CDF API's
// (spas_sage2_attn_meansim_cuda): θ = 0.6, τ = 0.98, λ = 50.
struct HeadParams {
  double theta = 0.6;  // simthreshd1: K/Q blocks with self-similarity <= θ are forced on
  SelectMode mode = SelectMode::Cdf;
  double tau = 0.98;     // cdfthreshd (CDF mode): keep blocks while cdf <= τ
  double topk = 0.5;     // topk (top-k mode): fraction of all K blocks kept per row
  double lambda = 50.0;  // pvthreshd: skip PV when max(rowmax_new - m_old) <= -λ (base 2)
  bool dense = false;    // is_sparse == false: compute every valid block, no PV skip
  // The other methods' parameters (docs/methods.md); a run reads those of RunConfig::method.
  XAttentionParams xattention;
  MInferenceParams minference;
  FlexPrefillParams flexprefill;
  MobaParams moba;

  bool operator==(const HeadParams&) const = default;
};

// Checks ranges (θ finite, τ in [0, 1], top-k in (0, 1], λ >= 0 and finite, and those of `method`'s own
// parameters); throws sparge::Error naming `where` (for example "--tau" or "params.json: entry l0 head 3").
void validate(const HeadParams& p, const std::string& where, Method method = Method::SpargeAttn);

struct RunConfig {
  Method method = Method::SpargeAttn;  // the block predictor of Stage 1 (docs/methods.md)
  Geometry geometry = kGeometry128x64;
  // Stage-2 arithmetic. The engines' default is exact; the CLI and GUI choose theirs (docs/cli.md, --target).
  Numerics numerics = Numerics::None;
  bool smoothK = true;  // subtract the per-head K token mean before pooling (SpargeAttn default)
  bool sink = false;    // attention sink: K block 0 always on
  // Extension (not SpargeAttn's): the diagonal blocks, those holding key == query, always on.
  bool diagonal = false;
  HeadParams defaults;  // used for every head without an override
  // Per-query-head overrides; empty, or size Hq (entries equal to `defaults` mean "no override").
  std::vector<HeadParams> perHead;
  // Per-query-head numerics; empty, or size Hq. A tuned file runs the heads whose quantization alone breaks
  // the budget in exact numerics (the exact fallback) and the others in `numerics`, in one run.
  std::vector<Numerics> perHeadNumerics;

  const HeadParams& forHead(int64_t qHead) const {
    return qHead < static_cast<int64_t>(perHead.size()) ? perHead[qHead] : defaults;
  }
  Numerics numericsFor(int64_t qHead) const {
    return qHead < static_cast<int64_t>(perHeadNumerics.size()) ? perHeadNumerics[qHead] : numerics;
  }
  // Some head runs in numerics other than `numerics`.
  bool mixedNumerics() const {
    for (Numerics n : perHeadNumerics)
      if (n != numerics) return true;
    return false;
  }
  // The tiles and Stage-2 numerics SpargeAttn uses on target `t`.
  void setTarget(Target t) {
    geometry = geometryOf(t);
    numerics = numericsOf(t);
  }
};

}  // namespace sparge::core

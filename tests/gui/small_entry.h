// The small synthetic entry the session tests open: 4 query heads over 2 KV heads, 512 tokens, D 64.
#pragma once

#include <memory>

#include "sparge/core/capture.h"
#include "sparge/core/synthetic.h"

namespace sparge::gui::session_tests {

inline std::shared_ptr<const core::EntryData> smallEntry() {
  core::SynthSpec spec;
  spec.name = "synth";
  spec.headsQ = 4;
  spec.headsKV = 2;
  spec.tokensQ = spec.tokensKV = 512;
  spec.headDim = spec.headDimV = 64;
  spec.segment = 128;
  spec.seed = 7;
  return std::make_shared<const core::EntryData>(core::makeSyntheticEntry(spec));
}

}  // namespace sparge::gui::session_tests

// Private: the predictors of the methods other than SpargeAttn, one file each (method_<name>.cpp).
#pragma once

#include "sparge/core/predictor.h"

namespace sparge::core::methods {

const Predictor& xattentionPredictor();
const Predictor& minferencePredictor();
const Predictor& flexprefillPredictor();
const Predictor& mobaPredictor();

}  // namespace sparge::core::methods

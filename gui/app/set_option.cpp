#include "set_option.h"

#include <cmath>

#include "sparge/core/error.h"
#include "sparge/core/option_values.h"

namespace sparge::gui {

namespace {
struct Value {
  std::string text;
  std::string where;

  // A finite number, by the CLI's rules (core/option_values.h): "", "nan", "inf", "1e400" are refused.
  double number() const { return core::parseReal(text, where); }
  bool boolean() const {
    if (text == "1" || text == "true" || text == "on" || text == "yes") return true;
    if (text == "0" || text == "false" || text == "off" || text == "no") return false;
    throw Error(where, "expected 0/1, got '" + text + "'");
  }
  core::SelectMode mode() const {
    if (text == "cdf") return core::SelectMode::Cdf;
    if (text == "topk") return core::SelectMode::TopK;
    throw Error(where, "expected cdf or topk, got '" + text + "'");
  }
};

// The other block predictors' parameters (docs/methods.md); false for an unknown key.
bool applyMethodParam(const std::string& key, const Value& v, core::HeadParams& p) {
  if (key == "xattn_threshold") {
    p.xattention.threshold = v.number();
  } else if (key == "xattn_stride") {
    p.xattention.stride = int(v.number());
  } else if (key == "minference_pattern") {
    p.minference.pattern = core::parseMInferencePattern(v.text, v.where.c_str());
  } else if (key == "minference_vertical") {
    p.minference.verticalSize = int64_t(v.number());
  } else if (key == "minference_slash") {
    p.minference.slashSize = int64_t(v.number());
  } else if (key == "minference_topk") {
    p.minference.topk = int64_t(v.number());
  } else if (key == "flex_gamma") {
    p.flexprefill.gamma = v.number();
  } else if (key == "flex_tau") {
    p.flexprefill.tau = v.number();
  } else if (key == "moba_topk") {
    p.moba.topk = int64_t(v.number());
  } else {
    return false;
  }
  return true;
}

// Returns false for an unknown key.
bool applyParam(const std::string& key, const Value& v, core::HeadParams& p) {
  if (key == "theta" || key == "simthreshd1") {
    p.theta = v.number();
  } else if (key == "tau" || key == "cdfthreshd") {
    p.tau = v.number();
    p.mode = core::SelectMode::Cdf;
  } else if (key == "topk") {
    p.topk = v.number();
    p.mode = core::SelectMode::TopK;
  } else if (key == "lambda" || key == "pvthreshd") {
    p.lambda = v.text == "inf" ? INFINITY : v.number();
  } else if (key == "mode") {
    p.mode = v.mode();
  } else if (key == "dense") {
    p.dense = v.boolean();
  } else {
    return applyMethodParam(key, v, p);
  }
  return true;
}

bool applyRunSetting(const std::string& key, const Value& v, core::RunConfig& config) {
  try {
    if (key == "geometry") {
      config.geometry = core::Geometry::parse(v.text);
    } else if (key == "quant" || key == "numerics") {
      config.numerics = core::parseNumerics(v.text);
    } else if (key == "target") {
      core::Target t = core::parseTarget(v.text);
      config.setTarget(t);
    } else if (key == "smooth_k" || key == "smoothk") {
      config.smoothK = v.boolean();
    } else if (key == "sink") {
      config.sink = v.boolean();
    } else if (key == "diagonal") {
      config.diagonal = v.boolean();
    } else if (key == "method") {
      config.method = core::parseMethod(v.text, v.where.c_str());
    } else {
      return false;
    }
  } catch (const Error& e) {
    throw Error(v.where, e.what());
  }
  return true;
}
}  // namespace

const char* settingKeys() {
  return "theta, tau, topk, lambda, mode=cdf|topk, dense, geometry=128x64|64x128, "
         "quant=none|int8-fp16|int8-fp8, "
         "target=sm80|sm89|sm90, smooth_k, sink, diagonal (extension), l1, l2, "
         "method=spargeattn|xattention|minference|flexprefill|moba, xattn_threshold, xattn_stride, "
         "minference_pattern, minference_vertical, minference_slash, minference_topk, flex_gamma, flex_tau, "
         "moba_topk";
}

void applySetting(const std::string& keyValue, core::RunConfig& config, Budget& budget) {
  auto eq = keyValue.find('=');
  if (eq == std::string::npos || eq == 0) throw Error("--set " + keyValue, "expected key=value");
  std::string key = keyValue.substr(0, eq);
  Value v{keyValue.substr(eq + 1), "--set " + key};
  if (key == "l1") {
    budget.l1 = v.number();
  } else if (key == "l2") {
    budget.l2 = v.number();
  } else if (!applyParam(key, v, config.defaults) && !applyRunSetting(key, v, config)) {
    throw Error(v.where, std::string("unknown setting (") + settingKeys() + ")");
  }
  core::validate(config.defaults, v.where, config.method);
  if (!(budget.l1 > 0) || !(budget.l2 > 0)) throw Error(v.where, "budget must be > 0");
  config.perHead.clear();
}

core::RunConfig defaultAppConfig() {
  core::RunConfig c;
  c.setTarget(core::Target::Sm89);
  return c;
}

}  // namespace sparge::gui

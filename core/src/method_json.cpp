// The methods' per-head parameters as JSON (method_json.h).
#include "sparge/core/method_json.h"

#include <cmath>
#include <set>

#include "sparge/core/error.h"

namespace sparge::core {

nlohmann::json methodParamsJson(Method m, const HeadParams& p) {
  switch (m) {
    case Method::SpargeAttn:
      return nullptr;
    case Method::XAttention:
      return {{"threshold", p.xattention.threshold}, {"stride", p.xattention.stride}};
    case Method::MInference:
      return {{"pattern", toString(p.minference.pattern)},
              {"vertical_size", p.minference.verticalSize},
              {"slash_size", p.minference.slashSize},
              {"topk", p.minference.topk}};
    case Method::FlexPrefill:
      return {{"gamma", p.flexprefill.gamma},
              {"tau", p.flexprefill.tau},
              {"min_budget", p.flexprefill.minBudget},
              {"max_budget", p.flexprefill.maxBudget}};
    case Method::Moba:
      return {{"topk", p.moba.topk}};
  }
  return nullptr;
}

namespace {

// Strict member access for one method object.
struct MethodReader {
  const nlohmann::json& j;
  std::string where;

  const nlohmann::json& member(const char* key) const {
    auto it = j.find(key);
    if (it == j.end()) throw Error(where + "/" + key, "missing");
    return *it;
  }
  double number(const char* key) const {
    const nlohmann::json& v = member(key);
    if (!v.is_number()) throw Error(where + "/" + key, "expected a number");
    const double d = v.get<double>();
    if (!std::isfinite(d)) throw Error(where + "/" + key, "must be finite");
    return d;
  }
  int64_t integer(const char* key) const {
    const nlohmann::json& v = member(key);
    if (!v.is_number_integer()) throw Error(where + "/" + key, "expected an integer");
    return v.get<int64_t>();
  }
  std::string text(const char* key) const {
    const nlohmann::json& v = member(key);
    if (!v.is_string()) throw Error(where + "/" + key, "expected a string");
    return v.get<std::string>();
  }
  void onlyKeys(std::initializer_list<const char*> keys) const {
    std::set<std::string> known(keys.begin(), keys.end());
    for (auto it = j.begin(); it != j.end(); ++it)
      if (!known.count(it.key())) throw Error(where + "/" + it.key(), "unknown key");
  }
};

}  // namespace

void readMethodParams(const nlohmann::json& j, Method m, HeadParams& p, const std::string& where) {
  if (m == Method::SpargeAttn) return;
  if (!j.is_object()) throw Error(where, "expected a JSON object with the method's parameters");
  const MethodReader rd{j, where};
  switch (m) {
    case Method::SpargeAttn:
      return;
    case Method::XAttention: {
      rd.onlyKeys({"threshold", "stride"});
      p.xattention.threshold = rd.number("threshold");
      const int64_t stride = rd.integer("stride");
      if (stride < 1 || stride > 64) throw Error(where + "/stride", "must be a power of two from 1 to 64");
      p.xattention.stride = int(stride);
      break;
    }
    case Method::MInference:
      rd.onlyKeys({"pattern", "vertical_size", "slash_size", "topk"});
      p.minference.pattern = parseMInferencePattern(rd.text("pattern"), (where + "/pattern").c_str());
      p.minference.verticalSize = rd.integer("vertical_size");
      p.minference.slashSize = rd.integer("slash_size");
      p.minference.topk = rd.integer("topk");
      break;
    case Method::FlexPrefill:
      rd.onlyKeys({"gamma", "tau", "min_budget", "max_budget"});
      p.flexprefill.gamma = rd.number("gamma");
      p.flexprefill.tau = rd.number("tau");
      p.flexprefill.minBudget = rd.integer("min_budget");
      p.flexprefill.maxBudget = rd.integer("max_budget");
      break;
    case Method::Moba:
      rd.onlyKeys({"topk"});
      p.moba.topk = rd.integer("topk");
      break;
  }
  validate(p, where, m);
}

}  // namespace sparge::core

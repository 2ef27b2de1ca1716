// The inputs of parameter files: the identity check (a group applies to an entry whose content digest it was
// tuned on) and held-out validation (budget violations on inputs it was not tuned on).
#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "sparge/core/atomic_file.h"
#include "sparge/core/error.h"
#include "sparge/core/exports.h"
#include "sparge/core/names.h"
#include "sparge/core/params_io.h"

namespace sparge::core {

ParamsIdentity identityOf(const ParamsGroup& g, const std::string& digest) {
  if (g.tunedOn.empty()) return ParamsIdentity::Unrecorded;
  const bool found =
      std::any_of(g.tunedOn.begin(), g.tunedOn.end(), [&](const TunedOn& t) { return t.digest == digest; });
  return found ? ParamsIdentity::Matches : ParamsIdentity::Foreign;
}

std::string describeTunedOn(const std::vector<TunedOn>& inputs) {
  constexpr size_t kShown = 3;
  std::string s;
  for (size_t i = 0; i < inputs.size() && i < kShown; ++i)
    s += (i ? ", " : "") + printable(inputs[i].capture) + ":" + printable(inputs[i].entry);
  if (inputs.size() > kShown) s += " and " + std::to_string(inputs.size() - kShown) + " more";
  return s;
}

std::string checkParamsIdentity(const ParamsFile& f, const std::string& source, const EntryInfo& info,
                                const std::string& capture, const std::string& digest, bool anyCapture) {
  const ParamsGroup* g = findGroup(f, info.name, info.layer);
  if (!g) return "";
  const std::string entry = printable(capture) + ":" + printable(info.name);
  switch (identityOf(*g, digest)) {
    case ParamsIdentity::Matches:
      return "";
    case ParamsIdentity::Unrecorded:
      return source + ": group \"" + printable(g->name) +
             "\" does not record the inputs it was tuned on (a file from before \"tuned_on\"), so it cannot "
             "be "
             "checked against " +
             entry + "; re-tune to record them";
    case ParamsIdentity::Foreign:
      break;
  }
  if (anyCapture)
    return kHeldOutNote + entry + " runs the parameters of group \"" + printable(g->name) + "\", tuned on " +
           describeTunedOn(g->tunedOn) + " (not on this input; --params-any-capture)";
  throw Error(source, "group \"" + printable(g->name) + "\" was tuned on " + describeTunedOn(g->tunedOn) +
                          ", not on " + entry + " (content digest " + digest +
                          " matches none of its inputs) — tune this capture (sparge tune " +
                          printable(capture) +
                          " -o ...), or pass --params-any-capture to apply the parameters to other inputs on "
                          "purpose (held-out validation)");
}

void addHeldOut(ParamsFile& f, const EntryResult& r, const std::string& capture) {
  const ParamsGroup* found = findGroup(f, r.info.name, r.info.layer);
  if (!found) return;
  ParamsGroup& g = f.groups[size_t(found - f.groups.data())];
  for (const auto& [headIndex, error] : headErrors(r)) {
    const int64_t head = headIndex;  // a structured binding cannot be captured by clang 14's lambdas
    const auto h =
        std::find_if(g.heads.begin(), g.heads.end(), [&](const ParamsHead& p) { return p.head == head; });
    if (h == g.heads.end()) continue;
    HeldOut& ho = h->heldOut ? *h->heldOut : h->heldOut.emplace();
    const double l1 = error.l1();
    ++ho.inputs;
    if (overBudget(l1, f.l2)) ++ho.violations;
    // A NaN L1 (non-finite outputs) is the worst there is.
    if (ho.inputs == 1 || std::isnan(l1) || l1 > ho.maxL1) {
      ho.maxL1 = std::isnan(l1) ? std::numeric_limits<double>::infinity() : l1;
      ho.maxL1Entry = capture + ":" + r.info.name;
    }
  }
}

void writeHeldOut(const std::string& path, const ParamsFile& f) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path, "cannot open the parameter file to add the held-out figures");
  std::ostringstream text;
  text << in.rdbuf();
  nlohmann::json root = nlohmann::json::parse(text.str(), nullptr, false);
  if (root.is_discarded() || !root.contains("groups") || !root["groups"].is_array())
    throw Error(path, "the parameter file changed while its held-out figures were computed");
  for (nlohmann::json& jg : root["groups"]) {
    const auto g = std::find_if(f.groups.begin(), f.groups.end(), [&](const ParamsGroup& p) {
      return jg.value("name", std::string()) == utf8Safe(p.name);
    });
    if (g == f.groups.end() || !jg.contains("heads")) continue;
    for (nlohmann::json& jh : jg["heads"]) {
      const auto h = std::find_if(g->heads.begin(), g->heads.end(), [&](const ParamsHead& p) {
        return jh.value("head", int64_t(-1)) == p.head;
      });
      if (h == g->heads.end() || !h->heldOut) continue;
      jh["held_out"] = {{"inputs", h->heldOut->inputs},
                        {"violations", h->heldOut->violations},
                        {"max_l1", std::isfinite(h->heldOut->maxL1) ? h->heldOut->maxL1 : 1e300},
                        {"max_l1_entry", utf8Safe(h->heldOut->maxL1Entry)}};
    }
  }
  writeTextAtomically(path, root.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

}  // namespace sparge::core

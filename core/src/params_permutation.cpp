// The permutation a parameter file was tuned in: its grid objects, recording the grids of the tuned entries,
// and the check that an entry has the grid the parameters were tuned on.
#include "params_grid.h"
#include "sparge/core/error.h"
#include "sparge/core/params_io.h"

namespace sparge::core {

nlohmann::json gridJson(const TokenGrid& g) {
  return {{"shape", {g.frames, g.height, g.width}}, {"offset", g.offset}, {"tokens", toString(g.tokens)}};
}

TokenGrid parseGridJson(const nlohmann::json& j, const std::string& path, const std::string& source) {
  auto fail = [&](const std::string& at, const std::string& problem) -> TokenGrid {
    throw Error(source + ":" + at, problem);
  };
  const std::string help =
      " — expected {\"shape\": [T, H, W], \"offset\": N, \"tokens\": \"qkv\" | \"q\" | \"kv\"}";
  if (!j.is_object()) return fail(path, "expected a JSON object" + help);
  auto shape = j.find("shape");
  if (shape == j.end() || !shape->is_array() || shape->size() != 3)
    return fail(path + "/shape", "expected an array of three integers" + help);
  for (const auto& v : *shape)
    if (!v.is_number_integer() || v.get<int64_t>() < 1)
      return fail(path + "/shape", "expected positive integers" + help);
  TokenGrid g;
  g.frames = (*shape)[0].get<int64_t>();
  g.height = (*shape)[1].get<int64_t>();
  g.width = (*shape)[2].get<int64_t>();
  if (auto off = j.find("offset"); off != j.end()) {
    if (!off->is_number_integer() || off->get<int64_t>() < 0)
      return fail(path + "/offset", "expected an integer >= 0" + help);
    g.offset = off->get<int64_t>();
  }
  if (auto tok = j.find("tokens"); tok != j.end()) {
    if (!tok->is_string()) return fail(path + "/tokens", "expected a string" + help);
    try {
      g.tokens = parseGridTokens(tok->get<std::string>());
    } catch (const Error& e) {
      return fail(path + "/tokens", e.problem());
    }
  }
  return g;
}

void recordPermutation(ParamsFile& file, Permutation permute, const std::map<std::string, EntryInfo>& infos) {
  file.permute = permute;
  for (ParamsGroup& g : file.groups) {
    g.grid.reset();
    if (permute == Permutation::None || g.entries.empty()) continue;
    if (auto it = infos.find(g.entries.front()); it != infos.end()) g.grid = it->second.grid;
  }
}

Permutation permutationFor(const ParamsFile& file, const std::string& source, const EntryInfo& info) {
  if (file.permute == Permutation::None) return Permutation::None;
  const ParamsGroup* g = findGroup(file, info.name, info.layer);
  const std::string what = std::string("the parameters were tuned in ") + toString(file.permute) + " order";
  if (!g) throw Error(source, "no parameters for entry \"" + info.name + "\"");
  if (!g->grid)
    throw Error(source, what + " but group \"" + g->name + "\" records no grid — re-tune with --permute");
  if (!info.grid)
    throw Error(source, what + " on a " + toString(*g->grid) + " grid, but entry \"" + info.name +
                            "\" has no grid — annotate it (sparge annotate --grid) or use other parameters");
  if (!(*info.grid == *g->grid))
    throw Error(source, what + " on a " + toString(*g->grid) + " grid, but entry \"" + info.name +
                            "\" has a " + toString(*info.grid) +
                            " grid — its blocks would hold other tokens; tune it anew");
  return file.permute;
}

}  // namespace sparge::core

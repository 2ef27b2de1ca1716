// Tuned-parameter JSON: writer (atomic), strict reader with JSON-pointer error locations, and the
// mapping of a file onto an entry's per-head parameters.
#include "sparge/core/params_io.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "input_file.h"
#include "params_grid.h"
#include "sparge/core/atomic_file.h"
#include "sparge/core/error.h"
#include "sparge/core/json_reader.h"
#include "sparge/core/method_json.h"
#include "sparge/core/names.h"
#include "sparge/core/quant.h"

namespace sparge::core {
namespace {

using nlohmann::json;

const char* modeName(SelectMode m) {
  return m == SelectMode::Cdf ? "cdf" : "topk";
}

json headJson(const ParamsHead& h, SelectMode mode, Method method, Numerics fileNumerics) {
  // Exact numerics in an exact file are no exception.
  const bool exact = h.exact && fileNumerics != Numerics::None;
  json j;
  j["head"] = h.head;
  j["is_sparse"] = h.isSparse;
  if (exact) j["numerics"] = toString(Numerics::None);
  if (method != Method::SpargeAttn) {
    j[toString(method)] = methodParamsJson(method, h.params);  // the method's own names, no θ / τ
  } else {
    j["simthreshd1"] = h.params.theta;
    if (mode == SelectMode::Cdf)
      j["cdfthreshd"] = h.params.tau;
    else
      j["topk"] = h.params.topk;
  }
  j["pvthreshd"] = h.params.lambda;
  j["sparsity"] = h.totalSparsity;
  j["stage1_sparsity"] = h.stage1Sparsity;
  j["l1"] = h.l1;
  // Not measured (a head whose final verification fell back to an earlier probe): left out.
  if (std::isfinite(h.l1Sparse)) j["l1_sparse"] = h.l1Sparse;
  if (std::isfinite(h.l1Quant)) j["l1_quant"] = h.l1Quant;
  if (std::isfinite(h.l1QuantQk)) j["l1_quant_qk"] = h.l1QuantQk;
  if (h.heldOut)
    j["held_out"] = {{"inputs", h.heldOut->inputs},
                     {"violations", h.heldOut->violations},
                     {"max_l1", h.heldOut->maxL1},
                     {"max_l1_entry", utf8Safe(h.heldOut->maxL1Entry)}};
  return j;
}

json traceJson(const TunedHead& th) {
  json t;
  t["decision"] = describe(th.decision);
  t["probes"] = th.probes;
  json pts = json::array();
  for (const ThetaPoint& p : th.thetaPoints) {
    json q = {{"entry", p.entry},
              {"theta", p.theta},
              {"passed", p.passed},
              {"sel", p.sel},
              {"stage1_sparsity", p.stage1},
              {"l1", p.l1},
              {"probes", p.probes}};
    q["reused_from"] = std::isnan(p.reusedFrom) ? json(nullptr) : json(p.reusedFrom);
    pts.push_back(q);
  }
  t["theta_points"] = pts;
  json pr = json::array();
  for (const TuneProbe& p : th.trace)
    pr.push_back(json::array(
        {p.entry, toString(p.phase), p.dense, p.theta, p.sel, p.lambda, p.stage1, p.total, p.l1, p.pass}));
  t["probe_columns"] = json::array(
      {"entry", "phase", "dense", "theta", "sel", "lambda", "stage1_sparsity", "sparsity", "l1", "pass"});
  t["probe_rows"] = pr;
  return t;
}

using Reader = JsonReader;

}  // namespace

Numerics numericsOf(const ParamsFile& f, const ParamsHead& h) {
  return h.exact ? Numerics::None : f.numerics;
}

ParamsFile toParamsFile(const TuneResult& r, const std::string& capturePath) {
  ParamsFile f;
  f.capture = capturePath;
  f.engine = r.engine;
  f.mode = r.options.mode;
  f.l1 = r.options.l1;
  f.l2 = r.options.l2;
  f.tunePv = r.options.tunePv;
  f.geometry = r.options.geometry;
  f.numerics = r.options.numerics;
  f.smoothK = r.options.smoothK;
  f.sink = r.options.sink;
  f.diagonal = r.options.diagonal;
  f.method = r.options.method;
  f.exactFallback = r.options.exactFallback;
  f.complete = !r.cancelled;
  for (const TunedGroup& g : r.groups) {
    if (g.heads.empty()) continue;
    ParamsGroup pg;
    pg.name = g.name;
    pg.entries = g.entries;
    pg.tunedOn = g.tunedOn;
    pg.layer = g.layer;
    pg.headsQ = g.headsQ;
    pg.complete = g.complete && int64_t(g.heads.size()) == g.headsQ;
    for (const TunedHead& th : g.heads) {
      ParamsHead ph;
      ph.head = th.head;
      ph.params = th.params;
      ph.isSparse = th.isSparse;
      ph.exact = th.exact && r.options.numerics != Numerics::None;
      ph.stage1Sparsity = th.stage1Sparsity;
      ph.totalSparsity = th.totalSparsity;
      ph.l1 = th.l1;
      ph.l1Sparse = th.l1Sparse;
      ph.l1Quant = th.l1Quant;
      ph.l1QuantQk = th.l1QuantQk;
      pg.heads.push_back(ph);
    }
    f.groups.push_back(std::move(pg));
  }
  return f;
}

std::string paramsToJson(const ParamsFile& f, const TuneResult* traceSource) {
  json root;
  root["sparge_params_version"] = f.version;
  root["generator"] = "sparge tune";
  root["complete"] = f.complete.value_or(true);
  root["capture"] = utf8Safe(f.capture);
  root["engine"] = f.engine;
  root["mode"] = modeName(f.mode);
  root["l1"] = f.l1;
  root["l2"] = f.l2;
  root["tune_pv"] = f.tunePv;
  root["geometry"] = f.geometry.label();
  root["numerics"] = toString(f.numerics);
  root["target"] = targetLabel(f.geometry, f.numerics);
  root["smooth_k"] = f.smoothK;
  root["sink"] = f.sink;
  root["diagonal"] = f.diagonal;
  if (f.method != Method::SpargeAttn) root["method"] = toString(f.method);
  if (f.exactFallback) root["exact_fallback"] = toString(*f.exactFallback);
  if (f.permute != Permutation::None) root["permute"] = toString(f.permute);
  json groups = json::array();
  for (const ParamsGroup& g : f.groups) {
    json jg;
    // Names that are not UTF-8 are stored escaped; findGroup matches either form.
    jg["name"] = utf8Safe(g.name);
    jg["entries"] = json::array();
    for (const std::string& e : g.entries) jg["entries"].push_back(utf8Safe(e));
    if (!g.tunedOn.empty()) {
      jg["tuned_on"] = json::array();
      for (const TunedOn& t : g.tunedOn)
        jg["tuned_on"].push_back(
            {{"capture", utf8Safe(t.capture)}, {"entry", utf8Safe(t.entry)}, {"digest", t.digest}});
    }
    jg["layer"] = g.layer ? json(*g.layer) : json(nullptr);
    jg["heads_q"] = g.headsQ;
    jg["complete"] = g.complete;
    if (g.grid) jg["grid"] = gridJson(*g.grid);
    if (g.method && *g.method != f.method) jg["method"] = toString(*g.method);
    json heads = json::array();
    const TunedGroup* tg = nullptr;
    if (traceSource)
      for (const TunedGroup& c : traceSource->groups)
        if (c.name == g.name) tg = &c;
    for (const ParamsHead& h : g.heads) {
      json jh = headJson(h, f.mode, methodOf(f, g), f.numerics);
      if (tg)
        if (const TunedHead* th = tg->find(h.head)) jh["trace"] = traceJson(*th);
      heads.push_back(jh);
    }
    jg["heads"] = heads;
    groups.push_back(jg);
  }
  root["groups"] = groups;
  // Every name was made UTF-8 above; `replace` keeps any string we missed from failing the export.
  return root.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

void writeParams(const std::string& path, const ParamsFile& f, const TuneResult* traceSource) {
  writeTextAtomically(path, paramsToJson(f, traceSource));
}

namespace {

json parseJsonText(const Reader& rd, const std::string& text) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    // Syntax errors and numbers beyond double range (1e400) alike; the library's tag is noise to users.
    std::string what = e.what();
    if (what.rfind("[json.exception.", 0) == 0 && what.find("] ") != std::string::npos)
      what = what.substr(what.find("] ") + 2);
    rd.fail("", "not valid JSON (" + what + ") — fix the file or re-create it with sparge tune");
  }
}

Method parseFileMethod(const Reader& rd, const json& v, const std::string& path) {
  try {
    return parseMethod(rd.string(v, path), "method");
  } catch (const Error& e) {
    rd.fail(path, e.problem());
  }
}

// The file-wide fields: version, mode, budgets, geometry, numerics and the Stage-1 switches.
void parseFileFields(const Reader& rd, const json& root, ParamsFile& f) {
  const int64_t version = rd.integer(root, "", "sparge_params_version");
  if (version != kParamsVersion)
    rd.fail("/sparge_params_version", "unsupported version " + std::to_string(version) +
                                          " (this build reads " + std::to_string(kParamsVersion) + ")");
  f.version = int(version);
  if (rd.optional(root, "complete")) f.complete = rd.boolean(root, "", "complete");
  if (const json* c = rd.optional(root, "capture")) f.capture = rd.string(*c, "/capture");
  if (const json* e = rd.optional(root, "engine")) f.engine = rd.string(*e, "/engine");
  const std::string mode = rd.string(root, "", "mode");
  if (mode == "cdf")
    f.mode = SelectMode::Cdf;
  else if (mode == "topk")
    f.mode = SelectMode::TopK;
  else
    rd.fail("/mode", "unknown mode \"" + mode + "\" (expected \"cdf\" or \"topk\")");
  f.l1 = rd.number(root, "", "l1");
  f.l2 = rd.number(root, "", "l2");
  if (f.l1 <= 0) rd.fail("/l1", "must be positive");
  if (f.l2 <= 0) rd.fail("/l2", "must be positive");
  if (rd.optional(root, "tune_pv")) f.tunePv = rd.boolean(root, "", "tune_pv");
  const std::string geom = rd.string(root, "", "geometry");
  try {
    f.geometry = Geometry::parse(geom);
  } catch (const Error& e) {
    rd.fail("/geometry", e.problem());
  }
  // Files written before the numerics existed were tuned in exact numerics.
  if (const json* n = rd.optional(root, "numerics")) {
    try {
      f.numerics = parseNumerics(rd.string(*n, "/numerics"));
    } catch (const Error& e) {
      rd.fail("/numerics", e.problem());
    }
  }
  f.smoothK = rd.boolean(root, "", "smooth_k");
  f.sink = rd.boolean(root, "", "sink");
  if (rd.optional(root, "diagonal")) f.diagonal = rd.boolean(root, "", "diagonal");
  if (const json* m = rd.optional(root, "method")) f.method = parseFileMethod(rd, *m, "/method");
  if (const json* x = rd.optional(root, "exact_fallback")) {
    try {
      f.exactFallback = parseExactFallback(rd.string(*x, "/exact_fallback"));
    } catch (const Error& e) {
      rd.fail("/exact_fallback", e.problem());
    }
  }
  if (const json* p = rd.optional(root, "permute")) {
    try {
      f.permute = parsePermutation(rd.string(*p, "/permute"));
    } catch (const Error& e) {
      rd.fail("/permute", e.problem());
    }
  }
}

// SpargeAttn's θ and τ (or top-k) of one head.
void readSpargeSelection(const Reader& rd, const json& jh, const std::string& hp, SelectMode mode,
                         HeadParams& p) {
  p.theta = rd.number(jh, hp, "simthreshd1");
  if (mode == SelectMode::Cdf) {
    if (rd.optional(jh, "topk")) rd.fail(hp + "/topk", "a cdf-mode file must not hold \"topk\"");
    p.tau = rd.number(jh, hp, "cdfthreshd");
    if (p.tau < 0 || p.tau > 1) rd.fail(hp + "/cdfthreshd", "must be in [0, 1]");
  } else {
    if (rd.optional(jh, "cdfthreshd"))
      rd.fail(hp + "/cdfthreshd", "a topk-mode file must not hold \"cdfthreshd\"");
    p.topk = rd.number(jh, hp, "topk");
    if (p.topk <= 0 || p.topk > 1) rd.fail(hp + "/topk", "must be in (0, 1]");
  }
}

HeldOut parseHeldOut(const Reader& rd, const json& j, const std::string& p) {
  HeldOut h;
  h.inputs = rd.integer(j, p, "inputs");
  h.violations = rd.integer(j, p, "violations");
  if (h.inputs < 0) rd.fail(p + "/inputs", "must be >= 0");
  if (h.violations < 0 || h.violations > h.inputs) rd.fail(p + "/violations", "must be in [0, inputs]");
  h.maxL1 = rd.number(j, p, "max_l1");
  if (h.maxL1 < 0) rd.fail(p + "/max_l1", "must be >= 0");
  h.maxL1Entry = rd.string(j, p, "max_l1_entry");
  return h;
}

std::vector<TunedOn> parseTunedOn(const Reader& rd, const json& j, const std::string& p) {
  if (!j.is_array() || j.empty()) rd.fail(p, "expected a non-empty array of {capture, entry, digest}");
  std::vector<TunedOn> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string ip = p + "/" + std::to_string(i);
    TunedOn t{rd.string(j[i], ip, "capture"), rd.string(j[i], ip, "entry"), rd.string(j[i], ip, "digest")};
    if (t.entry.empty()) rd.fail(ip + "/entry", "must not be empty");
    if (t.digest.empty()) rd.fail(ip + "/digest", "must not be empty");
    out.push_back(std::move(t));
  }
  return out;
}

// One head of a group at JSON path hp; its index is checked against the group's head count.
ParamsHead parseHead(const Reader& rd, const json& jh, const std::string& hp, const ParamsGroup& g,
                     const ParamsFile& f, Method method, const std::string& source) {
  const SelectMode mode = f.mode;
  if (!jh.is_object()) rd.fail(hp, "expected a JSON object");
  ParamsHead h;
  h.head = rd.integer(jh, hp, "head");
  if (const json* n = rd.optional(jh, "numerics")) {
    Numerics numerics = f.numerics;
    try {
      numerics = parseNumerics(rd.string(*n, hp + "/numerics"));
    } catch (const Error& e) {
      rd.fail(hp + "/numerics", e.problem());
    }
    // A head can only fall back from the file's numerics to exact ones.
    if (numerics != f.numerics && numerics != Numerics::None)
      rd.fail(hp + "/numerics", std::string("\"") + toString(numerics) + "\" in a file tuned in \"" +
                                    toString(f.numerics) + "\" (a head may only differ by being \"none\")");
    h.exact = numerics != f.numerics;
  }
  if (h.head < 0 || h.head >= g.headsQ)
    rd.fail(hp + "/head",
            "head " + std::to_string(h.head) + " out of range [0, " + std::to_string(g.headsQ) + ")");
  h.isSparse = rd.boolean(jh, hp, "is_sparse");
  h.params.mode = mode;
  h.params.dense = !h.isSparse;
  if (method != Method::SpargeAttn)
    // Another method: its parameters under its name (docs/methods.md), SpargeAttn's keys absent.
    readMethodParams(rd.member(jh, hp, toString(method)), method, h.params,
                     source + ":" + hp + "/" + toString(method));
  else
    readSpargeSelection(rd, jh, hp, mode, h.params);
  h.params.lambda = rd.number(jh, hp, "pvthreshd");
  if (h.params.lambda < 0) rd.fail(hp + "/pvthreshd", "must be >= 0");
  auto figure = [&](const char* key, double lo, double hiV, double& out) {
    if (!rd.optional(jh, key)) return;
    out = rd.number(jh, hp, key);
    if (out < lo || out > hiV)
      rd.fail(hp + "/" + key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hiV) + "]");
  };
  figure("sparsity", 0.0, 1.0, h.totalSparsity);
  figure("stage1_sparsity", 0.0, 1.0, h.stage1Sparsity);
  figure("l1", 0.0, 1e300, h.l1);
  figure("l1_sparse", 0.0, 1e300, h.l1Sparse);
  figure("l1_quant", 0.0, 1e300, h.l1Quant);
  figure("l1_quant_qk", 0.0, 1e300, h.l1QuantQk);
  if (const json* ho = rd.optional(jh, "held_out")) h.heldOut = parseHeldOut(rd, *ho, hp + "/held_out");
  validate(h.params, source + ":" + hp, method);
  return h;
}

ParamsGroup parseGroup(const Reader& rd, const json& jg, const std::string& gp, const ParamsFile& f,
                       const std::string& source) {
  if (!jg.is_object()) rd.fail(gp, "expected a JSON object");
  ParamsGroup g;
  g.name = rd.string(jg, gp, "name");
  if (g.name.empty()) rd.fail(gp + "/name", "must not be empty");
  const json& entries = rd.member(jg, gp, "entries");
  if (!entries.is_array() || entries.empty())
    rd.fail(gp + "/entries", "expected a non-empty array of entry names");
  for (size_t i = 0; i < entries.size(); ++i)
    g.entries.push_back(rd.string(entries[i], gp + "/entries/" + std::to_string(i)));
  if (const json* t = rd.optional(jg, "tuned_on")) g.tunedOn = parseTunedOn(rd, *t, gp + "/tuned_on");
  if (const json* l = rd.optional(jg, "layer"); l && !l->is_null()) g.layer = rd.integer(jg, gp, "layer");
  g.headsQ = rd.integer(jg, gp, "heads_q");
  if (g.headsQ <= 0) rd.fail(gp + "/heads_q", "must be positive");
  if (rd.optional(jg, "complete")) g.complete = rd.boolean(jg, gp, "complete");
  if (const json* grid = rd.optional(jg, "grid")) g.grid = parseGridJson(*grid, gp + "/grid", source);
  if (const json* m = rd.optional(jg, "method")) g.method = parseFileMethod(rd, *m, gp + "/method");
  const json& heads = rd.member(jg, gp, "heads");
  if (!heads.is_array()) rd.fail(gp + "/heads", "expected an array");
  std::set<int64_t> seen;
  for (size_t hi = 0; hi < heads.size(); ++hi) {
    const std::string hp = gp + "/heads/" + std::to_string(hi);
    ParamsHead h = parseHead(rd, heads[hi], hp, g, f, g.method.value_or(f.method), source);
    if (!seen.insert(h.head).second) rd.fail(hp + "/head", "duplicate head " + std::to_string(h.head));
    g.heads.push_back(h);
  }
  if (g.complete && int64_t(g.heads.size()) != g.headsQ)
    rd.fail(gp + "/heads", "holds " + std::to_string(g.heads.size()) + " heads but heads_q is " +
                               std::to_string(g.headsQ) + " (a partial file must say \"complete\": false)");
  std::sort(g.heads.begin(), g.heads.end(),
            [](const ParamsHead& a, const ParamsHead& b) { return a.head < b.head; });
  return g;
}

}  // namespace

ParamsFile parseParams(const std::string& text, const std::string& source) {
  Reader rd(source);
  const json root = parseJsonText(rd, text);
  if (!root.is_object()) rd.fail("", "expected a JSON object at the top level");
  ParamsFile f;
  parseFileFields(rd, root, f);
  const json& groups = rd.member(root, "", "groups");
  if (!groups.is_array()) rd.fail("/groups", "expected an array");
  std::set<std::string> names;
  std::map<std::string, std::string> groupOf;  // entry -> the group that lists it
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const std::string gp = "/groups/" + std::to_string(gi);
    ParamsGroup g = parseGroup(rd, groups[gi], gp, f, source);
    if (!names.insert(g.name).second) rd.fail(gp + "/name", "duplicate group name \"" + g.name + "\"");
    // An entry in two groups would get whichever group comes first, and --resume would keep both.
    for (size_t i = 0; i < g.entries.size(); ++i) {
      const auto [it, fresh] = groupOf.emplace(g.entries[i], g.name);
      if (!fresh && it->second == g.name)
        rd.fail(gp + "/entries/" + std::to_string(i), "entry \"" + g.entries[i] + "\" is listed twice");
      if (!fresh)
        rd.fail(gp + "/entries/" + std::to_string(i),
                "entry \"" + g.entries[i] + "\" is listed in group \"" + it->second + "\" and in group \"" +
                    g.name + "\": each entry must have one set of parameters — remove one of the groups");
    }
    f.groups.push_back(std::move(g));
  }
  return f;
}

ParamsFile readParams(const std::string& path) {
  checkRegularInputFile(path, "parameter file");  // before opening: a FIFO would block forever
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path, "cannot open the parameter file");
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) throw Error(path, "cannot read the parameter file");
  return parseParams(s.str(), path);
}

const ParamsGroup* findGroup(const ParamsFile& f, const std::string& entryName,
                             std::optional<int64_t> layer) {
  for (const ParamsGroup& g : f.groups)
    for (const std::string& e : g.entries)
      if (e == entryName || e == utf8Safe(entryName)) return &g;
  if (layer)
    for (const ParamsGroup& g : f.groups)
      if (g.layer && *g.layer == *layer) return &g;
  return nullptr;
}

std::vector<HeadParams> headParamsFor(const ParamsFile& f, const std::string& source,
                                      const std::string& entryName, std::optional<int64_t> layer,
                                      int64_t headsQ, const HeadParams& fallback,
                                      std::vector<std::string>* warnings) {
  const ParamsGroup* g = findGroup(f, entryName, layer);
  if (!g)
    throw Error(source, "no parameters for entry \"" + entryName + "\"" +
                            (layer ? " or its layer " + std::to_string(*layer)
                                   : std::string(" (it has no layer attribute)")));
  if (g->headsQ != headsQ)
    throw Error(source, "group \"" + g->name + "\" was tuned for " + std::to_string(g->headsQ) +
                            " query heads, but entry \"" + entryName + "\" has " + std::to_string(headsQ));
  std::vector<HeadParams> out(size_t(headsQ), fallback);
  std::vector<bool> have(size_t(headsQ), false);
  for (const ParamsHead& h : g->heads) {
    out[size_t(h.head)] = h.params;
    have[size_t(h.head)] = true;
  }
  if (warnings) {
    int64_t missing = 0;
    for (bool b : have) missing += b ? 0 : 1;
    // Heads can be missing because tuning stopped early or because only some heads were asked for.
    const char* why = !f.complete.has_value() ? "tuning was interrupted or limited to some heads"
                      : *f.complete           ? "only some heads were tuned (sparge tune --heads)"
                                              : "tuning was interrupted";
    if (missing > 0)
      warnings->push_back(source + ": group \"" + g->name + "\" has no parameters for " +
                          std::to_string(missing) + " of " + std::to_string(headsQ) + " heads (" + why +
                          "); they use the default parameters");
  }
  return out;
}

void applyParams(const ParamsFile& f, const std::string& source, const EntryInfo& info, RunConfig& config,
                 std::vector<std::string>* warnings) {
  config.perHead = headParamsFor(f, source, info.name, info.layer, info.headsQ, config.defaults, warnings);
  const Method method = methodOf(f, *findGroup(f, info.name, info.layer));
  if (warnings && config.method != method)
    warnings->push_back(source + ": using method " + toString(method) +
                        " (the parameters were tuned with it)");
  config.method = method;
  // headParamsFor found the group; heads it lacks run in the file's numerics like the rest.
  config.perHeadNumerics.clear();
  const ParamsGroup* g = findGroup(f, info.name, info.layer);
  if (g && std::any_of(g->heads.begin(), g->heads.end(),
                       [&](const ParamsHead& h) { return numericsOf(f, h) != f.numerics; })) {
    config.perHeadNumerics.assign(size_t(info.headsQ), f.numerics);
    for (const ParamsHead& h : g->heads) config.perHeadNumerics[size_t(h.head)] = numericsOf(f, h);
  }
  if (warnings) {
    if (!(config.geometry == f.geometry))
      warnings->push_back(source + ": using block geometry " + f.geometry.label() +
                          " (the parameters were tuned with it)");
    if (config.numerics != f.numerics)
      warnings->push_back(source + ": using numerics " + toString(f.numerics) +
                          " (the parameters were tuned with it)");
    if (config.smoothK != f.smoothK)
      warnings->push_back(source + std::string(": using smooth_k = ") + (f.smoothK ? "on" : "off") +
                          " (the parameters were tuned with it)");
    if (config.sink != f.sink)
      warnings->push_back(source + std::string(": using attention sink = ") + (f.sink ? "on" : "off") +
                          " (the parameters were tuned with it)");
  }
  config.geometry = f.geometry;
  config.numerics = f.numerics;
  config.smoothK = f.smoothK;
  config.sink = f.sink;
  if (warnings && config.diagonal != f.diagonal)
    warnings->push_back(source + std::string(": using diagonal blocks = ") + (f.diagonal ? "on" : "off") +
                        " (the parameters were tuned with it)");
  config.diagonal = f.diagonal;
}

}  // namespace sparge::core

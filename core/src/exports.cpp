// Masks v1 writer, JSON, CSV and Markdown reports.
#include "sparge/core/exports.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "entry_attrs.h"
#include "hdf5_util.h"
#include "params_grid.h"
#include "sparge/core/atomic_file.h"
#include "sparge/core/error.h"
#include "sparge/core/method_json.h"
#include "sparge/core/names.h"
#include "sparge/core/quant.h"

namespace sparge::core {
namespace {

bool sameParamsForAllHeads(const EntryResult& r) {
  for (const HeadResult& h : r.heads)
    if (!(h.params == r.heads.front().params)) return false;
  return true;
}

void check(bool ok, const std::string& where, const std::string& what) {
  if (!ok) throw Error(where, what + " " + h5::lastErrorDetail());
}

void writeUint8(hid_t group, const std::string& name, const std::vector<uint8_t>& data, const hsize_t dims[4],
                const std::string& where) {
  h5::Handle space = h5::dataspace(H5Screate_simple(4, dims, nullptr));
  h5::Handle props = h5::plist(H5Pcreate(H5P_DATASET_CREATE));
  const hsize_t chunk[4] = {1, 1, dims[2], dims[3]};
  H5Pset_chunk(props.get(), 4, chunk);
  H5Pset_deflate(props.get(), 4);
  h5::Handle ds = h5::dataset(
      H5Dcreate2(group, name.c_str(), H5T_STD_U8LE, space.get(), H5P_DEFAULT, props.get(), H5P_DEFAULT));
  check(ds.valid(), where + "/" + name, "cannot create dataset");
  check(H5Dwrite(ds.get(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()) >= 0,
        where + "/" + name, "cannot write dataset");
}

void writeDoubleArray(hid_t obj, const std::string& name, const std::vector<double>& values) {
  const hsize_t n = values.size();
  h5::Handle space = h5::dataspace(H5Screate_simple(1, &n, nullptr));
  h5::Handle attr =
      h5::attribute(H5Acreate2(obj, name.c_str(), H5T_IEEE_F64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT));
  if (attr.valid()) H5Awrite(attr.get(), H5T_NATIVE_DOUBLE, values.data());
}

// The masks file is built in memory (h5::createInMemory) and written by writeAtomically like any
// other export.
// The block predictor that produced the masks; for a method other than SpargeAttn its per-head parameters as
// JSON text (docs/methods.md): one object, or a list with one per query head (null: not run).
void writeMethodAttributes(hid_t g, const EntryResult& r) {
  const Method m = r.config.method;
  h5::writeString(g, "method", toString(m));
  if (m == Method::SpargeAttn) return;
  nlohmann::json params;
  if (sameParamsForAllHeads(r)) {
    params = methodParamsJson(m, r.heads.front().params);
  } else {
    params = nlohmann::json::array();
    for (int64_t h = 0; h < r.info.headsQ; ++h) params.push_back(nullptr);
    for (const HeadResult& h : r.heads) params[size_t(h.head)] = methodParamsJson(m, h.params);
  }
  h5::writeString(g, "method_params", params.dump());
}

std::string masksImage(const std::string& path, const std::vector<EntryResult>& results) {
  std::lock_guard<std::recursive_mutex> lock(h5::mutex());
  h5::silenceErrors();
  h5::Handle f = h5::createInMemory();
  check(f.valid(), path, "cannot create the masks file in memory");
  h5::writeInteger(f.get(), "sparge_masks_version", 1);
  h5::Handle entries = h5::group(H5Gcreate2(f.get(), "entries", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  check(entries.valid(), path + ":/entries", "cannot create group");
  for (const EntryResult& r : results) {
    const std::string where = path + ":/entries/" + printable(r.info.name);
    if (r.heads.empty()) continue;
    h5::Handle g =
        h5::group(H5Gcreate2(entries.get(), r.info.name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    check(g.valid(), where, "cannot create group");
    const int nq = r.heads.front().nq, nk = r.heads.front().nk;
    const hsize_t dims[4] = {hsize_t(r.info.batch), hsize_t(r.info.headsQ), hsize_t(nq), hsize_t(nk)};
    std::vector<uint8_t> mask(size_t(dims[0] * dims[1] * nq * nk), 0), skipped(mask.size(), 0);
    std::vector<double> present(size_t(r.info.headsQ), 0.0);
    for (const HeadResult& h : r.heads) {
      const size_t off = size_t((h.batch * r.info.headsQ + h.head) * nq * nk);
      std::copy(h.blockMask.begin(), h.blockMask.end(), mask.begin() + off);
      std::copy(h.pvSkipped.begin(), h.pvSkipped.end(), skipped.begin() + off);
      present[h.head] = 1.0;
    }
    writeUint8(g.get(), "block_mask", mask, dims, where);
    writeUint8(g.get(), "pv_skipped", skipped, dims, where);
    h5::writeInteger(g.get(), "block_q", r.config.geometry.blockQ);
    h5::writeInteger(g.get(), "block_k", r.config.geometry.blockK);
    h5::writeString(g.get(), "geometry", r.config.geometry.label());
    h5::writeString(g.get(), "numerics", toString(r.config.numerics));
    h5::writeString(g.get(), "target", targetLabel(r.config.geometry, r.config.numerics));
    h5::writeInteger(g.get(), "smooth_k", r.config.smoothK);
    h5::writeInteger(g.get(), "sink", r.config.sink);
    h5::writeInteger(g.get(), "diagonal", r.config.diagonal);  // extension, not SpargeAttn's
    h5::writeInteger(g.get(), "causal", r.info.causal);
    writeEntryExtras(g.get(), r.info);  // window, module, kind, stack, grid, as in the capture
    // The masks are in the permuted token order Stage 1 walked (docs/permutation.md).
    if (r.info.permutation != Permutation::None)
      h5::writeString(g.get(), "permute", toString(r.info.permutation));
    h5::writeString(g.get(), "engine", r.engine);
    writeMethodAttributes(g.get(), r);
    writeDoubleArray(g.get(), "heads_present", present);
    if (sameParamsForAllHeads(r)) {
      const HeadParams& p = r.heads.front().params;
      h5::writeString(g.get(), "mode", toString(p.mode));
      h5::writeDouble(g.get(), "simthreshd1", p.theta);
      if (p.mode == SelectMode::Cdf)
        h5::writeDouble(g.get(), "cdfthreshd", p.tau);
      else
        h5::writeDouble(g.get(), "topk", p.topk);
      h5::writeDouble(g.get(), "pvthreshd", p.lambda);
      h5::writeInteger(g.get(), "is_sparse", !p.dense);
    } else {
      std::vector<double> theta(r.info.headsQ, NAN), tau(r.info.headsQ, NAN), topk(r.info.headsQ, NAN),
          lambda(r.info.headsQ, NAN), sparse(r.info.headsQ, NAN);
      for (const HeadResult& h : r.heads) {
        theta[h.head] = h.params.theta;
        if (h.params.mode == SelectMode::Cdf)
          tau[h.head] = h.params.tau;
        else
          topk[h.head] = h.params.topk;
        lambda[h.head] = h.params.lambda;
        sparse[h.head] = h.params.dense ? 0.0 : 1.0;
      }
      writeDoubleArray(g.get(), "simthreshd1", theta);
      writeDoubleArray(g.get(), "cdfthreshd", tau);
      writeDoubleArray(g.get(), "topk", topk);
      writeDoubleArray(g.get(), "pvthreshd", lambda);
      writeDoubleArray(g.get(), "is_sparse", sparse);
    }
    h5::writeDouble(g.get(), "sparsity_stage1", r.sparsity.stage1());
    h5::writeDouble(g.get(), "pv_skip_rate", r.sparsity.pvSkipRate());
    h5::writeDouble(g.get(), "sparsity_total", r.sparsity.total());
    h5::writeDouble(g.get(), "sparsity_stage1_area", r.sparsity.stage1Area());
    h5::writeDouble(g.get(), "sparsity_total_area", r.sparsity.totalArea());
  }
  std::string image;
  check(h5::fileImage(f.get(), image), path, "cannot assemble the masks file in memory");
  return image;
}

double finiteOr(double v, double fallback) {
  return std::isfinite(v) ? v : fallback;
}

nlohmann::json paramsJson(const HeadParams& p) {
  nlohmann::json j;
  j["mode"] = toString(p.mode);
  j["simthreshd1"] = p.theta;
  if (p.mode == SelectMode::Cdf)
    j["cdfthreshd"] = p.tau;
  else
    j["topk"] = p.topk;
  if (std::isfinite(p.lambda))
    j["pvthreshd"] = p.lambda;
  else
    j["pvthreshd"] = nullptr;
  j["is_sparse"] = !p.dense;
  return j;
}

nlohmann::json sparsityJson(const SparsityCounts& s) {
  return {{"sparsity_stage1", s.stage1()},         {"pv_skip_rate", s.pvSkipRate()},
          {"sparsity_total", s.total()},           {"sparsity_stage1_area", s.stage1Area()},
          {"sparsity_total_area", s.totalArea()},  {"valid_blocks", s.validBlocks},
          {"selected_blocks", s.selectedBlocks},   {"computed_pv_blocks", s.computedPvBlocks},
          {"skipped_pv_blocks", s.skippedPvBlocks}};
}

// l1 / cos_sim / rmse of the deployed run, then the same with the suffix _sparse (same mask and λ in exact
// numerics) and _quant (every valid block in the chosen numerics). Non-finite figures are written as -1.
nlohmann::json errorJson(const ErrorSums& deployed, const ErrorSums& sparse, const ErrorSums& quant) {
  nlohmann::json j;
  for (const auto& [suffix, e] :
       {std::pair<const char*, const ErrorSums*>{"", &deployed}, {"_sparse", &sparse}, {"_quant", &quant}}) {
    j[std::string("l1") + suffix] = finiteOr(e->l1(), -1);
    j[std::string("cos_sim") + suffix] = finiteOr(e->cosSim(), -1);
    j[std::string("rmse") + suffix] = finiteOr(e->rmse(), -1);
  }
  return j;
}

// What every report states about the arithmetic and tiles that produced its figures.
nlohmann::json numericsJson(const RunConfig& c) {
  return {{"numerics", toString(c.numerics)},
          {"target", targetLabel(c.geometry, c.numerics)},
          {"geometry", c.geometry.label()},
          {"block_q", c.geometry.blockQ},
          {"block_k", c.geometry.blockK}};
}

std::string formatted(const char* fmt, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

// An error figure with `digits` decimals, or "-" when the engine measured no element of that part
// (exact numerics have no quantization part).
std::string measuredCell(const ErrorSums& e, double value, int digits) {
  return e.count > 0 ? formatted("%.*f", digits, value) : std::string("-");
}

// "L1 0.01234 (sparse alone 0.01000, quantization alone -)" and the same for the cosine similarity.
std::string errorSplitText(const char* what, const ErrorSums& deployed, const ErrorSums& sparse,
                           const ErrorSums& quant, bool l1) {
  auto cell = [&](const ErrorSums& e) { return measuredCell(e, l1 ? e.l1() : e.cosSim(), l1 ? 5 : 6); };
  return std::string(what) + " " + cell(deployed) + " (sparse alone " + cell(sparse) +
         ", quantization alone " + cell(quant) + ")";
}

// The budget figures of a head, for the reports: its L1 over its batch items against the budget.
struct HeadBudget {
  bool known = false;
  double budget = 0;
  bool over = false;
};
HeadBudget headBudget(const EntryResult& r, int64_t head, const ReportBudget* budget) {
  if (!budget) return {};
  for (const auto& [h, e] : headErrors(r))
    if (h == head) return {true, budget->l1, overBudget(e.l1(), budget->l1)};
  return {};
}

std::string markdownRow(const std::vector<std::string>& cells) {
  std::string row = "|";
  for (const std::string& c : cells) row += " " + c + " |";
  return row + "\n";
}

// One entry of the Markdown report: what ran, its totals and a row per head.
std::string markdownEntry(const EntryResult& r, const MarkdownExtras& extras, const ReportBudget* budget) {
  const EntryInfo& e = r.info;
  const RunConfig& c = r.config;
  std::string s = "\n## " + utf8Safe(e.name) + "\n\n";
  s += formatted("- Shape: B=%lld, Hq=%lld, Hkv=%lld, Nq=%lld, Nkv=%lld, D=%lld, %s%s%s\n",
                 (long long)e.batch, (long long)e.headsQ, (long long)e.headsKV, (long long)e.tokensQ,
                 (long long)e.tokensKV, (long long)e.headDim, toString(e.dtype), e.causal ? ", causal" : "",
                 e.window.bounded() ? (", window " + toString(e.window)).c_str() : "");
  if (e.grid)
    s += "- Token grid " + toString(*e.grid) + "; Stage 1 walked the tokens in " + toString(e.permutation) +
         " order\n";
  if (c.method != Method::SpargeAttn)
    s += std::string("- Block predictor: ") + methodLabel(c.method) + " (docs/methods.md)\n";
  s += formatted("- Numerics %s, target %s, geometry %s, smooth_k %s, sink %s%s; engine %s\n",
                 toString(c.numerics), targetLabel(c.geometry, c.numerics).c_str(),
                 c.geometry.label().c_str(), c.smoothK ? "on" : "off", c.sink ? "on" : "off",
                 c.diagonal ? ", diagonal blocks on (an extension, not SpargeAttn's)" : "", r.engine.c_str());
  s += formatted("- All heads: stage-1 sparsity %.1f %%, PV-skip rate %.1f %%, total sparsity %.1f %%; ",
                 100 * r.sparsity.stage1(), 100 * r.sparsity.pvSkipRate(), 100 * r.sparsity.total()) +
       errorSplitText("L1", r.error, r.errorSparse, r.errorQuant, true) + "; " +
       errorSplitText("cos", r.error, r.errorSparse, r.errorQuant, false) + "\n";
  const StageTimes& t = r.times;
  const std::string reference = t.referenceCached     ? "cached"
                                : t.referenceInSparse ? "in the sparse pass"
                                                      : formatted("%.2f ms", t.referenceMs);
  s += formatted(
      "- Times (%s clock): predict %.2f ms, sparse %.2f ms, reference %s, metrics %.2f ms, total %.2f ms\n\n",
      t.clock.c_str(), t.predictMs, t.sparseMs, reference.c_str(), t.metricsMs, t.totalMs);
  if (budget && budget->heldOut.count(e.name))
    s += "- Held-out: the parameters were not tuned on this entry\n";
  std::vector<std::string> header = {"batch",      "head",      "numerics", "mode",          "θ",
                                     "τ / top-k",  "λ",         "stage-1",  "PV skip",       "total",
                                     "L1",         "L1 sparse", "L1 quant", "L1 quant Q·Kᵀ", "cos",
                                     "cos sparse", "cos quant"};
  if (budget) header.push_back("budget");
  const size_t numeric = header.size();
  header.insert(header.end(), extras.headers.begin(), extras.headers.end());
  std::vector<std::string> align(header.size(), "---:");
  align[2] = align[3] = ":---";
  for (size_t i = numeric; i < align.size(); ++i) align[i] = ":---:";
  s += markdownRow(header) + markdownRow(align);
  for (const HeadResult& h : r.heads) {
    const HeadParams& p = h.params;
    const bool topk = p.mode == SelectMode::TopK;
    std::vector<std::string> row = {std::to_string(h.batch),
                                    std::to_string(h.head) + (h.hasNonFinite ? " (NaN/Inf)" : ""),
                                    toString(c.numericsFor(h.head)),
                                    p.dense ? "dense" : (topk ? "top-k" : "cdf"),
                                    formatted("%.3f", p.theta),
                                    formatted("%.3f", topk ? p.topk : p.tau),
                                    formatted("%g", p.lambda),
                                    formatted("%.1f %%", 100 * h.sparsity.stage1()),
                                    formatted("%.1f %%", 100 * h.sparsity.pvSkipRate()),
                                    formatted("%.1f %%", 100 * h.sparsity.total()),
                                    measuredCell(h.error, h.error.l1(), 5),
                                    measuredCell(h.errorSparse, h.errorSparse.l1(), 5),
                                    measuredCell(h.errorQuant, h.errorQuant.l1(), 5),
                                    measuredCell(h.errorQuantQk, h.errorQuantQk.l1(), 5),
                                    measuredCell(h.error, h.error.cosSim(), 6),
                                    measuredCell(h.errorSparse, h.errorSparse.cosSim(), 6),
                                    measuredCell(h.errorQuant, h.errorQuant.cosSim(), 6)};
    if (budget) {
      const HeadBudget hb = headBudget(r, h.head, budget);
      row.push_back(formatted("%g", hb.budget) + (hb.over ? " **over**" : ""));
    }
    if (extras.cells) {
      std::vector<std::string> more = extras.cells(r, h);
      more.resize(extras.headers.size());
      row.insert(row.end(), more.begin(), more.end());
    }
    s += markdownRow(row);
  }
  return s;
}

}  // namespace

const char* toString(SelectMode mode) {
  return mode == SelectMode::Cdf ? "cdf" : "topk";
}

void writeMasks(const std::string& path, const std::vector<EntryResult>& results) {
  writeTextAtomically(path, masksImage(path, results));
}

nlohmann::json reportJson(const std::vector<EntryResult>& results, const std::string& capturePath,
                          const ReportBudget* budget) {
  nlohmann::json root;
  root["sparge_report_version"] = 1;
  root["capture"] = utf8Safe(capturePath);
  root["entries"] = nlohmann::json::array();
  for (const EntryResult& r : results) {
    nlohmann::json e;
    e["name"] = utf8Safe(r.info.name);
    e["shape"] = {{"batch", r.info.batch},        {"heads_q", r.info.headsQ},
                  {"heads_kv", r.info.headsKV},   {"tokens_q", r.info.tokensQ},
                  {"tokens_kv", r.info.tokensKV}, {"head_dim", r.info.headDim},
                  {"head_dim_v", r.info.headDimV}};
    e["causal"] = r.info.causal;
    e["window"] =
        r.info.window.bounded() ? nlohmann::json{r.info.window.left, r.info.window.right} : nlohmann::json();
    e.update(numericsJson(r.config));
    if (r.info.grid) e["grid"] = gridJson(*r.info.grid);
    if (r.info.permutation != Permutation::None) e["permute"] = toString(r.info.permutation);
    e["smooth_k"] = r.config.smoothK;
    e["sink"] = r.config.sink;
    e["diagonal_extension"] = r.config.diagonal;  // Sparge Studio's option, not SpargeAttn's
    e["engine"] = r.engine;
    e["method"] = toString(r.config.method);
    e["totals"] = sparsityJson(r.sparsity);
    e["totals"].update(errorJson(r.error, r.errorSparse, r.errorQuant));
    if (r.errorQuantQk.count > 0) e["totals"]["l1_quant_qk"] = finiteOr(r.errorQuantQk.l1(), -1);
    if (budget) e["held_out"] = budget->heldOut.count(r.info.name) > 0;
    e["times_ms"] = {{"predict", r.times.predictMs},
                     {"sparse", r.times.sparseMs},
                     {"reference", r.times.referenceMs},
                     {"reference_cached", r.times.referenceCached},
                     {"reference_in_sparse", r.times.referenceInSparse},
                     {"metrics", r.times.metricsMs},
                     {"total", r.times.totalMs},
                     {"clock", r.times.clock}};
    e["warnings"] = nlohmann::json::array();
    for (const std::string& w : r.warnings) e["warnings"].push_back(utf8Safe(w));
    e["heads"] = nlohmann::json::array();
    for (const HeadResult& h : r.heads) {
      nlohmann::json hj = {{"batch", h.batch}, {"head", h.head}};
      hj.update(sparsityJson(h.sparsity));
      hj.update(errorJson(h.error, h.errorSparse, h.errorQuant));
      if (h.errorQuantQk.count > 0) hj["l1_quant_qk"] = finiteOr(h.errorQuantQk.l1(), -1);
      hj["numerics"] = toString(r.config.numericsFor(h.head));
      if (const HeadBudget hb = headBudget(r, h.head, budget); hb.known) {
        hj["budget_l1"] = hb.budget;
        hj["over_budget"] = hb.over;
      }
      hj["params"] = paramsJson(h.params);
      if (r.config.method != Method::SpargeAttn)
        hj["params"][toString(r.config.method)] = methodParamsJson(r.config.method, h.params);
      // Methods that choose single tokens: the share of the head's valid token pairs they cover themselves.
      if (std::isfinite(h.elementPairs) && h.sparsity.validArea > 0)
        hj["element_density"] = h.elementPairs / h.sparsity.validArea;
      hj["empty_rows"] = h.emptyRows;
      hj["non_finite"] = h.hasNonFinite;  // NaN/Inf in the head's inputs or output: figures not meaningful
      e["heads"].push_back(std::move(hj));
    }
    root["entries"].push_back(std::move(e));
  }
  return root;
}

void writeReportJson(const std::string& path, const std::vector<EntryResult>& results,
                     const std::string& capturePath, const ReportBudget* budget) {
  // Names were made UTF-8 in reportJson; `replace` keeps any string we missed from failing the export.
  writeTextAtomically(
      path,
      reportJson(results, capturePath, budget).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) +
          "\n");
}

std::string csvField(const std::string& text) {
  const std::string safe = utf8Safe(text);
  if (safe.find_first_of(",\"\r\n") == std::string::npos) return safe;
  std::string quoted = "\"";
  for (char c : safe) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::string reportCsv(const std::vector<EntryResult>& results, const ReportBudget* budget) {
  std::ostringstream out;
  out << "entry,batch,head,geometry,numerics,target,mode,simthreshd1,cdfthreshd,topk,pvthreshd,is_sparse,"
         "sparsity_stage1,pv_skip_rate,sparsity_total,sparsity_stage1_area,sparsity_total_area,l1,l1_sparse,"
         "l1_quant,cos_sim,cos_sim_sparse,cos_sim_quant,rmse,rmse_sparse,rmse_quant,non_finite,l1_quant_qk,"
         "budget_l1,over_budget,held_out,method,method_params\n";
  out.precision(8);
  for (const EntryResult& r : results)
    for (const HeadResult& h : r.heads) {
      const HeadParams& p = h.params;
      out << csvField(r.info.name) << ',' << h.batch << ',' << h.head << ',' << r.config.geometry.label()
          << ',' << toString(r.config.numericsFor(h.head)) << ','
          << targetLabel(r.config.geometry, r.config.numericsFor(h.head)) << ',' << toString(p.mode) << ','
          << p.theta << ',';
      if (p.mode == SelectMode::Cdf)
        out << p.tau << ",,";
      else
        out << ',' << p.topk << ',';
      out << p.lambda << ',' << (p.dense ? 0 : 1) << ',' << h.sparsity.stage1() << ','
          << h.sparsity.pvSkipRate() << ',' << h.sparsity.total() << ',' << h.sparsity.stage1Area() << ','
          << h.sparsity.totalArea();
      for (const ErrorSums* e : {&h.error, &h.errorSparse, &h.errorQuant}) out << ',' << e->l1();
      for (const ErrorSums* e : {&h.error, &h.errorSparse, &h.errorQuant}) out << ',' << e->cosSim();
      for (const ErrorSums* e : {&h.error, &h.errorSparse, &h.errorQuant}) out << ',' << e->rmse();
      out << ',' << (h.hasNonFinite ? 1 : 0) << ',';
      if (h.errorQuantQk.count > 0) out << h.errorQuantQk.l1();
      if (const HeadBudget hb = headBudget(r, h.head, budget); hb.known)
        out << ',' << hb.budget << ',' << (hb.over ? 1 : 0) << ','
            << (budget->heldOut.count(r.info.name) ? 1 : 0);
      else
        out << ",,,";
      out << ',' << toString(r.config.method) << ','
          << (r.config.method == Method::SpargeAttn
                  ? std::string()
                  : csvField(methodParamsJson(r.config.method, h.params).dump()))
          << '\n';
    }
  return out.str();
}

void writeReportCsv(const std::string& path, const std::vector<EntryResult>& results,
                    const ReportBudget* budget) {
  writeTextAtomically(path, reportCsv(results, budget));
}

std::string reportMarkdown(const std::vector<EntryResult>& results, const std::string& capturePath,
                           const MarkdownExtras& extras, const ReportBudget* budget) {
  std::ostringstream o;
  o << "# Sparge Studio report\n\n- Capture: `" << capturePath << "`\n";
  o << "- L1 = Σ|O − O_ref| / Σ|O_ref| against the dense fp32 reference: **L1** is what deployment gives "
       "(sparse, in the chosen numerics), *sparse* the same mask and λ in exact numerics, *quant* every "
       "valid "
       "block in the head's numerics, *quant Q·Kᵀ* its INT8 Q·Kᵀ part (every valid block, P·V in fp32); the "
       "same "
       "three for the cosine similarity (cos). \"-\": not measured.\n";
  if (budget)
    o << formatted("- Budget: the parameter file's L1 %g (deployed); **over** marks heads above it.\n",
                   budget->l1);
  if (!extras.legend.empty()) o << "\n" << extras.legend << "\n";
  for (const EntryResult& r : results) o << markdownEntry(r, extras, budget);
  return o.str();
}

void writeReportMarkdown(const std::string& path, const std::vector<EntryResult>& results,
                         const std::string& capturePath, const MarkdownExtras& extras,
                         const ReportBudget* budget) {
  writeTextAtomically(path, reportMarkdown(results, capturePath, extras, budget));
}

std::vector<std::pair<int64_t, ErrorSums>> headErrors(const EntryResult& r) {
  std::vector<std::pair<int64_t, ErrorSums>> out;
  for (const HeadResult& h : r.heads) {
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& p) { return p.first == h.head; });
    if (it == out.end())
      out.emplace_back(h.head, h.error);
    else
      it->second += h.error;
  }
  return out;
}

}  // namespace sparge::core

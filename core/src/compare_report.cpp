// Reports of `sparge compare`: JSON (with each variant's run report), CSV and Markdown, written atomically.
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "params_grid.h"
#include "sparge/core/atomic_file.h"
#include "sparge/core/compare.h"
#include "sparge/core/exports.h"
#include "sparge/core/method_json.h"
#include "sparge/core/method_knob.h"
#include "sparge/core/names.h"

namespace sparge::core {
namespace {

using nlohmann::json;

json number(double v) {
  return std::isfinite(v) ? json(v) : json(nullptr);
}

json variantHeadJson(const VariantHead& v, Method method) {
  json j = {{"self_similarity_q", number(v.similarity.meanQ())},
            {"self_similarity_k", number(v.similarity.meanK())},
            {"blocks_q", v.similarity.blocksQ},
            {"blocks_k", v.similarity.blocksK},
            {"is_sparse", v.tuned.isSparse},
            {"pvthreshd", v.tuned.params.lambda},
            {"sparsity_stage1", v.reached.stage1()},
            {"sparsity_total", v.reached.total()},
            {"valid_blocks", v.reached.validBlocks},
            {"l1", number(v.error.l1())}};
  if (method == Method::SpargeAttn) {
    j["simthreshd1"] = v.tuned.params.theta;
    j["sel"] = v.tuned.params.mode == SelectMode::Cdf ? v.tuned.params.tau : v.tuned.params.topk;
  } else {
    j[toString(method)] = methodParamsJson(method, v.tuned.params);
  }
  return j;
}

std::string cell(double v, const char* fmt) {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string row(const std::vector<std::string>& cells) {
  std::string s = "|";
  for (const std::string& c : cells) s += " " + c + " |";
  return s + "\n";
}

// "12.34 ms (wall), 8.1 % of dense".
std::string stage1Text(const CompareEntry& e, size_t i) {
  return cell(e.runs[i].times.predictMs, "%.2f ms") + " (" + e.runs[i].times.clock + ")" +
         (std::isfinite(e.stage1Share(i)) ? ", " + cell(100 * e.stage1Share(i), "%.1f %%") + " of dense"
                                          : "");
}

int headsWon(const CompareEntry& e, size_t i) {
  return i < e.headsWon.size() ? e.headsWon[i] : 0;
}

// The method's own parameters of a tuned head, for tables: SpargeAttn's θ, τ / top-k, λ or the method's.
std::string paramsText(const VariantHead& v, Method m) {
  const HeadParams& p = v.tuned.params;
  if (p.dense) return "dense";
  const std::string lambda = " λ " + cell(p.lambda, "%g");
  if (m != Method::SpargeAttn) return describeMethodParams(m, p) + lambda;
  return "θ " + cell(p.theta, "%g") + (p.mode == SelectMode::Cdf ? " τ " : " top-k ") +
         cell(p.mode == SelectMode::Cdf ? p.tau : p.topk, "%g") + lambda;
}

std::string budgetText(const TuneOptions& o) {
  return "l1 < " + cell(o.l1, "%g") + (o.tunePv ? ", l2 < " + cell(o.l2, "%g") : std::string()) + ", " +
         toString(o.numerics) + " numerics, " + o.geometry.label() + " tiles" + (o.sink ? ", sink" : "");
}

std::string entryMarkdown(const CompareEntry& e, const std::vector<CompareVariant>& variants) {
  std::string s = "\n## " + utf8Safe(e.info.name) + "\n\n";
  if (e.info.grid) s += "Token grid " + toString(*e.info.grid) + ".\n\n";
  s += "Dense pass " + cell(e.denseMs, "%.2f ms") + " on the same engine, the yardstick of Stage 1.\n\n";
  s += row({"variant", "mean self-sim Q", "mean self-sim K", "total sparsity", "L1", "Stage 1", "heads won"});
  s += "| --- | --- | --- | --- | --- | --- | --- |\n";
  for (size_t i = 0; i < variants.size(); ++i) {
    const EntryResult& r = e.runs[i];
    s += row({variants[i].label + (int(i) == e.winner ? " (winner)" : ""),
              cell(e.similarity[i].meanQ(), "%.3f"), cell(e.similarity[i].meanK(), "%.3f"),
              cell(100 * r.sparsity.total(), "%.1f %%"), cell(r.error.l1(), "%.4f"), stage1Text(e, i),
              std::to_string(headsWon(e, i)) + " / " + std::to_string(e.heads.size())});
  }
  std::vector<std::string> header{"head"}, rule{"---"};
  for (const CompareVariant& v : variants) {
    header.push_back(v.label +
                     (v.method == Method::SpargeAttn ? ": self-sim Q / K, sparsity" : ": sparsity"));
    rule.push_back("---");
  }
  header.push_back("winner");
  rule.push_back("---");
  s += "\n" + row(header) + row(rule);
  for (const CompareHead& h : e.heads) {
    std::vector<std::string> cells{std::to_string(h.head)};
    for (const VariantHead& v : h.variants) cells.push_back(variantHeadCell(v));
    cells.push_back(h.winner < 0 ? "-" : variants[size_t(h.winner)].label + (h.tie ? " (tie)" : ""));
    s += row(cells);
  }
  return s;
}

}  // namespace

std::string variantHeadCell(const VariantHead& v) {
  const bool sim = std::isfinite(v.similarity.meanQ()) || std::isfinite(v.similarity.meanK());
  return (sim ? cell(v.similarity.meanQ(), "%.3f") + " / " + cell(v.similarity.meanK(), "%.3f") + ", " : "") +
         cell(100 * v.reached.total(), "%.1f %%");
}

std::string compareJson(const std::vector<CompareEntry>& entries, const std::vector<CompareVariant>& variants,
                        const TuneOptions& options, const std::string& capturePath) {
  json root;
  root["sparge_compare_version"] = 1;
  root["capture"] = utf8Safe(capturePath);
  root["budget"] = {{"l1", options.l1}, {"l2", options.l2}, {"tune_pv", options.tunePv}};
  root["mode"] = toString(options.mode);
  root["numerics"] = toString(options.numerics);
  root["geometry"] = options.geometry.label();
  root["variants"] = json::array();
  for (const CompareVariant& v : variants)
    root["variants"].push_back(
        {{"label", v.label}, {"permute", toString(v.permute)}, {"method", toString(v.method)}});
  root["entries"] = json::array();
  for (const CompareEntry& e : entries) {
    json je{{"name", utf8Safe(e.info.name)}};
    je["grid"] = e.info.grid ? gridJson(*e.info.grid) : json(nullptr);
    je["winner"] = e.winner < 0 ? json(nullptr) : json(variants[size_t(e.winner)].label);
    je["tie"] = e.tie;
    je["dense_ms"] = e.denseMs;
    je["variants"] = json::object();
    for (size_t i = 0; i < variants.size(); ++i)
      je["variants"][variants[i].label] = {{"self_similarity_q", number(e.similarity[i].meanQ())},
                                           {"self_similarity_k", number(e.similarity[i].meanK())},
                                           {"sparsity_total", e.runs[i].sparsity.total()},
                                           {"l1", number(e.runs[i].error.l1())},
                                           {"stage1_ms", e.runs[i].times.predictMs},
                                           {"stage1_share_of_dense", number(e.stage1Share(i))},
                                           {"clock", e.runs[i].times.clock},
                                           {"heads_won", headsWon(e, i)},
                                           {"run", reportJson({e.runs[i]}, capturePath)["entries"][0]}};
    je["heads"] = json::array();
    for (const CompareHead& h : e.heads) {
      json jh{{"head", h.head}, {"tie", h.tie}};
      jh["winner"] = h.winner < 0 ? json(nullptr) : json(variants[size_t(h.winner)].label);
      for (size_t i = 0; i < variants.size(); ++i)
        jh["variants"][variants[i].label] = variantHeadJson(h.variants[i], variants[i].method);
      je["heads"].push_back(jh);
    }
    root["entries"].push_back(je);
  }
  return root.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

std::string compareCsv(const std::vector<CompareEntry>& entries,
                       const std::vector<CompareVariant>& variants) {
  std::string s =
      "entry,head,variant,permute,method,params,sparsity_stage1,sparsity_total,l1,winner,tie,heads_won,"
      "stage1_ms,"
      "dense_ms,stage1_share_of_dense,clock\n";
  auto line = [&](std::vector<std::string> cells) {
    for (size_t i = 0; i < cells.size(); ++i) {
      if (i) s += ',';
      s += csvField(cells[i]);
    }
    s += '\n';
  };
  for (const CompareEntry& e : entries) {
    const std::string name = utf8Safe(e.info.name);
    for (const CompareHead& h : e.heads)
      for (size_t i = 0; i < variants.size(); ++i) {
        const VariantHead& v = h.variants[i];
        line({name, std::to_string(h.head), variants[i].label, toString(variants[i].permute),
              toString(variants[i].method), paramsText(v, variants[i].method),
              cell(v.reached.stage1(), "%.6f"), cell(v.reached.total(), "%.6f"), cell(v.error.l1(), "%.6g"),
              h.winner == int(i) ? "1" : "0", h.tie ? "1" : "0", "", "", "", "", ""});
      }
    // Per entry and variant: head "all", Stage 1's time and the heads won.
    for (size_t i = 0; i < variants.size(); ++i) {
      const EntryResult& r = e.runs[i];
      line({name, "all", variants[i].label, toString(variants[i].permute), toString(variants[i].method), "",
            cell(r.sparsity.stage1(), "%.6f"), cell(r.sparsity.total(), "%.6f"), cell(r.error.l1(), "%.6g"),
            e.winner == int(i) ? "1" : "0", e.tie ? "1" : "0", std::to_string(headsWon(e, i)),
            cell(r.times.predictMs, "%.3f"), cell(e.denseMs, "%.3f"), cell(e.stage1Share(i), "%.4f"),
            r.times.clock});
    }
  }
  return s;
}

std::string compareMarkdown(const std::vector<CompareEntry>& entries,
                            const std::vector<CompareVariant>& variants, const TuneOptions& options,
                            const std::string& capturePath) {
  std::string s = "# Sparge Studio: variants compared\n\n";
  s +=
      "Capture `" + utf8Safe(capturePath) +
      "`; each variant (token order, block predictor) tuned per head against " + budgetText(options) +
      ", then re-run with its tuned parameters. Self-similarity is SpargeAttn's Stage-1 s (K after "
      "smoothing), "
      "the mean over the blocks where it is defined; sparsity is the total (Stage 1 and PV skip) over valid "
      "blocks; the winner reaches the most sparsity; Stage 1 is the re-run's prediction time on the engine's "
      "clock (its statistics not cached), and its share of a dense pass over the same heads in the same "
      "numerics.\n";
  for (const CompareEntry& e : entries) s += entryMarkdown(e, variants);
  return s;
}

void writeCompareReport(const std::string& path, const std::vector<CompareEntry>& entries,
                        const std::vector<CompareVariant>& variants, const TuneOptions& options,
                        const std::string& capturePath) {
  auto endsWith = [&](const char* ext) {
    const size_t n = std::char_traits<char>::length(ext);
    return path.size() >= n && path.compare(path.size() - n, n, ext) == 0;
  };
  writeTextAtomically(path, endsWith(".md")    ? compareMarkdown(entries, variants, options, capturePath)
                            : endsWith(".csv") ? compareCsv(entries, variants)
                                               : compareJson(entries, variants, options, capturePath));
}

}  // namespace sparge::core

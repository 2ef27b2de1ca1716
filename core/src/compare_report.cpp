// Reports of `sparge compare`: JSON (with each variant's run report) and Markdown, written atomically.
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "params_grid.h"
#include "sparge/core/atomic_file.h"
#include "sparge/core/compare.h"
#include "sparge/core/exports.h"
#include "sparge/core/names.h"

namespace sparge::core {
namespace {

using nlohmann::json;

json number(double v) {
  return std::isfinite(v) ? json(v) : json(nullptr);
}

json variantHeadJson(const VariantHead& v) {
  return {{"self_similarity_q", number(v.similarity.meanQ())},
          {"self_similarity_k", number(v.similarity.meanK())},
          {"blocks_q", v.similarity.blocksQ},
          {"blocks_k", v.similarity.blocksK},
          {"is_sparse", v.tuned.isSparse},
          {"simthreshd1", v.tuned.params.theta},
          {"sel", v.tuned.params.mode == SelectMode::Cdf ? v.tuned.params.tau : v.tuned.params.topk},
          {"pvthreshd", v.tuned.params.lambda},
          {"sparsity_stage1", v.reached.stage1()},
          {"sparsity_total", v.reached.total()},
          {"valid_blocks", v.reached.validBlocks},
          {"l1", number(v.error.l1())}};
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

std::string budgetText(const TuneOptions& o) {
  return "l1 < " + cell(o.l1, "%g") + (o.tunePv ? ", l2 < " + cell(o.l2, "%g") : std::string()) + ", " +
         toString(o.numerics) + " numerics, " + o.geometry.label() + " tiles" + (o.sink ? ", sink" : "");
}

std::string entryMarkdown(const CompareEntry& e, const std::vector<CompareVariant>& variants) {
  std::string s = "\n## " + utf8Safe(e.info.name) + "\n\n";
  if (e.info.grid) s += "Token grid " + toString(*e.info.grid) + ".\n\n";
  s += row({"variant", "mean self-sim Q", "mean self-sim K", "total sparsity", "L1"});
  s += "| --- | --- | --- | --- | --- |\n";
  for (size_t i = 0; i < variants.size(); ++i) {
    const EntryResult& r = e.runs[i];
    s += row({variants[i].label + (int(i) == e.winner ? " (winner)" : ""),
              cell(e.similarity[i].meanQ(), "%.3f"), cell(e.similarity[i].meanK(), "%.3f"),
              cell(100 * r.sparsity.total(), "%.1f %%"), cell(r.error.l1(), "%.4f")});
  }
  std::vector<std::string> header{"head"}, rule{"---"};
  for (const CompareVariant& v : variants) {
    header.push_back(v.label + ": self-sim Q / K, sparsity");
    rule.push_back("---");
  }
  header.push_back("winner");
  rule.push_back("---");
  s += "\n" + row(header) + row(rule);
  for (const CompareHead& h : e.heads) {
    std::vector<std::string> cells{std::to_string(h.head)};
    for (const VariantHead& v : h.variants)
      cells.push_back(cell(v.similarity.meanQ(), "%.3f") + " / " + cell(v.similarity.meanK(), "%.3f") + ", " +
                      cell(100 * v.reached.total(), "%.1f %%"));
    cells.push_back(h.winner < 0 ? "-" : variants[size_t(h.winner)].label + (h.tie ? " (tie)" : ""));
    s += row(cells);
  }
  return s;
}

}  // namespace

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
    root["variants"].push_back({{"label", v.label}, {"permute", toString(v.permute)}});
  root["entries"] = json::array();
  for (const CompareEntry& e : entries) {
    json je{{"name", utf8Safe(e.info.name)}};
    je["grid"] = e.info.grid ? gridJson(*e.info.grid) : json(nullptr);
    je["winner"] = e.winner < 0 ? json(nullptr) : json(variants[size_t(e.winner)].label);
    je["tie"] = e.tie;
    je["variants"] = json::object();
    for (size_t i = 0; i < variants.size(); ++i)
      je["variants"][variants[i].label] = {{"self_similarity_q", number(e.similarity[i].meanQ())},
                                           {"self_similarity_k", number(e.similarity[i].meanK())},
                                           {"sparsity_total", e.runs[i].sparsity.total()},
                                           {"l1", number(e.runs[i].error.l1())},
                                           {"run", reportJson({e.runs[i]}, capturePath)["entries"][0]}};
    je["heads"] = json::array();
    for (const CompareHead& h : e.heads) {
      json jh{{"head", h.head}, {"tie", h.tie}};
      jh["winner"] = h.winner < 0 ? json(nullptr) : json(variants[size_t(h.winner)].label);
      for (size_t i = 0; i < variants.size(); ++i)
        jh["variants"][variants[i].label] = variantHeadJson(h.variants[i]);
      je["heads"].push_back(jh);
    }
    root["entries"].push_back(je);
  }
  return root.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

std::string compareMarkdown(const std::vector<CompareEntry>& entries,
                            const std::vector<CompareVariant>& variants, const TuneOptions& options,
                            const std::string& capturePath) {
  std::string s = "# Sparge Studio: token orders compared\n\n";
  s +=
      "Capture `" + utf8Safe(capturePath) + "`; each variant tuned per head against " + budgetText(options) +
      ", then re-run with its tuned parameters. Self-similarity is Stage 1's s (K after smoothing), the mean "
      "over the blocks where it is defined; sparsity is the total (Stage 1 and PV skip) over valid blocks; "
      "the winner reaches the most sparsity.\n";
  for (const CompareEntry& e : entries) s += entryMarkdown(e, variants);
  return s;
}

void writeCompareReport(const std::string& path, const std::vector<CompareEntry>& entries,
                        const std::vector<CompareVariant>& variants, const TuneOptions& options,
                        const std::string& capturePath) {
  const bool md = path.size() >= 3 && path.compare(path.size() - 3, 3, ".md") == 0;
  writeTextAtomically(path, md ? compareMarkdown(entries, variants, options, capturePath)
                               : compareJson(entries, variants, options, capturePath));
}

}  // namespace sparge::core

// eval.json reader: every value checked for presence and type, errors at their JSON path.
#include "eval_report.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "sparge/core/error.h"
#include "sparge/core/json_reader.h"

namespace sparge::gui {
namespace {

using nlohmann::json;

// JsonReader with the optional keys of the format: absent or null mean "not given".
class Reader : public core::JsonReader {
 public:
  using JsonReader::JsonReader;

  const json* given(const json& obj, const std::string& key) const {
    const json* v = optional(obj, key);
    return v && !v->is_null() ? v : nullptr;
  }
  std::optional<double> optionalNumber(const json& obj, const std::string& path,
                                       const std::string& key) const {
    const json* v = given(obj, key);
    return v ? std::optional<double>(number(*v, path + "/" + key)) : std::nullopt;
  }
  std::string optionalString(const json& obj, const std::string& path, const std::string& key) const {
    return given(obj, key) ? string(obj, path, key) : std::string();
  }
};

EvalSummary parseSummary(const Reader& rd, const json& s, const std::string& p) {
  EvalSummary out;
  out.metric = rd.string(s, p, "metric");
  out.dense = rd.optionalNumber(s, p, "dense");
  out.sparse = rd.optionalNumber(s, p, "sparse");
  out.relativeChange = rd.optionalNumber(s, p, "relative_change");
  for (const char* key : {"top1_agreement", "token_agreement", "ssim"})
    if (auto v = rd.optionalNumber(s, p, key)) out.agreement = v;
  out.meanKl = rd.optionalNumber(s, p, "mean_kl");
  out.inputs = rd.integer(s, p, "inputs");
  if (out.inputs < 0) rd.fail(p + "/inputs", "must be >= 0");
  out.line = rd.string(s, p, "line");
  if (out.line.empty()) rd.fail(p + "/line", "must not be empty: it is the summary the GUI shows");
  return out;
}

EvalHead parseHead(const Reader& rd, const json& h, const std::string& p) {
  EvalHead out;
  out.entry = rd.string(h, p, "entry");
  out.module = rd.optionalString(h, p, "module");
  if (rd.given(h, "layer")) out.layer = rd.integer(h, p, "layer");
  out.head = rd.integer(h, p, "head");
  if (out.head < 0) rd.fail(p + "/head", "must be >= 0");
  out.numerics = rd.optionalString(h, p, "numerics");
  if (auto v = rd.optionalNumber(h, p, "sparsity")) out.sparsity = *v;
  // A head whose error was not measured has no l1, l1_max or over_budget.
  if (auto v = rd.optionalNumber(h, p, "l1")) out.l1 = *v;
  out.l1Max = rd.optionalNumber(h, p, "l1_max").value_or(out.l1);
  out.budgetL1 = rd.number(h, p, "budget_l1");
  if (rd.given(h, "over_budget")) out.overBudget = rd.boolean(h, p, "over_budget");
  out.inputs = rd.given(h, "inputs") ? rd.integer(h, p, "inputs") : 0;
  return out;
}

}  // namespace

EvalReport parseEvalReport(const std::string& text, const std::string& source) {
  Reader rd(source);
  const json root = json::parse(text, nullptr, false);
  if (root.is_discarded()) rd.fail("", "not valid JSON — an evaluation report is written by sparge-eval");
  if (!root.is_object()) rd.fail("", "expected a JSON object at the top level");
  const int64_t version = rd.integer(root, "", "sparge_eval_version");
  if (version != kEvalVersion)
    rd.fail("/sparge_eval_version", "unsupported version " + std::to_string(version) + " (this build reads " +
                                        std::to_string(kEvalVersion) + ")");
  EvalReport r;
  r.params = rd.optionalString(root, "", "params");
  r.engine = rd.optionalString(root, "", "engine");
  r.numerics = rd.optionalString(root, "", "numerics");
  r.device = rd.optionalString(root, "", "device");
  if (const json* m = rd.given(root, "model")) {
    r.modelName = rd.optionalString(*m, "/model", "name");
    r.modelKind = rd.optionalString(*m, "/model", "kind");
  }
  r.summary = parseSummary(rd, rd.member(root, "", "summary"), "/summary");
  const json& heads = rd.member(root, "", "heads");
  if (!heads.is_array()) rd.fail("/heads", "expected an array");
  for (size_t i = 0; i < heads.size(); ++i)
    r.heads.push_back(parseHead(rd, heads[i], "/heads/" + std::to_string(i)));
  return r;
}

EvalReport readEvalReport(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw Error(path, "no such evaluation report (a regular file)");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path, "cannot open the evaluation report");
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) throw Error(path, "cannot read the evaluation report");
  return parseEvalReport(s.str(), path);
}

std::string evalReportBeside(const std::string& paramsPath) {
  std::filesystem::path p(paramsPath);
  return (p.parent_path() / (p.stem().string() + ".eval.json")).string();
}

}  // namespace sparge::gui

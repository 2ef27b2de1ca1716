// eval.json reader: every value checked for presence and type, errors at their JSON path.
#include "eval_report.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "sparge/core/error.h"

namespace sparge::gui {
namespace {

using nlohmann::json;

class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string& path, const std::string& problem) const {
    throw Error(source_ + ":" + (path.empty() ? "/" : path), problem);
  }
  const json& member(const json& obj, const std::string& path, const std::string& key) const {
    if (!obj.is_object()) fail(path, "expected a JSON object");
    const auto it = obj.find(key);
    if (it == obj.end()) fail(path + "/" + key, "missing key \"" + key + "\"");
    return *it;
  }
  const json* optional(const json& obj, const std::string& key) const {
    const auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }
  double number(const json& v, const std::string& path) const {
    if (!v.is_number()) fail(path, "expected a number, got " + std::string(v.type_name()));
    const double d = v.get<double>();
    if (!std::isfinite(d)) fail(path, "expected a finite number");
    return d;
  }
  double number(const json& obj, const std::string& path, const std::string& key) const {
    return number(member(obj, path, key), path + "/" + key);
  }
  std::optional<double> optionalNumber(const json& obj, const std::string& path,
                                       const std::string& key) const {
    const json* v = optional(obj, key);
    return v ? std::optional<double>(number(*v, path + "/" + key)) : std::nullopt;
  }
  int64_t integer(const json& obj, const std::string& path, const std::string& key) const {
    const json& v = member(obj, path, key);
    if (!v.is_number_integer())
      fail(path + "/" + key, "expected an integer, got " + std::string(v.type_name()));
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX))
      fail(path + "/" + key, "out of range");
    return v.get<int64_t>();
  }
  bool boolean(const json& obj, const std::string& path, const std::string& key) const {
    const json& v = member(obj, path, key);
    if (!v.is_boolean()) fail(path + "/" + key, "expected true or false, got " + std::string(v.type_name()));
    return v.get<bool>();
  }
  std::string string(const json& obj, const std::string& path, const std::string& key) const {
    const json& v = member(obj, path, key);
    if (!v.is_string()) fail(path + "/" + key, "expected a string, got " + std::string(v.type_name()));
    return v.get<std::string>();
  }
  std::string optionalString(const json& obj, const std::string& path, const std::string& key) const {
    return optional(obj, key) ? string(obj, path, key) : std::string();
  }

 private:
  std::string source_;
};

EvalSummary parseSummary(const Reader& rd, const json& s, const std::string& p) {
  EvalSummary out;
  out.metric = rd.string(s, p, "metric");
  out.dense = rd.number(s, p, "dense");
  out.sparse = rd.number(s, p, "sparse");
  out.relativeChange = rd.number(s, p, "relative_change");
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
  if (rd.optional(h, "layer")) out.layer = rd.integer(h, p, "layer");
  out.head = rd.integer(h, p, "head");
  if (out.head < 0) rd.fail(p + "/head", "must be >= 0");
  out.numerics = rd.optionalString(h, p, "numerics");
  if (auto v = rd.optionalNumber(h, p, "sparsity")) out.sparsity = *v;
  out.l1 = rd.number(h, p, "l1");
  out.l1Max = rd.optionalNumber(h, p, "l1_max").value_or(out.l1);
  out.budgetL1 = rd.number(h, p, "budget_l1");
  out.overBudget = rd.boolean(h, p, "over_budget");
  out.inputs = rd.optional(h, "inputs") ? rd.integer(h, p, "inputs") : 0;
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
  if (const json* m = rd.optional(root, "model")) {
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

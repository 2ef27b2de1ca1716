#include "run_options.h"

#include <cfloat>

#include "option_checks.h"
#include "sparge/core/error.h"
#include "sparge/core/names.h"
#include "sparge/core/params_io.h"
#include "sparge/core/permutation.h"

namespace sparge::cli {

core::Geometry NumericsOptions::geometry() const {
  try {
    return block ? core::Geometry::parse(*block) : core::geometryOf(core::parseTarget(target));
  } catch (const Error& e) {
    throw Error(block ? "--block" : "--target", e.problem());
  }
}

core::Numerics NumericsOptions::numerics() const {
  try {
    return quant ? core::parseNumerics(*quant) : core::numericsOf(core::parseTarget(target));
  } catch (const Error& e) {
    throw Error(quant ? "--quant" : "--target", e.problem());
  }
}

void addNumericsOptions(CLI::App& cmd, NumericsOptions& o) {
  cmd.add_option(
         "--target", o.target,
         "SpargeAttn kernel family to imitate: sm80 (128x64, int8-fp16), sm89 (128x64, int8-fp8) or sm90 "
         "(64x128, int8-fp8)")
      ->capture_default_str();
  cmd.add_option("--block", o.block, "Tile geometry Q×K tokens, overrides --target: 128x64 or 64x128");
  cmd.add_option(
      "--quant", o.quant,
      "Stage-2 numerics, overrides --target: none (exact fp32), int8-fp16 (sm80) or int8-fp8 (sm89/sm90)");
}

void addMethodOptions(CLI::App& cmd, RunCommandOptions& o) {
  cmd.add_option("--theta", o.theta, "θ, simthreshd1: blocks with self-similarity <= θ are forced on")
      ->capture_default_str();
  auto* tau =
      cmd.add_option("--tau", o.tau, "τ, cdfthreshd: keep blocks while the pooled CDF <= τ (default 0.98)")
          ->check(realIn(0, 1));
  auto* topk = cmd.add_option("--topk", o.topk, "Top-k mode: fraction of K blocks kept per row, in (0, 1]")
                   ->check(realIn(0, 1));
  tau->excludes(topk);
  cmd.add_option("--lambda", o.lambda, "λ, pvthreshd: skip PV when the row maxima rise by <= -λ (base 2)")
      ->check(realIn(0, DBL_MAX))
      ->capture_default_str();
  addMethodChoiceOptions(cmd, o.method, true);
  addNumericsOptions(cmd, o.numerics);
  cmd.add_flag("--no-smooth-k", o.noSmoothK, "Do not subtract the K token mean before pooling");
  cmd.add_flag("--sink", o.sink, "Attention sink: K block 0 always on");
  cmd.add_flag("--diagonal", o.diagonal,
               "Extension, not SpargeAttn's: the diagonal blocks (those holding key == query) always on");
  cmd.add_flag("--dense", o.dense, "Compute every valid block (is_sparse = false), no PV skip");
  cmd.add_option("--engine", o.engine, "auto | cpu | cuda")->capture_default_str();
  addThreadsOption(cmd, o.threads, "CPU engine threads");
  cmd.add_option("--params", o.paramsPath,
                 "Per-head parameters from `sparge tune` (JSON); they also set geometry, numerics, smooth-k, "
                 "sink, diagonal")
      ->check(existingFile());
  cmd.add_flag(
      "--params-any-capture", o.paramsAnyCapture,
      "Apply --params to entries it was not tuned on (its tuned_on digests do not match): a deliberate "
      "transfer, e.g. held-out validation; the output marks those entries held-out");
  addHeadsOption(cmd, o.heads, "Only these query heads");
  addPermuteOption(cmd, o.permute);
}

void addPermuteOption(CLI::App& cmd, std::string& permute) {
  cmd.add_option(
         "--permute", permute,
         "Token order of image/video entries (their `grid`) before Stage 1: none | rowmajor | timemajor | "
         "hilbert; undone on the output, so errors stay against the same dense reference")
      ->capture_default_str();
}

core::Permutation runPermutation(const RunCommandOptions& o, const core::EntryInfo& entry,
                                 std::vector<std::string>* warnings) {
  core::Permutation p;
  try {
    p = core::parsePermutation(o.permute);
  } catch (const Error& e) {
    throw Error("--permute", e.problem());
  }
  if (!o.paramsPath.empty()) {
    const core::Permutation tuned = core::permutationFor(core::readParams(o.paramsPath), o.paramsPath, entry);
    if (tuned != p && warnings)
      warnings->push_back(o.paramsPath + ": using token order " + core::toString(tuned) +
                          " (the parameters were tuned in it)");
    p = tuned;
  }
  if (std::string problem = core::permutationProblem(entry, p); !problem.empty())
    throw Error(o.paramsPath.empty() ? "--permute" : o.paramsPath, problem);
  return p;
}

void applyBudgets(core::TuneOptions& t, double l1, double l2, bool noTunePv, bool topk, const CLI::App& cmd) {
  t.l1 = l1;
  t.tunePv = !noTunePv;
  if (t.tunePv && cmd.count("--l2") == 0) throw Error("--l2", "is required (or pass --no-tune-pv)");
  t.l2 = cmd.count("--l2") ? l2 : l1;
  t.mode = topk ? core::SelectMode::TopK : core::SelectMode::Cdf;
}

core::HeadParams checkMethodOptions(const RunCommandOptions& o) {
  const core::Method method = o.method.parsed();
  if (method != core::Method::SpargeAttn && (o.tau || o.topk))
    throw Error(o.tau ? "--tau" : "--topk", std::string("is SpargeAttn's; --method ") +
                                                core::toString(method) +
                                                " has its own options (sparge run --help)");
  core::HeadParams p;
  p.theta = o.theta;
  p.lambda = o.lambda;
  p.dense = o.dense;
  o.method.apply(method, p);
  if (o.topk) {
    p.mode = core::SelectMode::TopK;
    p.topk = *o.topk;
    core::validate(p, "--topk", method);
  } else {
    p.mode = core::SelectMode::Cdf;
    p.tau = o.tau.value_or(0.98);
    core::validate(p, method == core::Method::SpargeAttn ? "--theta/--tau/--lambda" : "--method options",
                   method);
  }
  o.numerics.geometry();
  o.numerics.numerics();
  core::parseEngineChoice(o.engine);
  return p;
}

core::RunConfig makeRunConfig(const RunCommandOptions& o, const core::EntryInfo& entry, const std::string&,
                              std::vector<std::string>* warnings) {
  core::RunConfig c;
  c.method = o.method.parsed();
  c.geometry = o.numerics.geometry();
  c.numerics = o.numerics.numerics();
  c.smoothK = !o.noSmoothK;
  c.sink = o.sink;
  c.diagonal = o.diagonal;
  c.defaults = checkMethodOptions(o);
  if (!o.paramsPath.empty()) {
    core::applyParams(core::readParams(o.paramsPath), o.paramsPath, entry, c, warnings);
    if (!o.method.method.empty() && o.method.parsed() != c.method)
      throw Error("--method", std::string(core::toString(o.method.parsed())) + " was asked, but " +
                                  o.paramsPath + " holds " + core::toString(c.method) +
                                  "'s parameters for this entry: drop --method or pass that method's file");
  }
  for (int64_t h : o.heads)
    if (h < 0 || h >= entry.headsQ)
      throw Error("--heads", "head " + std::to_string(h) + " does not exist in entry " +
                                 core::shortForDisplay(entry.name) + " (it has " +
                                 std::to_string(entry.headsQ) + " query heads)");
  return c;
}

}  // namespace sparge::cli

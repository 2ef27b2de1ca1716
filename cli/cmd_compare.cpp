// `sparge compare FILE --methods spargeattn,xattention,... --permute none,hilbert --l1 X --l2 Y`: each
// variant (token order, block predictor) tuned per head against the same budget; per head and entry the
// sparsity reached, the blocks' mean self-similarity, Stage 1's cost and the winner.
#include <cmath>
#include <cstdio>
#include <iostream>

#include "commands.h"
#include "format.h"
#include "guards.h"
#include "method_options.h"
#include "option_checks.h"
#include "run_options.h"
#include "sparge/core/capture.h"
#include "sparge/core/compare.h"
#include "sparge/core/error.h"
#include "sparge/core/method.h"
#include "sparge/core/names.h"
#include "sparge/core/permutation.h"
#include "sparge/kernels/engine_factory.h"

namespace sparge::cli {
namespace {

struct CompareOptions {
  std::string file;
  std::vector<std::string> entries;
  std::string permute = "none,rowmajor,timemajor,hilbert";  // without --permute but with --methods: none
  std::string methods = "spargeattn";
  MethodOptions methodOptions;  // the other methods' fixed parameters (their knobs are tuned)
  double l1 = 0, l2 = 0;
  bool topk = false, noTunePv = false, noSmoothK = false, sink = false;
  NumericsOptions numerics;
  std::vector<int64_t> heads;
  std::string engine = "auto";
  int threads = 0;
  std::string report;
};

void addCompareOptions(CLI::App& cmd, CompareOptions& o) {
  cmd.add_option("file", o.file, "Capture file (.h5) whose entries have a token grid");
  cmd.add_option(
      "--entry", o.entries,
      "Entry to compare (repeatable); default: every entry with a grid, or with --methods alone every "
      "entry");
  cmd.add_option(
         "--permute", o.permute,
         "Token orders to compare, comma separated (none, rowmajor, timemajor, hilbert); with --methods "
         "alone: none")
      ->capture_default_str();
  cmd.add_option(
         "--methods", o.methods,
         "Block predictors to compare, comma separated: spargeattn, xattention, minference, flexprefill, "
         "moba (docs/methods.md)")
      ->capture_default_str();
  addMethodFixedOptions(cmd, o.methodOptions);
  cmd.add_option("--l1", o.l1, "L1 budget for θ and τ / top-k, e.g. 0.05")->required();
  cmd.add_option("--l2", o.l2, "L1 budget for λ, > l1, e.g. 0.06");
  cmd.add_flag("--topk-mode", o.topk, "Search the top-k fraction instead of τ");
  cmd.add_flag("--no-tune-pv", o.noTunePv, "Do not search λ (λ = 50, checked against --l1)");
  addNumericsOptions(cmd, o.numerics);
  cmd.add_flag("--no-smooth-k", o.noSmoothK, "Do not subtract the K token mean before pooling");
  cmd.add_flag("--sink", o.sink, "Attention sink: K block 0 always on");
  addHeadsOption(cmd, o.heads, "Query heads to compare (default: all)");
  cmd.add_option("--engine", o.engine, "auto | cpu | cuda")->capture_default_str();
  addThreadsOption(cmd, o.threads, "CPU engine threads");
  cmd.add_option("--report", o.report, "Write the comparison: .json, .csv or .md");
}

core::TuneOptions tuneOptionsOf(const CompareOptions& o, const CLI::App& cmd) {
  core::TuneOptions t;
  applyBudgets(t, o.l1, o.l2, o.noTunePv, o.topk, cmd);
  o.methodOptions.applyEach(t.methodBase);
  t.geometry = o.numerics.geometry();
  t.numerics = o.numerics.numerics();
  t.smoothK = !o.noSmoothK;
  t.sink = o.sink;
  t.heads = o.heads;
  t.validate("sparge compare");
  return t;
}

std::string sim(double v) {
  return std::isfinite(v) ? fmtNum(v, 3) : "-";
}

// "12.34 ms (wall), 8.1% of dense".
std::string stage1Cell(const core::CompareEntry& e, size_t i) {
  const double share = e.stage1Share(i);
  return fmtNum(e.runs[i].times.predictMs, 2) + " ms (" + e.runs[i].times.clock + ")" +
         (std::isfinite(share) ? ", " + fmtPct(share) + " of dense" : "");
}

void printEntry(const core::CompareEntry& e, const std::vector<core::CompareVariant>& variants) {
  std::printf("\nentry %s  grid %s\n", core::printable(e.info.name).c_str(),
              e.info.grid ? core::toString(*e.info.grid).c_str() : "-");
  std::vector<std::string> header{"head"};
  for (const core::CompareVariant& v : variants)
    header.push_back(v.label +
                     (v.method == core::Method::SpargeAttn ? ": sim Q / K, sparsity" : ": sparsity"));
  header.push_back("winner");
  Table t(header);
  for (const core::CompareHead& h : e.heads) {
    std::vector<std::string> row{std::to_string(h.head)};
    for (const core::VariantHead& v : h.variants) row.push_back(core::variantHeadCell(v));
    row.push_back(h.winner < 0 ? "-" : variants[size_t(h.winner)].label + (h.tie ? " (tie)" : ""));
    t.row(row);
  }
  t.print(std::cout);
  Table s({"variant", "mean sim Q", "mean sim K", "total sparsity", "L1", "Stage 1", "heads won"});
  for (size_t i = 0; i < variants.size(); ++i)
    s.row({variants[i].label, sim(e.similarity[i].meanQ()), sim(e.similarity[i].meanK()),
           fmtPct(e.runs[i].sparsity.total()), fmtNum(e.runs[i].error.l1(), 5), stage1Cell(e, i),
           std::to_string(e.headsWon[i]) + " / " + std::to_string(e.heads.size())});
  s.print(std::cout);
  std::printf("dense pass %s ms on the same engine and numerics (the Stage 1 share's denominator)\n",
              fmtNum(e.denseMs, 2).c_str());
  std::printf("winner: %s%s\n", e.winner < 0 ? "-" : variants[size_t(e.winner)].label.c_str(),
              e.tie ? " (tied)" : "");
  std::fflush(stdout);
}

// --methods alone compares predictors in the capture's order, on every entry.
bool ordersAsked(const CLI::App& cmd) {
  return cmd.count("--permute") > 0 || cmd.count("--methods") == 0;
}

std::vector<core::CompareVariant> variantsOf(const CompareOptions& o, const CLI::App& cmd) {
  return core::compareVariants(core::parsePermutationList(ordersAsked(cmd) ? o.permute : "none", "--permute"),
                               core::parseMethodList(o.methods, "--methods"));
}

int runCompare(const CompareOptions& o, const CLI::App& cmd) {
  const core::TuneOptions opt = tuneOptionsOf(o, cmd);
  const std::vector<core::CompareVariant> variants = variantsOf(o, cmd);
  const std::string path = o.file.empty() ? defaultCapturePath() : o.file;
  core::CaptureReader reader(path);
  std::vector<std::string> names = uniqueEntries(o.entries);
  if (names.empty())
    for (const auto& e : reader.entries())
      if (e.grid || !ordersAsked(cmd)) names.push_back(e.name);
  if (names.empty())
    throw Error(
        path,
        "no entry has a token grid — record one with `sparge annotate FILE --entry E --grid T,H,W`, or "
        "compare block predictors alone with --methods");
  for (const auto& n : names)
    for (const auto& v : variants)
      if (std::string p = core::permutationProblem(reader.entry(n), v.permute); !p.empty())
        throw Error("--permute", p);
  if (!o.report.empty()) checkOutputs({{"--report", o.report}}, {{"capture", path}});
  engines::EngineSelection sel = engines::makeEngine(core::parseEngineChoice(o.engine), usableThreadsNoted(o.threads));
  if (!sel.message.empty()) std::fprintf(stderr, "note: %s\n", sel.message.c_str());
  std::fprintf(stderr, "comparing %zu variant%s on %zu entr%s of %s with %s: deployed l1 < %g%s, %s\n",
               variants.size(), variants.size() == 1 ? "" : "s", names.size(),
               names.size() == 1 ? "y" : "ies", path.c_str(), sel.engine->name().c_str(), opt.l1,
               opt.tunePv ? (", l2 < " + fmtNum(opt.l2, 4)).c_str() : "",
               numericsHeader(opt.geometry, opt.numerics).c_str());
  std::vector<core::CompareEntry> results;
  for (const auto& n : names) {
    auto data = std::make_shared<const core::EntryData>(core::loadEntry(reader, n));
    results.push_back(core::compareEntry(*sel.engine, data, variants, opt));
    printEntry(results.back(), variants);
  }
  if (!o.report.empty()) {
    core::writeCompareReport(o.report, results, variants, opt, path);
    std::printf("report written to %s\n", o.report.c_str());
  }
  return 0;
}

}  // namespace

void registerCompare(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("compare",
                                 "Compare block predictors (--methods) and token orders (--permute): each "
                                 "tuned per head against one budget");
  auto o = std::make_shared<CompareOptions>();
  addCompareOptions(*cmd, *o);
  cmd->callback([&action, o, cmd] {
    // Budgets, orders, methods and the engine are checked before any work (usage errors).
    tuneOptionsOf(*o, *cmd);
    variantsOf(*o, *cmd);
    core::parseEngineChoice(o->engine);
    action = [o, cmd]() -> int { return runCompare(*o, *cmd); };
  });
}

}  // namespace sparge::cli

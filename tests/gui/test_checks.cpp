// The GUI's view of loaded parameter files and evaluation reports, without a display: eval.json parsed
// strictly (hand-written files, every malformed case an error at its JSON path), the marks per head (exact
// numerics, held-out violations, evaluation over budget), and a parameter file with exact heads loaded into a
// session: those heads run exact, the report beside the file is picked up.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "checks.h"
#include "eval_report.h"
#include "session.h"
#include "small_entry.h"
#include "sparge/core/cpu_engine.h"
#include "sparge/core/error.h"

using namespace sparge;
using namespace sparge::gui;
using namespace std::chrono_literals;

namespace {

const char* kGoodEval = R"({
  "sparge_eval_version": 1, "generator": "sparge-eval", "params": "params.json", "engine": "reference",
  "numerics": "int8-fp8", "device": "cpu", "model": {"name": "tiny", "kind": "causal-lm"},
  "inputs": [{"name": "a", "tokens": 512, "metrics": {"perplexity_dense": 12.31, "perplexity_sparse": 12.45}}],
  "summary": {"metric": "perplexity", "dense": 12.31, "sparse": 12.45, "relative_change": 0.0114,
              "top1_agreement": 0.987, "mean_kl": 0.0123, "inputs": 3,
              "line": "perplexity 12.31 → 12.45 (+1.1 %), top-1 agreement 98.7 %, 3 held-out inputs"},
  "heads": [
    {"entry": "synth", "module": "m.0", "layer": 0, "head": 1, "numerics": "int8-fp8", "sparsity": 0.4,
     "l1": 0.07, "l1_max": 0.09, "budget_l1": 0.06, "over_budget": true, "inputs": 3},
    {"entry": "synth", "module": "m.0", "layer": 0, "head": 2, "numerics": "none", "sparsity": 0.5,
     "l1": 0.01, "l1_max": 0.02, "budget_l1": 0.06, "over_budget": false, "inputs": 3}
  ],
  "calls": {"sparse": [], "dense": []}
})";

// Expects parseEvalReport to fail at `where` with `fragment` in its message.
void expectEvalError(const std::string& text, const std::string& where, const std::string& fragment) {
  try {
    parseEvalReport(text, "e.json");
    ADD_FAILURE() << "no error for " << where;
  } catch (const Error& e) {
    EXPECT_EQ(e.where(), where) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

std::string replaced(std::string s, const std::string& from, const std::string& to) {
  const size_t p = s.find(from);
  EXPECT_NE(p, std::string::npos) << from;
  if (p != std::string::npos) s.replace(p, from.size(), to);
  return s;
}

TEST(EvalReport, ParsesTheAgreedFormat) {
  const EvalReport r = parseEvalReport(kGoodEval, "e.json");
  EXPECT_EQ(r.summary.line, "perplexity 12.31 → 12.45 (+1.1 %), top-1 agreement 98.7 %, 3 held-out inputs");
  EXPECT_EQ(r.summary.metric, "perplexity");
  ASSERT_TRUE(r.summary.dense.has_value());
  EXPECT_DOUBLE_EQ(*r.summary.dense, 12.31);
  ASSERT_TRUE(r.summary.agreement.has_value());
  EXPECT_DOUBLE_EQ(*r.summary.agreement, 0.987);
  EXPECT_EQ(r.summary.inputs, 3);
  EXPECT_EQ(r.engine, "reference");
  ASSERT_EQ(r.heads.size(), 2u);
  EXPECT_TRUE(r.heads[0].overBudget);
  EXPECT_EQ(r.heads[0].head, 1);
  EXPECT_DOUBLE_EQ(r.heads[0].l1Max, 0.09);
  ASSERT_TRUE(r.heads[0].layer.has_value());
  EXPECT_EQ(*r.heads[0].layer, 0);
  EXPECT_EQ(evalReportBeside("/x/y/params.json"), "/x/y/params.eval.json");
  EXPECT_EQ(evalReportBeside("p.json"), "p.eval.json");
}

// What sparge-eval writes where a metric has no value: PSNR has no dense figure, WER against the dense
// transcript no relative change, and a head whose error was not measured no l1 or over_budget.
TEST(EvalReport, NullsAndUnmeasuredHeadsAreNotErrors) {
  std::string text = replaced(kGoodEval, "\"dense\": 12.31, \"sparse\": 12.45, \"relative_change\": 0.0114",
                              "\"dense\": null, \"sparse\": 31.2, \"relative_change\": null");
  text = replaced(text, "\"l1\": 0.01, \"l1_max\": 0.02, \"budget_l1\": 0.06, \"over_budget\": false",
                  "\"budget_l1\": 0.06, \"dense\": true");
  const EvalReport r = parseEvalReport(text, "e.json");
  EXPECT_FALSE(r.summary.dense.has_value());
  EXPECT_FALSE(r.summary.relativeChange.has_value());
  ASSERT_TRUE(r.summary.sparse.has_value());
  EXPECT_DOUBLE_EQ(*r.summary.sparse, 31.2);
  ASSERT_EQ(r.heads.size(), 2u);
  EXPECT_TRUE(std::isnan(r.heads[1].l1));
  EXPECT_FALSE(r.heads[1].overBudget);
}

TEST(EvalReport, MalformedFilesAreErrorsAtTheirPath) {
  expectEvalError("{ not json", "e.json:/", "not valid JSON");
  expectEvalError("[]", "e.json:/", "JSON object");
  expectEvalError(replaced(kGoodEval, "\"sparge_eval_version\": 1", "\"sparge_eval_version\": 2"),
                  "e.json:/sparge_eval_version", "unsupported version 2");
  expectEvalError(replaced(kGoodEval, "\"sparge_eval_version\": 1,", ""), "e.json:/sparge_eval_version",
                  "missing key");
  expectEvalError(replaced(kGoodEval, "\"line\": \"perplexity", "\"lines\": \"perplexity"),
                  "e.json:/summary/line", "missing key");
  expectEvalError(replaced(kGoodEval, "\"dense\": 12.31,", "\"dense\": \"12.31\","), "e.json:/summary/dense",
                  "expected a number");
  expectEvalError(replaced(kGoodEval, "\"budget_l1\": 0.06, \"over_budget\": true", "\"over_budget\": true"),
                  "e.json:/heads/0/budget_l1", "missing key");
  expectEvalError(replaced(kGoodEval, "\"over_budget\": true", "\"over_budget\": \"yes\""),
                  "e.json:/heads/0/over_budget", "true or false");
  expectEvalError(replaced(kGoodEval, "\"head\": 2,", "\"head\": -2,"), "e.json:/heads/1/head", ">= 0");
  expectEvalError(replaced(kGoodEval, "\"heads\": [", "\"heads\": {\"x\": ["), "e.json:/", "not valid JSON");
  expectEvalError(
      replaced(replaced(kGoodEval, "\"heads\": [", "\"heads\": 3, \"h\": ["), "\"calls\"", "\"c\""),
      "e.json:/heads", "expected an array");
  try {
    readEvalReport("/nonexistent/x.eval.json");
    ADD_FAILURE() << "no error for a missing file";
  } catch (const Error& e) {
    EXPECT_EQ(e.where(), "/nonexistent/x.eval.json");
  }
}

core::ParamsFile exactFile() {
  const std::string text = R"({"sparge_params_version": 1, "mode": "cdf", "l1": 0.05, "l2": 0.06,
    "geometry": "128x64", "numerics": "int8-fp8", "smooth_k": true, "sink": false, "exact_fallback": "head",
    "groups": [{"name": "synth", "entries": ["synth"], "heads_q": 4, "heads": [
      {"head": 0, "is_sparse": true, "simthreshd1": -0.1, "cdfthreshd": 0.9, "pvthreshd": 50},
      {"head": 1, "is_sparse": true, "simthreshd1": -0.1, "cdfthreshd": 0.9, "pvthreshd": 50,
       "held_out": {"inputs": 2, "violations": 1, "max_l1": 0.08, "max_l1_entry": "other.h5:synth"}},
      {"head": 2, "is_sparse": true, "numerics": "none", "simthreshd1": -0.1, "cdfthreshd": 0.9,
       "pvthreshd": 50, "l1_quant": 0.3},
      {"head": 3, "is_sparse": true, "simthreshd1": -0.1, "cdfthreshd": 0.9, "pvthreshd": 50}]}]})";
  return core::parseParams(text, "p.json");
}

TEST(Checks, MarksEachHeadFromTheFileAndTheReport) {
  ChecksModel c;
  EXPECT_FALSE(c.marks("synth", std::nullopt, 1).any());
  c.setParams("p.json", exactFile());
  c.setEval("p.eval.json", parseEvalReport(kGoodEval, "p.eval.json"));
  const HeadMarks h0 = c.marks("synth", std::nullopt, 0), h1 = c.marks("synth", std::nullopt, 1),
                  h2 = c.marks("synth", std::nullopt, 2);
  EXPECT_FALSE(h0.any());
  EXPECT_TRUE(h1.heldOutOver);
  EXPECT_TRUE(h1.evalOver);  // head 1 is over budget in the report too
  EXPECT_FALSE(h1.exact);
  ASSERT_EQ(h1.lines.size(), 2u);
  EXPECT_NE(h1.lines[0].find("other.h5:synth"), std::string::npos) << h1.lines[0];
  EXPECT_NE(h1.lines[0].find("1 of 2"), std::string::npos) << h1.lines[0];
  EXPECT_NE(h1.lines[1].find("0.07"), std::string::npos) << h1.lines[1];
  EXPECT_TRUE(h2.exact);
  EXPECT_FALSE(h2.bad());
  EXPECT_EQ(c.exactHeads("synth", std::nullopt, 4), (std::vector<uint8_t>{0, 0, 1, 0}));
  EXPECT_TRUE(c.exactHeads("synth", std::nullopt, 8).empty());  // another head count: not this group
  ASSERT_TRUE(c.budget().has_value());
  EXPECT_DOUBLE_EQ(*c.budget(), 0.06);
}

TEST(Checks, LoadedFileRunsItsExactHeadsExactAndFindsTheReportBeside) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("sparge_gui_checks_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string params = (dir / "p.json").string();
  core::writeParams(params, exactFile());
  std::ofstream(dir / "p.eval.json") << kGoodEval;
  auto s = std::make_unique<Session>([] {
    return engines::EngineSelection{std::make_unique<core::CpuEngine>(2), ""};
  });
  s->openEntryData(session_tests::smallEntry());
  ASSERT_TRUE(s->waitIdle(120s));
  s->files().importParams(params);
  ASSERT_TRUE(s->waitIdle(120s));
  EXPECT_FALSE(s->messages().hasError()) << (s->messages().hasError() ? s->messages().frontError() : "");
  const core::RunConfig& c = s->runs().config();
  EXPECT_EQ(c.numerics, core::Numerics::Int8Fp8);
  ASSERT_EQ(c.perHeadNumerics.size(), 4u);
  EXPECT_EQ(c.perHeadNumerics[2], core::Numerics::None);
  auto r = s->runs().result();
  ASSERT_TRUE(r);
  const core::HeadResult* h2 = r->find(0, 2);
  const core::HeadResult* h0 = r->find(0, 0);
  ASSERT_TRUE(h2 && h0);
  EXPECT_EQ(h2->errorQuant.count, 0) << "head 2 ran in exact numerics: no quantization part";
  EXPECT_GT(h0->errorQuant.count, 0);
  ASSERT_TRUE(s->checks().eval().has_value());
  EXPECT_EQ(s->checks().evalPath(), (dir / "p.eval.json").string());
  // The in-memory entry's content is not what the file was tuned on (it has no tuned_on): a note, no error.
  // A malformed report is an error message and leaves the loaded one.
  std::ofstream(dir / "bad.eval.json") << "{\"sparge_eval_version\": 1}";
  s->files().loadEval((dir / "bad.eval.json").string());
  ASSERT_TRUE(s->messages().hasError());
  EXPECT_NE(s->messages().frontError().find("summary"), std::string::npos) << s->messages().frontError();
  EXPECT_EQ(s->checks().evalPath(), (dir / "p.eval.json").string());
  std::filesystem::remove_all(dir);
}

}  // namespace

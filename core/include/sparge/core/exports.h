// Exports of run results: masks v1 (.h5), the JSON report, a CSV table, a Markdown report. All written
// atomically.
#pragma once

#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <set>
#include <string>
#include <vector>

#include "sparge/core/result.h"

namespace sparge::core {

// Masks v1 (captures/FORMAT.md): root attribute sparge_masks_version = 1;
// /entries/<name>/block_mask and /entries/<name>/pv_skipped, uint8 [B, Hq, nq, nk]; attributes
// block_q, block_k, geometry, smooth_k, sink, engine, causal, the parameters (scalars when every head
// shares them, else per-head arrays theta/tau/topk/lambda/dense), and the sparsity figures.
// Heads that were not run are all-zero and listed as absent in the `heads_present` attribute.
void writeMasks(const std::string& path, const std::vector<EntryResult>& results);

// What a report knows of the parameter file a run applied (`sparge run --params`): its deployed budget (the
// file's l2, or l1 without λ search) and the entries it was not tuned on (held-out inputs).
struct ReportBudget {
  double l1 = 0;
  std::set<std::string> heldOut;
};

// The JSON report: per entry and head the keys sparsity_stage1, pv_skip_rate, sparsity_total, l1 (deployed:
// sparse and in the head's numerics), l1_sparse (same mask and λ, exact numerics), l1_quant (every valid
// block, the head's numerics), l1_quant_qk (its INT8 Q·Kᵀ part, where measured), the same three for cos_sim
// and rmse (plus area-based sparsity, counts, parameters, the head's numerics), and per entry the numerics,
// target, geometry, engine, totals and stage times. With a budget: per head budget_l1 and over_budget, per
// entry held_out.
nlohmann::json reportJson(const std::vector<EntryResult>& results, const std::string& capturePath,
                          const ReportBudget* budget = nullptr);
void writeReportJson(const std::string& path, const std::vector<EntryResult>& results,
                     const std::string& capturePath, const ReportBudget* budget = nullptr);

// A CSV field (RFC 4180): quoted when it holds a comma, quote or line break; names that are not valid
// UTF-8 are escaped as in the JSON report (utf8Safe).
std::string csvField(const std::string& text);

// One CSV row per (entry, batch, head) with the same figures as the JSON report.
// Columns after non_finite: l1_quant_qk (empty where not measured), budget_l1, over_budget, held_out (empty
// without a budget).
std::string reportCsv(const std::vector<EntryResult>& results, const ReportBudget* budget = nullptr);
void writeReportCsv(const std::string& path, const std::vector<EntryResult>& results,
                    const ReportBudget* budget = nullptr);

// What a caller adds to the Markdown report: a paragraph after the preamble (the GUI's colour legend) and
// columns appended to every head table (the GUI's heatmap images).
struct MarkdownExtras {
  std::string legend;
  std::vector<std::string> headers;
  std::function<std::vector<std::string>(const EntryResult&, const HeadResult&)> cells;  // one per header
};

// A Markdown report, for people: per entry its shape, numerics and settings, totals and stage times, and a
// table per head with the same figures as the CSV (the error split into l1 / l1_sparse / l1_quant and the
// cosine similarities; "-" for a part that was not measured).
std::string reportMarkdown(const std::vector<EntryResult>& results, const std::string& capturePath,
                           const MarkdownExtras& extras = {}, const ReportBudget* budget = nullptr);
void writeReportMarkdown(const std::string& path, const std::vector<EntryResult>& results,
                         const std::string& capturePath, const MarkdownExtras& extras = {},
                         const ReportBudget* budget = nullptr);

// Per query head of a result: the error sums over its batch items (a head's L1 as budgets judge it).
std::vector<std::pair<int64_t, ErrorSums>> headErrors(const EntryResult& result);
// A head's L1 exceeds `budget` (NaN counts as over: no budget is met by it).
inline bool overBudget(double l1, double budget) {
  return !(l1 <= budget);
}

// "cdf" / "topk" and the parameter value shown for a head's selection mode.
const char* toString(SelectMode mode);

}  // namespace sparge::core

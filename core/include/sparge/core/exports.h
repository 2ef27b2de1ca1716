// Exports of run results: masks v1 (.h5), the JSON report, a CSV table. All written atomically.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "sparge/core/result.h"

namespace sparge::core {

// Masks v1 (DESIGN.md, captures/FORMAT.md): root attribute sparge_masks_version = 1;
// /entries/<name>/block_mask and /entries/<name>/pv_skipped, uint8 [B, Hq, nq, nk]; attributes
// block_q, block_k, geometry, smooth_k, sink, engine, causal, the parameters (scalars when every head
// shares them, else per-head arrays theta/tau/topk/lambda/dense), and the sparsity figures.
// Heads that were not run are all-zero and listed as absent in the `heads_present` attribute.
void writeMasks(const std::string& path, const std::vector<EntryResult>& results);

// The JSON report: per entry and head the keys sparsity_stage1, pv_skip_rate, sparsity_total, l1,
// cos_sim, rmse (plus area-based sparsity, counts, parameters), and per entry the geometry, engine,
// totals and stage times.
nlohmann::json reportJson(const std::vector<EntryResult>& results, const std::string& capturePath);
void writeReportJson(const std::string& path, const std::vector<EntryResult>& results,
                     const std::string& capturePath);

// A CSV field (RFC 4180): quoted when it holds a comma, quote or line break; names that are not valid
// UTF-8 are escaped as in the JSON report (utf8Safe).
std::string csvField(const std::string& text);

// One CSV row per (entry, batch, head) with the same figures as the JSON report.
std::string reportCsv(const std::vector<EntryResult>& results);
void writeReportCsv(const std::string& path, const std::vector<EntryResult>& results);

// "cdf" / "topk" and the parameter value shown for a head's selection mode.
const char* toString(SelectMode mode);

}  // namespace sparge::core

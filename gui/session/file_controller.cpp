#include "file_controller.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "metrics.h"
#include "report_writer.h"
#include "sparge/core/error.h"
#include "sparge/core/exports.h"
#include "sparge/core/names.h"
#include "sparge/core/option_values.h"
#include "sparge/core/params_io.h"

namespace sparge::gui {

std::string reportFormatOf(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return ext == ".json" || ext == ".csv" || ext == ".md" ? ext : std::string();
}

void checkExportTarget(ExportKind kind, const std::string& path, const std::string& where,
                       const std::string& capturePath) {
  const std::vector<std::string> reportFormats{".json", ".csv", ".md"};
  core::checkOutputPath(path, where, kind == ExportKind::Report ? reportFormats : std::vector<std::string>{});
  struct stat out {
  }, in{};
  if (!capturePath.empty() && ::stat(path.c_str(), &out) == 0 && ::stat(capturePath.c_str(), &in) == 0 &&
      out.st_dev == in.st_dev && out.st_ino == in.st_ino)
    throw Error(where,
                "is the open capture (the same file) — an export never replaces its input; choose "
                "another path");
  if (kind == ExportKind::Report && reportFormatOf(path) == ".md") {
    // The PNGs go to <stem>_img/ beside the report: that name must fit as well.
    const std::string folder = std::filesystem::path(path).stem().string() + "_img";
    if (folder.size() > 255)
      throw Error(where, "the report's image folder " + core::shortForDisplay(folder) +
                             " would have a name longer than 255 bytes — choose a shorter name");
  }
}

void FileController::exportJob(const std::string& what, const std::string& path, Writer write) {
  auto r = runs_.result();
  if (!r) {
    core_.messages.pushError("Nothing to export yet: no results for the selected entry.");
    return;
  }
  if (splitPending()) return;
  std::string capture = core_.capture.path;
  // Exports use their own key so that a slider move never cancels a half-written file.
  auto job = [this, r, path, what, capture, write](const core::CancelFlag&) {
    write(*r, capture);
    core_.post([this, what, path] { core_.messages.addNotice("exported " + what + " to " + path); });
  };
  core_.submit(JobKind::Export, job, false, path);
}

// An early result's error split is still being computed (for a few ms): its figures would go out without
// the sparsity part, so the export is refused with a word instead.
bool FileController::splitPending() {
  auto r = runs_.result();
  if (!r || !r->splitPending) return false;
  core_.messages.pushError(
      "The error split of the latest run is still being computed: export again once it is shown.");
  return true;
}

// The target's check before the job, so that a bad path is said at once; false after the error.
bool FileController::targetOk(ExportKind kind, const std::string& path) {
  try {
    checkExportTarget(kind, path, core::shortForDisplay(path), core_.capture.path);
  } catch (const std::exception& e) {
    core_.messages.pushError(e.what());
    return false;
  }
  return true;
}

void FileController::exportMasks(const std::string& path) {
  if (!targetOk(ExportKind::Masks, path)) return;
  exportJob("masks", path,
            [path](const core::EntryResult& r, const std::string&) { core::writeMasks(path, {r}); });
}

void FileController::exportReport(const std::string& path) {
  if (!targetOk(ExportKind::Report, path)) return;
  std::string format = reportFormatOf(path);
  if (format == ".json") {
    exportJob("JSON report", path, [path](const core::EntryResult& r, const std::string& c) {
      core::writeReportJson(path, {r}, c);
    });
  } else if (format == ".csv") {
    exportJob("CSV report", path,
              [path](const core::EntryResult& r, const std::string&) { core::writeReportCsv(path, {r}); });
  } else if (format == ".md") {
    exportJob("Markdown report", path,
              [path](const core::EntryResult& r, const std::string& c) { writeReportMarkdown(path, r, c); });
  } else {
    core_.messages.pushError(path + ": a report ends in .json, .csv or .md");
  }
}

// A parameter file with no groups yet: the capture, engine, budget and the run settings the groups share.
core::ParamsFile FileController::paramsFileSettings() const {
  const core::RunConfig& config = runs_.config();
  core::ParamsFile file;
  file.capture = core_.capture.path;
  file.engine = core_.engine.name;
  file.mode = config.defaults.mode;
  file.l1 = tuning_.budget().l1;
  file.l2 = tuning_.budget().l2;
  file.geometry = config.geometry;
  file.numerics = config.numerics;
  file.smoothK = config.smoothK;
  file.sink = config.sink;
  file.diagonal = config.diagonal;
  return file;
}

void FileController::exportParams(const std::string& path) {
  if (!targetOk(ExportKind::Params, path)) return;
  const core::EntryInfo* info = core_.capture.info();
  if (!info) {
    core_.messages.pushError("Nothing to export yet: no entry loaded.");
    return;
  }
  if (splitPending()) return;
  // The file holds every tuned entry plus the current entry's parameters as they are now (tuned,
  // overridden by hand or defaults), with the figures the latest run achieved.
  const core::RunConfig& config = runs_.config();
  core::ParamsFile file = paramsFileSettings();
  auto result = runs_.result();
  auto figures = [&](const std::string& entry, core::ParamsHead& ph) {
    if (const TuneRow* row = tuning_.row(entry, ph.head); row && row->params == ph.params) {
      ph.stage1Sparsity = row->stage1;
      ph.totalSparsity = row->total;
      ph.l1 = row->l1;
      ph.l1Sparse = row->l1Sparse;
      ph.l1Quant = row->l1Quant;
    } else if (entry == info->name && result) {
      // Batch items share the parameters: report the head's first batch item.
      if (const auto* hr = result->find(0, ph.head); hr && hr->params == ph.params) {
        ph.stage1Sparsity = hr->sparsity.stage1();
        ph.totalSparsity = hr->sparsity.total();
        ph.l1 = hr->error.l1();
        ph.l1Sparse = measuredL1(hr->errorSparse);
        ph.l1Quant = measuredL1(hr->errorQuant);
      }
    }
  };
  auto addGroup = [&](const core::EntryInfo& e, const std::vector<core::HeadParams>& ps) {
    core::ParamsGroup g;
    g.name = e.name;
    g.entries = {e.name};
    g.layer = e.layer;
    g.headsQ = static_cast<int64_t>(ps.size());
    for (size_t h = 0; h < ps.size(); ++h) {
      core::ParamsHead ph;
      ph.head = static_cast<int64_t>(h);
      ph.params = ps[h];
      ph.isSparse = !ps[h].dense;
      figures(e.name, ph);
      g.heads.push_back(ph);
    }
    file.groups.push_back(std::move(g));
  };
  std::vector<core::HeadParams> current(static_cast<size_t>(info->headsQ));
  for (int64_t h = 0; h < info->headsQ; ++h) current[h] = config.forHead(h);
  addGroup(*info, current);
  // The current entry's heads that run exact (loaded with the exact fallback) stay exact in the file.
  for (core::ParamsHead& ph : file.groups.front().heads)
    ph.exact = config.numerics != core::Numerics::None && config.numericsFor(ph.head) == core::Numerics::None;
  for (const auto& [name, ps] : tuning_.allStored()) {
    const core::EntryInfo* e = core_.capture.find(name);
    if (name == info->name || !e) continue;
    addGroup(*e, ps);
    if (const auto* exact = tuning_.storedExact(name); exact && config.numerics != core::Numerics::None)
      for (core::ParamsHead& ph : file.groups.back().heads)
        ph.exact = size_t(ph.head) < exact->size() && (*exact)[size_t(ph.head)];
  }
  // The current entry's values belong to the token order it runs in; the other groups record no grid, so
  // `sparge run --params` refuses them in that order rather than run them in another.
  if (info->permutation != core::Permutation::None)
    core::recordPermutation(file, info->permutation, {{info->name, *info}});
  try {
    core::writeParams(path, file);
    core_.messages.addNotice("exported parameters to " + path);
  } catch (const std::exception& e) {
    core_.messages.pushError(e.what());
  }
}

void FileController::importParams(const std::string& path) {
  const core::EntryInfo* info = core_.capture.info();
  if (!info) {
    core_.messages.pushError("Open a capture before loading parameters.");
    return;
  }
  try {
    core::ParamsFile file = core::readParams(path);
    core::RunConfig config = runs_.config();
    std::vector<std::string> warnings;
    core::applyParams(file, path, *info, config, &warnings);
    // Exploring transfer is what the GUI is for: foreign parameters are applied, and said to be.
    const std::string identity =
        core::checkParamsIdentity(file, path, *info, core_.capture.path, core_.capture.entryDigest, true);
    if (!identity.empty()) warnings.push_back(identity);
    for (auto& w : warnings) core_.messages.addNotice(w);
    runs_.applyConfig(config);
    tuning_.store(info->name, runs_.config().perHead, exactHeadsOf(runs_.config()));
    core_.checks.setParams(path, std::move(file));
    core_.messages.addNotice("loaded parameters from " + path);
  } catch (const std::exception& e) {
    core_.messages.pushError(e.what());
    return;
  }
  const std::string beside = evalReportBeside(path);
  std::error_code ec;
  if (std::filesystem::is_regular_file(beside, ec)) loadEval(beside);
}

void FileController::loadEval(const std::string& path) {
  try {
    EvalReport report = readEvalReport(path);
    const std::string line = report.summary.line;
    core_.checks.setEval(path, std::move(report));
    core_.messages.addNotice("evaluation " + path + ": " + line);
  } catch (const std::exception& e) {
    core_.messages.pushError(e.what());
  }
}

}  // namespace sparge::gui

// Session exports: masks, reports and parameters, written on the worker from immutable snapshots.
#include <filesystem>

#include "report_writer.h"
#include "session.h"
#include "sparge/core/error.h"
#include "sparge/core/exports.h"
#include "sparge/core/params_io.h"

namespace sparge::gui {

void Session::exportJob(const std::string& what, const std::string& path,
                        std::function<void(const core::EntryResult&, const std::string&)> write) {
  auto r = result_;
  if (!r) {
    errors_.push_back("Nothing to export yet: no results for the selected entry.");
    return;
  }
  std::string capture = capturePath_;
  // Exports use their own key so that a slider move never cancels a half-written file.
  worker_.submit(
      "export:" + path,
      [this, r, path, what, capture, write](const core::CancelFlag&) {
        write(*r, capture);
        post([what, path](Session& s) { s.addNotice("exported " + what + " to " + path); });
      },
      false);
}

void Session::exportMasks(const std::string& path) {
  exportJob("masks", path, [path](const core::EntryResult& r, const std::string&) { core::writeMasks(path, {r}); });
}

void Session::exportReportJson(const std::string& path) {
  exportJob("JSON report", path,
            [path](const core::EntryResult& r, const std::string& c) { core::writeReportJson(path, {r}, c); });
}

void Session::exportReportCsv(const std::string& path) {
  exportJob("CSV report", path, [path](const core::EntryResult& r, const std::string&) { core::writeReportCsv(path, {r}); });
}

void Session::exportReportMarkdown(const std::string& path) {
  exportJob("Markdown report", path,
            [path](const core::EntryResult& r, const std::string& c) { writeReportMarkdown(path, r, c); });
}

void Session::exportParams(const std::string& path) {
  if (!entryLoaded_) {
    errors_.push_back("Nothing to export yet: no entry loaded.");
    return;
  }
  // The file holds every tuned entry plus the current entry's parameters as they are now (tuned,
  // overridden by hand or defaults), with the figures the latest run achieved.
  core::ParamsFile file;
  file.capture = capturePath_;
  file.engine = engineName_;
  file.mode = config_.defaults.mode;
  file.l1 = budget_.l1;
  file.l2 = budget_.l2;
  file.geometry = config_.geometry;
  file.smoothK = config_.smoothK;
  file.sink = config_.sink;
  auto figures = [&](const std::string& entry, int64_t head, core::ParamsHead& ph) {
    for (const auto& row : tuned_) {
      if (row.entry == entry && row.head == head && row.params == ph.params) {
        ph.stage1Sparsity = row.stage1;
        ph.totalSparsity = row.total;
        ph.l1 = row.l1;
        return;
      }
    }
    if (entry == entryName_ && result_) {
      // Batch items share the parameters: report the head's first batch item.
      if (const auto* hr = result_->find(0, head); hr && hr->params == ph.params) {
        ph.stage1Sparsity = hr->sparsity.stage1();
        ph.totalSparsity = hr->sparsity.total();
        ph.l1 = hr->error.l1();
      }
    }
  };
  auto addGroup = [&](const std::string& name, std::optional<int64_t> layer, const std::vector<core::HeadParams>& ps) {
    core::ParamsGroup g;
    g.name = name;
    g.entries = {name};
    g.layer = layer;
    g.headsQ = static_cast<int64_t>(ps.size());
    for (size_t h = 0; h < ps.size(); ++h) {
      core::ParamsHead ph;
      ph.head = static_cast<int64_t>(h);
      ph.params = ps[h];
      ph.isSparse = !ps[h].dense;
      figures(name, ph.head, ph);
      g.heads.push_back(ph);
    }
    file.groups.push_back(std::move(g));
  };
  std::vector<core::HeadParams> current(static_cast<size_t>(entryInfo_.headsQ));
  for (int64_t h = 0; h < entryInfo_.headsQ; ++h) current[h] = config_.forHead(h);
  addGroup(entryName_, entryInfo_.layer, current);
  for (const auto& [name, ps] : tunedPerEntry_) {
    if (name == entryName_) continue;
    std::optional<int64_t> layer;
    for (const auto& e : entries_) {
      if (e.name == name) layer = e.layer;
    }
    addGroup(name, layer, ps);
  }
  try {
    core::writeParams(path, file);
    addNotice("exported parameters to " + path);
  } catch (const std::exception& e) {
    errors_.push_back(e.what());
  }
}

void Session::importParams(const std::string& path) {
  if (!entryLoaded_) {
    errors_.push_back("Open a capture before loading parameters.");
    return;
  }
  try {
    core::ParamsFile file = core::readParams(path);
    core::RunConfig config = config_;
    std::vector<std::string> warnings;
    core::applyParams(file, path, entryInfo_, config, &warnings);
    for (auto& w : warnings) addNotice(w);
    setConfig(config);
    addNotice("loaded parameters from " + path);
  } catch (const std::exception& e) {
    errors_.push_back(e.what());
  }
}

}  // namespace sparge::gui

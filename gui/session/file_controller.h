// Files from the GUI: masks, reports (JSON, CSV, Markdown with PNGs) and parameters written on the worker
// from immutable snapshots, and parameter files loaded onto the selected entry.
#pragma once

#include <functional>
#include <string>

#include "run_controller.h"
#include "session_core.h"
#include "sparge/core/params_io.h"
#include "tune_controller.h"

namespace sparge::gui {

enum class ExportKind { Masks, Params, Report };

class FileController {
 public:
  FileController(SessionCore& core, RunController& runs, TuneController& tuning)
      : core_(core), runs_(runs), tuning_(tuning) {}

  // A notice ("exported ... to PATH") or an error says how each one went.
  void exportMasks(const std::string& path);
  // JSON, CSV or Markdown (PNG heatmaps beside it), by the extension of `path`.
  void exportReport(const std::string& path);
  void exportParams(const std::string& path);
  // Loads a parameter file onto the selected entry and keeps it for the views' marks (exact heads, held-out
  // violations); an evaluation report beside it (<stem>.eval.json) is loaded too. Parameters tuned on other
  // inputs are applied with a notice saying so.
  void importParams(const std::string& path);
  // Loads an evaluation report (eval.json): its summary line and the heads over budget. A malformed file is
  // an error message; what was loaded before stays.
  void loadEval(const std::string& path);

 private:
  using Writer = std::function<void(const core::EntryResult&, const std::string& capture)>;
  void exportJob(const std::string& what, const std::string& path, Writer write);
  bool splitPending();  // says why and returns true while the latest result waits for its error split
  bool targetOk(ExportKind kind, const std::string& path);  // checkExportTarget; false after its error
  core::ParamsFile paramsFileSettings() const;

  SessionCore& core_;
  RunController& runs_;
  TuneController& tuning_;
};

// The report format of a path by its extension: ".json", ".csv" or ".md"; empty for anything else.
std::string reportFormatOf(const std::string& path);

// Checks an export target before anything is computed or written: a report's format, a name and folder
// that take the file (core::checkOutputPath), not the capture `capturePath` itself (compared by device and
// inode; empty = none known yet), and for a Markdown report the name of its image folder. Throws
// sparge::Error naming `where` (for --action: the action).
void checkExportTarget(ExportKind kind, const std::string& path, const std::string& where,
                       const std::string& capturePath);

}  // namespace sparge::gui

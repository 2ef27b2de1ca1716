#include "commands.h"

#include <GLFW/glfw3.h>

#include <array>

namespace sparge::gui {

namespace {
constexpr Shortcut key(int k) {
  return Shortcut{k, false, false};
}
constexpr Shortcut ctrl(int k) {
  return Shortcut{k, true, false};
}
constexpr Shortcut ctrlShift(int k) {
  return Shortcut{k, true, true};
}
using A = ActionArg;
using C = CommandId;

// clang-format off
const CommandInfo kCommands[] = {
  {C::OpenCapture, "File", "Open capture...", {ctrl(GLFW_KEY_O)}, "open a capture (.h5)"},
  {C::OpenSample, "File", "Open bundled sample", {}, "open the sample capture that ships with the app"},
  {C::LoadParams, "File", "Load parameters (.json)...", {}, "load tuned parameters onto the selected entry",
   "load-params", A::Required, "P.json"},
  {C::LoadEval, "File", "Open evaluation report (.eval.json)...", {},
   "open a model-level evaluation report (sparge-eval's eval.json)", "load-eval", A::Required, "P.eval.json"},
  {C::ExportMasks, "File/Export", "Masks (.h5, masks v1)...", {ctrl(GLFW_KEY_E)}, "export masks (.h5)",
   "export-masks", A::Required, "P.h5"},
  {C::ExportParams, "File/Export", "Parameters (.json)...", {ctrlShift(GLFW_KEY_S)}, "export parameters",
   "export-params", A::Required, "P.json"},
  {C::ExportReportJson, "File/Export", "Report (.json)...", {}, "export a JSON report"},
  {C::ExportReportCsv, "File/Export", "Report (.csv)...", {}, "export a CSV report"},
  {C::ExportReportMd, "File/Export", "Report (Markdown + PNG)...", {ctrlShift(GLFW_KEY_E)},
   "export a Markdown report with PNG heatmaps"},
  {C::ExportReport, nullptr, "Report", {}, "export a report; the format follows the extension",
   "export-report", A::Required, "P.json|P.csv|P.md"},
  {C::Screenshot, "File", "Screenshot (PNG)", {key(GLFW_KEY_F12)}, "screenshot of the window",
   "screenshot", A::Required, "P.png"},
  {C::Quit, "File", "Quit", {ctrl(GLFW_KEY_Q)}, "quit"},
  {C::Rerun, "Run", "Re-run all heads", {key(GLFW_KEY_F5)}, "re-run all heads"},
  {C::Cancel, "Run", "Cancel", {key(GLFW_KEY_ESCAPE)}, "cancel the running job"},
  {C::TuneHead, "Run", "Auto-tune selected head", {ctrl(GLFW_KEY_T)}, "auto-tune the selected head",
   "tune", A::Required, "head|entry|all"},
  {C::TuneEntry, "Run", "Auto-tune entry", {ctrlShift(GLFW_KEY_T)}, "auto-tune every head of the entry"},
  {C::TuneAll, "Run", "Auto-tune all entries", {}, "auto-tune every entry of the capture"},
  {C::TuneCancel, nullptr, "Tune and cancel", {}, "start a tune, cancel it after its first progress report",
   "tune-cancel", A::Required, "head|entry|all"},
  {C::Profile, "Run", "Profile current settings", {ctrl(GLFW_KEY_P)},
   "time the current settings (N runs, 3 unless given, after T ms of warm-up)", "profile", A::Optional,
   "N[,T]"},
  {C::SweepHead, "Run", "Sweep curves: selected head", {ctrl(GLFW_KEY_W)},
   "error-sparsity curves of the selected head", "sweep", A::Required, "head|all|orders|methods"},
  {C::SweepAll, "Run", "Sweep curves: all heads", {ctrlShift(GLFW_KEY_W)},
   "error-sparsity curves of every head (small multiples)"},
  {C::CompareMethods, "Run", "Compare block predictors (overview)", {},
   "tune every block predictor per head on every entry; the overview colours heads by the best "
   "(docs/methods.md)",
   "compare-methods", A::None},
  {C::PresetCdf, "Parameters", "SpargeAttn CDF defaults", {ctrl(GLFW_KEY_1)},
   "preset: theta 0.6, tau 0.98, lambda 50 (the CDF API's defaults)", "preset", A::Required,
   "cdf|topk|filter-off|stored"},
  {C::PresetTopk, "Parameters", "Top-k defaults", {ctrl(GLFW_KEY_2)},
   "preset: theta -0.1, top-k 0.5, lambda 50 (the top-k API's defaults)"},
  {C::PresetFilterOff, "Parameters", "Similarity filter off", {ctrl(GLFW_KEY_3)},
   "preset: theta -0.1, nothing forced by self-similarity"},
  {C::PresetStored, "Parameters", "Tuned / loaded values", {ctrl(GLFW_KEY_4)},
   "preset: the entry's tuned or loaded per-head values"},
  {C::Set, nullptr, "Set", {}, "change a setting through the controls", "set", A::Required, "key=value"},
  {C::Follow, nullptr, "Follow budget", {}, "re-tune the selected head when the budget moves", "follow",
   A::Required, "0|1"},
  {C::Permute, nullptr, "Token order", {}, "token order of entries with a grid (docs/permutation.md)", "permute",
   A::Required, "none|rowmajor|timemajor|hilbert"},
  {C::CaptureOrder, nullptr, "Capture order", {},
   "head detail of a permuted run in the capture's token order", "capture-order", A::Required, "0|1"},
  {C::SelectEntry, nullptr, "Select entry", {}, "select an entry", "select-entry", A::Required, "NAME"},
  {C::SelectHead, nullptr, "Select head", {}, "select a head", "select-head", A::Required, "N"},
  {C::NextHead, nullptr, "Next head", {key(GLFW_KEY_RIGHT), key(GLFW_KEY_DOWN)}, "next head"},
  {C::PreviousHead, nullptr, "Previous head", {key(GLFW_KEY_LEFT), key(GLFW_KEY_UP)}, "previous head"},
  {C::ShowView, nullptr, "Show view", {}, "bring a view to the front of its panel", "view", A::Required,
   "overview|curves|kernels|heads|detail|summary|timings|capture|controls[:PANEL]"},
  {C::ShowOverview, "View", "Model overview", {ctrlShift(GLFW_KEY_O)}, "the overview (entries x heads)"},
  {C::ShowCurves, "View", "Error-sparsity curves", {ctrlShift(GLFW_KEY_C)}, "the error-sparsity curves"},
  {C::ShowKernels, "View", "Kernels", {ctrlShift(GLFW_KEY_K)}, "every kernel of the last profile"},
  {C::LargerText, "View", "Larger text", {ctrl(GLFW_KEY_EQUAL), ctrl(GLFW_KEY_KP_ADD)}, "larger text"},
  {C::SmallerText, "View", "Smaller text", {ctrl(GLFW_KEY_MINUS), ctrl(GLFW_KEY_KP_SUBTRACT)}, "smaller"},
  {C::ResetLayout, "View", "Reset layout", {}, "panel sizes and tabs back to the defaults"},
  {C::ShortcutHelp, "Help", "Keyboard shortcuts", {key(GLFW_KEY_F1)}, "this list"},
  {C::About, "Help", "About", {}, "versions and renderer"},
};
// clang-format on
}  // namespace

std::string Shortcut::label() const {
  if (!key) return {};
  std::string name;
  switch (key) {
    case GLFW_KEY_ESCAPE:
      name = "Esc";
      break;
    case GLFW_KEY_RIGHT:
      name = "Right";
      break;
    case GLFW_KEY_LEFT:
      name = "Left";
      break;
    case GLFW_KEY_UP:
      name = "Up";
      break;
    case GLFW_KEY_DOWN:
      name = "Down";
      break;
    case GLFW_KEY_EQUAL:
      name = "+";
      break;
    case GLFW_KEY_KP_ADD:
      name = "Keypad +";
      break;
    case GLFW_KEY_MINUS:
      name = "-";
      break;
    case GLFW_KEY_KP_SUBTRACT:
      name = "Keypad -";
      break;
    default:
      if (key >= GLFW_KEY_F1 && key <= GLFW_KEY_F25) {
        name = "F";
        name += std::to_string(key - GLFW_KEY_F1 + 1);
      } else {
        name = std::string(1, static_cast<char>(key));  // letters and digits are their ASCII codes
      }
  }
  return std::string(ctrl ? "Ctrl+" : "") + (shift ? "Shift+" : "") + name;
}

std::span<const CommandInfo> commands() {
  return kCommands;
}

const CommandInfo& command(CommandId id) {
  for (const auto& c : kCommands) {
    if (c.id == id) return c;
  }
  return kCommands[0];  // every id is in the table (checked by the tests)
}

const CommandInfo* commandForVerb(std::string_view verb) {
  for (const auto& c : kCommands) {
    if (c.verb && verb == c.verb) return &c;
  }
  return nullptr;
}

std::string shortcutText(const CommandInfo& c) {
  std::string s;
  for (const auto& k : c.keys) {
    if (!k.key) continue;
    s += (s.empty() ? "" : " / ") + k.label();
  }
  return s;
}

std::string actionHelp() {
  std::string s = "actions (--action, run in order after the first results, each waiting for its job):\n";
  for (const auto& c : kCommands) {
    if (!c.verb) continue;
    std::string v = std::string("  ") + c.verb;
    if (c.arg == ActionArg::Required) v += std::string("=") + c.argHint;
    if (c.arg == ActionArg::Optional) v += std::string("[=") + c.argHint + "]";
    v.resize(std::max<size_t>(v.size() + 1, 40), ' ');
    s += v + c.help + "\n";
  }
  return s;
}

}  // namespace sparge::gui

// The one table of the app's commands: it feeds the menus, the keyboard shortcuts, the shortcut help
// window and the --action verbs of automation. The app and the action runner dispatch on CommandId.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace sparge::gui {

enum class CommandId {
  // File
  OpenCapture,
  OpenSample,
  LoadParams,
  LoadEval,
  ExportMasks,
  ExportParams,
  ExportReportJson,
  ExportReportCsv,
  ExportReportMd,
  ExportReport,  // automation: the format follows the file's extension
  Screenshot,
  Quit,
  // Run
  Rerun,
  Cancel,
  TuneHead,
  TuneEntry,
  TuneAll,
  TuneCancel,  // automation: starts a tune and cancels it after its first progress report
  Profile,
  SweepHead,
  SweepAll,
  CompareMethods,
  // Parameters
  PresetCdf,
  PresetTopk,
  PresetFilterOff,
  PresetStored,
  Set,
  Follow,
  Permute,       // automation: the token order of entries with a grid
  CaptureOrder,  // automation: the head detail of a permuted run in the capture's order
  // Selection
  SelectEntry,
  SelectHead,
  NextHead,
  PreviousHead,
  // View
  ShowView,
  ShowOverview,
  ShowCurves,
  ShowKernels,
  LargerText,
  SmallerText,
  ResetLayout,
  // Help
  ShortcutHelp,
  About,
};

struct Shortcut {
  int key = 0;  // GLFW key code; 0 = none
  bool ctrl = false;
  bool shift = false;
  std::string label() const;  // "Ctrl+Shift+T"
};

// How an --action verb takes its argument.
enum class ActionArg { NotAnAction, None, Optional, Required };

struct CommandInfo {
  CommandId id;
  const char* menu;   // "File", "File/Export", "Run", "Parameters", "View", "Help"; nullptr: no menu item
  const char* label;  // menu label
  Shortcut keys[2];   // up to two shortcuts
  const char* help;   // one line, for the help window and --help
  const char* verb = nullptr;  // --action verb
  ActionArg arg = ActionArg::NotAnAction;
  const char* argHint = nullptr;  // "P.h5", "head|entry|all"
};

std::span<const CommandInfo> commands();
const CommandInfo& command(CommandId id);
const CommandInfo* commandForVerb(std::string_view verb);
// The shortcut labels of a command joined by " / " ("" when it has none).
std::string shortcutText(const CommandInfo& c);
// The --action verbs with their arguments, for --help.
std::string actionHelp();

}  // namespace sparge::gui

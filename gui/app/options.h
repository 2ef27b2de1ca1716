// Command-line options of sparge-studio (interactive use and automation for tests and docs).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace sparge::gui {

// The font scales the settings keep (settings.cpp clamps a saved one to the same range).
inline constexpr double kMinFontScale = 0.5;
inline constexpr double kMaxFontScale = 3.0;

struct AppOptions {
  std::string file;                  // capture to open; empty = the bundled sample
  std::vector<std::string> settings;  // --set key=value
  std::string entry;                 // --entry NAME
  std::string eval;                  // --eval FILE: an evaluation report (eval.json) to show
  std::optional<long long> head;     // --head N
  std::optional<long long> batch;    // --batch N
  std::string screenshot;            // --screenshot OUT.png: render, wait for results, write, exit
  std::vector<std::string> actions;  // --action VERB[=ARG]: automation commands, in order (app/actions.h)
  int frames = 3;                    // --frames N (at least this many frames before the screenshot)
  int width = 1600, height = 1000;   // --size WxH
  std::string backend = "auto";  // --backend auto|glfw|egl (auto: EGL when screenshotting without DISPLAY)
  std::string engine = "auto";       // --engine auto|cpu|cuda
  int threads = 0;                   // --threads (CPU engine)
  double timeoutSeconds = 600;       // --timeout for the screenshot mode
  std::optional<std::pair<float, float>> mouse;  // --mouse X,Y: where ImGui sees the pointer (automation)
  float fontScale = 0;               // --font-scale (0 = saved setting)
  bool help = false;
};

// Parses argv with the CLI's rules for values (core/option_values.h); throws sparge::Error naming the option
// on bad input (an empty capture path, NaN, out-of-range numbers ...), before any window opens.
AppOptions parseOptions(int argc, char** argv);
const char* usageText();

}  // namespace sparge::gui

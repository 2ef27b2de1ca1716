#include "options.h"

#include <tuple>
#include <utility>

#include "app/set_option.h"
#include "sparge/core/error.h"
#include "sparge/core/names.h"
#include "sparge/core/option_values.h"
#include "sparge/core/types.h"

namespace sparge::gui {

const char* usageText() {
  static const std::string text =
      std::string(
          "usage: sparge-studio [FILE.h5] [--set key=value]... [--entry NAME] [--head N] [--batch N]\n"
          "         [--eval EVAL.json]\n"
          "         [--action VERB[=ARG]]... [--screenshot OUT.png] [--frames N] [--size WxH]\n"
          "         [--backend auto|glfw|egl] [--engine auto|cpu|cuda] [--threads N] [--timeout S]\n"
          "         [--mouse X,Y] [--font-scale F]\n"
          "settings: ") +
      settingKeys() +
      "\n(default: target sm89, i.e. 128x64 tiles with INT8 Q.K and FP8 P.V, at SpargeAttn's CDF defaults)\n"
      "--screenshot renders N frames, waits for the background work, writes the PNG and exits (EGL "
      "off-screen\n"
      "when there is no DISPLAY). --action runs the menu commands headless (same automation mode) and exits\n"
      "non-zero when one fails; the screenshot, if asked for, is taken after the last action.\n";
  return text.c_str();
}

namespace {

// "WxH" / "X,Y": two values split at `separator`, each checked by `parse`.
template <class Parse>
auto pairOf(const std::string& value, char separator, const char* option, const char* form, Parse parse) {
  const size_t at = value.find(separator);
  if (at == std::string::npos) throw Error(option, std::string("expected ") + form);
  return std::make_pair(parse(value.substr(0, at)), parse(value.substr(at + 1)));
}

// One option and its value (argv[i + 1] for options that take one), checked by the rules the CLI's options
// follow (core/option_values.h): empty values, NaN, infinities, overflow and out-of-range numbers refused.
void parseOption(const std::string& a, const std::string& v, AppOptions& o) {
  using core::parseInteger;
  using core::parseReal;
  const char* f = a.c_str();
  if (a == "--set") {
    o.settings.push_back(v);
  } else if (a == "--entry") {
    if (v.empty()) throw Error(f, "the value is empty — give an entry name");
    o.entry = v;
  } else if (a == "--eval") {
    if (v.empty()) throw Error(f, "the value is empty — give an evaluation report (eval.json)");
    o.eval = v;
  } else if (a == "--head") {
    o.head = parseInteger(v, f, 0, core::kMaxDimension - 1);
  } else if (a == "--batch") {
    o.batch = parseInteger(v, f, 0, core::kMaxDimension - 1);
  } else if (a == "--screenshot") {
    if (core::outputFormat(v, {".png"}).empty())
      throw Error(f, "the screenshot is written as PNG: give a name ending in .png");
    o.screenshot = v;
  } else if (a == "--action") {
    o.actions.push_back(v);
  } else if (a == "--frames") {
    o.frames = int(parseInteger(v, f, 1, 100000));
  } else if (a == "--size") {
    std::tie(o.width, o.height) =
        pairOf(v, 'x', f, "WxH", [&](const std::string& n) { return int(parseInteger(n, f, 320, 8192)); });
  } else if (a == "--backend") {
    if (v != "auto" && v != "glfw" && v != "egl") throw Error(f, "auto, glfw or egl");
    o.backend = v;
  } else if (a == "--engine") {
    o.engine = v;
  } else if (a == "--threads") {
    o.threads = int(parseInteger(v, f, 0, 1 << 20));
  } else if (a == "--timeout") {
    o.timeoutSeconds = parseReal(v, f, 1e-3, 7 * 24 * 3600.0);
  } else if (a == "--mouse") {
    o.mouse =
        pairOf(v, ',', f, "X,Y", [&](const std::string& n) { return float(parseReal(n, f, -1e6, 1e6)); });
  } else if (a == "--font-scale") {
    o.fontScale = float(parseReal(v, f, kMinFontScale, kMaxFontScale));
  }
}

bool takesValue(const std::string& a) {
  static const char* const options[] = {"--set",        "--entry",   "--eval",    "--head",  "--batch",
                                        "--screenshot", "--action",  "--frames",  "--size",  "--backend",
                                        "--engine",     "--threads", "--timeout", "--mouse", "--font-scale"};
  for (const char* o : options)
    if (a == o) return true;
  return false;
}

}  // namespace

AppOptions parseOptions(int argc, char** argv) {
  AppOptions o;
  bool fileGiven = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      o.help = true;
    } else if (!a.empty() && a[0] == '-') {
      if (!takesValue(a)) throw Error(core::shortForDisplay(a), "unknown option");
      if (i + 1 >= argc) throw Error(a, "needs a value");
      parseOption(a, argv[++i], o);
    } else if (a.empty()) {
      throw Error("capture file", "the path is empty — give a capture file (or none for the bundled sample)");
    } else if (!fileGiven) {
      o.file = a;
      fileGiven = true;
    } else {
      throw Error(core::shortForDisplay(a), "only one capture file can be given");
    }
  }
  return o;
}

}  // namespace sparge::gui

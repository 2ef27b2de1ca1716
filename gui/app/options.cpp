#include "options.h"

#include <cstdlib>
#include <cstring>

#include "app/set_option.h"
#include "sparge/core/error.h"

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

AppOptions parseOptions(int argc, char** argv) {
  AppOptions o;
  auto need = [&](int& i, const char* flag) -> std::string {
    if (i + 1 >= argc) throw Error(flag, "needs a value");
    return argv[++i];
  };
  auto toInt = [](const std::string& v, const char* flag) {
    char* end = nullptr;
    long long x = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end) throw Error(flag, "not an integer: '" + v + "'");
    return x;
  };
  auto toDouble = [](const std::string& v, const char* flag) {
    char* end = nullptr;
    double x = std::strtod(v.c_str(), &end);
    if (v.empty() || *end) throw Error(flag, "not a number: '" + v + "'");
    return x;
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      o.help = true;
    } else if (a == "--set") {
      o.settings.push_back(need(i, "--set"));
    } else if (a == "--entry") {
      o.entry = need(i, "--entry");
    } else if (a == "--eval") {
      o.eval = need(i, "--eval");
    } else if (a == "--head") {
      o.head = toInt(need(i, "--head"), "--head");
    } else if (a == "--batch") {
      o.batch = toInt(need(i, "--batch"), "--batch");
    } else if (a == "--screenshot") {
      o.screenshot = need(i, "--screenshot");
    } else if (a == "--action") {
      o.actions.push_back(need(i, "--action"));
    } else if (a == "--frames") {
      o.frames = static_cast<int>(toInt(need(i, "--frames"), "--frames"));
      if (o.frames < 1) throw Error("--frames", "must be >= 1");
    } else if (a == "--size") {
      std::string v = need(i, "--size");
      auto x = v.find('x');
      if (x == std::string::npos) throw Error("--size", "expected WxH");
      o.width = static_cast<int>(toInt(v.substr(0, x), "--size"));
      o.height = static_cast<int>(toInt(v.substr(x + 1), "--size"));
      if (o.width < 320 || o.height < 240 || o.width > 8192 || o.height > 8192)
        throw Error("--size", "out of range");
    } else if (a == "--backend") {
      o.backend = need(i, "--backend");
      if (o.backend != "auto" && o.backend != "glfw" && o.backend != "egl")
        throw Error("--backend", "auto, glfw or egl");
    } else if (a == "--engine") {
      o.engine = need(i, "--engine");
    } else if (a == "--threads") {
      o.threads = static_cast<int>(toInt(need(i, "--threads"), "--threads"));
    } else if (a == "--timeout") {
      o.timeoutSeconds = toDouble(need(i, "--timeout"), "--timeout");
    } else if (a == "--mouse") {
      std::string v = need(i, "--mouse");
      auto c = v.find(',');
      if (c == std::string::npos) throw Error("--mouse", "expected X,Y");
      o.mouse = std::make_pair(static_cast<float>(toDouble(v.substr(0, c), "--mouse")),
                               static_cast<float>(toDouble(v.substr(c + 1), "--mouse")));
    } else if (a == "--font-scale") {
      o.fontScale = static_cast<float>(toDouble(need(i, "--font-scale"), "--font-scale"));
    } else if (!a.empty() && a[0] == '-') {
      throw Error(a, "unknown option");
    } else if (o.file.empty()) {
      o.file = a;
    } else {
      throw Error(a, "only one capture file can be given");
    }
  }
  return o;
}

}  // namespace sparge::gui

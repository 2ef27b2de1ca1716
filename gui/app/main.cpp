// sparge-studio: the desktop GUI (interactive), and its automation mode (--screenshot, --action) for tests
// and docs. main() only runs the named steps below.
#include <imgui.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "app/actions.h"
#include "app/app.h"
#include "app/automation.h"
#include "app/options.h"
#include "app/platform.h"
#include "app/set_option.h"
#include "session.h"
#include "settings.h"
#include "sparge/core/data_dir.h"
#include "sparge/core/names.h"
#include "sparge/core/parallel.h"
#include "sparge/kernels/engine_factory.h"

namespace fs = std::filesystem;
using namespace sparge;
using namespace sparge::gui;

namespace {
// Everything decided before a window opens.
struct Startup {
  AppOptions options;
  std::vector<Action> actions;
  core::RunConfig config = defaultAppConfig();
  Budget budget;
  core::EngineChoice engine = core::EngineChoice::Auto;
  bool automation = false;
  std::string settingsPath = configDirectory() + "/settings.json";
  std::string iniPath = configDirectory() + "/imgui.ini";
};

// Command line, actions and --set values, checked before any window opens. Returns an exit status when
// the program should stop here (help, usage error).
std::optional<int> parseCommandLine(int argc, char** argv, Startup& st) {
  try {
    st.options = parseOptions(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sparge-studio: %s\n%s", core::shortForDisplay(e.what(), 4096).c_str(), usageText());
    return 2;
  }
  if (const int usable = core::usableThreads(st.options.threads); st.options.threads > usable) {
    std::fprintf(
        stderr,
        "sparge-studio: note: --threads %d capped at %d (%d per hardware thread of this machine's %d)\n",
        st.options.threads, usable, core::kThreadsPerHardwareThread, core::hardwareThreads());
    st.options.threads = usable;
  }
  if (st.options.help) {
    std::fputs(usageText(), stdout);
    std::fputs(actionHelp().c_str(), stdout);
    return 0;
  }
  try {
    for (const auto& a : st.options.actions) st.actions.push_back(parseAction(a, st.options.file));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sparge-studio: %s\n%s", core::shortForDisplay(e.what(), 4096).c_str(),
                 actionHelp().c_str());
    return 2;
  }
  st.automation = !st.options.screenshot.empty() || !st.actions.empty();
  return std::nullopt;
}

// Saved settings (defaults in automation: reproducible screenshots, nothing saved), then --set on top.
std::optional<int> loadSettingsAndConfig(Startup& st, AppSettings& settings) {
  settings = st.automation ? AppSettings{} : loadSettings(st.settingsPath);
  st.budget = Budget{settings.budgetL1, settings.budgetL2};
  if (st.budget.l2 <= st.budget.l1) st.budget = Budget{};
  try {
    for (const auto& kv : st.options.settings) applySetting(kv, st.config, st.budget);
    st.engine = core::parseEngineChoice(st.options.engine);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sparge-studio: %s\n", e.what());
    return 2;
  }
  if (st.options.fontScale > 0) settings.fontScale = st.options.fontScale;
  return std::nullopt;
}

// Whether --set chose the tiles or numerics; otherwise the engine's GPU picks the target.
bool choosesTarget(const std::vector<std::string>& settings) {
  for (const auto& kv : settings) {
    const std::string key = kv.substr(0, kv.find('='));
    if (key == "target" || key == "geometry" || key == "quant" || key == "numerics") return true;
  }
  return false;
}

// The window (GLFW) or the off-screen context (EGL), with the ImGui context. Null on failure.
std::unique_ptr<Platform> openPlatform(const Startup& st, const AppSettings& settings) {
  const AppOptions& o = st.options;
  const char* display = std::getenv("DISPLAY");
  bool useEgl = o.backend == "egl" || (o.backend == "auto" && st.automation && (!display || !*display));
  std::unique_ptr<Platform> platform = useEgl ? makeEglPlatform() : makeGlfwPlatform();
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;
  if (!st.automation) {
    std::error_code ec;
    fs::create_directories(configDirectory(), ec);
    io.IniFilename = st.iniPath.c_str();
  }
  PlatformConfig pc;
  bool sizeGiven = o.width != 1600 || o.height != 1000;
  pc.width = st.automation || sizeGiven ? o.width : settings.windowWidth;
  pc.height = st.automation || sizeGiven ? o.height : settings.windowHeight;
  try {
    platform->init(pc);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sparge-studio: %s\n", e.what());
    ImGui::DestroyContext();
    return nullptr;
  }
  if (st.automation) std::fprintf(stderr, "sparge-studio: rendering with %s\n", platform->describe().c_str());
  if (st.automation || o.mouse) {
    platform->overrideMouse = true;
    if (o.mouse) {
      platform->mouseX = o.mouse->first;
      platform->mouseY = o.mouse->second;
    }
  }
  return platform;
}

void openInitialCapture(App& app, Session& session, const Startup& st) {
  std::string file = st.options.file;
  if (file.empty()) {
    try {
      file = core::sampleCapturePath().string();
    } catch (const std::exception& e) {
      session.messages().addNotice(std::string(e.what()) +
                                   ". Open a capture with File > Open or drop one on the window.");
      return;
    }
  }
  if (st.automation) {
    session.openCapture(file, st.options.entry);
    return;
  }
  app.openFile(file);
  if (!st.options.entry.empty()) session.openCapture(file, st.options.entry);
}

void runInteractive(App& app, Platform& platform) {
  while (!platform.shouldClose()) {
    app.frame();
    if (!app.lastFrameTimes().deferred) {
      app.afterRender();
      platform.present();
    }
    app.waitForWork();
  }
}

void saveSettingsOnExit(const Startup& st, AppSettings& settings, const Session& session, App& app) {
  settings.budgetL1 = session.tuning().budget().l1;
  settings.budgetL2 = session.tuning().budget().l2;
  settings.profileRuns = app.ui().profileRuns;
  settings.profileWarmupMs = app.ui().profileWarmupMs;
  try {
    saveSettings(st.settingsPath, settings);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sparge-studio: %s\n", e.what());
  }
}
}  // namespace

int main(int argc, char** argv) {
  engines::prepareCudaProcess();
  Startup st;
  AppSettings settings;
  if (auto rc = parseCommandLine(argc, argv, st)) return *rc;
  if (auto rc = loadSettingsAndConfig(st, settings)) return *rc;
  std::unique_ptr<Platform> platform = openPlatform(st, settings);
  if (!platform) return 1;
  int result = 0;
  {
    Session session(
        [choice = st.engine, threads = st.options.threads] { return engines::makeEngine(choice, threads); });
    session.runs().applyConfig(st.config);
    session.followDeviceTarget(!choosesTarget(st.options.settings));
    session.tuning().setBudget(st.budget);
    if (st.options.head || st.options.batch)
      session.selectHead(HeadRef{st.options.batch.value_or(0), st.options.head.value_or(0)});
    App app(session, settings, *platform, st.automation);
    app.setupStyleAndFonts(platform->contentScale());
    openInitialCapture(app, session, st);
    if (!st.options.eval.empty()) session.files().loadEval(st.options.eval);
    if (st.automation) {
      AutomationOptions ao{st.options.screenshot, st.options.frames, st.options.timeoutSeconds};
      result = runAutomation(app, session, *platform, ao, std::move(st.actions));
    } else {
      app.setDeferFrames(true);
      runInteractive(app, *platform);
      saveSettingsOnExit(st, settings, session, app);
    }
  }
  platform->shutdown();
  ImGui::DestroyContext();
  return result;
}

// sparge-studio: the desktop GUI (interactive), and its automation mode (--screenshot) for tests and docs.
#include <imgui.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "app/actions.h"
#include "app/app.h"
#include "app/options.h"
#include "app/platform.h"
#include "session.h"
#include "settings.h"
#include "sparge/core/data_dir.h"
#include "sparge/core/error.h"
#include "sparge/kernels/engine_factory.h"

namespace fs = std::filesystem;
using namespace sparge;
using namespace sparge::gui;

int main(int argc, char** argv) {
  AppOptions opt;
  try {
    opt = parseOptions(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sparge-studio: %s\n%s", e.what(), usageText());
    return 2;
  }
  if (opt.help) {
    std::fputs(usageText(), stdout);
    std::fputs(actionHelp(), stdout);
    return 0;
  }
  std::vector<Action> actions;
  try {
    for (const auto& a : opt.actions) actions.push_back(parseAction(a));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sparge-studio: %s\n%s", e.what(), actionHelp());
    return 2;
  }
  const bool automation = !opt.screenshot.empty() || !actions.empty();

  // Settings: --set values are checked before any window opens.
  core::RunConfig config;
  Budget budget;
  std::string settingsPath = configDirectory() + "/settings.json";
  AppSettings settings = loadSettings(settingsPath);
  if (automation) settings = AppSettings{};  // reproducible screenshots: default layout, nothing saved
  budget.l1 = settings.budgetL1;
  budget.l2 = settings.budgetL2;
  if (budget.l2 <= budget.l1) budget = Budget{};
  core::EngineChoice choice;
  try {
    for (const auto& kv : opt.settings) applySetting(kv, config, budget);
    choice = core::parseEngineChoice(opt.engine);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sparge-studio: %s\n", e.what());
    return 2;
  }
  if (opt.fontScale > 0) settings.fontScale = opt.fontScale;

  bool useEgl = opt.backend == "egl" ||
                (opt.backend == "auto" && automation && (!std::getenv("DISPLAY") || !*std::getenv("DISPLAY")));
  std::unique_ptr<Platform> platform = useEgl ? makeEglPlatform() : makeGlfwPlatform();

  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  std::string iniPath = configDirectory() + "/imgui.ini";
  if (automation) {
    io.IniFilename = nullptr;
  } else {
    std::error_code ec;
    fs::create_directories(configDirectory(), ec);
    io.IniFilename = iniPath.c_str();
  }
  PlatformConfig pc;
  pc.width = automation ? opt.width : settings.windowWidth;
  pc.height = automation ? opt.height : settings.windowHeight;
  if (!automation && (opt.width != 1600 || opt.height != 1000)) {
    pc.width = opt.width;
    pc.height = opt.height;
  }
  try {
    platform->init(pc);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sparge-studio: %s\n", e.what());
    ImGui::DestroyContext();
    return 1;
  }
  if (automation) std::fprintf(stderr, "sparge-studio: rendering with %s\n", platform->describe().c_str());
  if (automation || opt.mouse) {
    platform->overrideMouse = true;
    if (opt.mouse) {
      platform->mouseX = opt.mouse->first;
      platform->mouseY = opt.mouse->second;
    }
  }

  int result = 0;
  {
    int threads = opt.threads;
    Session session([choice, threads]() {
      auto sel = engines::makeEngine(choice, threads);
      return EngineBox{std::move(sel.engine), sel.message};
    });
    session.setConfig(config);
    session.setBudget(budget);
    if (opt.head || opt.batch) session.selectHead(HeadRef{opt.batch.value_or(0), opt.head.value_or(0)});

    App app(session, settings, *platform, settingsPath, automation);
    app.setupStyleAndFonts(platform->contentScale());

    std::string file = opt.file;
    if (file.empty()) {
      try {
        file = core::sampleCapturePath().string();
      } catch (const std::exception& e) {
        session.addNotice(std::string(e.what()) + ". Open a capture with File > Open or drop one on the window.");
      }
    }
    if (!file.empty()) {
      if (automation) {
        session.openCapture(file, opt.entry);
      } else {
        app.openFile(file);
        if (!opt.entry.empty()) session.openCapture(file, opt.entry);
      }
    }

    using Clock = std::chrono::steady_clock;
    auto start = Clock::now();
    int frames = 0, settled = 0;
    ActionRunner runner(session, actions);
    bool actionsDone = actions.empty();
    while (!platform->shouldClose()) {
      app.frame();
      ++frames;
      if (automation) {
        // Done when N frames are drawn, the worker has finished, every result is on screen and every
        // --action has run (each one waits for its own job the same way).
        bool idle = !session.busy() && session.engineReady();
        settled = idle ? settled + 1 : 0;
        bool ready = frames >= opt.frames && settled >= 3;
        if (!actionsDone && frames >= opt.frames) {
          actionsDone = runner.step(ready);
          if (actionsDone) settled = 0;  // let the last action's results reach the screen
          std::string shot = runner.takeScreenshotRequest();
          if (!shot.empty()) {
            int w = 0, h = 0;
            platform->framebufferSize(&w, &h);
            try {
              writeFramebufferPng(shot, w, h);
              std::fprintf(stderr, "sparge-studio: wrote %s (%dx%d)\n", shot.c_str(), w, h);
              runner.screenshotDone({});
            } catch (const std::exception& e) {
              runner.screenshotDone(e.what());
            }
          }
          ready = false;
        }
        double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
        bool timedOut = elapsed > opt.timeoutSeconds;
        if (ready || runner.failed() || timedOut) {
          int w = 0, h = 0;
          platform->framebufferSize(&w, &h);
          if (!opt.screenshot.empty()) {
            try {
              writeFramebufferPng(opt.screenshot, w, h);
              std::fprintf(stderr, "sparge-studio: wrote %s (%dx%d, %d frames, %.1f s)\n", opt.screenshot.c_str(), w,
                           h, frames, elapsed);
            } catch (const std::exception& e) {
              std::fprintf(stderr, "sparge-studio: %s\n", e.what());
              result = 1;
            }
          }
          if (runner.failed()) {
            std::fprintf(stderr, "sparge-studio: %s\n", runner.failure().c_str());
            result = 4;
          }
          if (timedOut) {
            std::fprintf(stderr, "sparge-studio: timed out after %.0f s waiting for the worker%s\n", elapsed,
                         actionsDone ? "" : " (actions unfinished)");
            result = 3;
          }
          while (session.hasError()) {
            std::fprintf(stderr, "sparge-studio: error: %s\n", session.frontError().c_str());
            session.popError();
            result = result ? result : 1;
          }
          for (const auto& n : session.notices()) std::fprintf(stderr, "sparge-studio: %s\n", n.c_str());
          break;
        }
        if (!idle) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      } else {
        app.afterRender();
      }
      platform->present();
    }
    if (!automation) {
      int w = 0, h = 0;
      platform->framebufferSize(&w, &h);
      settings.budgetL1 = session.budget().l1;
      settings.budgetL2 = session.budget().l2;
      try {
        saveSettings(settingsPath, settings);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "sparge-studio: %s\n", e.what());
      }
    }
  }
  platform->shutdown();
  ImGui::DestroyContext();
  return result;
}

// Where frames go: a GLFW window (X11) or an off-screen EGL context with no display at all.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace sparge::gui {

struct PlatformConfig {
  int width = 1600, height = 1000;
  bool visible = true;
  std::string title = "Sparge Studio";
};

class Platform {
 public:
  virtual ~Platform() = default;
  // Creates the window/context and initialises ImGui's platform and renderer backends
  // (the ImGui context must exist). Throws sparge::Error on failure.
  virtual void init(const PlatformConfig& config) = 0;
  virtual void shutdown() = 0;
  virtual bool shouldClose() = 0;
  virtual void requestClose() = 0;
  virtual void newFrame() = 0;  // polls events, starts the backend frame
  virtual void present() = 0;   // after ImGui rendering: swap buffers (no-op off-screen)
  // Sleeps until input arrives, wake() is called or `timeoutS` passes (whichever comes first).
  virtual void waitEvents(double timeoutS) = 0;
  // Ends a waitEvents() in progress, or the next one; any thread may call it.
  virtual void wake() = 0;
  virtual void framebufferSize(int* w, int* h) = 0;
  virtual float contentScale() = 0;  // HiDPI factor
  virtual bool headless() const = 0;
  virtual std::string describe() const = 0;  // GL vendor/renderer, for logs
  // Files dropped onto the window.
  std::function<void(const std::vector<std::string>&)> onDrop;
  // Automation: when set, ImGui sees the mouse here (or nowhere when x < 0) instead of the real pointer,
  // so that a pointer resting on the window (Xvfb puts it at the screen centre) triggers no hover.
  bool overrideMouse = false;
  float mouseX = -1, mouseY = -1;
};

std::unique_ptr<Platform> makeGlfwPlatform();
std::unique_ptr<Platform> makeEglPlatform();

// Reads the current framebuffer (bottom-up GL rows) and writes a top-down PNG. Throws sparge::Error.
void writeFramebufferPng(const std::string& path, int width, int height);

}  // namespace sparge::gui

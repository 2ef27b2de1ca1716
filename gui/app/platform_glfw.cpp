// GLFW + OpenGL 3.3 core window with ImGui's GLFW and OpenGL3 backends (both inside Debian's libimgui.a).
#include <GLFW/glfw3.h>
#include <imgui.h>
#include <imgui_impl_glfw.h>
#include <imgui_impl_opengl3.h>

#include <cfloat>

#include "platform.h"
#include "sparge/core/error.h"
#include "widgets/gl.h"

namespace sparge::gui {

namespace {
class GlfwPlatform final : public Platform {
 public:
  ~GlfwPlatform() override { shutdown(); }

  void init(const PlatformConfig& c) override {
    glfwSetErrorCallback(
        [](int code, const char* msg) { std::fprintf(stderr, "glfw error %d: %s\n", code, msg); });
    if (!glfwInit()) throw Error("glfw", "cannot initialise GLFW (no X display? use --screenshot with EGL)");
    glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
    glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
    glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
    glfwWindowHint(GLFW_SCALE_TO_MONITOR, GLFW_TRUE);
    glfwWindowHint(GLFW_VISIBLE, c.visible ? GLFW_TRUE : GLFW_FALSE);
    window_ = glfwCreateWindow(c.width, c.height, c.title.c_str(), nullptr, nullptr);
    if (!window_) {
      glfwTerminate();
      throw Error("glfw", "cannot create an OpenGL 3.3 window");
    }
    glfwMakeContextCurrent(window_);
    glfwSwapInterval(1);
    glfwSetWindowUserPointer(window_, this);
    glfwSetDropCallback(window_, [](GLFWwindow* w, int n, const char** paths) {
      auto* self = static_cast<GlfwPlatform*>(glfwGetWindowUserPointer(w));
      std::vector<std::string> files(paths, paths + n);
      if (self->onDrop) self->onDrop(files);
    });
    ImGui_ImplGlfw_InitForOpenGL(window_, true);
    ImGui_ImplOpenGL3_Init("#version 330 core");
    inited_ = true;
  }

  void shutdown() override {
    if (inited_) {
      ImGui_ImplOpenGL3_Shutdown();
      ImGui_ImplGlfw_Shutdown();
      inited_ = false;
    }
    if (window_) {
      glfwDestroyWindow(window_);
      window_ = nullptr;
      glfwTerminate();
    }
  }

  bool shouldClose() override { return glfwWindowShouldClose(window_); }
  void requestClose() override { glfwSetWindowShouldClose(window_, GLFW_TRUE); }

  void newFrame() override {
    glfwPollEvents();
    ImGui_ImplOpenGL3_NewFrame();
    ImGui_ImplGlfw_NewFrame();
    if (overrideMouse)
      ImGui::GetIO().MousePos = mouseX < 0 ? ImVec2(-FLT_MAX, -FLT_MAX) : ImVec2(mouseX, mouseY);
  }

  void present() override { glfwSwapBuffers(window_); }
  void waitEvents(double timeoutS) override { glfwWaitEventsTimeout(timeoutS); }
  void wake() override { glfwPostEmptyEvent(); }

  void framebufferSize(int* w, int* h) override { glfwGetFramebufferSize(window_, w, h); }

  float contentScale() override {
    float x = 1, y = 1;
    glfwGetWindowContentScale(window_, &x, &y);
    return std::max(1.0f, std::max(x, y));
  }
  bool headless() const override { return false; }
  std::string describe() const override {
    return std::string("GLFW/GLX: ") + reinterpret_cast<const char*>(glGetString(GL_RENDERER));
  }

 private:
  GLFWwindow* window_ = nullptr;
  bool inited_ = false;
};
}  // namespace

std::unique_ptr<Platform> makeGlfwPlatform() {
  return std::make_unique<GlfwPlatform>();
}

}  // namespace sparge::gui

// Off-screen rendering with no X server: EGL (Mesa's surfaceless platform, or an EGL device such as the
// NVIDIA driver's), a context without any surface, and a framebuffer object to draw into.
#include <EGL/egl.h>
#include <EGL/eglext.h>
#include <imgui.h>
#include <imgui_impl_opengl3.h>

#include <cfloat>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>

#include "platform.h"
#include "sparge/core/error.h"
#include "widgets/gl.h"

namespace sparge::gui {

namespace {
class EglPlatform final : public Platform {
 public:
  ~EglPlatform() override { shutdown(); }

  void init(const PlatformConfig& c) override {
    width_ = c.width;
    height_ = c.height;
    auto getPlatformDisplay =
        reinterpret_cast<PFNEGLGETPLATFORMDISPLAYEXTPROC>(eglGetProcAddress("eglGetPlatformDisplayEXT"));
    const char* clientExt = eglQueryString(EGL_NO_DISPLAY, EGL_EXTENSIONS);
    std::string ext = clientExt ? clientExt : "";
    // 1) Mesa surfaceless; 2) the first EGL device (NVIDIA headless); 3) the default display.
    if (getPlatformDisplay && ext.find("EGL_MESA_platform_surfaceless") != std::string::npos) {
      tryDisplay(getPlatformDisplay(EGL_PLATFORM_SURFACELESS_MESA, EGL_DEFAULT_DISPLAY, nullptr),
                 "surfaceless");
    }
    if (!display_ && getPlatformDisplay && ext.find("EGL_EXT_platform_device") != std::string::npos) {
      auto queryDevices =
          reinterpret_cast<PFNEGLQUERYDEVICESEXTPROC>(eglGetProcAddress("eglQueryDevicesEXT"));
      EGLDeviceEXT devices[8];
      EGLint n = 0;
      if (queryDevices && queryDevices(8, devices, &n)) {
        for (EGLint i = 0; i < n && !display_; ++i) {
          tryDisplay(getPlatformDisplay(EGL_PLATFORM_DEVICE_EXT, devices[i], nullptr), "device");
        }
      }
    }
    if (!display_) tryDisplay(eglGetDisplay(EGL_DEFAULT_DISPLAY), "default");
    if (!display_) throw Error("egl", "no usable EGL display (surfaceless, device or default)");
    if (!eglBindAPI(EGL_OPENGL_API)) throw Error("egl", "eglBindAPI(EGL_OPENGL_API) failed");
    EGLConfig config = nullptr;
    EGLint num = 0;
    const EGLint cfgAttrs[] = {
        EGL_RENDERABLE_TYPE, EGL_OPENGL_BIT, EGL_RED_SIZE, 8, EGL_GREEN_SIZE, 8, EGL_BLUE_SIZE, 8, EGL_NONE};
    if (!eglChooseConfig(display_, cfgAttrs, &config, 1, &num) || num == 0)
      config = nullptr;  // EGL_KHR_no_config_context
    const EGLint ctxAttrs[] = {EGL_CONTEXT_MAJOR_VERSION,
                               3,
                               EGL_CONTEXT_MINOR_VERSION,
                               3,
                               EGL_CONTEXT_OPENGL_PROFILE_MASK,
                               EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT,
                               EGL_NONE};
    context_ = eglCreateContext(display_, config, EGL_NO_CONTEXT, ctxAttrs);
    if (context_ == EGL_NO_CONTEXT) throw Error("egl", "cannot create an OpenGL 3.3 core context");
    if (!eglMakeCurrent(display_, EGL_NO_SURFACE, EGL_NO_SURFACE, context_)) {
      throw Error("egl", "eglMakeCurrent without a surface failed (EGL_KHR_surfaceless_context missing?)");
    }
    glGenFramebuffers(1, &fbo_);
    glGenRenderbuffers(1, &color_);
    glBindRenderbuffer(GL_RENDERBUFFER, color_);
    glRenderbufferStorage(GL_RENDERBUFFER, GL_RGBA8, width_, height_);
    glBindFramebuffer(GL_FRAMEBUFFER, fbo_);
    glFramebufferRenderbuffer(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_RENDERBUFFER, color_);
    if (glCheckFramebufferStatus(GL_FRAMEBUFFER) != GL_FRAMEBUFFER_COMPLETE)
      throw Error("egl", "framebuffer incomplete");
    glViewport(0, 0, width_, height_);
    if (!ImGui_ImplOpenGL3_Init("#version 330 core"))
      throw Error("egl", "ImGui OpenGL3 backend failed to start");
    inited_ = true;
    ImGuiIO& io = ImGui::GetIO();
    io.BackendPlatformName = "sparge_egl_offscreen";
  }

  void shutdown() override {
    if (inited_) {
      ImGui_ImplOpenGL3_Shutdown();
      inited_ = false;
    }
    if (display_) {
      if (fbo_) glDeleteFramebuffers(1, &fbo_);
      if (color_) glDeleteRenderbuffers(1, &color_);
      eglMakeCurrent(display_, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
      if (context_ != EGL_NO_CONTEXT) eglDestroyContext(display_, context_);
      eglTerminate(display_);
      display_ = nullptr;
    }
  }

  bool shouldClose() override { return close_; }
  void requestClose() override { close_ = true; }

  void newFrame() override {
    // No platform backend: ImGui's IO is driven here.
    ImGuiIO& io = ImGui::GetIO();
    io.DisplaySize = ImVec2(static_cast<float>(width_), static_cast<float>(height_));
    io.DisplayFramebufferScale = ImVec2(1, 1);
    io.DeltaTime = 1.0f / 60.0f;
    io.MousePos = overrideMouse && mouseX >= 0 ? ImVec2(mouseX, mouseY) : ImVec2(-FLT_MAX, -FLT_MAX);
    glBindFramebuffer(GL_FRAMEBUFFER, fbo_);
    ImGui_ImplOpenGL3_NewFrame();
  }

  void present() override { glFinish(); }
  // No input off-screen: only wake() or the timeout ends a wait.
  void waitEvents(double timeoutS) override {
    std::unique_lock lock(wakeMutex_);
    wakeCv_.wait_for(lock, std::chrono::duration<double>(timeoutS), [this] { return woken_; });
    woken_ = false;
  }
  void wake() override {
    {
      std::lock_guard lock(wakeMutex_);
      woken_ = true;
    }
    wakeCv_.notify_one();
  }
  void framebufferSize(int* w, int* h) override {
    *w = width_;
    *h = height_;
  }
  float contentScale() override { return 1.0f; }
  bool headless() const override { return true; }
  std::string describe() const override {
    return "EGL " + kind_ + ": " + reinterpret_cast<const char*>(glGetString(GL_VENDOR)) + " / " +
           reinterpret_cast<const char*>(glGetString(GL_RENDERER));
  }

 private:
  void tryDisplay(EGLDisplay d, const char* kind) {
    if (d == EGL_NO_DISPLAY) return;
    EGLint major = 0, minor = 0;
    if (!eglInitialize(d, &major, &minor)) return;
    display_ = d;
    kind_ = kind;
  }

  EGLDisplay display_ = nullptr;
  EGLContext context_ = EGL_NO_CONTEXT;
  std::string kind_;
  unsigned fbo_ = 0, color_ = 0;
  int width_ = 0, height_ = 0;
  bool close_ = false;
  bool inited_ = false;
  std::mutex wakeMutex_;
  std::condition_variable wakeCv_;
  bool woken_ = false;
};
}  // namespace

std::unique_ptr<Platform> makeEglPlatform() {
  return std::make_unique<EglPlatform>();
}

}  // namespace sparge::gui

#include "app.h"

#include <GLFW/glfw3.h>
#include <imgui.h>
#include <imgui_impl_opengl3.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>

#include "app/layout.h"
#include "sparge/core/data_dir.h"
#include "sysinfo.h"
#include "views/capture_browser.h"
#include "views/controls_view.h"
#include "views/head_detail.h"
#include "views/head_grid.h"
#include "views/summary_table.h"
#include "views/timings_view.h"
#include "widgets/gl.h"
#include "widgets/ui_util.h"

namespace fs = std::filesystem;

namespace sparge::gui {

namespace {
std::string findAsset(const std::string& rel) {
  const std::optional<fs::path> p = core::findDataFile(rel);
  return p ? p->string() : std::string();
}
}  // namespace

App::App(Session& session, AppSettings& settings, Platform& platform, std::string settingsPath, bool automation)
    : session_(session), settings_(settings), platform_(platform), settingsPath_(std::move(settingsPath)),
      automation_(automation) {
  ui_.screenshotMode = automation;
  views_.push_back(std::make_unique<CaptureBrowser>());
  views_.push_back(std::make_unique<ControlsView>());
  auto grid = std::make_unique<HeadGrid>();
  grid_ = grid.get();
  views_.push_back(std::move(grid));
  views_.push_back(std::make_unique<HeadDetail>());
  views_.push_back(std::make_unique<SummaryTable>());
  views_.push_back(std::make_unique<TimingsView>());
  platform_.onDrop = [this](const std::vector<std::string>& files) {
    for (const auto& f : files) {
      if (fs::path(f).extension() == ".h5" || fs::path(f).extension() == ".hdf5") {
        openFile(f);
        return;
      }
    }
    if (!files.empty()) session_.pushError("Dropped file is not an .h5 capture: " + files.front());
  };
}

App::~App() = default;

void App::setupStyleAndFonts(float scale) {
  baseScale_ = scale;
  ImGuiIO& io = ImGui::GetIO();
  ImGuiStyle& style = ImGui::GetStyle();
  style = ImGuiStyle();  // sizes are scaled below: start from the unscaled defaults every time
  ImGui::StyleColorsDark();
  style.WindowRounding = 0;
  style.ChildRounding = 0;
  style.FrameRounding = 2;
  style.GrabRounding = 2;
  style.ScrollbarRounding = 2;
  style.WindowPadding = ImVec2(6, 6);
  style.FramePadding = ImVec2(5, 3);
  style.ItemSpacing = ImVec2(6, 4);
  style.CellPadding = ImVec2(4, 2);
  style.WindowBorderSize = 0;
  style.ChildBorderSize = 0;
  ImVec4* c = style.Colors;
  c[ImGuiCol_WindowBg] = ImVec4(0.085f, 0.09f, 0.105f, 1);
  c[ImGuiCol_ChildBg] = ImVec4(0.11f, 0.115f, 0.135f, 1);
  c[ImGuiCol_PopupBg] = ImVec4(0.09f, 0.095f, 0.11f, 0.97f);
  c[ImGuiCol_FrameBg] = ImVec4(0.17f, 0.18f, 0.21f, 1);
  c[ImGuiCol_Header] = ImVec4(0.22f, 0.36f, 0.52f, 0.8f);
  c[ImGuiCol_TableHeaderBg] = ImVec4(0.15f, 0.16f, 0.19f, 1);
  c[ImGuiCol_TableRowBgAlt] = ImVec4(1, 1, 1, 0.025f);
  c[ImGuiCol_MenuBarBg] = ImVec4(0.13f, 0.14f, 0.17f, 1);
  style.ScaleAllSizes(scale);

  io.Fonts->Clear();
  ImFontGlyphRangesBuilder builder;
  builder.AddRanges(io.Fonts->GetGlyphRangesDefault());
  static const ImWchar extra[] = {0x0300, 0x03FF, 0x1D00, 0x1DBF, 0x2000, 0x22FF, 0x25A0, 0x25FF, 0};
  builder.AddRanges(extra);
  static ImVector<ImWchar> ranges;
  ranges.clear();
  builder.BuildRanges(&ranges);
  float size = std::round(15.0f * scale * settings_.fontScale);
  std::string font = findAsset("fonts/DejaVuSans.ttf");
  ImFontConfig cfg;
  cfg.OversampleH = 2;
  if (font.empty() || !io.Fonts->AddFontFromFileTTF(font.c_str(), size, &cfg, ranges.Data)) {
    ImFontConfig def;
    def.SizePixels = size;
    io.Fonts->AddFontDefault(&def);
  }
}

std::string App::defaultDir() const {
  if (!settings_.lastDirectory.empty()) return settings_.lastDirectory;
  std::error_code ec;
  return fs::current_path(ec).string();
}

void App::openFile(const std::string& path) {
  session_.openCapture(path);
  settings_.addRecent(path);
  settings_.lastDirectory = fs::path(path).parent_path().string();
}

void App::startExport(const std::string& purpose, const std::string& title, const std::string& ext,
                      const std::string& suffix) {
  std::string stem = session_.entryName().empty() ? "sparge" : session_.entryName();
  browser_.open(title, FileBrowser::Mode::Save, defaultDir(), {ext}, stem + suffix + ext);
  browser_.setPurpose(purpose);
}

void App::handleShortcuts() {
  ImGuiIO& io = ImGui::GetIO();
  if (io.WantTextInput || browser_.isOpen()) return;
  auto pressed = [](int key) { return ImGui::IsKeyPressed(key, false); };
  bool ctrl = io.KeyCtrl, shift = io.KeyShift;
  if (ctrl && pressed(GLFW_KEY_O)) browser_.open("Open capture", FileBrowser::Mode::Open, defaultDir(), {".h5", ".hdf5"}),
      browser_.setPurpose("open");
  if (ctrl && !shift && pressed(GLFW_KEY_E)) startExport("masks", "Export masks (.h5)", ".h5", "_masks");
  if (ctrl && shift && pressed(GLFW_KEY_E)) startExport("report_md", "Export report (Markdown + PNG)", ".md", "_report");
  if (ctrl && shift && pressed(GLFW_KEY_S)) startExport("params", "Export parameters (.json)", ".json", "_params");
  if (pressed(GLFW_KEY_F5)) session_.rerun();
  if (pressed(ImGui::GetKeyIndex(ImGuiKey_Escape))) session_.cancel();
  if (ctrl && !shift && pressed(GLFW_KEY_T)) session_.autoTune(TuneScope::SelectedHead);
  if (ctrl && shift && pressed(GLFW_KEY_T)) session_.autoTune(TuneScope::Entry);
  if (ctrl && pressed(GLFW_KEY_P)) session_.profile(ui_.profileRuns);
  if (ctrl && pressed(GLFW_KEY_Q)) platform_.requestClose();
  if (pressed(GLFW_KEY_F12)) {
    char name[64];
    std::time_t t = std::time(nullptr);
    std::strftime(name, sizeof name, "sparge-studio-%Y%m%d-%H%M%S.png", std::localtime(&t));
    screenshotPath_ = (fs::path(defaultDir()) / name).string();
  }
  if (ctrl && (pressed(GLFW_KEY_EQUAL) || pressed(GLFW_KEY_KP_ADD))) pendingFontScale_ = settings_.fontScale * 1.1f;
  if (ctrl && (pressed(GLFW_KEY_MINUS) || pressed(GLFW_KEY_KP_SUBTRACT))) pendingFontScale_ = settings_.fontScale / 1.1f;
  // Arrow keys walk through the heads of the grid.
  if (!io.WantCaptureKeyboard || !ImGui::IsAnyItemActive()) {
    HeadRef h = session_.selectedHead();
    if (pressed(GLFW_KEY_RIGHT) || pressed(GLFW_KEY_DOWN)) session_.selectHead({h.batch, h.head + 1});
    if (pressed(GLFW_KEY_LEFT) || pressed(GLFW_KEY_UP)) session_.selectHead({h.batch, std::max<int64_t>(0, h.head - 1)});
  }
}

void App::drawMenu() {
  if (!ImGui::BeginMainMenuBar()) return;
  if (ImGui::BeginMenu("File")) {
    if (ImGui::MenuItem("Open capture...", "Ctrl+O")) {
      browser_.open("Open capture", FileBrowser::Mode::Open, defaultDir(), {".h5", ".hdf5"});
      browser_.setPurpose("open");
    }
    if (ImGui::BeginMenu("Open recent", !settings_.recentFiles.empty())) {
      for (const auto& f : settings_.recentFiles) {
        if (ImGui::MenuItem(f.c_str())) {
          std::string copy = f;
          openFile(copy);
          break;
        }
      }
      ImGui::Separator();
      if (ImGui::MenuItem("Clear list")) settings_.recentFiles.clear();
      ImGui::EndMenu();
    }
    const std::optional<fs::path> sample = core::findDataFile(core::kSampleCaptureFile);
    if (ImGui::MenuItem("Open bundled sample", nullptr, false, sample.has_value())) {
      session_.openCapture(sample->string());
    }
    if (ImGui::MenuItem("Load parameters (.json)...")) {
      browser_.open("Load parameters", FileBrowser::Mode::Open, defaultDir(), {".json"});
      browser_.setPurpose("import_params");
    }
    ImGui::Separator();
    bool have = session_.result() != nullptr;
    if (ImGui::BeginMenu("Export", have)) {
      if (ImGui::MenuItem("Masks (.h5, masks v1)...", "Ctrl+E")) startExport("masks", "Export masks (.h5)", ".h5", "_masks");
      if (ImGui::MenuItem("Parameters (.json)...", "Ctrl+Shift+S"))
        startExport("params", "Export parameters (.json)", ".json", "_params");
      if (ImGui::MenuItem("Report (.json)...")) startExport("report_json", "Export report (.json)", ".json", "_report");
      if (ImGui::MenuItem("Report (.csv)...")) startExport("report_csv", "Export report (.csv)", ".csv", "_report");
      if (ImGui::MenuItem("Report (Markdown + PNG)...", "Ctrl+Shift+E"))
        startExport("report_md", "Export report (Markdown + PNG)", ".md", "_report");
      ImGui::EndMenu();
    }
    if (ImGui::MenuItem("Screenshot (PNG)", "F12")) {
      char name[64];
      std::time_t t = std::time(nullptr);
      std::strftime(name, sizeof name, "sparge-studio-%Y%m%d-%H%M%S.png", std::localtime(&t));
      screenshotPath_ = (fs::path(defaultDir()) / name).string();
    }
    ImGui::Separator();
    if (ImGui::MenuItem("Quit", "Ctrl+Q")) platform_.requestClose();
    ImGui::EndMenu();
  }
  if (ImGui::BeginMenu("Run")) {
    if (ImGui::MenuItem("Re-run all heads", "F5", false, session_.entryInfo() != nullptr)) session_.rerun();
    if (ImGui::MenuItem("Cancel", "Esc", false, session_.busy())) session_.cancel();
    ImGui::Separator();
    if (ImGui::MenuItem("Auto-tune selected head", "Ctrl+T")) session_.autoTune(TuneScope::SelectedHead);
    if (ImGui::MenuItem("Auto-tune entry", "Ctrl+Shift+T")) session_.autoTune(TuneScope::Entry);
    if (ImGui::MenuItem("Auto-tune all entries")) session_.autoTune(TuneScope::AllEntries);
    ImGui::Separator();
    if (ImGui::MenuItem("Profile current settings", "Ctrl+P")) session_.profile(ui_.profileRuns);
    ImGui::EndMenu();
  }
  if (ImGui::BeginMenu("View")) {
    if (ImGui::MenuItem("Larger text", "Ctrl++")) pendingFontScale_ = settings_.fontScale * 1.1f;
    if (ImGui::MenuItem("Smaller text", "Ctrl+-")) pendingFontScale_ = settings_.fontScale / 1.1f;
    if (ImGui::MenuItem("Reset layout")) {
      AppSettings d;
      settings_.leftWidth = d.leftWidth;
      settings_.rightWidth = d.rightWidth;
      settings_.gridHeight = d.gridHeight;
      settings_.leftTopHeight = d.leftTopHeight;
      settings_.rightTopHeight = d.rightTopHeight;
    }
    ImGui::EndMenu();
  }
  if (ImGui::BeginMenu("Help")) {
    if (ImGui::MenuItem("Keyboard shortcuts")) showShortcuts_ = true;
    if (ImGui::MenuItem("About")) showAbout_ = true;
    ImGui::EndMenu();
  }
  ImGui::EndMainMenuBar();
}

void App::drawLayout() {
  ImGuiViewport* vp = ImGui::GetMainViewport();
  float statusH = ImGui::GetFrameHeight() + 4;
  ImGui::SetNextWindowPos(vp->WorkPos);
  ImGui::SetNextWindowSize(ImVec2(vp->WorkSize.x, vp->WorkSize.y - statusH));
  ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(4, 4));
  ImGui::PushStyleVar(ImGuiStyleVar_ItemSpacing, ImVec2(0, 0));
  ImGuiWindowFlags hostFlags = ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoSavedSettings |
                               ImGuiWindowFlags_NoBringToFrontOnFocus | ImGuiWindowFlags_NoScrollWithMouse;
  ImGui::Begin("##host", nullptr, hostFlags);
  ImGui::PopStyleVar(2);
  ImVec2 avail = ImGui::GetContentRegionAvail();
  const float gap = 5;
  float W = avail.x, H = avail.y;
  float leftW = std::floor(W * settings_.leftWidth), rightW = std::floor(W * settings_.rightWidth);
  float centerW = W - leftW - rightW - 2 * gap;
  auto panel = [&](int view, const char* id, ImVec2 size) {
    ImGui::PushStyleVar(ImGuiStyleVar_ItemSpacing, ImVec2(6, 4));
    ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(6, 4));
    ImGui::BeginChild(id, size, false, ImGuiWindowFlags_AlwaysUseWindowPadding);
    views_[view]->draw(session_, ui_);
    ImGui::EndChild();
    ImGui::PopStyleVar(2);
  };
  auto column = [&](const char* id, float w, float* topRatio, int top, int bottom, const char* topId, const char* botId) {
    ImGui::BeginGroup();
    float topH = std::floor((H - gap) * *topRatio);
    panel(top, topId, ImVec2(w, topH));
    splitter(id, false, gap, w, H, topRatio, 0.12f, 0.88f);
    panel(bottom, botId, ImVec2(w, H - topH - gap));
    ImGui::EndGroup();
  };
  column("##lsplit", leftW, &settings_.leftTopHeight, 0, 1, "##capture", "##controls");
  ImGui::SameLine(0, 0);
  splitter("##lv", true, gap, H, W, &settings_.leftWidth, 0.12f, 0.4f);
  ImGui::SameLine(0, 0);
  column("##csplit", centerW, &settings_.gridHeight, 2, 3, "##grid", "##detail");
  ImGui::SameLine(0, 0);
  splitter("##rv", true, gap, H, W, &settings_.rightWidth, 0.15f, 0.45f, true);
  ImGui::SameLine(0, 0);
  column("##rsplit", rightW, &settings_.rightTopHeight, 4, 5, "##summary", "##timings");
  ImGui::End();
  drawStatusBar(statusH);
}

void App::drawStatusBar(float height) {
  ImGuiViewport* vp = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(ImVec2(vp->WorkPos.x, vp->WorkPos.y + vp->WorkSize.y - height));
  ImGui::SetNextWindowSize(ImVec2(vp->WorkSize.x, height));
  ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(8, 2));
  ImGui::PushStyleColor(ImGuiCol_WindowBg, ImVec4(0.13f, 0.14f, 0.17f, 1));
  ImGui::Begin("##status", nullptr,
               ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoSavedSettings |
                   ImGuiWindowFlags_NoFocusOnAppearing);
  ImGui::AlignTextToFramePadding();
  ImVec4 engineCol = session_.engineIsGpu() ? ImVec4(0.46f, 0.85f, 0.45f, 1) : ImVec4(0.55f, 0.75f, 0.95f, 1);
  ImGui::TextColored(engineCol, "%s %s", session_.engineIsGpu() ? "GPU" : "CPU", session_.engineName().c_str());
  if (!session_.engineMessage().empty()) itemTooltip(session_.engineMessage().c_str());
  ImGui::SameLine();
  ImGui::TextDisabled("|");
  ImGui::SameLine();
  std::string act = session_.activity();
  if (!act.empty()) {
    static const char spin[] = "|/-\\";
    int k = static_cast<int>(ImGui::GetTime() * 8) % 4;
    ImGui::TextColored(ImVec4(0.93f, 0.67f, 0.24f, 1), "%c %s", spin[k], act.c_str());
  } else {
    ImGui::TextDisabled("idle");
  }
  ImGui::SameLine();
  ImGui::TextDisabled("|");
  ImGui::SameLine();
  if (session_.lastRunHeads() > 0) {
    ImGui::Text("last re-run %.1f ms (%lld heads)", session_.lastRunMs(), (long long)session_.lastRunHeads());
  } else {
    ImGui::TextDisabled("no run yet");
  }
  ImGui::SameLine();
  ImGui::TextDisabled("|");
  ImGui::SameLine();
  ImGui::Text("RSS %s", formatBytes(processRssBytes()).c_str());
  if (session_.gpuMemTotal() > 0) {
    ImGui::SameLine();
    ImGui::Text("  GPU %s / %s", formatBytes(session_.gpuMemUsed()).c_str(), formatBytes(session_.gpuMemTotal()).c_str());
  }
  if (!automation_) {
    ImGui::SameLine();
    ImGui::TextDisabled("|  %.1f fps", ImGui::GetIO().Framerate);
  }
  const auto& notices = session_.notices();
  const auto& warnings = session_.warnings();
  std::string tail = !notices.empty() ? notices.back() : (!warnings.empty() ? warnings.back() : "");
  if (!tail.empty()) {
    float w = ImGui::CalcTextSize(tail.c_str()).x;
    float x = ImGui::GetWindowWidth() - w - 12;
    ImGui::SameLine(std::max(x, ImGui::GetCursorPosX() + 20));
    ImGui::TextDisabled("%s", tail.c_str());
  }
  ImGui::End();
  ImGui::PopStyleColor();
  ImGui::PopStyleVar();
}

void App::drawDialogs() {
  std::string chosen;
  if (browser_.draw(&chosen)) {
    const std::string& p = browser_.purpose();
    settings_.lastDirectory = fs::path(chosen).parent_path().string();
    if (p == "open") {
      openFile(chosen);
    } else if (p == "import_params") {
      session_.importParams(chosen);
    } else if (p == "masks") {
      session_.exportMasks(chosen);
    } else if (p == "params") {
      session_.exportParams(chosen);
    } else if (p == "report_json") {
      session_.exportReportJson(chosen);
    } else if (p == "report_csv") {
      session_.exportReportCsv(chosen);
    } else if (p == "report_md") {
      session_.exportReportMarkdown(chosen);
    }
  }
  if (session_.hasError() && !browser_.isOpen()) {
    if (!ImGui::IsPopupOpen("Error")) ImGui::OpenPopup("Error");
    ImGuiViewport* vp = ImGui::GetMainViewport();
    ImGui::SetNextWindowPos(ImVec2(vp->WorkPos.x + vp->WorkSize.x * 0.5f, vp->WorkPos.y + vp->WorkSize.y * 0.4f),
                            ImGuiCond_Appearing, ImVec2(0.5f, 0.5f));
    if (ImGui::BeginPopupModal("Error", nullptr, ImGuiWindowFlags_AlwaysAutoResize)) {
      ImGui::PushTextWrapPos(ImGui::GetFontSize() * 40);
      ImGui::TextColored(ImVec4(1, 0.5f, 0.5f, 1), "Something went wrong");
      ImGui::TextUnformatted(session_.frontError().c_str());
      ImGui::TextDisabled("Sparge Studio keeps what it had loaded.");
      ImGui::PopTextWrapPos();
      if (ImGui::Button("OK", ImVec2(120, 0)) || ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Enter))) {
        session_.popError();
        ImGui::CloseCurrentPopup();
      }
      ImGui::EndPopup();
    }
  }
  if (showShortcuts_) {
    ImGui::Begin("Keyboard shortcuts", &showShortcuts_, ImGuiWindowFlags_AlwaysAutoResize);
    const char* rows[][2] = {{"Ctrl+O", "open a capture"}, {"Ctrl+E", "export masks (.h5)"},
                             {"Ctrl+Shift+E", "export Markdown report"}, {"Ctrl+Shift+S", "export parameters"},
                             {"F5", "re-run all heads"}, {"Esc", "cancel the running job"},
                             {"Ctrl+T / Ctrl+Shift+T", "auto-tune head / entry"}, {"Ctrl+P", "profile"},
                             {"Arrows", "previous / next head"}, {"F12", "screenshot"},
                             {"Ctrl++ / Ctrl+-", "text size"}, {"Ctrl+Q", "quit"},
                             {"wheel / drag / double-click", "zoom / pan / reset the head panels"}};
    for (auto& r : rows) {
      ImGui::TextUnformatted(r[0]);
      ImGui::SameLine(ImGui::GetFontSize() * 14);
      ImGui::TextDisabled("%s", r[1]);
    }
    ImGui::End();
  }
  if (showAbout_) {
    ImGui::Begin("About Sparge Studio", &showAbout_, ImGuiWindowFlags_AlwaysAutoResize);
    ImGui::Text("Sparge Studio - SpargeAttn masks, errors and timings per head");
    ImGui::TextDisabled("Dear ImGui %s, GLFW %s", IMGUI_VERSION, glfwGetVersionString());
    ImGui::TextDisabled("%s", platform_.describe().c_str());
    ImGui::TextDisabled("Fonts: DejaVu (assets/fonts/LICENSE)");
    ImGui::End();
  }
}

void App::frame() {
  if (pendingFontScale_ > 0) {
    settings_.fontScale = std::clamp(pendingFontScale_, 0.5f, 3.0f);
    pendingFontScale_ = 0;
    ImGui_ImplOpenGL3_DestroyFontsTexture();
    setupStyleAndFonts(baseScale_);
    ImGui_ImplOpenGL3_CreateFontsTexture();
  }
  session_.poll();
  platform_.newFrame();
  ImGui::NewFrame();
  if (!automation_) handleShortcuts();
  drawMenu();
  drawLayout();
  drawDialogs();
  ImGui::Render();
  int w = 0, h = 0;
  platform_.framebufferSize(&w, &h);
  glViewport(0, 0, w, h);
  glClearColor(0.07f, 0.075f, 0.085f, 1);
  glClear(GL_COLOR_BUFFER_BIT);
  ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
}

void App::afterRender() {
  if (screenshotPath_.empty()) return;
  int w = 0, h = 0;
  platform_.framebufferSize(&w, &h);
  std::string path = screenshotPath_;
  screenshotPath_.clear();
  try {
    writeFramebufferPng(path, w, h);
    session_.addNotice("screenshot written to " + path);
  } catch (const std::exception& e) {
    session_.pushError(e.what());
  }
}

}  // namespace sparge::gui

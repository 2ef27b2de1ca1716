#include "app.h"

#include <imgui.h>
#include <imgui_impl_opengl3.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>

#include "sparge/core/data_dir.h"
#include "views/registry.h"
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

namespace {
// "kernels:centre-bottom" -> ("kernels", panel index); no colon -> (id, -1); a bad panel name -> -2.
std::pair<std::string, int> splitViewArgument(const std::string& arg) {
  auto colon = arg.find(':');
  if (colon == std::string::npos) return {arg, -1};
  int panel = PanelLayout::panelByName(arg.substr(colon + 1));
  return {arg.substr(0, colon), panel < 0 ? -2 : panel};
}
}  // namespace

bool App::isViewId(const std::string& idAndPanel) {
  auto [id, panel] = splitViewArgument(idAndPanel);
  if (panel == -2) return false;
  return isRegisteredView(id);
}

bool App::showView(const std::string& idAndPanel) {
  auto [id, panel] = splitViewArgument(idAndPanel);
  if (panel >= 0) panels_.move(id, panel);
  return panel != -2 && panels_.show(id);
}

bool App::viewVisible(const std::string& idAndPanel) const {
  return panels_.inFront(splitViewArgument(idAndPanel).first);
}

App::App(Session& session, AppSettings& settings, Platform& platform, bool automation)
    : session_(session),
      settings_(settings),
      platform_(platform),
      automation_(automation),
      views_(makeViews()),
      panels_(views_, settings_.layout) {
  ui_.screenshotMode = automation;
  ui_.profileRuns = settings_.profileRuns;
  ui_.profileWarmupMs = settings_.profileWarmupMs;
  session_.setWake([&platform] { platform.wake(); });
  platform_.onDrop = [this](const std::vector<std::string>& files) {
    for (const auto& f : files) {
      if (fs::path(f).extension() == ".h5" || fs::path(f).extension() == ".hdf5") {
        openFile(f);
        return;
      }
    }
    if (!files.empty()) session_.messages().pushError("Dropped file is not an .h5 capture: " + files.front());
  };
}

App::~App() {
  session_.setWake({});
}

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
  style.TabRounding = 2;
  style.WindowPadding = ImVec2(6, 6);
  style.FramePadding = ImVec2(5, 3);
  style.ItemSpacing = ImVec2(6, 4);
  style.CellPadding = ImVec2(4, 2);
  style.WindowBorderSize = 0;
  style.ChildBorderSize = 0;
  ImVec4* c = style.Colors;
  c[ImGuiCol_WindowBg] = ImVec4(0.085f, 0.09f, 0.105f, 1);
  c[ImGuiCol_ChildBg] = ImVec4(0, 0, 0, 0);  // the frame is cleared to colors::kPanelBg instead
  c[ImGuiCol_PopupBg] = ImVec4(0.09f, 0.095f, 0.11f, 0.97f);
  c[ImGuiCol_FrameBg] = ImVec4(0.17f, 0.18f, 0.21f, 1);
  c[ImGuiCol_Header] = ImVec4(0.22f, 0.36f, 0.52f, 0.8f);
  c[ImGuiCol_TableHeaderBg] = ImVec4(0.15f, 0.16f, 0.19f, 1);
  c[ImGuiCol_TableRowBgAlt] = ImVec4(1, 1, 1, 0.025f);
  c[ImGuiCol_MenuBarBg] = ImVec4(0.13f, 0.14f, 0.17f, 1);
  c[ImGuiCol_Tab] = ImVec4(0.15f, 0.16f, 0.19f, 1);
  c[ImGuiCol_TabActive] = ImVec4(0.22f, 0.36f, 0.52f, 1);
  c[ImGuiCol_TabHovered] = ImVec4(0.28f, 0.45f, 0.64f, 1);
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
  std::string stem = session_.capture().entryName.empty() ? "sparge" : session_.capture().entryName;
  browser_.open(title, FileBrowser::Mode::Save, defaultDir(), {ext}, stem + suffix + ext);
  browser_.setPurpose(purpose);
}

void App::screenshotNow() {
  char name[64];
  std::time_t t = std::time(nullptr);
  std::strftime(name, sizeof name, "sparge-studio-%Y%m%d-%H%M%S.png", std::localtime(&t));
  screenshotPath_ = (fs::path(defaultDir()) / name).string();
}

bool App::enabled(CommandId id) const {
  bool loaded = session_.capture().info() != nullptr;
  switch (id) {
    case CommandId::OpenSample:
      return core::findDataFile(core::kSampleCaptureFile).has_value();
    case CommandId::ExportMasks:
    case CommandId::ExportParams:
    case CommandId::ExportReportJson:
    case CommandId::ExportReportCsv:
    case CommandId::ExportReportMd:
      return session_.runs().result() != nullptr;
    case CommandId::Cancel:
      return session_.busy();
    case CommandId::PresetStored:
      return session_.presetAvailable(core::Preset::Tuned);
    case CommandId::Rerun:
    case CommandId::TuneHead:
    case CommandId::TuneEntry:
    case CommandId::TuneAll:
    case CommandId::Profile:
    case CommandId::SweepHead:
    case CommandId::SweepAll:
    case CommandId::CompareMethods:
    case CommandId::PresetCdf:
    case CommandId::PresetTopk:
    case CommandId::PresetFilterOff:
      return loaded;
    default:
      return true;
  }
}

void App::run(CommandId id) {
  if (!enabled(id)) return;
  switch (id) {
    case CommandId::OpenCapture:
      browser_.open("Open capture", FileBrowser::Mode::Open, defaultDir(), {".h5", ".hdf5"});
      browser_.setPurpose("open");
      break;
    case CommandId::OpenSample:
      if (auto sample = core::findDataFile(core::kSampleCaptureFile)) session_.openCapture(sample->string());
      break;
    case CommandId::LoadParams:
      browser_.open("Load parameters", FileBrowser::Mode::Open, defaultDir(), {".json"});
      browser_.setPurpose("import_params");
      break;
    case CommandId::LoadEval:
      browser_.open("Open evaluation report", FileBrowser::Mode::Open, defaultDir(), {".json"});
      browser_.setPurpose("load_eval");
      break;
    case CommandId::ExportMasks:
      startExport("export", "Export masks (.h5)", ".h5", "_masks");
      break;
    case CommandId::ExportParams:
      startExport("export_params", "Export parameters (.json)", ".json", "_params");
      break;
    case CommandId::ExportReportJson:
      startExport("export", "Export report (.json)", ".json", "_report");
      break;
    case CommandId::ExportReportCsv:
      startExport("export", "Export report (.csv)", ".csv", "_report");
      break;
    case CommandId::ExportReportMd:
      startExport("export", "Export report (Markdown + PNG)", ".md", "_report");
      break;
    case CommandId::Screenshot:
      screenshotNow();
      break;
    case CommandId::Quit:
      platform_.requestClose();
      break;
    default:
      runSessionCommand(id);
      break;
  }
}

// The commands that run, tune, profile or sweep the session, or apply a preset.
void App::runSessionCommand(CommandId id) {
  switch (id) {
    case CommandId::Rerun:
      session_.runs().rerun();
      break;
    case CommandId::Cancel:
      session_.cancel();
      break;
    case CommandId::TuneHead:
      session_.tuning().autoTune(TuneScope::SelectedHead);
      break;
    case CommandId::TuneEntry:
      session_.tuning().autoTune(TuneScope::Entry);
      break;
    case CommandId::TuneAll:
      session_.tuning().autoTune(TuneScope::AllEntries);
      break;
    case CommandId::Profile:
      session_.profiling().profile(ui_.profileRuns, ui_.profileWarmupMs);
      break;
    case CommandId::SweepHead:
      panels_.show("curves");
      session_.curves().sweep(SweepScope::SelectedHead);
      break;
    case CommandId::SweepAll:
      panels_.show("curves");
      session_.curves().sweep(SweepScope::AllHeads);
      break;
    case CommandId::CompareMethods:
      panels_.show("overview");
      session_.methodCompare().compareAll();
      break;
    case CommandId::PresetCdf:
      session_.applyPreset(core::Preset::CdfDefaults);
      break;
    case CommandId::PresetTopk:
      session_.applyPreset(core::Preset::TopkDefaults);
      break;
    case CommandId::PresetFilterOff:
      session_.applyPreset(core::Preset::FilterOff);
      break;
    case CommandId::PresetStored:
      session_.applyPreset(core::Preset::Tuned);
      break;
    default:
      runViewCommand(id);
      break;
  }
}

// The commands that move between heads and views, change the text size or the layout, or open help.
void App::runViewCommand(CommandId id) {
  const auto selected = session_.capture().selected;
  switch (id) {
    case CommandId::NextHead:
      session_.selectHead({selected.batch, selected.head + 1});
      break;
    case CommandId::PreviousHead:
      session_.selectHead({selected.batch, std::max<int64_t>(0, selected.head - 1)});
      break;
    case CommandId::ShowOverview:
      panels_.show("overview");
      break;
    case CommandId::ShowCurves:
      panels_.show("curves");
      break;
    case CommandId::ShowKernels:
      panels_.show("kernels");
      break;
    case CommandId::LargerText:
      pendingFontScale_ = settings_.fontScale * 1.1f;
      break;
    case CommandId::SmallerText:
      pendingFontScale_ = settings_.fontScale / 1.1f;
      break;
    case CommandId::ResetLayout:
      panels_.reset();
      break;
    case CommandId::ShortcutHelp:
      showShortcuts_ = true;
      break;
    case CommandId::About:
      showAbout_ = true;
      break;
    default:
      break;  // automation-only commands (they need an argument)
  }
}

void App::drawDialogs() {
  std::string chosen;
  if (browser_.draw(&chosen)) {
    const std::string& p = browser_.purpose();
    settings_.lastDirectory = fs::path(chosen).parent_path().string();
    if (p == "open") {
      openFile(chosen);
    } else if (p == "import_params") {
      session_.files().importParams(chosen);
    } else if (p == "load_eval") {
      session_.files().loadEval(chosen);
    } else if (p == "export_params") {
      session_.files().exportParams(chosen);
    } else if (p == "export" && fs::path(chosen).extension() == ".h5") {
      session_.files().exportMasks(chosen);
    } else if (p == "export") {
      session_.files().exportReport(chosen);
    }
  }
  drawErrorModal();
  drawShortcutHelp();
  drawAbout();
}

void App::drawErrorModal() {
  Messages& m = session_.messages();
  if (!m.hasError() || browser_.isOpen()) return;
  if (!ImGui::IsPopupOpen("Error")) ImGui::OpenPopup("Error");
  ImGuiViewport* vp = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(
      ImVec2(vp->WorkPos.x + vp->WorkSize.x * 0.5f, vp->WorkPos.y + vp->WorkSize.y * 0.4f),
      ImGuiCond_Appearing, ImVec2(0.5f, 0.5f));
  if (ImGui::BeginPopupModal("Error", nullptr, ImGuiWindowFlags_AlwaysAutoResize)) {
    ImGui::PushTextWrapPos(ImGui::GetFontSize() * 40);
    ImGui::TextColored(ImVec4(1, 0.5f, 0.5f, 1), "Something went wrong");
    ImGui::TextUnformatted(m.frontError().c_str());
    ImGui::TextDisabled("Sparge Studio keeps what it had loaded.");
    ImGui::PopTextWrapPos();
    if (ImGui::Button("OK", ImVec2(120, 0)) || ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Enter))) {
      m.popError();
      ImGui::CloseCurrentPopup();
    }
    ImGui::EndPopup();
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
  // The overview fills itself only while someone can see it.
  session_.overview().setActive(panels_.inFront("overview"));
  using Clock = std::chrono::steady_clock;
  auto lap = [last = Clock::now()]() mutable {
    const auto now = Clock::now();
    const double ms = std::chrono::duration<double, std::milli>(now - last).count();
    last = now;
    return ms;
  };
  FrameTimes t;
  t.applied = session_.poll();
  t.pollMs = lap();
  platform_.newFrame();
  ImGui::NewFrame();
  const bool input = sawInput();
  if (!automation_) handleShortcuts();
  drawMenu();
  ImGuiViewport* vp = ImGui::GetMainViewport();
  float statusH = ImGui::GetFrameHeight() + 4;
  ImGui::SetNextWindowPos(vp->WorkPos);
  ImGui::SetNextWindowSize(ImVec2(vp->WorkSize.x, vp->WorkSize.y - statusH));
  ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(4, 4));
  ImGui::PushStyleVar(ImGuiStyleVar_ItemSpacing, ImVec2(0, 0));
  ImGui::Begin("##host", nullptr,
               ImGuiWindowFlags_NoBackground | ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove |
                   ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoBringToFrontOnFocus |
                   ImGuiWindowFlags_NoScrollWithMouse);
  ImGui::PopStyleVar(2);
  t.otherMs = lap();
  panels_.draw(session_, ui_);
  t.viewsMs = lap();
  drawHostBackground();
  ImGui::End();
  drawStatusBar(statusH);
  drawDialogs();
  t.otherMs += lap();
  ImGui::Render();
  t.renderMs = lap();
  const uint64_t config = session_.runs().configGeneration();
  pacing_.runScheduled = config != seenConfig_;
  seenConfig_ = config;
  t.deferred = deferFrames_ && screenshotPath_.empty() &&
               pacer_.deferFrame(pacing_.runScheduled && !t.applied, session_.runs().lastRun().wallMs * 1e-3);
  if (!t.deferred) submit(t);
  t.submitMs = lap();
  frameTimes_ = t;
  pacing_.activity =
      input || t.applied || pacing_.runScheduled || pendingFontScale_ > 0 || !screenshotPath_.empty();
}

// Hands the frame's draw lists to GL, and notes how much they hold.
void App::submit(FrameTimes& t) {
  int w = 0, h = 0;
  platform_.framebufferSize(&w, &h);
  glViewport(0, 0, w, h);
  glClearColor(colors::kPanelBg.x, colors::kPanelBg.y, colors::kPanelBg.z, 1);
  glClear(GL_COLOR_BUFFER_BIT);
  ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
  const ImDrawData* dd = ImGui::GetDrawData();
  t.vertices = dd->TotalVtxCount;
  t.indices = dd->TotalIdxCount;
  for (int i = 0; i < dd->CmdListsCount; ++i) t.drawCalls += dd->CmdLists[i]->CmdBuffer.Size;
}

// The host window draws no background under the panels (the frame is cleared to theirs): only where they
// and the splitters leave it uncovered, as its background would show there.
void App::drawHostBackground() {
  const ImVec2 p = ImGui::GetWindowPos(), size = ImGui::GetWindowSize();
  const ImU32 bg = ImGui::GetColorU32(ImGuiCol_WindowBg);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->PushClipRectFullScreen();
  for (const Box& b : uncoveredParts({p.x, p.y, p.x + size.x, p.y + size.y}, panels_.filled()))
    dl->AddRectFilled(ImVec2(b.x0, b.y0), ImVec2(b.x1, b.y1), bg);
  dl->PopClipRect();
}

bool App::sawInput() {
  const ImGuiIO& io = ImGui::GetIO();
  bool any = io.MousePos.x != lastMouse_.x || io.MousePos.y != lastMouse_.y || io.MouseWheel != 0 ||
             io.MouseWheelH != 0 || io.InputQueueCharacters.Size > 0 || io.DisplaySize.x != lastDisplay_.x ||
             io.DisplaySize.y != lastDisplay_.y;
  bool held = false;
  for (int b = 0; b < IM_ARRAYSIZE(io.MouseDown); ++b) {
    any = any || io.MouseClicked[b] || io.MouseReleased[b];
    held = held || io.MouseDown[b];
  }
  for (int k = 0; k < IM_ARRAYSIZE(io.KeysDown); ++k) {
    any = any || io.KeysDownDuration[k] == 0.0f || (io.KeysDownDurationPrev[k] >= 0.0f && !io.KeysDown[k]);
    held = held || io.KeysDown[k];
  }
  lastMouse_ = io.MousePos;
  lastDisplay_ = io.DisplaySize;
  pacing_.held = held;
  pacing_.textInput = io.WantTextInput;
  return any;
}

void App::waitForWork() {
  pacing_.resultsWaiting = session_.hasResults();
  pacing_.busy = session_.busy();
  pacing_.runInFlight = session_.runningJob() == JobKind::Run || session_.runs().owesRuns();
  const double wait = pacer_.next(pacing_);
  pacing_.activity = false;
  if (wait > 0) platform_.waitEvents(wait);
}

void App::afterRender() {
  if (screenshotPath_.empty()) return;
  int w = 0, h = 0;
  platform_.framebufferSize(&w, &h);
  std::string path = screenshotPath_;
  screenshotPath_.clear();
  try {
    writeFramebufferPng(path, w, h);
    session_.messages().addNotice("screenshot written to " + path);
  } catch (const std::exception& e) {
    session_.messages().pushError(e.what());
  }
}

}  // namespace sparge::gui

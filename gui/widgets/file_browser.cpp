#include "file_browser.h"

#include <imgui.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "ui_util.h"

namespace fs = std::filesystem;

namespace sparge::gui {

void FileBrowser::open(const std::string& title, Mode mode, const std::string& directory,
                       std::vector<std::string> extensions, const std::string& defaultName) {
  title_ = title;
  mode_ = mode;
  std::error_code ec;
  dir_ = directory.empty() || !fs::is_directory(directory, ec) ? fs::current_path(ec).string() : directory;
  extensions_ = std::move(extensions);
  std::snprintf(nameBuf_, sizeof nameBuf_, "%s", defaultName.c_str());
  selected_ = -1;
  visible_ = true;
  justOpened_ = true;
  focusName_ = true;
  refresh();
}

void FileBrowser::refresh() {
  items_.clear();
  error_.clear();
  std::snprintf(dirBuf_, sizeof dirBuf_, "%s", dir_.c_str());
  std::error_code ec;
  for (fs::directory_iterator it(dir_, fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end; it.increment(ec)) {
    Item item;
    item.name = it->path().filename().string();
    if (item.name.empty() || item.name[0] == '.') continue;
    std::error_code e2;
    item.isDir = it->is_directory(e2);
    if (!item.isDir) {
      if (!extensions_.empty()) {
        std::string ext = it->path().extension().string();
        if (std::find(extensions_.begin(), extensions_.end(), ext) == extensions_.end()) continue;
      }
      item.size = static_cast<long long>(it->file_size(e2));
    }
    items_.push_back(std::move(item));
  }
  if (ec) error_ = ec.message();
  std::sort(items_.begin(), items_.end(),
            [](const Item& a, const Item& b) { return a.isDir != b.isDir ? a.isDir : a.name < b.name; });
}

// The folder line: Up, Home and the folder's path, which Enter opens.
void FileBrowser::drawFolderBar() {
  if (ImGui::Button("Up")) {
    dir_ = fs::path(dir_).parent_path().string();
    if (dir_.empty()) dir_.assign(1, '/');  // not = "/": GCC 12 warns falsely (-Wrestrict)
    refresh();
  }
  ImGui::SameLine();
  if (ImGui::Button("Home")) {
    if (const char* h = std::getenv("HOME")) dir_ = h;
    refresh();
  }
  ImGui::SameLine();
  ImGui::SetNextItemWidth(-1);
  if (ImGui::InputText("##dir", dirBuf_, sizeof dirBuf_, ImGuiInputTextFlags_EnterReturnsTrue)) {
    std::error_code ec;
    if (fs::is_directory(dirBuf_, ec)) {
      dir_ = dirBuf_;
      refresh();
    } else {
      error_ = std::string("not a folder: ") + dirBuf_;
    }
  }
}

// The folder's listing above a footer `footer` high: a click selects, a double click opens a folder or
// chooses a file (then `*chosen` is set and it returns true).
bool FileBrowser::drawListing(float footer, std::string* chosen) {
  bool done = false;
  ImGui::PushStyleColor(ImGuiCol_ChildBg, colors::kPanelBg);  // the table's scroll child over the popup
  const bool open = ImGui::BeginTable(
      "files", 2, ImGuiTableFlags_ScrollY | ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersOuter,
      ImVec2(0, -footer));
  ImGui::PopStyleColor();
  if (open) {
    ImGui::TableSetupScrollFreeze(0, 1);
    ImGui::TableSetupColumn("Name", ImGuiTableColumnFlags_WidthStretch);
    ImGui::TableSetupColumn("Size", ImGuiTableColumnFlags_WidthFixed, ImGui::CalcTextSize("000.0 MiB").x);
    ImGui::TableHeadersRow();
    for (int i = 0; i < static_cast<int>(items_.size()); ++i) {
      const Item& item = items_[i];
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      std::string label = (item.isDir ? "[dir] " : "") + item.name;
      if (ImGui::Selectable(label.c_str(), selected_ == i,
                            ImGuiSelectableFlags_SpanAllColumns | ImGuiSelectableFlags_AllowDoubleClick)) {
        selected_ = i;
        if (item.isDir) {
          if (ImGui::IsMouseDoubleClicked(0)) {
            dir_ = (fs::path(dir_) / item.name).string();
            refresh();
            selected_ = -1;
            break;
          }
        } else {
          std::snprintf(nameBuf_, sizeof nameBuf_, "%s", item.name.c_str());
          if (ImGui::IsMouseDoubleClicked(0)) {
            *chosen = (fs::path(dir_) / item.name).string();
            done = true;
          }
        }
      }
      ImGui::TableNextColumn();
      if (!item.isDir) ImGui::TextDisabled("%s", formatBytes(item.size).c_str());
    }
    ImGui::EndTable();
  }
  return done;
}

bool FileBrowser::draw(std::string* chosen) {
  if (!visible_) return false;
  if (justOpened_) {
    ImGui::OpenPopup(title_.c_str());
    justOpened_ = false;
  }
  bool done = false;
  ImGuiViewport* vp = ImGui::GetMainViewport();
  ImGui::SetNextWindowSize(ImVec2(vp->WorkSize.x * 0.55f, vp->WorkSize.y * 0.6f), ImGuiCond_Appearing);
  ImGui::SetNextWindowPos(
      ImVec2(vp->WorkPos.x + vp->WorkSize.x * 0.5f, vp->WorkPos.y + vp->WorkSize.y * 0.5f),
      ImGuiCond_Appearing, ImVec2(0.5f, 0.5f));
  bool keepOpen = true;
  if (ImGui::BeginPopupModal(title_.c_str(), &keepOpen)) {
    drawFolderBar();
    float footer =
        ImGui::GetFrameHeightWithSpacing() * 2 + (error_.empty() ? 0 : ImGui::GetTextLineHeightWithSpacing());
    done = drawListing(footer, chosen);
    if (!error_.empty()) ImGui::TextColored(ImVec4(0.9f, 0.4f, 0.4f, 1), "%s", error_.c_str());
    ImGui::SetNextItemWidth(-ImGui::CalcTextSize("Cancel Open/Save").x - ImGui::GetStyle().ItemSpacing.x * 4);
    if (focusName_) {
      // Keyboard users (Ctrl+E, then Enter) confirm the proposed name without reaching for the mouse.
      ImGui::SetKeyboardFocusHere();
      focusName_ = false;
    }
    bool enter = ImGui::InputText("##name", nameBuf_, sizeof nameBuf_, ImGuiInputTextFlags_EnterReturnsTrue);
    ImGui::SameLine();
    bool ok = ImGui::Button(mode_ == Mode::Open ? "Open" : "Save");
    ImGui::SameLine();
    if (ImGui::Button("Cancel") || ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape))) keepOpen = false;
    if ((ok || enter) && nameBuf_[0]) {
      fs::path p(nameBuf_);
      *chosen = p.is_absolute() ? p.string() : (fs::path(dir_) / p).string();
      done = true;
    }
    if (done || !keepOpen) {
      ImGui::CloseCurrentPopup();
      visible_ = false;
    }
    ImGui::EndPopup();
  } else {
    visible_ = false;
  }
  return done;
}

}  // namespace sparge::gui

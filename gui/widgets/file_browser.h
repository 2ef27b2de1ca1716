// A small modal file browser in ImGui (no file-dialog library is packaged): open or save one file.
#pragma once

#include <string>
#include <vector>

namespace sparge::gui {

class FileBrowser {
 public:
  enum class Mode { Open, Save };

  // Opens the modal on the next draw(). `extensions` filters the listing (".h5", ".json"); empty shows all.
  void open(const std::string& title, Mode mode, const std::string& directory,
            std::vector<std::string> extensions, const std::string& defaultName = {});
  bool isOpen() const { return visible_; }
  // Draws the modal when open. Returns true once, on the frame the user confirms; `*chosen` gets the path.
  bool draw(std::string* chosen);
  const std::string& directory() const { return dir_; }
  // What the pending dialog is for (the caller dispatches on it after draw() returns true).
  const std::string& purpose() const { return purpose_; }
  void setPurpose(std::string p) { purpose_ = std::move(p); }

 private:
  struct Item {
    std::string name;
    bool isDir = false;
    long long size = 0;
  };
  void refresh();
  void drawFolderBar();
  bool drawListing(float footer, std::string* chosen);  // true when a file was chosen

  std::string title_;
  std::string purpose_;
  Mode mode_ = Mode::Open;
  std::string dir_;
  std::vector<std::string> extensions_;
  std::vector<Item> items_;
  std::string error_;
  char nameBuf_[512] = {};
  char dirBuf_[1024] = {};
  int selected_ = -1;
  bool visible_ = false;
  bool justOpened_ = false;
  bool focusName_ = false;
};

}  // namespace sparge::gui

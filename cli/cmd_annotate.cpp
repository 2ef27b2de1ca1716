// `sparge annotate FILE --entry E --grid T,H,W`: records the token grid of image / video entries in an
// existing capture (the one command that modifies a capture).
#include <cstdio>

#include "commands.h"
#include "sparge/core/annotate.h"
#include "sparge/core/error.h"
#include "sparge/core/names.h"

namespace sparge::cli {

void registerAnnotate(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand(
      "annotate", "Record the token grid (T x H x W) of image / video entries in a capture, in place");
  struct Opts {
    std::string file;
    std::vector<std::string> entries;
    std::string grid;
    int64_t offset = 0;
    std::string tokens = "qkv";
    bool clear = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("file", o->file, "Capture file (.h5), modified in place")->required();
  cmd->add_option("--entry", o->entries, "Entry to annotate (repeatable)")->required();
  auto* grid = cmd->add_option(
      "--grid", o->grid, "T,H,W: frames, rows and columns of the token grid after patching (T = 1: image)");
  cmd->add_option("--grid-offset", o->offset,
                  "Index of the first grid token (text / prompt tokens before it)")
      ->capture_default_str();
  cmd->add_option(
         "--grid-tokens", o->tokens,
         "Which sequences lie on the grid: qkv (self-attention), q (queries only), kv (keys and values only)")
      ->capture_default_str();
  auto* clear = cmd->add_flag("--clear-grid", o->clear, "Remove the grid attributes instead");
  grid->excludes(clear);
  cmd->callback([&action, o, cmd] {
    action = [o, cmd]() -> int {
      if (o->grid.empty() && !o->clear) {
        std::fprintf(stderr, "sparge annotate: give --grid T,H,W (or --clear-grid)\n");
        return 2;
      }
      std::optional<core::TokenGrid> g;
      if (!o->clear) {
        g = core::parseGridShape(o->grid, "--grid");
        g->offset = o->offset;
        try {
          g->tokens = core::parseGridTokens(o->tokens);
        } catch (const Error& e) {
          throw Error("--grid-tokens", e.problem());
        }
      } else if (cmd->count("--grid-offset") || cmd->count("--grid-tokens")) {
        throw Error("--clear-grid", "takes no --grid-offset or --grid-tokens");
      }
      for (const std::string& e : o->entries) {
        core::setEntryGrid(o->file, e, g);
        std::printf("%s: entry %s: %s\n", core::printable(o->file).c_str(), core::printable(e).c_str(),
                    g ? ("grid " + core::toString(*g)).c_str() : "grid removed");
      }
      return 0;
    };
  });
}

}  // namespace sparge::cli

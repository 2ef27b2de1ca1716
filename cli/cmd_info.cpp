// `sparge info [FILE]`: what a capture holds — entries, shapes, dtypes, layout, causal, GQA, sizes.
#include <cstdio>
#include <iostream>

#include "commands.h"
#include "format.h"
#include "sparge/core/capture.h"
#include "sparge/core/names.h"

namespace sparge::cli {

void registerInfo(CLI::App& app, Action& action) {
  auto* cmd =
      app.add_subcommand("info", "List the entries of a capture (shapes, dtype, layout, causal, GQA, size)");
  auto file = std::make_shared<std::string>();
  cmd->add_option("file", *file, "Capture file (.h5); default: the bundled sample capture");
  cmd->callback([&action, file] {
    action = [file] {
      const std::string path = file->empty() ? defaultCapturePath() : *file;
      core::CaptureReader reader(path);
      std::printf("capture  %s\nversion  %d\n", core::printable(path).c_str(), reader.version());
      for (const auto& [k, v] : reader.rootAttributes())
        if (k != "sparge_capture_version")
          std::printf("  %-22s %s\n", core::printable(k).c_str(), core::printable(v).c_str());
      std::printf("\n%zu entries\n", reader.entries().size());
      Table t({"entry", "layer", "step", "B", "Hq", "Hkv", "GQA", "Nq", "Nkv", "D", "Dv", "dtype", "layout",
               "causal", "scale", "size"});
      int64_t total = 0;
      for (const core::EntryInfo& e : reader.entries()) {
        total += e.bytesOnDisk();
        t.row({core::printable(e.name), e.layer ? std::to_string(*e.layer) : "-",
               e.step ? std::to_string(*e.step) : "-",
               std::to_string(e.batch), std::to_string(e.headsQ), std::to_string(e.headsKV),
               e.isGqa() ? std::to_string(e.groupSize()) + ":1" : "no", std::to_string(e.tokensQ),
               std::to_string(e.tokensKV), std::to_string(e.headDim), std::to_string(e.headDimV),
               core::toString(e.dtype), core::toString(e.layout), e.causal ? "yes" : "no",
               fmtNum(e.scale, 5) + (e.scaleFromFile ? "" : " (1/√D)"), fmtBytes(e.bytesOnDisk())});
      }
      t.print(std::cout);
      std::printf("\ntotal q/k/v payload %s\n", fmtBytes(total).c_str());
      return 0;
    };
  });
}

}  // namespace sparge::cli

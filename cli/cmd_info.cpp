// `sparge info [FILE]`: what a capture holds — entries, shapes, dtypes, layout, causal, window, GQA, the
// model's module / kind / stack of each entry, sizes; optionally grouped by one of those.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>

#include "commands.h"
#include "format.h"
#include "sparge/core/capture.h"
#include "sparge/core/names.h"

namespace sparge::cli {
namespace {

const char* const kGroupKeys[] = {"stack", "kind", "layer", "step", "window", "causal", "module"};

// Names come from the file: shown without control characters and shortened (exports keep them whole).
std::string orDash(const std::string& s) {
  return s.empty() ? "-" : core::shortForDisplay(s);
}

std::string windowCell(const core::EntryInfo& e) {
  return e.window.bounded() ? core::toString(e.window) : "-";
}

// The value of entry `e` under `key` (one of kGroupKeys), whole (groups are told apart by it); "" when the
// entry does not record it.
std::string groupValue(const core::EntryInfo& e, const std::string& key) {
  if (key == "stack") return e.stack;
  if (key == "kind") return e.kind;
  if (key == "layer") return e.layer ? std::to_string(*e.layer) : "";
  if (key == "step") return e.step ? std::to_string(*e.step) : "";
  if (key == "window") return e.window.bounded() ? core::toString(e.window) : "";
  if (key == "causal") return e.causal ? "yes" : "no";
  return e.module;
}

// Which optional columns carry information in this file (old captures have none of them).
struct Columns {
  bool identity = false, window = false, module = false, grid = false;
  explicit Columns(const std::vector<core::EntryInfo>& entries) {
    for (const core::EntryInfo& e : entries) {
      grid = grid || e.grid.has_value();
      identity = identity || !e.stack.empty() || !e.kind.empty();
      window = window || e.window.bounded();
      module = module || !e.module.empty();
    }
  }
};

void printEntries(const std::vector<const core::EntryInfo*>& entries, const Columns& c) {
  std::vector<std::string> header{"entry"};
  if (c.identity) header.insert(header.end(), {"stack", "kind"});
  header.insert(header.end(), {"layer", "step", "B", "Hq", "Hkv", "GQA", "Nq", "Nkv", "D", "Dv", "dtype",
                               "layout", "causal"});
  if (c.window) header.push_back("window");
  if (c.grid) header.push_back("grid T×H×W (offset, tokens)");
  header.insert(header.end(), {"scale", "size"});
  if (c.module) header.push_back("module");
  Table t(header);
  for (const core::EntryInfo* p : entries) {
    const core::EntryInfo& e = *p;
    std::vector<std::string> row{core::shortForDisplay(e.name)};
    if (c.identity) row.insert(row.end(), {orDash(e.stack), orDash(e.kind)});
    row.insert(row.end(), {e.layer ? std::to_string(*e.layer) : "-", e.step ? std::to_string(*e.step) : "-",
                           std::to_string(e.batch), std::to_string(e.headsQ), std::to_string(e.headsKV),
                           e.isGqa() ? std::to_string(e.groupSize()) + ":1" : "no", std::to_string(e.tokensQ),
                           std::to_string(e.tokensKV), std::to_string(e.headDim), std::to_string(e.headDimV),
                           core::toString(e.dtype), core::toString(e.layout), e.causal ? "yes" : "no"});
    if (c.window) row.push_back(windowCell(e));
    if (c.grid)
      row.push_back(e.grid ? e.grid->shape() + " (" + std::to_string(e.grid->offset) + ", " +
                                 core::toString(e.grid->tokens) + ")"
                           : "-");
    row.insert(row.end(),
               {fmtNum(e.scale, 5) + (e.scaleFromFile ? "" : " (1/√D)"), fmtBytes(e.bytesOnDisk())});
    if (c.module) row.push_back(orDash(e.module));
    t.row(row);
  }
  t.print(std::cout);
}

// One line per group: how many entries and query heads, and their payload.
void printGroups(const std::vector<const core::EntryInfo*>& entries, const std::string& key) {
  struct Sum {
    int entries = 0;
    int64_t heads = 0, bytes = 0;
  };
  std::vector<std::string> order;
  std::map<std::string, Sum> sums;
  for (const core::EntryInfo* e : entries) {
    const std::string v = groupValue(*e, key);
    if (!sums.count(v)) order.push_back(v);
    Sum& s = sums[v];
    ++s.entries;
    s.heads += e->batch * e->headsQ;
    s.bytes += e->bytesOnDisk();
  }
  Table t({key, "entries", "query heads (B x Hq)", "size"});
  for (const std::string& v : order)
    t.row(
        {orDash(v), std::to_string(sums[v].entries), std::to_string(sums[v].heads), fmtBytes(sums[v].bytes)});
  std::printf("\nby %s\n", key.c_str());
  t.print(std::cout);
}

}  // namespace

void registerInfo(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand(
      "info", "List the entries of a capture (shapes, dtype, layout, causal, window, GQA, module, size)");
  auto file = std::make_shared<std::string>();
  auto groupBy = std::make_shared<std::string>();
  cmd->add_option("file", *file, "Capture file (.h5); default: the bundled sample capture");
  cmd->add_option(
         "--group-by", *groupBy,
         "Order the entries by stack | kind | layer | step | window | causal | module and total them "
         "per value")
      ->check(CLI::IsMember(std::vector<std::string>(std::begin(kGroupKeys), std::end(kGroupKeys))));
  cmd->callback([&action, file, groupBy] {
    action = [file, groupBy] {
      const std::string path = file->empty() ? defaultCapturePath() : *file;
      core::CaptureReader reader(path);
      std::printf("capture  %s\nversion  %d\n", core::shortForDisplay(path).c_str(), reader.version());
      for (const auto& [k, v] : reader.rootAttributes())
        if (k != "sparge_capture_version")
          std::printf("  %-22s %s\n", core::shortForDisplay(k).c_str(), core::shortForDisplay(v).c_str());
      std::printf("\n%zu entries\n", reader.entries().size());
      std::vector<const core::EntryInfo*> entries;
      int64_t total = 0;
      for (const core::EntryInfo& e : reader.entries()) {
        entries.push_back(&e);
        total += e.bytesOnDisk();
      }
      if (!groupBy->empty()) {
        // Stable: the file's natural order stays within each group; groups in order of first appearance.
        std::map<std::string, size_t> first;
        for (const core::EntryInfo* e : entries) first.emplace(groupValue(*e, *groupBy), first.size());
        std::stable_sort(entries.begin(), entries.end(),
                         [&](const core::EntryInfo* a, const core::EntryInfo* b) {
                           return first[groupValue(*a, *groupBy)] < first[groupValue(*b, *groupBy)];
                         });
      }
      printEntries(entries, Columns(reader.entries()));
      if (!groupBy->empty()) printGroups(entries, *groupBy);
      std::printf("\ntotal q/k/v payload %s\n", fmtBytes(total).c_str());
      return 0;
    };
  });
}

}  // namespace sparge::cli

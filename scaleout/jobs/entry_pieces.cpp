// Entries as job units, and joining head pieces of an entry.
#include "entry_pieces.h"

#include <algorithm>

#include "sparge/core/error.h"
#include "sparge/scaleout/codec.h"
#include "sparge/scaleout/partition.h"

namespace sparge::scaleout {

PieceJobSpec entryJobSpec(const core::CaptureReader& reader, const std::vector<std::string>& names,
                          const std::vector<int64_t>& heads) {
  PieceJobSpec spec;
  for (const std::string& n : names) {
    const core::EntryInfo& info = reader.entry(n);
    WorkUnit u;
    u.costPerHead = headCost(info);
    u.heads = heads;
    if (u.heads.empty())
      for (int64_t h = 0; h < info.headsQ; ++h) u.heads.push_back(h);
    std::sort(u.heads.begin(), u.heads.end());
    u.heads.erase(std::unique(u.heads.begin(), u.heads.end()), u.heads.end());
    spec.units.push_back(std::move(u));
    spec.names.push_back("entry " + n);
  }
  return spec;
}

core::EntryResult mergeEntryPieces(std::vector<std::string>& payloads, const std::string& entry) {
  if (payloads.empty()) throw Error("entry " + entry, "no rank returned a result");
  core::EntryResult out = decodeResult(payloads[0], "result of entry " + entry);
  if (out.info.name != entry) throw Error("entry " + entry, "a rank returned entry " + out.info.name);
  if (payloads.size() == 1) return out;
  std::vector<core::EntryResult> parts;
  parts.push_back(std::move(out));
  for (size_t i = 1; i < payloads.size(); ++i) {
    parts.push_back(decodeResult(payloads[i], "result of entry " + entry));
    if (parts.back().info.name != entry)
      throw Error("entry " + entry, "a rank returned entry " + parts.back().info.name);
  }
  out = core::joinHeadRuns(std::move(parts));
  out.warnings.push_back("heads ran on " + std::to_string(payloads.size()) +
                         " ranks: the stage times are their sum");
  return out;
}

}  // namespace sparge::scaleout

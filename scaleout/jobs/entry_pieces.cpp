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
  for (size_t i = 1; i < payloads.size(); ++i) {
    core::EntryResult part = decodeResult(payloads[i], "result of entry " + entry);
    if (part.info.name != entry) throw Error("entry " + entry, "a rank returned entry " + part.info.name);
    for (core::HeadResult& h : part.heads) out.heads.push_back(std::move(h));
    for (std::string& w : part.warnings)
      if (std::find(out.warnings.begin(), out.warnings.end(), w) == out.warnings.end())
        out.warnings.push_back(w);
    out.times += part.times;
  }
  std::sort(out.heads.begin(), out.heads.end(), [](const core::HeadResult& a, const core::HeadResult& b) {
    return a.batch != b.batch ? a.batch < b.batch : a.head < b.head;
  });
  core::aggregate(out);
  out.warnings.push_back("heads ran on " + std::to_string(payloads.size()) +
                         " ranks: the stage times are their sum");
  return out;
}

}  // namespace sparge::scaleout

// Matching a previous parameter file against this run's groups and settings.
#include "sparge/scaleout/resume.h"

#include <algorithm>
#include <cmath>

#include "sparge/core/error.h"

namespace sparge::scaleout {
namespace {

core::TunedHead tunedHeadOf(const core::ParamsHead& h) {
  core::TunedHead t;
  t.head = h.head;
  t.params = h.params;
  t.isSparse = h.isSparse;
  t.exact = h.exact;
  t.stage1Sparsity = h.stage1Sparsity;
  t.totalSparsity = h.totalSparsity;
  t.l1 = h.l1;
  t.l1Sparse = h.l1Sparse;
  t.l1Quant = h.l1Quant;
  t.l1QuantQk = h.l1QuantQk;
  return t;
}

core::TunedGroup tunedGroupOf(const core::ParamsGroup& g) {
  core::TunedGroup t;
  t.name = g.name;
  t.entries = g.entries;
  t.tunedOn = g.tunedOn;
  t.layer = g.layer;
  t.headsQ = g.headsQ;
  t.complete = g.complete;
  for (const core::ParamsHead& h : g.heads) t.heads.push_back(tunedHeadOf(h));
  return t;
}

void mustMatch(bool same, const std::string& path, const std::string& what, const std::string& theirs,
               const std::string& ours) {
  if (!same)
    throw Error(path, "was tuned with " + what + " " + theirs + ", this run uses " + ours +
                          " — resume with the same settings, or tune into a new file without --resume");
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

void checkResumable(const core::ParamsFile& f, const std::string& path, const core::TuneOptions& o) {
  auto modeName = [](core::SelectMode m) { return std::string(m == core::SelectMode::Cdf ? "cdf" : "topk"); };
  mustMatch(f.method == o.method, path, "--method", core::toString(f.method), core::toString(o.method));
  mustMatch(f.mode == o.mode, path, "mode", modeName(f.mode), modeName(o.mode));
  mustMatch(f.l1 == o.l1, path, "--l1", num(f.l1), num(o.l1));
  mustMatch(f.tunePv == o.tunePv, path, "λ search", f.tunePv ? "on" : "off (--no-tune-pv)",
            o.tunePv ? "on" : "off (--no-tune-pv)");
  if (o.tunePv) mustMatch(f.l2 == o.l2, path, "--l2", num(f.l2), num(o.l2));
  mustMatch(f.geometry == o.geometry, path, "geometry", f.geometry.label(), o.geometry.label());
  mustMatch(f.numerics == o.numerics, path, "numerics", core::toString(f.numerics),
            core::toString(o.numerics));
  mustMatch(f.smoothK == o.smoothK, path, "smooth-k", f.smoothK ? "on" : "off", o.smoothK ? "on" : "off");
  mustMatch(f.sink == o.sink, path, "sink", f.sink ? "on" : "off", o.sink ? "on" : "off");
  mustMatch(f.diagonal == o.diagonal, path, "diagonal blocks (--diagonal)", f.diagonal ? "on" : "off",
            o.diagonal ? "on" : "off");
  // Files from before the exact fallback kept every head in the file's numerics; exact numerics have none.
  const core::ExactFallback fallback = f.exactFallback.value_or(core::ExactFallback::Off);
  if (o.numerics != core::Numerics::None)
    mustMatch(fallback == o.exactFallback, path, "--exact-fallback", core::toString(fallback),
              core::toString(o.exactFallback));
}

std::vector<core::TunedHead> finishedHeads(const core::ParamsFile& file, const core::TuneGroupInput& group,
                                           int64_t headsQ, std::string* note) {
  std::vector<std::string> entries;  // each name once: an entry of several captures is one entry of the group
  for (const core::TuneInput& e : group.entries)
    if (std::find(entries.begin(), entries.end(), e.name) == entries.end()) entries.push_back(e.name);
  for (const core::ParamsGroup& g : file.groups) {
    if (g.name != group.name) continue;
    if (g.entries != entries || g.headsQ != headsQ) {
      if (note)
        *note = "group " + group.name + " of the resumed file has other entries or heads: tuned again";
      return {};
    }
    std::vector<core::TunedHead> out;
    for (const core::ParamsHead& h : g.heads) out.push_back(tunedHeadOf(h));
    return out;
  }
  return {};
}

std::vector<core::TunedGroup> otherGroups(const core::ParamsFile& file,
                                          const std::vector<core::TuneGroupInput>& groups) {
  std::vector<core::TunedGroup> out;
  for (const core::ParamsGroup& g : file.groups) {
    const bool ours = std::any_of(groups.begin(), groups.end(),
                                  [&](const core::TuneGroupInput& in) { return in.name == g.name; });
    if (!ours) out.push_back(tunedGroupOf(g));
  }
  return out;
}

}  // namespace sparge::scaleout

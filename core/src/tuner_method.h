// The first stage of a head's search for a method other than SpargeAttn: MInference's pattern choice (the
// candidate with the largest recall of the dense attention, as upstream's offline search), then the
// method's knob bisected against l1 with the PV skip off (docs/methods.md, "Tuning").
#pragma once

#include <optional>
#include <vector>

#include "tuner_search.h"

namespace sparge::core::tuning {

// MInference's candidates, as upstream's search lists them: vertical-slash (vertical_size, slash_size) pairs
// and block-sparse with an eighth of the key blocks.
std::vector<HeadParams> minferenceCandidates(const HeadParams& base, const EntryInfo& info,
                                             const Geometry& g);

class KnobSweep : public SweepTask {
 public:
  KnobSweep(const TuneOptions& o, const EntryInfo& info, int32_t entry);
  bool next(Probe& probe) override;
  void feed(const Probe& probe, const Measured& m, bool pass) override;
  double fraction() const override;

  const std::vector<ThetaPoint>& points() const override { return points_; }
  const ThetaPoint* best() const override { return bestPoint(points_); }
  HeadParams paramsAt(const ThetaPoint& p) const override;

 private:
  void startBisection();

  const TuneOptions& o_;
  EntryInfo info_;
  int32_t entry_;
  HeadParams base_;
  std::vector<HeadParams> candidates_;  // MInference: evaluated first, one probe each
  size_t candidate_ = 0;
  double bestRecall_ = -1;
  std::optional<Bisection> bisection_;
  bool done_ = false;
  std::vector<ThetaPoint> points_;  // one per evaluated knob value (θ unused: 0)
};

}  // namespace sparge::core::tuning

#include "app/frame_pacing.h"

namespace sparge::gui {

double FramePacer::next(const PacingState& s) {
  if (s.activity) {
    settle_ = kSettleFrames;
    awaitRun_ = s.runScheduled;
  }
  if (s.resultsWaiting) return 0;
  if (settle_ > 0) {
    --settle_;
    return awaitRun_ && s.runInFlight ? kRunWaitS : 0;
  }
  if (s.held) return kHeldS;
  if (s.textInput) return kTextInputS;
  return s.busy ? kBusyS : kIdleS;
}

bool FramePacer::deferFrame(bool runScheduledOnly, double lastRunS) {
  deferred_ = !deferred_ && runScheduledOnly && lastRunS < kRunWaitS;
  return deferred_;
}

}  // namespace sparge::gui

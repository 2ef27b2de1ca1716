// The automation loop of sparge-studio (--screenshot, --action): frames are drawn until the worker is
// idle and every action has run, then the screenshot is written and the process exits with a status.
#pragma once

#include <string>
#include <vector>

#include "app/actions.h"
#include "app/app.h"
#include "app/platform.h"

namespace sparge::gui {

struct AutomationOptions {
  std::string screenshot;  // written when everything has settled (empty: none)
  int frames = 3;          // at least this many frames first
  double timeoutSeconds = 600;
};

// Exit status: 0 done, 1 an error (a job failed, the PNG could not be written), 3 timed out, 4 an action
// failed.
int runAutomation(App& app, Session& session, Platform& platform, const AutomationOptions& options,
                  std::vector<Action> actions);

}  // namespace sparge::gui

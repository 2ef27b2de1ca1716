// Running untrusted parsing in a child process, so that a crash inside a library becomes an error.
#pragma once

#include <functional>

namespace sparge::core {

// How `work` ended in the child process.
enum class IsolatedOutcome {
  Finished,     // returned normally
  Threw,        // threw an exception (the caller repeats the work to get the message)
  Crashed,      // died from a signal or a sanitizer report
  TimedOut,     // still running after the time limit (killed)
  Unavailable,  // no child process could be started: the caller runs the work directly
};

struct IsolatedResult {
  IsolatedOutcome outcome = IsolatedOutcome::Unavailable;
  int signal = 0;  // for Crashed: the signal, 0 for an abnormal exit
};

// Forks, runs `work` in the child with stderr discarded and fatal-signal handlers reset, and waits at most
// `timeoutSeconds`. Only for work without side effects outside the process (reading a file). The
// child leaves with _exit: no atexit handlers, no stdio flushing.
IsolatedResult runIsolated(const std::function<void()>& work, double timeoutSeconds);

}  // namespace sparge::core

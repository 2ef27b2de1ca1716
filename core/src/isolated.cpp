// runIsolated: fork, run, wait with a time limit; the child cannot take the caller down.
#include "isolated.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <thread>

// Set by the sanitizers (and through them by libFuzzer) to act on a report; absent in plain builds.
extern "C" void __sanitizer_set_death_callback(void (*callback)()) __attribute__((weak));

namespace sparge::core {
namespace {

constexpr int kExitFinished = 0;
constexpr int kExitThrew = 3;

// In the child: a crash must end the child quietly, not run the parent's crash reporting, and the child
// must never outlive its parent or its time limit (a file can make the library loop).
void prepareChild(pid_t parent, double timeoutSeconds) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(kExitThrew);  // the parent is already gone
  for (int s : {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGALRM}) std::signal(s, SIG_DFL);
  ::alarm(static_cast<unsigned>(std::ceil(timeoutSeconds)) + 1);
  if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(nullptr);
  const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null >= 0) ::dup2(null, STDERR_FILENO);
}

IsolatedResult classify(int status) {
  IsolatedResult r;
  if (WIFEXITED(status) && WEXITSTATUS(status) == kExitFinished) {
    r.outcome = IsolatedOutcome::Finished;
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == kExitThrew) {
    r.outcome = IsolatedOutcome::Threw;
  } else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {
    r.outcome = IsolatedOutcome::TimedOut;  // the child's own limit (see prepareChild)
  } else {
    r.outcome = IsolatedOutcome::Crashed;
    r.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  }
  return r;
}

}  // namespace

IsolatedResult runIsolated(const std::function<void()>& work, double timeoutSeconds) {
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child < 0) return {};
  if (child == 0) {
    prepareChild(parent, timeoutSeconds);
    try {
      work();
    } catch (...) {
      ::_exit(kExitThrew);
    }
    ::_exit(kExitFinished);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeoutSeconds);
  auto pause = std::chrono::microseconds(200);
  for (;;) {
    int status = 0;
    const pid_t done = ::waitpid(child, &status, WNOHANG);
    if (done == child) return classify(status);
    if (done < 0 && errno != EINTR) return {};
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(child, SIGKILL);
      ::waitpid(child, &status, 0);
      return {IsolatedOutcome::TimedOut, 0};
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(20000));  // quick files answer at once
  }
}

}  // namespace sparge::core

#include "actions.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "sparge/core/error.h"
#include "sparge/core/params_io.h"

namespace fs = std::filesystem;

namespace sparge::gui {

namespace {
bool parseScope(const std::string& s, TuneScope* scope) {
  if (s == "head") {
    *scope = TuneScope::SelectedHead;
  } else if (s == "entry") {
    *scope = TuneScope::Entry;
  } else if (s == "all") {
    *scope = TuneScope::AllEntries;
  } else {
    return false;
  }
  return true;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}
}  // namespace

const char* actionHelp() {
  return "actions (--action, run in order after the first results, each waiting for its job):\n"
         "  export-masks=P.h5  export-params=P.json  export-report=P.json|P.csv|P.md  load-params=P.json\n"
         "  tune=head|entry|all  tune-cancel=head|entry|all  profile[=N]  set=key=value  follow=0|1\n"
         "  select-entry=NAME  select-head=N  screenshot=P.png\n";
}

Action parseAction(const std::string& text) {
  Action a;
  a.text = text;
  auto eq = text.find('=');
  a.verb = text.substr(0, eq);
  if (eq != std::string::npos) a.arg = text.substr(eq + 1);
  std::string where = "--action " + text;
  static const char* withPath[] = {"export-masks", "export-params", "export-report", "load-params", "screenshot",
                                   "select-entry"};
  bool known = false;
  for (const char* v : withPath) {
    if (a.verb == v) {
      known = true;
      if (a.arg.empty()) throw Error(where, "needs a value (" + a.verb + "=...)");
    }
  }
  if (a.verb == "export-report") {
    std::string ext = lower(fs::path(a.arg).extension().string());
    if (ext != ".json" && ext != ".csv" && ext != ".md") throw Error(where, "the report must end in .json, .csv or .md");
  } else if (a.verb == "tune" || a.verb == "tune-cancel") {
    known = true;
    TuneScope scope;
    if (!parseScope(a.arg, &scope)) throw Error(where, "expected head, entry or all");
  } else if (a.verb == "profile") {
    known = true;
    if (!a.arg.empty()) {
      char* end = nullptr;
      long n = std::strtol(a.arg.c_str(), &end, 10);
      if (*end || n < 1 || n > 100) throw Error(where, "expected a run count in 1..100");
    }
  } else if (a.verb == "set") {
    known = true;
    core::RunConfig c;
    Budget b;
    applySetting(a.arg, c, b);  // validates key and value
  } else if (a.verb == "follow") {
    known = true;
    if (a.arg != "0" && a.arg != "1") throw Error(where, "expected 0 or 1");
  } else if (a.verb == "select-head") {
    known = true;
    char* end = nullptr;
    long n = std::strtol(a.arg.c_str(), &end, 10);
    if (a.arg.empty() || *end || n < 0) throw Error(where, "expected a head index");
  }
  if (!known) throw Error(where, "unknown action");
  return a;
}

std::string ActionRunner::takeScreenshotRequest() {
  std::string r = std::move(screenshotRequest_);
  screenshotRequest_.clear();
  return r;
}

void ActionRunner::screenshotDone(const std::string& error) {
  screenshotPending_ = false;
  screenshotError_ = error;
}

void ActionRunner::fail(const Action& a, const std::string& why) {
  failed_ = true;
  failure_ = "action '" + a.text + "' failed: " + why;
}

bool ActionRunner::step(bool settled) {
  if (failed_) return true;
  if (next_ >= actions_.size()) return true;
  const Action& a = actions_[next_];
  switch (phase_) {
    case Phase::Start:
      if (!settled) return false;  // every action starts from an idle worker with its results applied
      if (session_.hasError()) {
        fail(a, "an earlier error is pending: " + session_.frontError());
        return true;
      }
      std::fprintf(stderr, "sparge-studio: action %s\n", a.text.c_str());
      startedAt_ = std::chrono::steady_clock::now();
      cancelSent_ = false;
      start(a);
      if (failed_) return true;
      phase_ = Phase::Running;
      return false;
    case Phase::Running:
      // tune-cancel: cancel once the tuner has reported progress, as a user pressing Cancel would.
      if (a.verb == "tune-cancel" && !cancelSent_) {
        const Progress& p = session_.progress();
        if (p.active && (p.total > 0 || p.fraction > 0)) {
          session_.cancel();
          cancelSent_ = true;
        } else if (!session_.busy()) {
          fail(a, "the tune ended before it reported any progress (nothing to cancel)");
          return true;
        }
        return false;
      }
      if (screenshotPending_) return false;
      phase_ = Phase::Wait;
      return false;
    case Phase::Wait:
      if (!settled) return false;
      finish(a);
      if (!failed_) {
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - startedAt_).count();
        std::fprintf(stderr, "sparge-studio: action %s: ok (%.1f s)\n", a.text.c_str(), s);
      }
      ++next_;
      phase_ = Phase::Start;
      return failed_ || next_ >= actions_.size();
  }
  return false;
}

void ActionRunner::start(const Action& a) {
  noticesBefore_ = session_.notices().size();
  tuneBefore_ = session_.lastTune();
  if (a.verb == "export-masks") {
    session_.exportMasks(a.arg);
  } else if (a.verb == "export-params") {
    session_.exportParams(a.arg);
  } else if (a.verb == "export-report") {
    std::string ext = lower(fs::path(a.arg).extension().string());
    if (ext == ".json") {
      session_.exportReportJson(a.arg);
    } else if (ext == ".csv") {
      session_.exportReportCsv(a.arg);
    } else {
      session_.exportReportMarkdown(a.arg);
    }
  } else if (a.verb == "load-params") {
    session_.importParams(a.arg);
  } else if (a.verb == "tune" || a.verb == "tune-cancel") {
    TuneScope scope = TuneScope::Entry;
    parseScope(a.arg, &scope);
    session_.autoTune(scope);
    if (!session_.busy() && !session_.hasError()) fail(a, "no tuning job was started");
  } else if (a.verb == "profile") {
    session_.profile(a.arg.empty() ? 3 : std::atoi(a.arg.c_str()));
  } else if (a.verb == "set") {
    // Through the same commands as the sliders and checkboxes (not setConfig), so that follow-budget
    // and the per-head overrides behave as they do for a user.
    core::RunConfig c = session_.config();
    Budget b = session_.budget();
    try {
      applySetting(a.arg, c, b);
    } catch (const std::exception& e) {
      fail(a, e.what());
      return;
    }
    if (b.l2 <= b.l1) b.l2 = b.l1 * 1.15;
    if (!(c.geometry == session_.config().geometry)) session_.setGeometry(c.geometry);
    if (c.smoothK != session_.config().smoothK) session_.setSmoothK(c.smoothK);
    if (c.sink != session_.config().sink) session_.setSink(c.sink);
    if (!(c.defaults == session_.config().defaults)) session_.setParams(c.defaults, ApplyTarget::AllHeads);
    if (!(b == session_.budget())) session_.setBudget(b);
  } else if (a.verb == "follow") {
    session_.setFollowBudget(a.arg == "1");
  } else if (a.verb == "select-entry") {
    session_.selectEntry(a.arg);
  } else if (a.verb == "select-head") {
    session_.selectHead(HeadRef{session_.selectedHead().batch, std::atoll(a.arg.c_str())});
  } else if (a.verb == "screenshot") {
    screenshotRequest_ = a.arg;
    screenshotPending_ = true;
    screenshotError_.clear();
  }
}

void ActionRunner::finish(const Action& a) {
  if (session_.hasError()) {
    fail(a, session_.frontError());
    return;
  }
  auto noticeSince = [&](const std::string& needle) {
    const auto& n = session_.notices();
    for (size_t i = std::min(noticesBefore_, n.size()); i < n.size(); ++i) {
      if (n[i].find(needle) != std::string::npos) return true;
    }
    return false;
  };
  auto fileWritten = [&](const std::string& path) {
    std::error_code ec;
    if (!fs::is_regular_file(path, ec) || fs::file_size(path, ec) == 0) {
      fail(a, path + " was not written");
      return false;
    }
    if (!noticeSince("to " + path)) {
      fail(a, "no confirmation that " + path + " was exported");
      return false;
    }
    return true;
  };
  // The tuned values of the selected entry must be on the sliders (per-head parameters) and in the
  // latest results (the summary table), not only in the tuning table.
  auto tunedValuesShown = [&]() {
    auto r = session_.result();
    for (const auto& row : session_.tuned()) {
      if (row.entry != session_.entryName()) continue;
      if (!(session_.paramsFor(row.head) == row.params)) {
        fail(a, "head " + std::to_string(row.head) + ": tuned parameters are not the session's parameters");
        return false;
      }
      const core::HeadResult* h = r ? r->find(session_.selectedHead().batch, row.head) : nullptr;
      if (!h || !(h->params == row.params)) {
        fail(a, "head " + std::to_string(row.head) + ": the results were not re-run with the tuned parameters");
        return false;
      }
    }
    return true;
  };

  if (a.verb == "export-masks" || a.verb == "export-params") {
    fileWritten(a.arg);
  } else if (a.verb == "export-report") {
    if (!fileWritten(a.arg)) return;
    if (lower(fs::path(a.arg).extension().string()) == ".md") {
      fs::path img = fs::path(a.arg).parent_path() / (fs::path(a.arg).stem().string() + "_img");
      std::error_code ec;
      if (!fs::is_directory(img, ec)) fail(a, img.string() + " (heatmaps) was not written");
    }
  } else if (a.verb == "load-params") {
    if (!noticeSince("loaded parameters from")) {
      fail(a, "the parameters were not loaded");
      return;
    }
    const core::EntryInfo* info = session_.entryInfo();
    if (!info) {
      fail(a, "no entry");
      return;
    }
    try {
      core::ParamsFile file = core::readParams(a.arg);
      auto expected = core::headParamsFor(file, a.arg, info->name, info->layer, info->headsQ, session_.config().defaults);
      auto r = session_.result();
      for (int64_t h = 0; h < info->headsQ; ++h) {
        if (!(session_.paramsFor(h) == expected[h])) {
          fail(a, "head " + std::to_string(h) + ": the loaded parameters are not the session's parameters");
          return;
        }
        const core::HeadResult* hr = r ? r->find(session_.selectedHead().batch, h) : nullptr;
        if (!hr || !(hr->params == expected[h])) {
          fail(a, "head " + std::to_string(h) + ": the results were not re-run with the loaded parameters");
          return;
        }
      }
    } catch (const std::exception& e) {
      fail(a, e.what());
    }
  } else if (a.verb == "tune") {
    auto t = session_.lastTune();
    if (!t || t == tuneBefore_) {
      fail(a, "no tuning result arrived");
      return;
    }
    if (t->cancelled) {
      fail(a, "the tune was cancelled");
      return;
    }
    int64_t expected = 1;
    if (a.arg == "entry") expected = session_.entryInfo() ? session_.entryInfo()->headsQ : 0;
    if (a.arg == "all") {
      expected = 0;
      for (const auto& e : session_.entries()) expected += e.headsQ;
    }
    if (t->headsFinished() != expected) {
      fail(a, "tuned " + std::to_string(t->headsFinished()) + " heads, expected " + std::to_string(expected));
      return;
    }
    if (session_.progress().active) {
      fail(a, "the progress bar is still shown after the tune");
      return;
    }
    tunedValuesShown();
  } else if (a.verb == "tune-cancel") {
    auto t = session_.lastTune();
    if (!t || t == tuneBefore_) {
      fail(a, "the cancelled tune reported no result");
      return;
    }
    if (!t->cancelled) fail(a, "the tune finished although it was cancelled");
    if (session_.progress().active) fail(a, "the progress bar is still shown after cancel");
  } else if (a.verb == "profile") {
    if (!session_.timing().valid) fail(a, "no timing summary");
    if (session_.progress().active) fail(a, "the progress bar is still shown after profiling");
  } else if (a.verb == "set") {
    std::string key = a.arg.substr(0, a.arg.find('='));
    if (session_.followBudget() && (key == "l1" || key == "l2")) {
      auto t = session_.lastTune();
      if (!t || t == tuneBefore_) {
        fail(a, "follow budget is on but the selected head was not re-tuned");
        return;
      }
      if (std::abs(t->options.l1 - session_.budget().l1) > 1e-12 || std::abs(t->options.l2 - session_.budget().l2) > 1e-12) {
        fail(a, "the re-tune did not use the new budget");
        return;
      }
      tunedValuesShown();
    }
  } else if (a.verb == "select-entry") {
    auto r = session_.result();
    if (session_.entryName() != a.arg || !r || r->info.name != a.arg) fail(a, "entry " + a.arg + " is not shown");
  } else if (a.verb == "select-head") {
    if (session_.selectedHead().head != std::atoll(a.arg.c_str())) fail(a, "head not selected (out of range?)");
  } else if (a.verb == "screenshot") {
    if (!screenshotError_.empty()) fail(a, screenshotError_);
  }
}

}  // namespace sparge::gui

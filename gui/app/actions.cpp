#include "actions.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "app/app.h"
#include "app/set_option.h"
#include "sparge/core/error.h"
#include "sparge/core/names.h"
#include "sparge/core/params_io.h"

namespace fs = std::filesystem;

namespace sparge::gui {

namespace {
std::optional<TuneScope> parseScope(const std::string& s) {
  if (s == "head") return TuneScope::SelectedHead;
  if (s == "entry") return TuneScope::Entry;
  if (s == "all") return TuneScope::AllEntries;
  return std::nullopt;
}

std::optional<core::Preset> parsePreset(const std::string& s) {
  if (s == "cdf") return core::Preset::CdfDefaults;
  if (s == "topk") return core::Preset::TopkDefaults;
  if (s == "filter-off") return core::Preset::FilterOff;
  if (s == "stored") return core::Preset::Tuned;
  return std::nullopt;
}

bool isCount(const std::string& s, long lo, long hi) {
  char* end = nullptr;
  long n = std::strtol(s.c_str(), &end, 10);
  return !s.empty() && !*end && n >= lo && n <= hi;
}

// `profile`, `profile=N` or `profile=N,T`: N profiled runs (3 unless given) after T ms of warm-up (0: one
// warm-up round).
struct ProfileArg {
  int runs = 3;
  int warmupMs = 0;
};

std::optional<ProfileArg> parseProfileArg(const std::string& s) {
  ProfileArg p;
  if (s.empty()) return p;
  const size_t comma = s.find(',');
  const std::string runs = s.substr(0, comma);
  const std::string warmup = comma == std::string::npos ? "0" : s.substr(comma + 1);
  if (!isCount(runs, 1, ProfileController::kMaxRuns) || !isCount(warmup, 0, ProfileController::kMaxWarmupMs))
    return std::nullopt;
  p.runs = std::atoi(runs.c_str());
  p.warmupMs = std::atoi(warmup.c_str());
  return p;
}

// Checks the argument of a verb (an export's target before any work: capturePath is the capture the
// session will open, empty for the bundled sample); throws sparge::Error naming the action.
void validateArgument(const Action& a, const std::string& capturePath) {
  std::string where = "--action " + core::shortForDisplay(a.text);
  const CommandInfo& c = *a.command;
  if (c.arg == ActionArg::Required && a.arg.empty())
    throw Error(where, std::string("needs a value (") + c.verb + "=...)");
  if (c.arg == ActionArg::None && !a.arg.empty()) throw Error(where, "takes no value");
  switch (c.id) {
    case CommandId::ExportReport:
      checkExportTarget(ExportKind::Report, a.arg, where, capturePath);
      break;
    case CommandId::ExportMasks:
      checkExportTarget(ExportKind::Masks, a.arg, where, capturePath);
      break;
    case CommandId::ExportParams:
      checkExportTarget(ExportKind::Params, a.arg, where, capturePath);
      break;
    case CommandId::TuneHead:
    case CommandId::TuneCancel:
      if (!parseScope(a.arg)) throw Error(where, "expected head, entry or all");
      break;
    case CommandId::SweepHead:
      if (a.arg != "head" && a.arg != "all" && a.arg != "orders" && a.arg != "methods")
        throw Error(where, "expected head, all, orders or methods");
      break;
    case CommandId::Permute:
      try {
        core::parsePermutation(a.arg);
      } catch (const Error& e) {
        throw Error(where, e.problem());
      }
      break;
    case CommandId::CaptureOrder:
      if (a.arg != "0" && a.arg != "1") throw Error(where, "expected 0 or 1");
      break;
    case CommandId::Profile:
      if (!parseProfileArg(a.arg))
        throw Error(where, "expected N or N,T: N profiled runs in 1.." +
                               std::to_string(ProfileController::kMaxRuns) + ", T ms of warm-up in 0.." +
                               std::to_string(ProfileController::kMaxWarmupMs));
      break;
    case CommandId::PresetCdf:
      if (!parsePreset(a.arg)) throw Error(where, "expected cdf, topk, filter-off or stored");
      break;
    case CommandId::Set: {
      core::RunConfig c2;
      Budget b;
      applySetting(a.arg, c2, b);  // validates key and value
      break;
    }
    case CommandId::Follow:
      if (a.arg != "0" && a.arg != "1") throw Error(where, "expected 0 or 1");
      break;
    case CommandId::SelectHead:
      if (!isCount(a.arg, 0, 1 << 30)) throw Error(where, "expected a head index");
      break;
    case CommandId::ShowView:
      if (!App::isViewId(a.arg)) throw Error(where, "no view named '" + a.arg + "'");
      break;
    default:
      break;
  }
}
}  // namespace

Action parseAction(const std::string& text, const std::string& capturePath) {
  Action a;
  a.text = text;
  auto eq = text.find('=');
  a.command = commandForVerb(text.substr(0, eq));
  if (eq != std::string::npos) a.arg = text.substr(eq + 1);
  if (!a.command) throw Error("--action " + core::shortForDisplay(text), "unknown action");
  validateArgument(a, capturePath);
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
  if (failed_ || next_ >= actions_.size()) return true;
  const Action& a = actions_[next_];
  switch (phase_) {
    case Phase::Start:
      if (!settled) return false;  // every action starts from an idle worker with its results applied
      if (session_.messages().hasError()) {
        fail(a, "an earlier error is pending: " + session_.messages().frontError());
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
      if (a.command->id == CommandId::TuneCancel && !cancelSent_) {
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
  noticesBefore_ = session_.messages().notices().size();
  tuneBefore_ = session_.tuning().lastTune();
  switch (a.command->id) {
    case CommandId::ExportMasks:
      session_.files().exportMasks(a.arg);
      break;
    case CommandId::ExportParams:
      session_.files().exportParams(a.arg);
      break;
    case CommandId::ExportReport:
      session_.files().exportReport(a.arg);
      break;
    case CommandId::LoadParams:
      session_.files().importParams(a.arg);
      break;
    case CommandId::LoadEval:
      session_.files().loadEval(a.arg);
      break;
    case CommandId::TuneHead:
    case CommandId::TuneCancel:
      session_.tuning().autoTune(*parseScope(a.arg));
      if (!session_.busy() && !session_.messages().hasError()) fail(a, "no tuning job was started");
      break;
    case CommandId::Profile: {
      const ProfileArg p = *parseProfileArg(a.arg);
      session_.profiling().profile(p.runs, p.warmupMs);
      break;
    }
    case CommandId::SweepHead:
      app_.showView("curves");
      if (a.arg == "orders" || a.arg == "methods")
        session_.orderCurves().sweep(12, a.arg == "methods" ? OverlayKind::Methods : OverlayKind::Orders);
      else
        session_.curves().sweep(a.arg == "all" ? SweepScope::AllHeads : SweepScope::SelectedHead);
      break;
    case CommandId::CompareMethods:
      app_.showView("overview");
      session_.methodCompare().compareAll();
      break;
    case CommandId::Permute:
      if (std::string problem = session_.permutationProblem(core::parsePermutation(a.arg)); !problem.empty())
        return fail(a, problem);
      session_.setPermutation(core::parsePermutation(a.arg));
      break;
    case CommandId::CaptureOrder:
      app_.ui().captureOrder = a.arg == "1";
      break;
    case CommandId::PresetCdf:
      session_.applyPreset(*parsePreset(a.arg));
      break;
    case CommandId::Set:
      applySet(a);
      break;
    case CommandId::Follow:
      session_.tuning().setFollowBudget(a.arg == "1");
      break;
    case CommandId::SelectEntry:
      session_.selectEntry(a.arg);
      break;
    case CommandId::SelectHead:
      session_.selectHead(HeadRef{session_.capture().selected.batch, std::atoll(a.arg.c_str())});
      break;
    case CommandId::ShowView:
      app_.showView(a.arg);
      break;
    case CommandId::Screenshot:
      screenshotRequest_ = a.arg;
      screenshotPending_ = true;
      screenshotError_.clear();
      break;
    default:
      fail(a, "not an automation action");
      break;
  }
}

// `set=KEY=VALUE`: through the same command as the controls, so that follow-budget and the per-head
// overrides behave as they do for a user.
void ActionRunner::applySet(const Action& a) {
  core::RunConfig c = session_.runs().config();
  Budget b = session_.tuning().budget();
  try {
    applySetting(a.arg, c, b);
  } catch (const std::exception& e) {
    fail(a, e.what());
    return;
  }
  if (b.l2 <= b.l1) b.l2 = b.l1 * 1.15;
  c.perHead = session_.runs().config().perHead;  // a default changes; overrides stay overrides
  if (!(c.defaults == session_.runs().config().defaults)) {
    session_.runs().setParams(c.defaults, ApplyTarget::AllHeads);
    c.perHead.clear();
  }
  session_.runs().applyConfig(c);
  session_.tuning().setBudget(b);
}

bool ActionRunner::noticeSince(const std::string& needle) const {
  const auto& n = session_.messages().notices();
  for (size_t i = std::min(noticesBefore_, n.size()); i < n.size(); ++i) {
    if (n[i].find(needle) != std::string::npos) return true;
  }
  return false;
}

bool ActionRunner::checkFileWritten(const Action& a, const std::string& path) {
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
}

// The tuned values of the selected entry must be on the sliders (per-head parameters) and in the latest
// results (the summary table), not only in the tuning table.
bool ActionRunner::checkTunedValuesShown(const Action& a) {
  auto r = session_.runs().result();
  for (const auto& row : session_.tuning().rows()) {
    if (row.entry != session_.capture().entryName) continue;
    if (!(session_.runs().paramsFor(row.head) == row.params)) {
      fail(a, "head " + std::to_string(row.head) + ": tuned parameters are not the session's parameters");
      return false;
    }
    const core::HeadResult* h = r ? r->find(session_.capture().selected.batch, row.head) : nullptr;
    if (!h || !(h->params == row.params)) {
      fail(a, "head " + std::to_string(row.head) + ": the results were not re-run with the tuned parameters");
      return false;
    }
  }
  return true;
}

void ActionRunner::checkTune(const Action& a) {
  auto t = session_.tuning().lastTune();
  if (!t || t == tuneBefore_) return fail(a, "no tuning result arrived");
  if (t->cancelled) return fail(a, "the tune was cancelled");
  int64_t expected = 1;
  if (a.arg == "entry") expected = session_.capture().headsQ();
  if (a.arg == "all") {
    expected = 0;
    for (const auto& e : session_.capture().entries) expected += e.headsQ;
  }
  if (t->headsFinished() != expected) {
    return fail(
        a, "tuned " + std::to_string(t->headsFinished()) + " heads, expected " + std::to_string(expected));
  }
  if (session_.progress().active) return fail(a, "the progress bar is still shown after the tune");
  checkTunedValuesShown(a);
}

void ActionRunner::checkLoadedParams(const Action& a) {
  if (!noticeSince("loaded parameters from")) return fail(a, "the parameters were not loaded");
  const core::EntryInfo* info = session_.capture().info();
  if (!info) return fail(a, "no entry");
  try {
    core::ParamsFile file = core::readParams(a.arg);
    auto expected = core::headParamsFor(file, a.arg, info->name, info->layer, info->headsQ,
                                        session_.runs().config().defaults);
    auto r = session_.runs().result();
    for (int64_t h = 0; h < info->headsQ; ++h) {
      if (!(session_.runs().paramsFor(h) == expected[h])) {
        return fail(a,
                    "head " + std::to_string(h) + ": the loaded parameters are not the session's parameters");
      }
      const core::HeadResult* hr = r ? r->find(session_.capture().selected.batch, h) : nullptr;
      if (!hr || !(hr->params == expected[h])) {
        return fail(a,
                    "head " + std::to_string(h) + ": the results were not re-run with the loaded parameters");
      }
    }
  } catch (const std::exception& e) {
    fail(a, e.what());
  }
}

void ActionRunner::checkView(const Action& a) {
  if (!app_.viewVisible(a.arg)) return fail(a, "the view " + a.arg + " is not shown");
  if (a.arg.rfind("overview", 0) != 0) return;
  const auto& o = session_.overview();
  if (o.filling() || o.doneCount() != o.rows().size()) return fail(a, "the overview was not filled");
  for (const auto& row : o.rows()) {
    if (!row.error.empty()) return fail(a, "overview: entry " + row.entry + ": " + row.error);
  }
}

void ActionRunner::checkSweep(const Action& a) {
  if (a.arg == "orders" || a.arg == "methods") {
    auto o = session_.orderCurves().data();
    if (!o || o->done != o->total || session_.orderCurves().running())
      return fail(a, "the sweep did not finish");
    if (o->series.empty()) return fail(a, "no token order applies to the entry");
    return;
  }
  auto d = session_.curves().data();
  if (!d || d->done != d->total || session_.curves().running()) return fail(a, "the sweep did not finish");
  size_t expected = a.arg == "all" ? static_cast<size_t>(session_.capture().headsQ()) : 1;
  if (d->heads.size() != expected) return fail(a, "the sweep covers the wrong heads");
}

void ActionRunner::checkPreset(const Action& a) {
  auto r = session_.runs().result();
  const core::EntryInfo* info = session_.capture().info();
  if (!info || !r) return fail(a, "no results");
  for (int64_t h = 0; h < info->headsQ; ++h) {
    const core::HeadResult* hr = r->find(session_.capture().selected.batch, h);
    if (!hr || !(hr->params == session_.runs().paramsFor(h))) {
      return fail(a, "head " + std::to_string(h) + ": the results were not re-run with the preset");
    }
  }
}

void ActionRunner::checkTuneCancelled(const Action& a) {
  auto t = session_.tuning().lastTune();
  if (!t || t == tuneBefore_) return fail(a, "the cancelled tune reported no result");
  if (!t->cancelled) fail(a, "the tune finished although it was cancelled");
  if (session_.progress().active) fail(a, "the progress bar is still shown after cancel");
}

void ActionRunner::checkMethodsCompared(const Action& a) {
  const MethodCompareController& mc = session_.methodCompare();
  if (mc.running() || mc.done() != mc.total() || mc.total() == 0)
    return fail(a, "the comparison did not finish");
  for (const core::EntryInfo& e : session_.capture().entries) {
    const MethodWinners* w = mc.find(e.name);
    if (!w || int64_t(w->winner.size()) != e.headsQ) return fail(a, "entry " + e.name + " was not compared");
  }
}

// A budget set while "follow budget" is on re-tunes the selected head with the new budget.
void ActionRunner::checkBudgetFollowed(const Action& a) {
  std::string key = a.arg.substr(0, a.arg.find('='));
  if (!session_.tuning().followBudget() || (key != "l1" && key != "l2")) return;
  auto t = session_.tuning().lastTune();
  if (!t || t == tuneBefore_) return fail(a, "follow budget is on but the selected head was not re-tuned");
  const Budget& b = session_.tuning().budget();
  if (std::abs(t->options.l1 - b.l1) > 1e-12 || std::abs(t->options.l2 - b.l2) > 1e-12) {
    return fail(a, "the re-tune did not use the new budget");
  }
  checkTunedValuesShown(a);
}

void ActionRunner::finish(const Action& a) {
  if (session_.messages().hasError()) return fail(a, session_.messages().frontError());
  switch (a.command->id) {
    case CommandId::ExportMasks:
    case CommandId::ExportParams:
      checkFileWritten(a, a.arg);
      break;
    case CommandId::ExportReport:
      if (checkFileWritten(a, a.arg) && reportFormatOf(a.arg) == ".md") {
        fs::path img = fs::path(a.arg).parent_path() / (fs::path(a.arg).stem().string() + "_img");
        std::error_code ec;
        if (!fs::is_directory(img, ec)) fail(a, img.string() + " (heatmaps) was not written");
      }
      break;
    case CommandId::LoadParams:
      checkLoadedParams(a);
      break;
    case CommandId::LoadEval:
      if (!session_.checks().eval() || session_.checks().evalPath() != a.arg)
        fail(a, session_.messages().hasError() ? session_.messages().frontError()
                                               : std::string("the evaluation report was not loaded"));
      break;
    case CommandId::TuneHead:
      checkTune(a);
      break;
    case CommandId::TuneCancel:
      checkTuneCancelled(a);
      break;
    case CommandId::Profile:
      if (!session_.profiling().timing().valid) fail(a, "no timing summary");
      if (session_.progress().active) fail(a, "the progress bar is still shown after profiling");
      break;
    case CommandId::SweepHead:
      checkSweep(a);
      break;
    case CommandId::CompareMethods:
      checkMethodsCompared(a);
      break;
    case CommandId::PresetCdf:
      checkPreset(a);
      break;
    case CommandId::Set:
      checkBudgetFollowed(a);
      break;
    case CommandId::SelectEntry: {
      auto r = session_.runs().result();
      if (session_.capture().entryName != a.arg || !r || r->info.name != a.arg)
        fail(a, "entry " + a.arg + " is not shown");
      break;
    }
    case CommandId::Permute: {
      auto r = session_.runs().result();
      if (!r || r->info.permutation != core::parsePermutation(a.arg)) fail(a, "the run is not in that order");
      break;
    }
    case CommandId::SelectHead:
      if (session_.capture().selected.head != std::atoll(a.arg.c_str()))
        fail(a, "head not selected (out of range?)");
      break;
    case CommandId::ShowView:
      checkView(a);
      break;
    case CommandId::Screenshot:
      if (!screenshotError_.empty()) fail(a, screenshotError_);
      break;
    default:
      break;
  }
}

}  // namespace sparge::gui

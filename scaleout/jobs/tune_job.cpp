// The tune job: schedule (identical on every rank), tune the pieces this rank gets, gather on rank 0, write.
#include "tune_job.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <optional>
#include <set>

#include "job_runner.h"
#include "job_support.h"
#include "sparge/core/error.h"
#include "sparge/core/memory_guard.h"
#include "sparge/core/names.h"
#include "sparge/core/parallel.h"
#include "sparge/core/params_io.h"
#include "sparge/scaleout/codec.h"
#include "sparge/scaleout/partition.h"
#include "sparge/scaleout/resume.h"
#include "sparge/scaleout/wire.h"

namespace sparge::scaleout {
// Where a rank's time went, sent to rank 0 with its last message: how many pieces it tuned, engine runs and
// tuning logic, loading entries, and coordination (rank 0's receiving, printing, checkpoints and answers to
// requests for pieces; the others' sends, polls and waits for a piece);
// before that, its start-up (process start, MPI, opening the capture, planning, creating the engine) and
// the engine's creation alone (CUDA's start-up and context); and its first piece, which pays what the later
// ones find ready (buffers, kernels loaded on first use, the first entry's load when it was not done by
// then).
struct RankTimes {
  int64_t pieces = 0, probes = 0;
  double workSeconds = 0, loadSeconds = 0, coordinationSeconds = 0;
  double startupSeconds = 0, engineSeconds = 0, firstPieceSeconds = 0;
};

template <>
struct WireFields<RankTimes> {
  template <class S, class F>
  static void visit(S& v, F&& f) {
    f(v.pieces, v.probes, v.workSeconds, v.loadSeconds, v.coordinationSeconds, v.startupSeconds,
      v.engineSeconds, v.firstPieceSeconds);
  }
};

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::vector<int64_t> wantedHeads(const core::TuneOptions& o, int64_t headsQ) {
  std::vector<int64_t> heads = o.heads;
  if (heads.empty())
    for (int64_t h = 0; h < headsQ; ++h) heads.push_back(h);
  std::sort(heads.begin(), heads.end());
  heads.erase(std::unique(heads.begin(), heads.end()), heads.end());
  return heads;
}

HeadFinishedHook& headFinishedHook() {
  static HeadFinishedHook hook;  // function-local: set from other files' static initialisers
  return hook;
}

class TuneJobRunner {
 public:
  TuneJobRunner(Transport& t, const TuneJobSpec& spec, const TuneJobOutput& out)
      : transport_(t),
        spec_(spec),
        out_(out),
        runner_(t, events()),
        ranks_(size_t(t.size())),
        rankTimes_(size_t(t.size())) {}

  int run() {
    try {
      if (job().root() && spec_.checkOutputs) spec_.checkOutputs();  // rank 0 writes; the others stop
      plan();
      // Placing the rank sets environment variables: before any other thread starts. The first entry then
      // loads on another thread while the engine is created (CUDA's start-up); they took turns before.
      const Placement placement = placeThisRank(transport_, spec_.threads);
      prefetchFirst();
      const auto engineStart = Clock::now();
      RankEngine engine = makeRankEngine(placement, spec_.engine);
      times_.engineSeconds = secondsSince(engineStart);
      if (!engine.selection.message.empty() && job().root())
        std::fprintf(stderr, "note: %s\n", engine.selection.message.c_str());
      if (!engine.note.empty() && transport_.localRank() == 0)
        std::fprintf(stderr, "note: %s\n", engine.note.c_str());
      if (job().root() && out_.started) out_.started(engine.info.engine);
      if (job().root()) announcePlan();
      job().hello(engine.info);
      work(*engine.selection.engine);
    } catch (const std::exception& e) {
      job().fail(where(), e.what());
    }
    times_.probes = probes_;
    times_.pieces = runner_.scheduled() ? runner_.feed().started() : 0;
    const JobOutcome outcome = job().finish(encode(times_));
    return job().root() ? conclude(outcome) : (outcome.failures.empty() ? 0 : 1);
  }

 private:
  Job& job() { return runner_.job(); }
  const Job& job() const { return runner_.job(); }
  const Schedule& schedule() const { return runner_.schedule(); }

  // Called while runner_ is being built: only the lambdas may use it.
  JobEvents events() {
    JobEvents e;
    e.hello = [this](const RankInfo& r) { onHello(r); };
    e.final = [this](int rank, const std::string& payload) {
      const auto t = decode<RankTimes>(payload, "final message of rank " + std::to_string(rank));
      totalProbes_ += t.probes;
      if (size_t(rank) < rankTimes_.size()) rankTimes_[size_t(rank)] = t;
    };
    e.progress = [this](const JobProgress& j) { onProgress(j); };
    e.clear = [this] {
      if (out_.clearProgress) out_.clearProgress();
    };
    e.unitDone = [this](size_t unit, std::vector<std::string>& payloads) { onGroup(unit, payloads); };
    e.unitsHandedOver = [this] { checkpoint(); };
    return e;
  }

  std::string where() const { return currentEntry_.empty() ? "" : "entry " + currentEntry_; }

  // Every rank computes the same schedule from the same inputs, so no plan is ever sent.
  void plan() {
    std::optional<core::ParamsFile> resume;
    if (!spec_.resumePath.empty()) {
      resume = core::readParams(spec_.resumePath);
      checkResumable(*resume, spec_.resumePath, spec_.options);
      if (resume->permute != spec_.permute)  // its heads were tuned on other blocks
        throw Error(spec_.resumePath, std::string("was tuned in ") + core::toString(resume->permute) +
                                          " token order, this run uses " + core::toString(spec_.permute) +
                                          " — pass --permute " + core::toString(resume->permute) +
                                          " or tune anew");
      if (job().root()) checkResumeIdentity(*resume);
      others_ = otherGroups(*resume, spec_.groups);
      for (const core::TunedGroup& g : others_)
        for (const core::TunedHead& h : g.heads) resumedKeys_.insert({g.name, h.head});
    }
    std::vector<WorkUnit> units;
    for (const core::TuneGroupInput& g : spec_.groups) {
      const int64_t headsQ = g.entries.front().headsQ;
      const std::vector<int64_t> wanted = wantedHeads(spec_.options, headsQ);
      std::string note;
      resumed_.push_back(resume ? finishedHeads(*resume, g, headsQ, &note) : std::vector<core::TunedHead>{});
      resumedTunedOn_.push_back({});
      if (resume && !resumed_.back().empty())
        for (const core::ParamsGroup& pg : resume->groups)
          if (pg.name == g.name) resumedTunedOn_.back() = pg.tunedOn;
      if (!note.empty() && job().root()) std::fprintf(stderr, "note: %s\n", core::printable(note).c_str());
      for (const core::TunedHead& h : resumed_.back()) resumedKeys_.insert({g.name, h.head});
      WorkUnit u;
      for (const core::TuneInput& e : g.entries) u.costPerHead += headCost(spec_.infos.at(inputKey(e)));
      for (int64_t h : wanted)
        if (std::none_of(resumed_.back().begin(), resumed_.back().end(),
                         [h](const core::TunedHead& t) { return t.head == h; }))
          u.heads.push_back(h);
      units.push_back(std::move(u));
    }
    runner_.plan(planWork(units, job().size()), units.size(), [this](const Piece& p) { return unitsOf(p); });
  }

  // Heads kept from --resume must have been tuned on this run's inputs: a file tuned on another capture of
  // the same shape would otherwise be taken whole ("2 heads kept, 0 to tune") and its budgets broken here.
  void checkResumeIdentity(const core::ParamsFile& file) {
    bool unrecorded = false;
    for (const core::TuneGroupInput& g : spec_.groups) {
      const auto pg = std::find_if(file.groups.begin(), file.groups.end(),
                                   [&](const core::ParamsGroup& p) { return p.name == g.name; });
      if (pg == file.groups.end() || pg->heads.empty()) continue;
      if (pg->tunedOn.empty()) {
        unrecorded = true;
        continue;
      }
      for (const core::TuneInput& e : g.entries) {
        const std::string digest = spec_.digestOf ? spec_.digestOf(e) : std::string();
        if (core::identityOf(*pg, digest) == core::ParamsIdentity::Matches) continue;
        throw Error(
            spec_.resumePath,
            "group \"" + core::printable(g.name) + "\" was tuned on " + core::describeTunedOn(pg->tunedOn) +
                ", not on " + core::printable(e.capture) + ":" + core::printable(e.name) +
                " (content digest " + digest +
                ") — its heads cannot be kept for this input: resume with the captures it was tuned on, "
                "or tune into a new file without --resume");
      }
    }
    if (unrecorded)
      std::fprintf(stderr,
                   "warning: %s does not record the inputs its groups were tuned on (a file from before "
                   "\"tuned_on\"): the heads it holds are kept unchecked\n",
                   core::printable(spec_.resumePath).c_str());
  }

  // Work units of a piece: entry × head pairs.
  int64_t unitsOf(const Piece& p) const {
    return int64_t(p.heads.size() * spec_.groups[size_t(p.unit)].entries.size());
  }

  void announcePlan() {
    size_t resumedHeads = 0, todo = 0;
    for (const auto& r : resumed_) resumedHeads += r.size();
    for (const auto& p : schedule().pieces) todo += p.heads.size();
    if (!spec_.resumePath.empty())
      std::fprintf(stderr, "resuming %s: %zu head%s kept, %zu to tune\n",
                   core::printable(spec_.resumePath).c_str(), resumedHeads, resumedHeads == 1 ? "" : "s",
                   todo);
    if (job().size() > 1 && schedule().queue)
      std::fprintf(stderr, "plan: %zu groups in %zu pieces over %d ranks, handed out as ranks become free\n",
                   spec_.groups.size(), schedule().pieces.size(), job().size());
    else if (job().size() > 1)
      std::fprintf(stderr, "plan: %zu groups in %zu pieces over %d ranks, estimated load imbalance %.2f\n",
                   spec_.groups.size(), schedule().pieces.size(), job().size(), schedule().imbalance);
  }

  bool interrupted() const { return spec_.interrupt && spec_.interrupt->load(); }

  // The group with loaders that record which entry this rank is reading (for error messages) and check,
  // before allocating, that tuning `heads` of it fits in memory. Once an entry is there, the next piece's
  // entry starts loading on another thread (prefetchNext), when the next piece is known by then.
  core::TuneGroupInput traced(const core::TuneGroupInput& g, size_t heads) {
    core::TuneGroupInput copy = g;
    for (core::TuneInput& e : copy.entries)
      e.load = [this, load = e.load, name = e.name, capture = e.capture, key = inputKey(e), heads] {
        currentEntry_ = name;
        const auto t0 = Clock::now();
        std::shared_ptr<const core::EntryData> data = takePrefetched(key);
        if (!data) data = stillLoaded(key);
        if (!data) {
          core::checkRunMemory(capture, spec_.infos.at(key), spec_.options.geometry, heads);
          data = load();
        }
        times_.loadSeconds += secondsSince(t0);
        lastName_ = key;
        lastData_ = data;
        entryLoaded_ = true;
        prefetchNext();
        return data;
      };
    return copy;
  }

  // The prefetched entry if it is `name` (its loading error, if any, is thrown here, as a direct load's
  // would be). A prefetch of another entry stays for its piece: the entries of a group tuned together are
  // loaded in turn while the next piece's entry waits.
  std::shared_ptr<const core::EntryData> takePrefetched(const std::string& name) {
    if (!prefetch_ || prefetch_->name != name) return nullptr;
    std::future<std::shared_ptr<const core::EntryData>> data = std::move(prefetch_->data);
    prefetch_.reset();
    return data.get();
  }

  // The entry the engine still holds from the previous piece, if it is `name` (where an entry's heads are
  // split, a rank may get two of its pieces in a row): used again rather than read again. No memory check:
  // the entry is in memory already, and a queue hands pieces out largest first, so a rank's later piece of
  // an entry has no more heads than its earlier one.
  std::shared_ptr<const core::EntryData> stillLoaded(const std::string& name) const {
    return name == lastName_ ? lastData_.lock() : nullptr;
  }

  // The first entry this rank tunes, started before the engine exists. Its memory check runs on the loading
  // thread too: a failure of the check, like one of the load, is thrown when the entry's turn comes, and is
  // reported as the entry's.
  void prefetchFirst() {
    const std::vector<int>& mine = schedule().initial[size_t(job().rank())];
    if (mine.empty()) return;
    const Piece& first = schedule().pieces[size_t(mine.front())];
    const core::TuneInput& in = spec_.groups[size_t(first.unit)].entries.front();
    const size_t heads = first.heads.size();
    prefetch_ = Prefetched{inputKey(in), core::startAsync([this, &in, heads] {
                             core::checkRunMemory(in.capture, spec_.infos.at(inputKey(in)),
                                                  spec_.options.geometry, heads);
                             return in.load();
                           })};
  }

  // Loading takes a large share of tuning on a GPU (HDF5 reads and conversion), so the next piece's first
  // entry is read while this one is tuned, when memory allows both at once.
  void prefetchNext() {
    if (!next_ || prefetch_) return;
    const core::TuneInput& in = *next_;
    next_ = nullptr;
    core::MemoryEstimate twice =
        core::estimateRunMemory(spec_.infos.at(inputKey(in)), spec_.options.geometry, int64_t(nextHeads_));
    twice.entryBytes *= 2;
    twice.engineBytes *= 2;
    twice.referenceBytes *= 2;
    try {
      core::checkMemory(twice, in.name);
    } catch (const Error&) {
      return;  // loaded when its turn comes, with the memory check that says why if it fails then
    }
    prefetch_ = Prefetched{inputKey(in), core::startAsync(in.load)};
  }

  // Once the piece after `current` is known (at the start of `current`, or when rank 0's answer arrives
  // during it): its first entry is loaded ahead, from when `current`'s first entry is there.
  void followNext(int current) {
    if (nextKnown_) return;
    const std::optional<int> later = runner_.feed().ahead();
    if (!later) return;
    nextKnown_ = true;
    setNext(current, *later);
    if (entryLoaded_) prefetchNext();
  }

  // What prefetchNext loads for piece `later`: its first entry, unless `current` tunes that entry alone, as
  // the engine then still holds it when `later` starts (stillLoaded).
  void setNext(int current, int later) {
    next_ = nullptr;
    if (later == kNoPiece) return;
    const Piece& piece = schedule().pieces[size_t(later)];
    const core::TuneInput& in = spec_.groups[size_t(piece.unit)].entries.front();
    const std::vector<core::TuneInput>& now =
        spec_.groups[size_t(schedule().pieces[size_t(current)].unit)].entries;
    if (now.size() == 1 && inputKey(now.front()) == inputKey(in)) return;
    next_ = &in;
    nextHeads_ = piece.heads.size();
  }

  void work(core::Engine& engine) {
    workStart_ = Clock::now();
    times_.startupSeconds = std::chrono::duration<double>(workStart_ - processStart()).count();
    runner_.work([&](int pi) { return tunePiece(engine, pi); },
                 [&](const std::function<void()>& askForPiece) {
                   if (interrupted()) job().requestStop();
                   coordinate([&] {
                     askForPiece();
                     return false;
                   });
                 });
    currentEntry_.clear();
  }

  // This rank's progress with `pieceCost`, `pieceUnits` and `pieceProbes` of the current piece done.
  RankProgress progressNow(double pieceCost, int64_t pieceUnits, int64_t pieceProbes,
                           const std::string& current) const {
    RankProgress rp;
    rp.costDone = doneCost_ + pieceCost;
    rp.unitsDone = unitsDone_ + pieceUnits;
    rp.probes = probes_ + pieceProbes;
    rp.current = current;
    rp.elapsedSeconds = secondsSince(workStart_);
    return rp;
  }

  // Tunes piece `pi` and sends its heads to rank 0; false when the job was stopped meanwhile.
  bool tunePiece(core::Engine& engine, int pi) {
    const Piece& piece = schedule().pieces[size_t(pi)];
    next_ = nullptr;
    nextKnown_ = entryLoaded_ = false;
    followNext(pi);
    const core::TuneGroupInput group = traced(spec_.groups[size_t(piece.unit)], piece.heads.size());
    currentEntry_ = group.entries.front().name;
    core::TuneOptions opt = spec_.options;
    opt.heads = piece.heads;
    core::TuneCallbacks cb;
    cb.cancel = &job().stopFlag();
    cb.progress = [&](const core::TuneProgress& p) {
      phase_ = p.phase;
      const RankProgress rp = progressNow(piece.cost * p.fraction, p.unitsDone, p.probes, p.group);
      coordinate([&] {
        job().progress(rp);
        if (interrupted()) job().requestStop();
        const bool stop = job().service();
        followNext(pi);
        return stop;
      });
    };
    // Heads finished before a failure still reach rank 0 (kept as an incomplete group).
    core::TunedGroup partial;
    cb.headFinished = [&](const core::TunedGroup& g, const core::TunedHead&) {
      partial = g;
      ++headsDone_;
      injectFault();
    };
    core::TuneResult r;
    try {
      r = core::tune(engine, {group}, opt, cb);
    } catch (...) {
      if (!partial.heads.empty()) {
        // Finished heads are final: a failure after the piece's last head leaves the piece whole.
        partial.complete = partial.heads.size() == piece.heads.size();
        job().submit(pi, encodeGroup(partial));
      }
      throw;
    }
    probes_ += r.probes;
    coordinate([&] {
      job().submit(pi, encodeGroup(r.groups.empty() ? core::TunedGroup{} : r.groups.front()));
      return false;
    });
    times_.workSeconds = secondsSince(workStart_);
    if (runner_.feed().started() == 1) times_.firstPieceSeconds = times_.workSeconds;
    if (r.cancelled) return false;
    doneCost_ += piece.cost;
    unitsDone_ += unitsOf(piece);
    coordinate([&] {
      job().progress(progressNow(0, 0, 0, group.name), true);
      return false;
    });
    return true;
  }

  // Runs a step of the job's messaging and counts its time as coordination.
  template <class F>
  bool coordinate(F&& step) {
    const auto t0 = Clock::now();
    const bool stop = step();
    times_.coordinationSeconds += secondsSince(t0);
    return stop;
  }

  // The test seam (setHeadFinishedHookForTests); nothing in the product sets it.
  void injectFault() const {
    if (const HeadFinishedHook& hook = headFinishedHook()) hook(job().rank(), headsDone_);
  }

  // ---- rank 0 ----

  void onHello(const RankInfo& r) {
    ranks_[size_t(r.rank)] = r;
    if (++hellos_ == job().size() && job().size() > 1) {
      if (out_.clearProgress) out_.clearProgress();
      std::fprintf(stderr, "%s\n", describeRanks(ranks_, transport_.name()).c_str());
    }
  }

  void onProgress(const JobProgress& j) {
    if (!out_.progress) return;
    core::TuneProgress p;
    p.unitsDone = j.unitsDone;
    p.unitsTotal = j.unitsTotal;
    p.fraction = j.fraction;
    p.elapsedSeconds = j.elapsedSeconds;
    p.etaSeconds = j.etaSeconds;
    p.group = j.current;
    p.phase = phase_;
    p.probes = j.probes;
    out_.progress(p);
  }

  // The unit's heads kept from --resume plus those the ranks sent, ordered by head.
  core::TunedGroup merge(size_t unit, std::vector<std::string>& payloads, bool whole) {
    const core::TuneGroupInput& in = spec_.groups[unit];
    core::TunedGroup g;
    g.name = in.name;
    g.layer = in.layer;
    for (const core::TuneInput& e : in.entries)
      if (std::find(g.entries.begin(), g.entries.end(), e.name) == g.entries.end())
        g.entries.push_back(e.name);
    g.headsQ = in.entries.front().headsQ;
    g.heads = resumed_[unit];
    g.tunedOn = resumedTunedOn_[unit];
    g.complete = whole;
    for (const std::string& p : payloads) {
      core::TunedGroup part = decodeGroup(p, "tuned group " + in.name);
      if (!part.tunedOn.empty()) g.tunedOn = part.tunedOn;
      g.heads.insert(g.heads.end(), part.heads.begin(), part.heads.end());
      g.complete = g.complete && part.complete;
      g.elapsedSeconds = std::max(g.elapsedSeconds, part.elapsedSeconds);
    }
    std::sort(g.heads.begin(), g.heads.end(),
              [](const core::TunedHead& a, const core::TunedHead& b) { return a.head < b.head; });
    return g;
  }

  // A group whose pieces have all arrived (in order): printed and stored; the runner then has the file
  // updated (checkpoint).
  void onGroup(size_t unit, std::vector<std::string>& payloads) {
    const bool tuned = !payloads.empty();
    done_.push_back(merge(unit, payloads, true));
    if (tuned && out_.group) {
      if (out_.clearProgress) out_.clearProgress();
      out_.group(done_.back());
    }
  }

  core::TuneResult result() const {
    core::TuneResult r;
    r.options = spec_.options;
    r.engine = commonEngineName(ranks_);
    r.groups = done_;
    r.groups.insert(r.groups.end(), others_.begin(), others_.end());
    r.probes = totalProbes_;
    return r;
  }

  // The inputs' descriptions by entry name (an entry of several captures: the first capture's).
  std::map<std::string, core::EntryInfo> infosByName() const {
    std::map<std::string, core::EntryInfo> byName;
    for (const core::TuneGroupInput& g : spec_.groups)
      for (const core::TuneInput& e : g.entries) byName.emplace(e.name, spec_.infos.at(inputKey(e)));
    return byName;
  }

  // Writes the parameter file; returns how many groups it holds.
  size_t write(const core::TuneResult& r, bool complete) const {
    core::ParamsFile file = core::toParamsFile(r, spec_.capturePath);
    file.complete = complete;
    core::recordPermutation(file, spec_.permute, infosByName());
    if (!spec_.trace) {
      core::writeParams(spec_.output, file);
      return file.groups.size();
    }
    // Heads kept from --resume have no trace of this run: they are written without one.
    core::TuneResult traced = r;
    for (core::TunedGroup& g : traced.groups)
      std::erase_if(g.heads, [&](const core::TunedHead& h) {
        return resumedKeys_.count({g.name, h.head}) > 0;
      });
    core::writeParams(spec_.output, file, &traced);
    return file.groups.size();
  }

  // After a handed-over group: the file so far, top-level "complete": false, so that a killed job leaves
  // whole groups that say they are not the whole result (and --resume finishes them). Each checkpoint
  // rewrites the whole file, which grows with the groups: after every group, a model of thousands of
  // entries would spend time quadratic in its size on them. So once a checkpoint holds kSmallCheckpoint
  // groups, after a write that took t the next waits until kCheckpointSpacing·t have passed (checkpoints
  // then take at most ~1/kCheckpointSpacing of rank 0's time). Smaller files are written after every group
  // whatever their write took, so that a short job's checkpoints, and a disk that refuses them, do not
  // depend on how busy the disk was. A failed checkpoint stops nothing: the result is written at the end,
  // when the disk may have room again.
  void checkpoint() {
    const Clock::time_point t0 = Clock::now();
    if (t0 < nextCheckpoint_ && checkpointGroups_ >= kSmallCheckpoint) return;
    try {
      checkpointGroups_ = write(result(), false);
    } catch (const Error& e) {
      if (!checkpointWarned_) {
        if (out_.clearProgress) out_.clearProgress();
        std::fprintf(stderr,
                     "warning: checkpoint not written (%s); tuning goes on, the result is written at "
                     "the end\n",
                     core::printable(e.what()).c_str());
      }
      checkpointWarned_ = true;
    }
    const Clock::time_point t1 = Clock::now();
    nextCheckpoint_ = t1 + kCheckpointSpacing * (t1 - t0);
  }

  // The last write ("complete" unless the job stopped early); when it fails, say what the file holds.
  void writeResult(const core::TuneResult& r) const {
    try {
      write(r, !r.cancelled);
    } catch (const Error& e) {
      if (checkpointGroups_ == 0) throw;
      throw Error(e.where(), e.problem() + " — the file still holds the checkpoint of " +
                                 std::to_string(checkpointGroups_) +
                                 " finished group(s), marked \"complete\": false");
    }
  }

  int conclude(const JobOutcome& outcome) {
    if (out_.clearProgress) out_.clearProgress();
    if (runner_.scheduled()) runner_.handOver();  // groups that needed no tuning (all kept by --resume)
    // Groups the job did not finish: printed when they hold newly tuned heads, kept in the file as
    // incomplete.
    if (runner_.scheduled())
      runner_.collector().remaining([&](size_t unit, std::vector<std::string>& payloads, bool all) {
        const bool tuned = !payloads.empty();
        done_.push_back(merge(unit, payloads, all));
        if (tuned && out_.group) out_.group(done_.back());
      });
    core::TuneResult r = result();
    r.cancelled = outcome.stopped;
    r.elapsedSeconds = secondsSince(start_);
    const int64_t kept = r.headsFinished();
    if (outcome.stopped) return concludeStopped(r, kept, !outcome.failures.empty());
    writeResult(r);
    int64_t sparse = 0;
    for (const auto& g : r.groups)
      for (const auto& h : g.heads) sparse += h.isSparse ? 1 : 0;
    std::printf(
        "\n%lld heads tuned (%lld sparse, %lld dense) in %.1f s, %lld engine runs; parameters written to "
        "%s\n",
        (long long)kept, (long long)sparse, (long long)(kept - sparse), r.elapsedSeconds, (long long)r.probes,
        spec_.output.c_str());
    printRankTimes();
    if (out_.finished) out_.finished(r);
    return 0;
  }

  // One line a rank when there are several: a rank that took much longer than the others shows where, and
  // with a queue, how many pieces each rank took.
  void printRankTimes() const {
    if (rankTimes_.size() < 2) return;
    for (size_t rank = 0; rank < rankTimes_.size(); ++rank) {
      const RankTimes& t = rankTimes_[rank];
      std::printf(
          "  rank %zu: %.1f s, %lld piece%s (first piece %.2f s, loading entries %.1f s, coordination "
          "%.1f s), %lld engine runs; before them %.2f s of start-up (engine %.2f s)\n",
          rank, t.workSeconds, (long long)t.pieces, t.pieces == 1 ? "" : "s", t.firstPieceSeconds,
          t.loadSeconds, t.coordinationSeconds, (long long)t.probes, t.startupSeconds, t.engineSeconds);
    }
  }

  int concludeStopped(const core::TuneResult& r, int64_t kept, bool failed) {
    const char* why = failed ? "failed" : "interrupted";
    if (kept > 0) {
      writeResult(r);
      std::fprintf(stderr, "%s: kept %lld finished head%s in %s (%.1f s)%s\n", why, (long long)kept,
                   kept == 1 ? "" : "s", spec_.output.c_str(), r.elapsedSeconds,
                   " — `sparge tune ... --resume` with that file tunes only the rest");
    } else {
      std::fprintf(stderr, "%s: no head was finished, %s not written\n", why, spec_.output.c_str());
    }
    return failed ? 1 : 130;
  }

  Transport& transport_;
  const TuneJobSpec& spec_;
  const TuneJobOutput& out_;
  JobRunner runner_;  // the job, its schedule, this rank's feed and rank 0's collector
  std::vector<std::vector<core::TunedHead>> resumed_;       // per group: heads kept from --resume
  std::vector<std::vector<core::TunedOn>> resumedTunedOn_;  // per group: the inputs of those heads
  std::vector<core::TunedGroup> others_;  // groups of the resumed file this run does not tune
  std::set<std::pair<std::string, int64_t>> resumedKeys_;  // (group, head) kept from --resume
  std::vector<core::TunedGroup> done_;                     // rank 0: handed-over groups, in order
  std::vector<RankInfo> ranks_;
  int hellos_ = 0;
  int64_t probes_ = 0, totalProbes_ = 0;
  struct Prefetched {
    std::string name;
    std::future<std::shared_ptr<const core::EntryData>> data;
  };
  std::optional<Prefetched> prefetch_;     // the next piece's entry, loading or loaded
  const core::TuneInput* next_ = nullptr;  // what prefetchNext loads, for nextHeads_ heads
  size_t nextHeads_ = 0;
  bool nextKnown_ = false;    // the piece after the current one is known (followNext)
  bool entryLoaded_ = false;  // the current piece has loaded its first entry
  std::string lastName_;      // the entry loaded last, and its data while the engine holds it
  std::weak_ptr<const core::EntryData> lastData_;
  Clock::time_point workStart_{};     // this rank's first piece
  double doneCost_ = 0;               // estimated cost of this rank's finished pieces
  int64_t unitsDone_ = 0;             // their entry × head pairs
  RankTimes times_;                   // this rank's
  std::vector<RankTimes> rankTimes_;  // rank 0: every rank's, from their last messages
  int64_t headsDone_ = 0;             // heads this rank finished
  core::ProbePhase phase_ = core::ProbePhase::Select;
  std::string currentEntry_;
  static constexpr int kCheckpointSpacing = 20;
  static constexpr size_t kSmallCheckpoint = 4;  // groups; checkpoints this small are never spaced
  size_t checkpointGroups_ = 0;                  // groups in the last checkpoint written
  bool checkpointWarned_ = false;
  Clock::time_point nextCheckpoint_{};  // no checkpoint before this (see checkpoint())
  Clock::time_point start_ = Clock::now();
};

}  // namespace

void setHeadFinishedHookForTests(HeadFinishedHook hook) {
  headFinishedHook() = std::move(hook);
}

int runTuneJob(Transport& transport, const TuneJobSpec& spec, const TuneJobOutput& output) {
  TuneJobRunner runner(transport, spec, output);
  return runner.run();
}

}  // namespace sparge::scaleout

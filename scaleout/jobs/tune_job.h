// `sparge tune` as a job over one or many processes: the groups (their heads split only where whole groups
// cannot be balanced) are handed out largest first as ranks become free (or, with SPARGE_STATIC_PLAN=1,
// fixed per rank up front by estimated cost), every rank tunes the pieces it gets, rank 0 prints the groups in order, checkpoints the
// parameter file as groups finish ("complete": false; spaced so that rewriting a large file stays a small
// share of the job) and writes it atomically.
// --resume tunes only the heads a previous file lacks.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "sparge/core/engine.h"
#include "sparge/core/tuner.h"
#include "sparge/scaleout/transport.h"

namespace sparge::scaleout {

// The key of an input in TuneJobSpec::infos: entries of several captures may share a name.
inline std::string inputKey(const core::TuneInput& in) {
  return in.capture + '\n' + in.name;
}

struct TuneJobSpec {
  std::string capturePath;                       // the first capture (the file's "capture")
  std::vector<core::TuneGroupInput> groups;      // every group of the command, in order
  std::map<std::string, core::EntryInfo> infos;  // every input of the groups, by inputKey (cost model)
  // The content digest of an input, read from its capture (--resume checks the file's tuned_on with it).
  std::function<std::string(const core::TuneInput&)> digestOf;
  core::TuneOptions options;                     // heads: the requested query heads (empty = all)
  std::string output;
  bool trace = false;
  std::string resumePath;  // empty: tune everything
  core::EngineChoice engine = core::EngineChoice::Auto;
  int threads = 0;
  const std::atomic<bool>* interrupt = nullptr;  // set by Ctrl-C or SIGTERM
  std::function<void()> checkOutputs;            // rank 0, before any work: throws when -o is unusable
  core::Permutation permute = core::Permutation::None;  // recorded in the file with the groups' grids
};

// Rank 0's terminal output; the command keeps its own formatting.
struct TuneJobOutput {
  std::function<void(const std::string& engineName)> started;  // once rank 0's engine exists
  std::function<void(const core::TuneProgress&)> progress;     // the whole job
  std::function<void()> clearProgress;                         // before other output
  std::function<void(const core::TunedGroup&)> group;          // each finished group, in order
  std::function<void(const core::TuneResult&)> finished;       // once, after a run that was not stopped
};

// Runs on every rank; returns the exit code: 0, 1 when a rank failed (rank 0 prints which, where and
// why, and keeps the finished groups in the output), 130 when interrupted.
int runTuneJob(Transport& transport, const TuneJobSpec& spec, const TuneJobOutput& output);

// The test seam of the failure paths: called on a rank after each head it finished, with its rank and the
// heads it finished so far; a throw fails the rank as a lost GPU would in the middle of a group. Only test
// programs set it (tests/mpi/fault_injection.cpp); the product never does.
using HeadFinishedHook = std::function<void(int rank, int64_t headsDone)>;
void setHeadFinishedHookForTests(HeadFinishedHook hook);

}  // namespace sparge::scaleout

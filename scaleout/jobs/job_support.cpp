// Rank placement, engine creation per rank and the rank summaries rank 0 prints.
#include "job_support.h"

#include <algorithm>
#include <cstdlib>
#include <map>

#include "sparge/core/error.h"
#include "sparge/core/names.h"
#include "sparge/scaleout/placement.h"

namespace sparge::scaleout {
namespace {

Transport* gTransport = nullptr;
const std::chrono::steady_clock::time_point gProcessStart = std::chrono::steady_clock::now();

// SPARGE_BIND_NEAR_GPU=0 leaves unbound ranks unbound.
GpuCpus nearGpuCpus() {
  const char* bind = std::getenv("SPARGE_BIND_NEAR_GPU");
  if (bind && std::string(bind) == "0") return {};
  const char* order = std::getenv("CUDA_DEVICE_ORDER");
  const bool pciBusOrder = order && std::string(order) == "PCI_BUS_ID";
  return [pciBusOrder](const std::string& gpu) { return gpuLocalCpus("/sys", gpu, pciBusOrder); };
}

Placement placement(Transport& t, int threads) {
  return placeRank(t.localRank(), t.localSize(), visibleGpus(), hostCores(), usableCores(), threads,
                   nearGpuCpus());
}

// "a ×3, b" for the distinct values in first-seen order.
std::string counted(const std::vector<std::string>& values) {
  std::vector<std::pair<std::string, int>> seen;
  for (const std::string& v : values) {
    auto it = std::find_if(seen.begin(), seen.end(), [&](const auto& s) { return s.first == v; });
    if (it == seen.end())
      seen.emplace_back(v, 1);
    else
      ++it->second;
  }
  std::string out;
  for (const auto& [v, n] : seen)
    out += (out.empty() ? "" : ", ") + v + (n > 1 ? " ×" + std::to_string(n) : "");
  return out;
}

}  // namespace

Transport& jobTransport() {
  if (!gTransport) throw Error("sparge", "internal: no transport was opened");
  return *gTransport;
}

void setJobTransport(Transport* transport) {
  gTransport = transport;
}

Placement placeThisRank(Transport& transport, int threads) {
  Placement p = placement(transport, threads);
  applyPlacement(p);
  return p;
}

Schedule scheduleOf(const Plan& plan) {
  const char* fixed = std::getenv("SPARGE_STATIC_PLAN");
  if (plan.ranks <= 1 || (fixed && std::string(fixed) == "1")) return fixedSchedule(plan);
  return queueSchedule(queueOrder(plan), plan.ranks);
}

std::unique_ptr<PieceFeed> startFeed(Job& job, const Schedule& schedule, int64_t units) {
  double cost = 0;
  for (const Piece& p : schedule.pieces) cost += p.cost;
  job.setSchedule(schedule.describe(), cost, units);
  if (job.root()) job.serve(schedule.shared);
  return std::make_unique<PieceFeed>(job, schedule.initial[size_t(job.rank())], !schedule.shared.empty());
}

RankEngine makeRankEngine(const Placement& p, core::EngineChoice choice) {
  RankEngine r;
  r.selection = engines::makeEngine(choice, p.threads);
  r.note = p.note;
  r.info.engine = r.selection.engine->name();
  if (r.selection.engine->isGpu())
    r.info.device = (p.visibleDevices.empty() ? "GPU" : "GPU " + p.visibleDevices) +
                    (p.cpus.empty() ? "" : " (CPUs " + formatCpuList(p.cpus) + ")");
  else
    r.info.device = p.threads > 0 ? std::to_string(p.threads) + " threads" : "all cores";
  return r;
}

std::chrono::steady_clock::time_point processStart() {
  return gProcessStart;
}

std::string describeFailure(const RankFailure& f, int ranks) {
  // Entry names and messages may hold control bytes: printed through printable().
  const std::string where = core::printable(f.where), problem = core::printable(f.problem);
  if (ranks <= 1) return (where.empty() ? "" : where + ": ") + problem;
  return "rank " + std::to_string(f.rank) + " (" + core::printable(f.host) + ") failed" +
         (where.empty() ? "" : " on " + where) + ": " + problem;
}

std::string describeRanks(const std::vector<RankInfo>& ranks, const std::string& transportName) {
  std::vector<std::string> hosts, engines, devices;
  for (const RankInfo& r : ranks) {
    hosts.push_back(r.host);
    engines.push_back(r.engine);
    devices.push_back(r.host + " " + r.device);
  }
  std::map<std::string, int> distinctHosts;
  for (const std::string& h : hosts) ++distinctHosts[h];
  return std::to_string(ranks.size()) + " ranks on " + std::to_string(distinctHosts.size()) + " host" +
         (distinctHosts.size() == 1 ? "" : "s") + " via " + transportName + ": " + counted(engines) + " [" +
         counted(devices) + "]";
}

std::string commonEngineName(const std::vector<RankInfo>& ranks) {
  std::vector<std::string> names;
  for (const RankInfo& r : ranks)
    if (!r.engine.empty() && std::find(names.begin(), names.end(), r.engine) == names.end())
      names.push_back(r.engine);
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : " + ") + n;
  return out;
}

}  // namespace sparge::scaleout

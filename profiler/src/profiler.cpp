// The Profiler facade: chooses CUPTI / CUDA events / wall clock once, then records runs.
#include "sparge/profiler/profiler.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "nvml_loader.h"
#include "sparge/core/error.h"
#include "sparge/core/result.h"
#include "sparge/profiler/cupti_collector.h"
#include "sparge/profiler/event_timer.h"
#include "steady_clock.h"

#ifdef SPARGE_PROF_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif
#ifdef SPARGE_PROF_HAVE_CUPTI
#include "cupti_loader.h"
#endif

namespace sparge::prof {

namespace {

// Kernels launched by the run must have finished before its window closes.
void synchronizeDevice() {
#ifdef SPARGE_PROF_HAVE_CUDA
  cudaDeviceSynchronize();
  cudaGetLastError();
#endif
}

}  // namespace

struct Profiler::Impl {
  ProfilerOptions options;
  TimingSource source = TimingSource::WallClock;
  std::string reason;
  DeviceInfo device;
  CuptiCollector cupti;
  std::unique_ptr<EventTimer> events;
  std::vector<RunRecord> runs;
  bool open = false;
  uint64_t nextId = 1;
  uint64_t hostStartNs = 0;
  Workload workload;
  bool workloadFixed = false;            // set by setWorkload(): results no longer override it
  std::unique_ptr<NvmlSmClock> smClock;  // null: not sampled, smClockMissing says why
  std::string smClockMissing;
  std::string lastSampleError;
  std::vector<double> sampleUs;  // host cost of each SM clock read
  std::vector<std::string> notes;

  void openSmClock();
  void sampleSmClock(RunRecord& r);

  RunRecord& target() {
    if (runs.empty()) throw Error("profiler", "no run to record into: call begin() first");
    return runs.back();
  }
};

void Profiler::Impl::openSmClock() {
  if (!device.gpu) {
    smClockMissing = "no GPU";
    return;
  }
  if (!options.sampleSmClock) {
    smClockMissing = "SM clock sampling disabled";
    return;
  }
  std::string busId;
  int index = -1;
#ifdef SPARGE_PROF_HAVE_CUDA
  // CUDA ordinals and NVML indices differ (CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER); the bus id does not.
  char buf[64] = {};
  if (cudaDeviceGetPCIBusId(buf, int(sizeof buf), device.index) == cudaSuccess) {
    busId = buf;
  } else {
    cudaGetLastError();
    index = device.index;
  }
#endif
  std::string why;
  smClock = NvmlSmClock::open(nvml(), busId, index, why);
  if (!smClock) {
    smClockMissing = "NVML unavailable: " + why;
    return;
  }
  if (device.maxSmClockKHz <= 0 && smClock->maxMHz() > 0)
    device.maxSmClockKHz = int(smClock->maxMHz()) * 1000;
  if (busId.empty()) device.clockNote += "; NVML device matched by index (PCI bus id unavailable)";
}

// Called after the run's clocks stopped: the read costs tens of microseconds and must not be timed.
void Profiler::Impl::sampleSmClock(RunRecord& r) {
  const uint64_t t0 = steadyNs();
  std::string why;
  std::optional<unsigned> mhz = smClock->currentMHz(why);
  sampleUs.push_back(double(steadyNs() - t0) * 1e-3);
  if (mhz) {
    r.smClockMHz = double(*mhz);
  } else {
    lastSampleError = why;
  }
}

Profiler::Profiler(ProfilerOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.options = options;
  m.device = queryDevice(options.device);
  m.openSmClock();
  if (!m.device.gpu) {
    m.source = TimingSource::WallClock;
    m.reason = "no GPU (" + m.device.probeError + "): host wall clock";
#ifdef SPARGE_PROF_HAVE_CUPTI
    // Said now so that the fix is known before the program is moved to a GPU machine.
    if (options.useCupti && !cupti().ok) m.reason += "; CUPTI unavailable: " + cupti().error;
#endif
    return;
  }
  std::string why;
  if (options.useCupti) {
    if (m.cupti.start()) {
      m.source = TimingSource::Cupti;
      m.reason = m.cupti.externalCorrelation()
                     ? "CUPTI activity API; kernels matched to runs by external correlation id"
                     : "CUPTI activity API; " + m.cupti.reason();
      return;
    }
    why = "CUPTI unavailable: " + m.cupti.reason();
  } else {
    why = "CUPTI disabled";
  }
  if (options.useCudaEvents && EventTimer::available()) {
    m.events = std::make_unique<EventTimer>();
    m.source = TimingSource::CudaEvent;
    m.reason = why + "; CUDA events time whole runs, stage times come from the engine";
  } else {
    m.source = TimingSource::WallClock;
    m.reason = why + "; host wall clock";
  }
}

Profiler::~Profiler() = default;

TimingSource Profiler::source() const {
  return impl_->source;
}
const std::string& Profiler::sourceReason() const {
  return impl_->reason;
}
const DeviceInfo& Profiler::device() const {
  return impl_->device;
}
int Profiler::runs() const {
  return int(impl_->runs.size()) - (impl_->open ? 1 : 0);
}

void Profiler::begin(const RunInfo& info, std::optional<bool> warmup) {
  Impl& m = *impl_;
  if (m.open) throw Error("profiler", "begin() while a run is open: call end() first");
  RunRecord r;
  r.id = m.nextId++;
  r.index = int(m.runs.size());
  r.warmup = warmup.value_or(r.index < m.options.warmup);
  r.info = info;
  if (m.source == TimingSource::Cupti) {
    // Work queued before the run belongs to no run; let it drain so the time window stays clean.
    synchronizeDevice();
    r.clock = TimingSource::Cupti;
    r.startNs = m.cupti.timestampNs();
    m.cupti.push(r.id);
  } else {
    r.clock = TimingSource::WallClock;
    if (m.events) m.events->start(nullptr);
    r.startNs = steadyNs();
  }
  m.runs.push_back(std::move(r));
  m.open = true;
  m.hostStartNs = steadyNs();
}

void Profiler::end(const core::EntryResult* result) {
  Impl& m = *impl_;
  if (!m.open) throw Error("profiler", "end() without begin()");
  RunRecord& r = m.runs.back();
  m.open = false;
  if (m.source == TimingSource::Cupti) {
    m.cupti.pop();
    synchronizeDevice();
    r.endNs = m.cupti.timestampNs();
  } else {
    if (m.events) {
      m.events->stop(nullptr);
      r.samples.push_back({Stage::Total, m.events->elapsedMs(), TimingSource::CudaEvent});
    }
    r.endNs = steadyNs();
  }
  r.samples.push_back({Stage::Total, double(steadyNs() - m.hostStartNs) * 1e-6, TimingSource::WallClock});
  if (m.smClock) {
    // CUPTI synchronised above and the event stop was waited for; a bare wall clock did not wait.
    if (m.source == TimingSource::WallClock && !m.events) synchronizeDevice();
    m.sampleSmClock(r);
  }
  if (!result) return;
  if (!m.workloadFixed && (!r.warmup || !m.workload.valid())) m.workload = Workload::fromResult(*result);
  // The engine's own stage times. Under CUPTI the kernels are timed directly, but a CPU engine launches none,
  // so these are kept too, under their own clock.
  const core::StageTimes& t = result->times;
  const TimingSource src = parseTimingSource(t.clock).value_or(TimingSource::WallClock);
  if (t.predictMs > 0) r.samples.push_back({Stage::Predict, t.predictMs, src});
  if (t.quantizeMs > 0) r.samples.push_back({Stage::Quantize, t.quantizeMs, src});
  if (t.sparseMs > 0) r.samples.push_back({Stage::Sparse, t.sparseMs, src});
  if (t.referenceMs > 0 && !t.referenceCached) r.samples.push_back({Stage::Reference, t.referenceMs, src});
  if (t.metricsMs > 0) r.samples.push_back({Stage::Metrics, t.metricsMs, src});
}

void Profiler::recordWall(Stage stage, double ms) {
  record(stage, ms, TimingSource::WallClock);
}

void Profiler::record(Stage stage, double ms, TimingSource source) {
  impl_->target().samples.push_back({stage, ms, source});
}

void Profiler::setWorkload(const Workload& workload) {
  impl_->workload = workload;
  impl_->workloadFixed = true;
}

void Profiler::addNote(const std::string& note) {
  auto& notes = impl_->notes;
  if (std::find(notes.begin(), notes.end(), note) == notes.end()) notes.push_back(note);
}

TimingReport Profiler::report() {
  return buildReport(collect());
}

ReportInput Profiler::collect() {
  Impl& m = *impl_;
  ReportInput in;
  in.source = m.source;
  in.sourceReason = m.reason;
  in.device = m.device;
  in.workload = m.workload;
  in.notes = m.notes;
  in.smClockMissing = m.smClock ? (m.lastSampleError.empty() ? std::string() : "NVML: " + m.lastSampleError)
                                : m.smClockMissing;
  if (!m.sampleUs.empty()) in.smClockSampleUs = computeStats(m.sampleUs).median;
  for (const RunRecord& r : m.runs) {
    if (m.open && &r == &m.runs.back()) break;  // an open run has no end yet
    in.runs.push_back(r);
  }
  if (m.cupti.active()) {
    m.cupti.flush();
    std::vector<RunWindow> windows;
    for (const RunRecord& r : in.runs) windows.push_back({r.id, r.startNs, r.endNs});
    in.kernels = m.cupti.log().resolve(windows);
    in.droppedRecords = m.cupti.log().dropped();
    bool any = false;
    for (const KernelSample& k : in.kernels) {
      for (const RunRecord& r : in.runs) any = any || (!r.warmup && k.runId == r.id);
      if (any) break;
    }
    if (!any && !in.runs.empty()) {
      // A CPU engine on a GPU machine: CUPTI is up but saw nothing. Say so rather than report empty stages.
      in.source = TimingSource::WallClock;
      in.sourceReason +=
          "; CUPTI recorded no kernels in the profiled runs (CPU engine?): engine stage times used";
    }
  }
  return in;
}

void Profiler::reset() {
  Impl& m = *impl_;
  if (m.open) throw Error("profiler", "reset() while a run is open");
  m.runs.clear();
  m.cupti.log().clear();
  m.workload = {};
  m.workloadFixed = false;
  m.sampleUs.clear();
  m.lastSampleError.clear();
  m.notes.clear();
}

}  // namespace sparge::prof

// The one-process transport, launcher detection and loading of the MPI transport plugin.
#include "sparge/scaleout/transport.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <deque>
#include <filesystem>
#include <vector>

#include "sparge/core/error.h"

namespace sparge::scaleout {
namespace {

class LocalTransport : public Transport {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int localRank() const override { return 0; }
  int localSize() const override { return 1; }
  std::string host() const override {
    char buf[256] = {};
    if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
    return buf;
  }
  std::string name() const override { return "one process"; }
  void send(int dest, int tag, std::string payload) override {
    if (dest != 0) throw Error("transport", "rank " + std::to_string(dest) + " does not exist (1 process)");
    queue_.push_back(Message{0, tag, std::move(payload)});
  }
  std::optional<Message> poll() override {
    if (queue_.empty()) return std::nullopt;
    Message m = std::move(queue_.front());
    queue_.pop_front();
    return m;
  }
  bool sendsDone() override { return true; }
  [[noreturn]] void abort(int code) override { std::_Exit(code); }

 private:
  std::deque<Message> queue_;
};

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

int envInt(const char* name, int fallback) {
  const char* v = env(name);
  return v ? std::atoi(v) : fallback;
}

// Where the plugin is looked for: $SPARGE_MPI_PLUGIN, beside the executable (build tree), and
// ../lib/sparge-studio/ relative to it (installed tree).
std::vector<std::string> pluginCandidates() {
  if (const char* p = env("SPARGE_MPI_PLUGIN")) return {p};
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {"libsparge_mpi.so"};
  const std::filesystem::path dir = exe.parent_path();
  return {(dir / "libsparge_mpi.so").string(), (dir / "../lib/sparge-studio/libsparge_mpi.so").string()};
}

using AbiFn = int (*)();
using OpenFn = Transport* (*)(int*, char***, char*, size_t);

std::unique_ptr<Transport> loadPlugin(int* argc, char*** argv, const LaunchEnvironment& launch) {
  std::string tried;
  for (const std::string& path : pluginCandidates()) {
    if (!std::filesystem::exists(path) && path.find('/') != std::string::npos) {
      tried += (tried.empty() ? "" : ", ") + path + " (absent)";
      continue;
    }
    // RTLD_GLOBAL: Open MPI loads its own components later, and they resolve symbols of libmpi.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!handle) {
      const char* why = dlerror();
      throw Error(path, std::string("cannot load the MPI transport: ") + (why ? why : "dlopen failed") +
                            " — install Open MPI's runtime (Debian: openmpi-bin) or set LD_LIBRARY_PATH");
    }
    auto abi = reinterpret_cast<AbiFn>(dlsym(handle, "sparge_mpi_abi"));
    auto open = reinterpret_cast<OpenFn>(dlsym(handle, "sparge_mpi_open"));
    if (!abi || !open || abi() != kTransportAbi)
      throw Error(
          path, "not an MPI transport of this sparge version — rebuild sparge and libsparge_mpi.so together");
    char error[512] = {};
    Transport* t = open(argc, argv, error, sizeof error);
    if (!t) throw Error("MPI", std::string(error[0] ? error : "MPI_Init failed"));
    return std::unique_ptr<Transport>(t);
  }
  throw Error("sparge", launch.launcher + " started " + std::to_string(launch.size) +
                            " processes, but this build has no MPI support (looked for " + tried +
                            "): install libopenmpi-dev and rebuild, or run sparge without a launcher");
}

}  // namespace

std::unique_ptr<Transport> makeLocalTransport() {
  return std::make_unique<LocalTransport>();
}

LaunchEnvironment detectLaunch() {
  LaunchEnvironment l;
  if (env("OMPI_COMM_WORLD_SIZE")) {
    l.mpiLauncher = true;
    l.launcher = "mpirun";
    l.size = envInt("OMPI_COMM_WORLD_SIZE", 1);
  } else if (env("PMIX_RANK")) {
    l.mpiLauncher = true;
    l.launcher = "PMIx";
    l.size = envInt("SLURM_STEP_NUM_TASKS", envInt("SLURM_NTASKS", 1));
  } else if (env("PMI_RANK") || env("PMI_SIZE")) {
    l.mpiLauncher = true;
    l.launcher = "PMI";
    l.size = envInt("PMI_SIZE", 1);
  } else if (env("SLURM_STEP_ID") && envInt("SLURM_STEP_NUM_TASKS", 1) > 1) {
    l.slurmWithoutPmi = true;
    l.launcher = "srun";
    l.size = envInt("SLURM_STEP_NUM_TASKS", 1);
  }
  return l;
}

std::unique_ptr<Transport> openTransport(int* argc, char*** argv) {
  const LaunchEnvironment launch = detectLaunch();
  if (launch.slurmWithoutPmi)
    throw Error("srun", "started " + std::to_string(launch.size) +
                            " tasks without PMI, so they cannot form one MPI job — use `srun --mpi=pmix` "
                            "(or pmi2; `srun --mpi=list` shows what the cluster offers)");
  if (!launch.mpiLauncher) return makeLocalTransport();
  try {
    return loadPlugin(argc, argv, launch);
  } catch (const Error&) {
    // One process under a launcher (mpirun -np 1) works without MPI.
    if (launch.size <= 1) return makeLocalTransport();
    throw;
  }
}

}  // namespace sparge::scaleout

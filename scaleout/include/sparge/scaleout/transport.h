// Point-to-point messages between the processes of one job: the interface, the one-process transport,
// and opening the MPI transport (a plugin loaded at run time, so `sparge` itself never needs libmpi).
#pragma once

#include <memory>
#include <optional>
#include <string>

namespace sparge::scaleout {

struct Message {
  int source = 0;
  int tag = 0;
  std::string payload;
};

// Ranks are numbered 0 … size()-1; rank 0 coordinates. Messages between two ranks arrive in the order
// they were sent. No call blocks: callers poll, so a rank that fails never leaves another one waiting
// in a collective operation.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int localRank() const = 0;  // rank among the processes of this host
  virtual int localSize() const = 0;
  virtual std::string host() const = 0;
  virtual std::string name() const = 0;  // "one process", "MPI (Open MPI 4.1.4)"
  // Queues `payload` for `dest` (the data is taken over) and returns at once. A send to the own rank is
  // delivered by this rank's next poll().
  virtual void send(int dest, int tag, std::string payload) = 0;
  // A message that has arrived, if any; also moves queued sends along.
  virtual std::optional<Message> poll() = 0;
  // True when every queued send has been delivered to MPI's buffers or its receiver.
  virtual bool sendsDone() = 0;
  // Ends every process of the job at once, with `code`: only for a peer that stopped answering.
  [[noreturn]] virtual void abort(int code) = 0;
};

// The transport of a process started without a launcher: rank 0 of 1.
std::unique_ptr<Transport> makeLocalTransport();

// Version of the plugin interface above; the plugin refuses to load when it differs.
inline constexpr int kTransportAbi = 1;

// What started this process, from the environment: Open MPI's mpirun, a PMI/PMIx launcher (srun with
// --mpi=pmix or pmi2) or Slurm without PMI; `size` is the number of processes the launcher announced
// (1 when unknown).
struct LaunchEnvironment {
  bool mpiLauncher = false;  // MPI must be initialised: OMPI_COMM_WORLD_SIZE, PMIX_RANK or PMI_RANK is set
  bool slurmWithoutPmi = false;  // srun started several tasks but gave them no PMI: MPI cannot connect them
  int size = 1;
  std::string launcher;  // "mpirun", "PMIx", "PMI", "srun", or "" without a launcher
};
LaunchEnvironment detectLaunch();

// The transport for this process: MPI when a launcher started it, else the one-process transport.
// Throws sparge::Error when a launcher started several processes but MPI is unavailable (this build has
// no MPI plugin, or the MPI library cannot be loaded), because several independent processes would
// each do the whole job and write the same outputs. SPARGE_MPI_PLUGIN overrides the plugin's path.
std::unique_ptr<Transport> openTransport(int* argc, char*** argv);

}  // namespace sparge::scaleout

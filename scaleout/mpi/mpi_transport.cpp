// libsparge_mpi.so: the MPI transport, loaded by sparge at run time only when a launcher (mpirun, srun)
// started it, so that the sparge executable never depends on libmpi. Non-blocking point-to-point only
// (MPI_Isend, MPI_Improbe + MPI_Imrecv): no rank ever waits inside a collective for a rank that failed, and
// the coordinator never waits inside a receive for a sender that is busy computing (a message larger than
// the eager limit may need the sender's progress, which comes only when it next calls MPI).
#include <mpi.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <list>
#include <stdexcept>

#include "sparge/scaleout/transport.h"

namespace sparge::scaleout {
namespace {

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw std::runtime_error(std::string(what) + " failed: " + text);
}

class MpiTransport : public Transport {
 public:
  MpiTransport(int* argc, char*** argv) {
    int provided = 0;
    // Only the main thread calls MPI; engine worker threads never do.
    check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Comm local;
    check(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local),
          "MPI_Comm_split_type");
    MPI_Comm_rank(local, &localRank_);
    MPI_Comm_size(local, &localSize_);
    MPI_Comm_free(&local);
    char host[MPI_MAX_PROCESSOR_NAME] = {};
    int len = 0;
    MPI_Get_processor_name(host, &len);
    host_ = host;
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    MPI_Get_library_version(version, &len);
    std::string v = version;
    v = v.substr(0, v.find_first_of(",\n"));
    name_ = "MPI (" + v + ")";
  }

  ~MpiTransport() override {
    // Every send must be matched before MPI_Finalize; the coordinator receives everything it is sent, so
    // this wait is short unless a peer is gone, and then the job is ended rather than left hanging.
    const double t0 = MPI_Wtime();
    while (!sendsDone())
      if (MPI_Wtime() - t0 > 60) abort(1);
    MPI_Comm_free(&comm_);
    MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int localRank() const override { return localRank_; }
  int localSize() const override { return localSize_; }
  std::string host() const override { return host_; }
  std::string name() const override { return name_; }

  void send(int dest, int tag, std::string payload) override {
    if (payload.size() > size_t(INT_MAX))
      throw std::runtime_error("a message of " + std::to_string(payload.size()) +
                               " bytes exceeds MPI's 2 GiB message limit");
    pending_.push_back(Pending{std::move(payload), MPI_REQUEST_NULL});
    Pending& p = pending_.back();
    check(MPI_Isend(p.data.data(), int(p.data.size()), MPI_BYTE, dest, tag, comm_, &p.request), "MPI_Isend");
  }

  // Starts the receive of every matched message and hands them over in the order they were matched (MPI
  // keeps the order of one sender's messages; a later small message must not overtake a larger one).
  std::optional<Message> poll() override {
    progressSends();
    while (startReceive()) {
    }
    if (receiving_.empty()) return std::nullopt;
    int done = 0;
    check(MPI_Test(&receiving_.front().request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (!done) return std::nullopt;
    Message m = std::move(receiving_.front().message);
    receiving_.pop_front();
    return m;
  }

  bool sendsDone() override {
    progressSends();
    return pending_.empty();
  }

  [[noreturn]] void abort(int code) override {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(comm_, code);
    std::_Exit(code);
  }

 private:
  struct Pending {
    std::string data;
    MPI_Request request;
  };

  struct Receiving {
    Message message;
    MPI_Request request;
  };

  // Matches the next waiting message, if any, and starts its receive into its own buffer.
  bool startReceive() {
    int flag = 0;
    MPI_Message handle;
    MPI_Status status;
    check(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &flag, &handle, &status), "MPI_Improbe");
    if (!flag) return false;
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    receiving_.push_back(Receiving{Message{}, MPI_REQUEST_NULL});
    Receiving& r = receiving_.back();
    r.message.source = status.MPI_SOURCE;
    r.message.tag = status.MPI_TAG;
    r.message.payload.resize(size_t(count));
    check(MPI_Imrecv(r.message.payload.data(), count, MPI_BYTE, &handle, &r.request), "MPI_Imrecv");
    return true;
  }

  void progressSends() {
    for (auto it = pending_.begin(); it != pending_.end();) {
      int done = 0;
      check(MPI_Test(&it->request, &done, MPI_STATUS_IGNORE), "MPI_Test");
      it = done ? pending_.erase(it) : std::next(it);
    }
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1, localRank_ = 0, localSize_ = 1;
  std::string host_, name_;
  std::list<Pending> pending_;      // a list: the buffers must not move while MPI holds them
  std::list<Receiving> receiving_;  // in match order, for the same reason
};

}  // namespace
}  // namespace sparge::scaleout

extern "C" int sparge_mpi_abi() {
  return sparge::scaleout::kTransportAbi;
}

extern "C" sparge::scaleout::Transport* sparge_mpi_open(int* argc, char*** argv, char* error,
                                                        size_t errorSize) {
  try {
    return new sparge::scaleout::MpiTransport(argc, argv);
  } catch (const std::exception& e) {
    std::snprintf(error, errorSize, "%s", e.what());
    return nullptr;
  }
}

// sparge with an injected fault, for the failure-path tests (mpi_test.sh):
// SPARGE_TEST_FAIL_AFTER_HEADS=RANK:N makes rank RANK fail once it has finished N heads, as a lost GPU would
// in the middle of a group. Linked only into the test program sparge_fault_injecting; the product has no such
// switch.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "sparge/core/error.h"
#include "tune_job.h"

namespace {

const bool kInstalled = [] {
  sparge::scaleout::setHeadFinishedHookForTests([](int rank, int64_t headsDone) {
    const char* spec = std::getenv("SPARGE_TEST_FAIL_AFTER_HEADS");
    int failRank = -1, heads = 0;
    if (spec && std::sscanf(spec, "%d:%d", &failRank, &heads) == 2 && failRank == rank && headsDone >= heads)
      throw sparge::Error("SPARGE_TEST_FAIL_AFTER_HEADS",
                          "injected fault after " + std::to_string(heads) + " heads");
  });
  return true;
}();

}  // namespace

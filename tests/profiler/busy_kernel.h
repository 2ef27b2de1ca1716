// A deliberately slow kernel for the GPU timing test (launcher compiled by nvcc, callable from C++).
#pragma once

#include <cstdint>

struct CUstream_st;

namespace sparge::prof::fixtures {

// Launches `sparge_sparse_test_busy` (a dependent FMA chain per thread) on `stream`; its run time grows
// linearly with `iterations`. `out` must hold `outputCount()` floats. Returns a cudaError_t value.
int launchBusyKernel(CUstream_st* stream, int64_t iterations, float* out);
int64_t outputCount();

}  // namespace sparge::prof::fixtures

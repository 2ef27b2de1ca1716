// Summary statistics over repeated timings (min / median / max / mean / count / total).
#pragma once

#include <cstdint>
#include <vector>

namespace sparge::prof {

struct Stats {
  int64_t count = 0;
  double min = 0;
  double median = 0;  // mean of the two middle values when count is even
  double max = 0;
  double mean = 0;
  double total = 0;
  double stddev = 0;  // population standard deviation
};

// All zero when `values` is empty.
Stats computeStats(std::vector<double> values);

}  // namespace sparge::prof

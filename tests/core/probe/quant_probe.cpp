// Test helper: applies one of the CPU engine's numerics routines to float32 values read from stdin and writes
// float32 results to stdout, so that tests/core/test_numerics.py can check them against numpy oracles.
//   quant_probe e4m3 | half | bf16           elementwise rounding
//   quant_probe int8 SCALE                   INT8 codes for one block scale
//   quant_probe int8rows N D BLOCK [mean]    quantizeRowsInt8 on [N, D] (K smoothing with the next D
//                                            values when "mean"); writes codes [nb*BLOCK, D] then scales [nb]
//   quant_probe fp8cols N D                  quantizeColumnsFp8 on [N, D]; writes codes [N, D] then scales
//   [D]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "sparge/core/half.h"
#include "sparge/core/quant.h"

using namespace sparge::core;

namespace {

std::vector<float> readAll() {
  std::vector<float> v;
  float buf[4096];
  size_t n;
  while ((n = std::fread(buf, sizeof(float), 4096, stdin)) > 0) v.insert(v.end(), buf, buf + n);
  return v;
}

void write(const std::vector<float>& v) {
  std::fwrite(v.data(), sizeof(float), v.size(), stdout);
}

int usage() {
  std::fprintf(stderr,
               "usage: quant_probe e4m3|half|bf16 | int8 SCALE | int8rows N D BLOCK [mean] | fp8cols N D\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  const std::string mode = argv[1];
  std::vector<float> in = readAll(), out;
  if (mode == "e4m3" || mode == "half" || mode == "bf16") {
    for (float x : in)
      out.push_back(mode == "e4m3" ? roundToE4m3(x) : mode == "half" ? roundToHalf(x) : roundToBf16(x));
  } else if (mode == "int8" && argc == 3) {
    const float scale = std::strtof(argv[2], nullptr);
    for (float x : in) out.push_back(float(quantizeInt8(x, scale)));
  } else if (mode == "int8rows" && argc >= 5) {
    const long n = std::atol(argv[2]), d = std::atol(argv[3]);
    const int block = std::atoi(argv[4]);
    const bool smooth = argc == 6 && std::strcmp(argv[5], "mean") == 0;
    if (long(in.size()) != n * d + (smooth ? d : 0)) return usage();
    Int8Rows r =
        quantizeRowsInt8(in.data(), n, d, block, smooth ? in.data() + n * d : nullptr, DType::Float16);
    out = r.codes;
    out.insert(out.end(), r.scales.begin(), r.scales.end());
  } else if (mode == "fp8cols" && argc == 4) {
    const long n = std::atol(argv[2]), d = std::atol(argv[3]);
    if (long(in.size()) != n * d) return usage();
    Fp8Columns c = quantizeColumnsFp8(in.data(), n, d, n);
    out = c.codes;
    out.insert(out.end(), c.scales.begin(), c.scales.end());
  } else {
    return usage();
  }
  write(out);
  return 0;
}

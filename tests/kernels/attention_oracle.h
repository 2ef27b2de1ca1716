// Host oracles for the attention kernel tests, written independently of the kernels: e4m3 rounding by search
// over the format's values, SpargeAttn's INT8 and FP8 operand quantization, and the block-sequential
// attention each numerics defines (running max per visited block, PV skip vote per query tile, the rounding
// of P and of the per-block P·V accumulators).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "sparge/core/types.h"

namespace sparge::cuda::oracle {

// Nearest e4m3 value (ties to even mantissa), saturating to ±448; NaN stays NaN.
float e4m3Round(float x);
uint8_t e4m3Bits(float x);  // the same value as its bit pattern
float e4m3Value(uint8_t bits);

// The keys [first, last] query q sees among nkv: FlashAttention's window convention (-1 unbounded), causal
// is right = 0, top-left aligned.
struct KeyRange {
  int first, last;
};
KeyRange visibleKeys(int q, int nkv, bool causal, const core::Window& w);

// Round-trips through the input element type (fp16 or bf16).
float roundElem(float x, bool bf16);

// INT8 of one tile, SpargeAttn's rule: scale = amax/127 + 1e-7, q = trunc(x/scale + 0.5·sign) in fp32.
struct Int8Tile {
  std::vector<int8_t> q;
  float scale = 0;
};
Int8Tile quantizeTile(const float* x, int rows, int d);

// One head of a problem, already rounded to the input type; km (K's token mean, input type) may be empty.
struct HeadData {
  int nq = 0, nkv = 0, d = 0;
  bool bf16 = false;
  std::vector<float> q, k, v, km;
};

// K smoothed as the kernels see it: round(k - km) in the input type.
std::vector<float> smoothK(const HeadData& h);
// V as fp16 (upstream casts bf16 V), per-channel e4m3 with scale amax/2.25: the e4m3 values (as floats,
// [token][channel]) and the per-channel scales.
void quantizeV(const HeadData& h, std::vector<float>& v8, std::vector<float>& scale);

struct TileWalk {
  std::vector<int> blocks;  // visited key blocks in order
  bool dense = false;       // no PV skip
  float lambda = INFINITY;
};

struct HeadOut {
  std::vector<float> out;        // [nq][d], rounded to the output type
  std::vector<uint8_t> skipped;  // [nqTiles][nkTiles]
  int emptyRows = 0;
};

// Block-sequential attention of one head in the given numerics over each tile's walk. The PV skip of a tile
// is voted by its real rows; in quantized numerics the zero rows that pad a partial last tile vote too, with
// a rise of 0 (their scores are 0), so that tile skips only when λ = 0.
// With `sumRoundedP` (int8-fp8 only) the denominator sums the e4m3 P that P·V multiplies, as the Hopper
// walk without the vote does on its tensor cores, instead of SpargeAttn's unrounded fp32 P.
HeadOut attention(const HeadData& h, core::Numerics n, int bq, int bk, float scale, bool causal,
                  const core::Window& w, const std::vector<TileWalk>& walks, bool sumRoundedP = false);

// Exact softmax attention in double over the keys each row sees inside its walked blocks (no skip).
std::vector<double> exactAttention(const HeadData& h, int bq, int bk, double scale, bool causal,
                                   const core::Window& w, const std::vector<TileWalk>& walks);

}  // namespace sparge::cuda::oracle

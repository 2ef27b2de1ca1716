// Basic value types: names of dtypes/layouts/tensors, tile geometry labels, entry sizes.
#include "sparge/core/types.h"

#include <cctype>

#include "sparge/core/capture.h"
#include "sparge/core/error.h"

namespace sparge::core {

const char* toString(DType d) {
  switch (d) {
    case DType::Float16:
      return "float16";
    case DType::BFloat16:
      return "bfloat16";
    case DType::Float32:
      return "float32";
  }
  return "?";
}

const char* toString(Layout l) {
  switch (l) {
    case Layout::HND:
      return "HND";
    case Layout::NHD:
      return "NHD";
  }
  return "?";
}

const char* toString(Tensor t) {
  switch (t) {
    case Tensor::Q:
      return "q";
    case Tensor::K:
      return "k";
    case Tensor::V:
      return "v";
  }
  return "?";
}

std::string Geometry::label() const {
  return std::to_string(blockQ) + "x" + std::to_string(blockK);
}

Geometry Geometry::parse(const std::string& text) {
  // Tolerate surrounding blanks and an upper-case X; nothing else, so typos fail loudly.
  std::string t;
  for (char c : text) {
    if (!std::isspace(static_cast<unsigned char>(c))) t += (c == 'X') ? 'x' : c;
  }
  if (t == "128x64") return kGeometry128x64;
  if (t == "64x128") return kGeometry64x128;
  throw Error("block geometry", "'" + text + "' is not supported — use 128x64 or 64x128");
}

int64_t EntryInfo::bytesOnDisk() const {
  const int64_t elem = dtype == DType::Float32 ? 4 : 2;
  const int64_t values = batch * headsQ * tokensQ * headDim + batch * headsKV * tokensKV * headDim +
                         batch * headsKV * tokensKV * headDimV;
  return values * elem;
}

}  // namespace sparge::core

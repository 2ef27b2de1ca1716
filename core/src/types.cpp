// Basic value types: names of dtypes/layouts/tensors, tile geometry labels, entry sizes.
#include "sparge/core/types.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <initializer_list>
#include <utility>

#include "enum_names.h"
#include "sparge/core/capture.h"
#include "sparge/core/checked_math.h"
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

const char* toString(Numerics n) {
  switch (n) {
    case Numerics::None:
      return "none";
    case Numerics::Int8Fp16:
      return "int8-fp16";
    case Numerics::Int8Fp8:
      return "int8-fp8";
  }
  return "?";
}

Numerics parseNumerics(const std::string& text) {
  return parseByName(text, {Numerics::None, Numerics::Int8Fp16, Numerics::Int8Fp8}, "numerics");
}

const char* toString(Target t) {
  switch (t) {
    case Target::Sm80:
      return "sm80";
    case Target::Sm89:
      return "sm89";
    case Target::Sm90:
      return "sm90";
  }
  return "?";
}

Target parseTarget(const std::string& text) {
  return parseByName(text, {Target::Sm80, Target::Sm89, Target::Sm90}, "target");
}

Geometry geometryOf(Target t) {
  return t == Target::Sm90 ? kGeometry64x128 : kGeometry128x64;
}

Numerics numericsOf(Target t) {
  return t == Target::Sm80 ? Numerics::Int8Fp16 : Numerics::Int8Fp8;
}

std::optional<Target> targetOf(const Geometry& g, Numerics n) {
  for (Target t : {Target::Sm80, Target::Sm89, Target::Sm90})
    if (geometryOf(t) == g && numericsOf(t) == n) return t;
  return std::nullopt;
}

Target targetForComputeCapability(int cc) {
  if (cc == 80 || cc == 86 || cc == 87) return Target::Sm80;
  if (cc / 10 == 9) return Target::Sm90;
  return Target::Sm89;
}

KeyRange visibleKeys(int64_t query, int64_t nKv, bool causal, const Window& window) {
  KeyRange r{0, nKv - 1};
  const int64_t right = causal ? 0 : window.right;  // causal is right = 0, whatever the window says
  if (right >= 0) r.last = std::min(r.last, query + right);
  if (window.left >= 0) r.first = std::max<int64_t>(0, query - window.left);
  return r;
}

std::string toString(const Window& w) {
  std::string text = "[";  // appended piece by piece: GCC 12 warns (wrongly) on "[" + std::to_string(...)
  text.append(std::to_string(w.left)).append(", ").append(std::to_string(w.right)).append("]");
  return text;
}

int64_t EntryInfo::bytesOnDisk() const {
  const int64_t elem = dtype == DType::Float32 ? 4 : 2;
  const auto q = checkedProduct({batch, headsQ, tokensQ, headDim, elem});
  const auto kv = checkedProduct({batch, headsKV, tokensKV, headDim + headDimV, elem});
  const auto sum = q && kv ? checkedSum(*q, *kv) : std::nullopt;
  return sum.value_or(INT64_MAX);
}

EntryInfo::ShapeProblem EntryInfo::shapeProblem() const {
  const std::pair<const char*, int64_t> dims[] = {
      {"batch", batch},        {"heads", headsQ}, {"kv-heads", headsKV}, {"tokens", tokensQ},
      {"kv-tokens", tokensKV}, {"dim", headDim},  {"dim-v", headDimV}};
  for (const auto& [name, value] : dims)
    if (value < 1 || value > kMaxDimension)
      return {name, std::to_string(value) + " is outside 1 … " + std::to_string(kMaxDimension)};
  struct Tensor {
    const char* name;
    int64_t heads, tokens, dim;
    const char* dimensions;  // its factors, named as `sparge synth` names them
  };
  const Tensor tensors[] = {{"q", headsQ, tokensQ, headDim, "batch/heads/tokens/dim"},
                            {"k", headsKV, tokensKV, headDim, "batch/kv-heads/kv-tokens/dim"},
                            {"v", headsKV, tokensKV, headDimV, "batch/kv-heads/kv-tokens/dim-v"}};
  for (const Tensor& t : tensors)
    if (!checkedProduct({batch, t.heads, t.tokens, t.dim}, kMaxTensorValues)) {
      const double values = double(batch) * double(t.heads) * double(t.tokens) * double(t.dim);
      char text[64];
      std::snprintf(text, sizeof text, "%.3g", values);
      return {t.dimensions, std::string(t.name) + " would hold " + text +
                                " values (batch × heads × tokens × dim), more than any machine holds (2^59)"};
    }
  return {};
}

}  // namespace sparge::core

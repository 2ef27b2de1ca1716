// Capture format v1 (captures/FORMAT.md): a lazy HDF5 reader (per entry, per head) and a writer.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sparge/core/float_buffer.h"
#include "sparge/core/types.h"

namespace sparge::core {

enum class Tensor { Q, K, V };
const char* toString(Tensor t);

// Opens a capture and validates every entry's metadata up front (shapes, dtypes, attributes), so
// that a bad file fails at open time with a message naming the file, the HDF5 path and the problem.
// Tensor data is read lazily, one head at a time, through HDF5 hyperslabs; the whole file is never
// held in memory. Not thread-safe (HDF5 is built without thread safety): serialise calls.
class CaptureReader {
 public:
  // Throws sparge::Error: not HDF5, missing/unknown version, no entries, missing q/k/v, wrong rank,
  // mismatched B/D/heads/N, Hq not a multiple of Hkv, unsupported dtype, zero-size dimension, and
  // truncated files (detected here when the metadata is unreadable, or at read time for data).
  explicit CaptureReader(const std::string& path);
  ~CaptureReader();
  CaptureReader(const CaptureReader&) = delete;
  CaptureReader& operator=(const CaptureReader&) = delete;

  const std::string& path() const;
  int version() const;
  const std::vector<EntryInfo>& entries() const;
  const EntryInfo& entry(const std::string& name) const;  // throws sparge::Error if absent
  // Root attributes that are strings or numbers, as text (provenance: model, text, command...).
  const std::vector<std::pair<std::string, std::string>>& rootAttributes() const;

  // Reads one head of one tensor as float32, row-major [N, D] (N = tokensQ for Q, tokensKV for K/V;
  // D = headDim for Q/K, headDimV for V). `head` is a query head for Q and a KV head for K/V.
  // float16 / bfloat16 are read raw and converted in our code (HDF5's own conversion is ~45x slower).
  std::vector<float> readHead(const std::string& entryName, Tensor tensor, int64_t batch, int64_t head) const;
  // The same into `out` (N x D floats). Safe to call from several threads: the HDF5 read takes a lock, the
  // conversion to float32 runs outside it. `nonFinite` (optional) receives how many of the values are NaN
  // or ±Inf, counted while they are converted; `sliceHash` (optional) the head's headSliceHash (digest.h).
  void readHeadInto(const std::string& entryName, Tensor tensor, int64_t batch, int64_t head, float* out,
                    int64_t* nonFinite = nullptr, uint64_t* sliceHash = nullptr) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Data of one entry, held in memory as float32 values (exactly the stored half values when the
// capture is float16/bfloat16; `info.dtype` records the original precision, which Stage 1 mirrors).
// Layout is always HND: q [B, Hq, Nq, D], k [B, Hkv, Nkv, D], v [B, Hkv, Nkv, Dv]. Whoever resizes q, k
// or v writes every value (FloatBuffer leaves them unset).
struct EntryData {
  EntryInfo info;
  FloatBuffer q, k, v;
  // The content digest (digest.h): set by loadEntry; empty for entries made in memory (entryDigest(data)
  // computes it).
  std::string digest;

  const float* qHead(int64_t b, int64_t hq) const {
    return q.data() + ((b * info.headsQ + hq) * info.tokensQ) * info.headDim;
  }
  const float* kHead(int64_t b, int64_t hkv) const {
    return k.data() + ((b * info.headsKV + hkv) * info.tokensKV) * info.headDim;
  }
  const float* vHead(int64_t b, int64_t hkv) const {
    return v.data() + ((b * info.headsKV + hkv) * info.tokensKV) * info.headDimV;
  }
};

// One head whose data contains NaN or Inf (reported as a warning, never a crash).
struct NonFiniteReport {
  int64_t batch = 0;
  int64_t head = 0;
  Tensor tensor = Tensor::Q;
  int64_t count = 0;
};

// Loads a whole entry head by head, on `threads` threads (0: up to 8, as the machine has cores).
// `nonFinite` (optional) receives one record per (tensor, b, head) that holds NaN/Inf values, in that order.
EntryData loadEntry(const CaptureReader& reader, const std::string& entryName,
                    std::vector<NonFiniteReport>* nonFinite = nullptr, int threads = 0);

// Writes capture format v1. Used by tests, synthetic captures and tools.
// Data is given in HND float32 order; it is stored in `info.dtype` and `info.layout`.
class CaptureWriter {
 public:
  // Gzip (with byte shuffle) shrinks real activations; random synthetic data hardly compresses and costs
  // several seconds per hundred MB to deflate and again to inflate on every read, so synthetic captures
  // are written uncompressed.
  enum class Compression { Gzip, None };
  // Creates (truncates) `path`. Writing goes to `path` directly: callers that must not destroy an
  // existing file write to a temporary name and rename (see core/atomic_file.h).
  explicit CaptureWriter(const std::string& path, Compression compression = Compression::Gzip);
  ~CaptureWriter();
  CaptureWriter(const CaptureWriter&) = delete;
  CaptureWriter& operator=(const CaptureWriter&) = delete;

  void setRootAttribute(const std::string& name, const std::string& value);
  // Writes one entry. `info.name`, shapes, dtype, layout, causal, layer/step, window (when bounded),
  // module/kind/stack (when not empty) are used; `scale` is written only when info.scaleFromFile is true.
  void addEntry(const EntryInfo& info, std::span<const float> q, std::span<const float> k,
                std::span<const float> v);
  void close();  // flushes; called by the destructor too

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sparge::core

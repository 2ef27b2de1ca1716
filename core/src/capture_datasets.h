// Private: inspection and validation of a capture entry's q, k, v datasets (shape, storage, dtype,
// agreement).
#pragma once

#include <hdf5.h>

#include <array>
#include <cstdint>
#include <string>

#include "sparge/core/types.h"

namespace sparge::core {

inline constexpr const char* kFixCorrupt = "re-create the capture or copy it again";
inline constexpr const char* kExternalLink =
    "is an external link to another file — a capture must hold its data itself; copy the data into the file";

// `problem` followed by HDF5's description of its last error, where it gave one.
std::string withDetail(const std::string& problem);

// How the raw values of a dataset are read and converted.
enum class Storage { Half, BFloat16, Float32 };

struct DatasetMeta {
  Storage storage = Storage::Float32;
  bool bigEndian = false;         // 16-bit data is read raw, so we swap bytes ourselves
  std::array<hsize_t, 4> dims{};  // as stored (HND or NHD)
  int64_t batch = 0, heads = 0, tokens = 0, dim = 0;
};

// Dataset `name` ("q", "k" or "v") of the entry group `group` at `groupPath` in the capture `filePath`:
// present, no external link, rank 4 in `layout` without empty or oversized dimensions, readable storage and
// an accepted dtype. Throws sparge::Error naming the dataset otherwise. `linkAccess` refuses external links.
DatasetMeta inspectDataset(const std::string& filePath, hid_t group, const std::string& groupPath,
                           const char* name, Layout layout, hid_t linkAccess);

// Checks that q, k and v of the entry at `groupPath` agree (dtype, batch, head dims, KV heads and tokens,
// Hq a multiple of Hkv) and sets the shape and dtype of `info`; throws sparge::Error naming the dataset.
void checkEntryDatasets(const std::string& filePath, const std::string& groupPath, const DatasetMeta& q,
                        const DatasetMeta& k, const DatasetMeta& v, EntryInfo& info);

}  // namespace sparge::core

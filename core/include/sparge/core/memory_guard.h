// The memory a run needs, estimated from an entry's shape before anything is allocated, and the check
// against what the machine can give (or a limit set with --max-memory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "sparge/core/types.h"

namespace sparge::core {

// Bytes, by purpose. Estimates from the shapes (the engines' own buffers; allocator overhead is not
// counted), computed in floating point so that no shape can overflow them.
struct MemoryEstimate {
  double entryBytes = 0;      // q, k, v held as float32
  double engineBytes = 0;     // per-head masks, block statistics and outputs of one run
  double referenceBytes = 0;  // the cached dense reference (outputs and block masses)

  double total() const { return entryBytes + engineBytes + referenceBytes; }
};

// The entry's data alone.
MemoryEstimate estimateEntryMemory(const EntryInfo& info);
// A run of `heads` query heads (of every batch item) with tile geometry `geometry`.
MemoryEstimate estimateRunMemory(const EntryInfo& info, const Geometry& geometry, int64_t heads);

// What this process may still allocate: MemAvailable from /proc/meminfo, lowered to the cgroup's
// remaining memory when a limit is set there; -1 when unknown.
double availableMemoryBytes();

// A limit that replaces availableMemoryBytes() in checkMemory (the CLI's --max-memory); 0 removes it.
void setMemoryLimit(double bytes);
// What checkMemory compares with: the limit when one is set, else availableMemoryBytes() (-1 unknown).
double memoryBudgetBytes();

// Throws sparge::Error(where = `what`) when `estimate` exceeds the limit (or what the machine can give),
// saying how much is needed, how much there is, and what to do: `fix`, or by default what helps a run
// (fewer heads, another entry, a higher --max-memory).
void checkMemory(const MemoryEstimate& estimate, const std::string& what, const std::string& fix = "");

// Fails before loading when a run of `heads` query heads (0 = all) of `entry` in the capture at
// `capturePath` would not fit in memory (checkMemory, naming the entry's HDF5 path).
void checkRunMemory(const std::string& capturePath, const EntryInfo& entry, const Geometry& geometry,
                    size_t heads);

// "8G", "512MiB", "1.5g", "1000000" (bytes; K/M/G/T are powers of 1024), from 1 byte to kMaxByteSize.
// Throws Error(option, ...) for anything else (empty, NaN, infinite, negative, beyond every machine).
inline constexpr double kMaxByteSize = 1024.0 * 1024 * 1024 * 1024 * 1024 * 1024;  // 1 EiB
double parseByteSize(const std::string& text, const std::string& option);

}  // namespace sparge::core

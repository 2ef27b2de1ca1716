// Bounds-checked reading of the binary message encoding.
#include "sparge/scaleout/wire.h"

#include "sparge/core/error.h"

namespace sparge::scaleout {

void WireReader::raw(void* out, size_t bytes) {
  if (bytes > data_.size() - at_)
    throw Error(source_, "message ends early (" + std::to_string(data_.size()) +
                             " bytes) — are all ranks running the same sparge build?");
  if (bytes > 0) std::memcpy(out, data_.data() + at_, bytes);
  at_ += bytes;
}

size_t WireReader::length(size_t elementBytes) {
  uint64_t n = 0;
  get(n);
  if (elementBytes > 0 && n > (data_.size() - at_) / elementBytes)
    throw Error(source_, "message holds a length of " + std::to_string(n) + " that exceeds its size (" +
                             std::to_string(data_.size()) +
                             " bytes) — are all ranks running the same sparge build?");
  return size_t(n);
}

void WireReader::expectEnd() const {
  if (!atEnd())
    throw Error(source_, "message has " + std::to_string(data_.size() - at_) +
                             " unread bytes — are all ranks running the same sparge build?");
}

}  // namespace sparge::scaleout

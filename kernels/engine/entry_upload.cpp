#include "engine/entry_upload.h"

#include <algorithm>
#include <atomic>
#include <vector>

#include "engine/half_bits.h"
#include "sparge/core/parallel.h"

namespace sparge::cuda {
namespace {

constexpr size_t kSlotValues = size_t(16) << 20;  // 32 MiB of 16-bit values a slot
constexpr size_t kTaskValues = size_t(1) << 20;   // one thread's share at a time

struct Range {
  size_t begin, end;
};

// [begin, end) cut into tasks of at most kTaskValues that never cross a head boundary, so that each task
// reports NaN/Inf for one head.
std::vector<Range> tasksOf(size_t begin, size_t end, size_t perHead) {
  std::vector<Range> tasks;
  for (size_t a = begin; a < end;) {
    const size_t headEnd = (a / perHead + 1) * perHead;
    const size_t b = std::min({end, headEnd, a + kTaskValues});
    tasks.push_back({a, b});
    a = b;
  }
  return tasks;
}

}  // namespace

UploadStaging::~UploadStaging() {
  for (cudaEvent_t e : copied_)
    if (e) cudaEventDestroy(e);
}

void UploadStaging::upload(void* dst, const float* src, int64_t heads, size_t perHead, ElemType t,
                           uint8_t* headNonFinite, const char* what) {
  std::fill(headNonFinite, headNonFinite + heads, uint8_t(0));
  const size_t total = size_t(heads) * perHead;
  int s = 0;
  for (size_t begin = 0; begin < total; begin += kSlotValues, s ^= 1)
    uploadSlot(s, dst, src, begin, std::min(total, begin + kSlotValues), perHead, t, headNonFinite, what);
}

void UploadStaging::uploadSlot(int s, void* dst, const float* src, size_t begin, size_t end, size_t perHead,
                               ElemType t, uint8_t* headNonFinite, const char* what) {
  if (copied_[s])
    check(cudaEventSynchronize(copied_[s]), what);  // the slot's previous copy has left it
  else
    check(cudaEventCreateWithFlags(&copied_[s], cudaEventDisableTiming), what);
  slot_[s].reserve((end - begin) * sizeof(uint16_t), what);  // grows to one slot at most
  uint16_t* bits = slot_[s].as<uint16_t>();
  const std::vector<Range> tasks = tasksOf(begin, end, perHead);
  core::parallelFor(int64_t(tasks.size()), core::bulkThreads(), [&](int64_t i) {
    const Range r = tasks[size_t(i)];
    if (toHalfBits(src + r.begin, r.end - r.begin, bits + (r.begin - begin), t))
      std::atomic_ref<uint8_t>(headNonFinite[r.begin / perHead]).store(1, std::memory_order_relaxed);
  });
  check(cudaMemcpyAsync(static_cast<uint16_t*>(dst) + begin, bits, (end - begin) * sizeof(uint16_t),
                        cudaMemcpyHostToDevice, 0),
        what);
  check(cudaEventRecord(copied_[s], 0), what);
}

}  // namespace sparge::cuda

// Private HDF5 helpers shared by the capture reader/writer (and any other HDF5 file in core).
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

namespace sparge::core::h5 {

// Debian's HDF5 is built without thread safety: every HDF5 call in core holds this lock.
std::recursive_mutex& mutex();
// In a child process right after fork(): the lock may be held by the forking thread, recorded under a
// thread id the child does not have; this makes it a fresh, unlocked lock (the child has one thread).
void resetMutexAfterFork();

// Turns off HDF5's automatic printing of its error stack (we convert failures into sparge::Error).
void silenceErrors();

// The most specific message on HDF5's current error stack ("" if none), for appending to our errors.
std::string lastErrorDetail();

// Owns one HDF5 identifier and closes it with the matching H5?close.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& o) noexcept : id_(o.id_), closer_(o.closer_) { o.id_ = H5I_INVALID_HID; }
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = o.id_;
      closer_ = o.closer_;
      o.id_ = H5I_INVALID_HID;
    }
    return *this;
  }
  ~Handle() { reset(); }

  void reset() {
    if (id_ >= 0 && closer_) closer_(id_);
    id_ = H5I_INVALID_HID;
  }
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  explicit operator bool() const { return valid(); }

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer closer_ = nullptr;
};

inline Handle file(hid_t id) {
  return Handle(id, H5Fclose);
}
inline Handle group(hid_t id) {
  return Handle(id, H5Gclose);
}
inline Handle dataset(hid_t id) {
  return Handle(id, H5Dclose);
}
inline Handle dataspace(hid_t id) {
  return Handle(id, H5Sclose);
}
inline Handle datatype(hid_t id) {
  return Handle(id, H5Tclose);
}
inline Handle attribute(hid_t id) {
  return Handle(id, H5Aclose);
}
inline Handle plist(hid_t id) {
  return Handle(id, H5Pclose);
}

// The IEEE binary16 type h5py and numpy use for float16 (HDF5 has no predefined one).
Handle halfType();

// Reading attributes of any reasonable encoding. Each returns nullopt when the attribute's type class
// does not fit (the caller words the error) and throws nothing.
std::optional<std::string> readString(hid_t attr);  // fixed or variable length
// Integer, enum (h5py bool), integral float. An unsigned value beyond 2^63 − 1 (HDF5 would clamp it to
// that) gives nullopt and, when `beyond` is given, its exact value there.
std::optional<int64_t> readInteger(hid_t attr, std::optional<uint64_t>* beyond = nullptr);
std::optional<double> readNumber(hid_t attr);       // float or integer
int64_t elementCount(hid_t attr);                   // number of values (1 for scalars)

// Why a dataset of `rank` dimensions `dims` cannot be read safely, or "" when it can: dimensions or a
// total size no machine could hold, data kept outside the file (external storage, virtual datasets),
// a compression filter this HDF5 lacks (named, e.g. lzf), chunks larger than the dataset, and data
// that was declared but never written (unallocated chunks would read as zeros).
std::string shapeProblem(const hsize_t* dims, int rank);
std::string storageProblem(hid_t dataset, const hsize_t* dims, int rank);

// True when `name` in `loc` is an external or user-defined link: following one opens another file
// (which may be a FIFO or a device), so captures must not contain them.
bool isExternalLink(hid_t loc, const char* name);
// An access property list of class `cls` (H5P_LINK_ACCESS, H5P_GROUP_ACCESS or H5P_DATASET_ACCESS) on
// which following an external link fails, wherever it appears on a path (soft links included).
Handle refuseExternalLinks(hid_t cls);

// A new, empty HDF5 file held in memory (core driver without a backing store): writers build files this
// way and write the bytes themselves, so HDF5 never meets a full disk (a failed flush inside HDF5 left
// the library holding a broken file that crashed the process at exit) and the bytes can go to an
// unnamed temporary file (see atomic_file.h). Invalid handle on failure.
Handle createInMemory();
// The bytes of an open file; false on failure.
bool fileImage(hid_t file, std::string& bytes);
// Writes all of `bytes` to the open file `fd`; "" on success, else the system's reason (for example
// "No space left on device").
std::string writeAll(int fd, const std::string& bytes);

// Writing attributes; return false on failure (the caller words the error). Existing ones are replaced.
bool writeString(hid_t obj, const std::string& name, const std::string& value);  // variable-length UTF-8
bool writeInteger(hid_t obj, const std::string& name, int64_t value);
bool writeDouble(hid_t obj, const std::string& name, double value);

}  // namespace sparge::core::h5

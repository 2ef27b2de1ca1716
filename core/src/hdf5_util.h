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
std::optional<int64_t> readInteger(hid_t attr);     // integer, enum (h5py bool), integral float
std::optional<double> readNumber(hid_t attr);       // float or integer
int64_t elementCount(hid_t attr);                   // number of values (1 for scalars)

// Writing attributes; return false on failure (the caller words the error). Existing ones are replaced.
bool writeString(hid_t obj, const std::string& name, const std::string& value);  // variable-length UTF-8
bool writeInteger(hid_t obj, const std::string& name, int64_t value);
bool writeDouble(hid_t obj, const std::string& name, double value);

}  // namespace sparge::core::h5

// Private HDF5 helpers: the global lock, error-stack text, RAII handles, attribute reading/writing.
#include "hdf5_util.h"

#include <cmath>
#include <cstring>
#include <vector>

namespace sparge::core::h5 {

std::recursive_mutex& mutex() {
  static std::recursive_mutex m;
  return m;
}

void silenceErrors() {
  std::lock_guard lock(mutex());
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

namespace {
herr_t walkCallback(unsigned, const H5E_error2_t* err, void* data) {
  auto* out = static_cast<std::string*>(data);
  if (err && err->desc && err->desc[0]) *out = err->desc;  // walking downward: the last one is the deepest
  return 0;
}
}  // namespace

std::string lastErrorDetail() {
  std::lock_guard lock(mutex());
  std::string detail;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, walkCallback, &detail);
  return detail;
}

Handle halfType() {
  // Same construction as h5py's float16: binary32 fields shrunk to 1-5-10 bits with bias 15.
  Handle t = datatype(H5Tcopy(H5T_IEEE_F32LE));
  if (!t) return t;
  if (H5Tset_fields(t.get(), 15, 10, 5, 0, 10) < 0 || H5Tset_size(t.get(), 2) < 0 ||
      H5Tset_ebias(t.get(), 15) < 0) {
    return Handle();
  }
  return t;
}

int64_t elementCount(hid_t attr) {
  Handle space = dataspace(H5Aget_space(attr));
  if (!space) return -1;
  return H5Sget_simple_extent_npoints(space.get());
}

std::optional<std::string> readString(hid_t attr) {
  Handle type = datatype(H5Aget_type(attr));
  if (!type || H5Tget_class(type.get()) != H5T_STRING || elementCount(attr) != 1) return std::nullopt;
  const htri_t isVar = H5Tis_variable_str(type.get());
  if (isVar < 0) return std::nullopt;
  if (isVar) {
    Handle mem = datatype(H5Tcopy(H5T_C_S1));
    H5Tset_size(mem.get(), H5T_VARIABLE);
    H5Tset_cset(mem.get(), H5Tget_cset(type.get()));
    char* p = nullptr;
    if (H5Aread(attr, mem.get(), &p) < 0) return std::nullopt;
    std::string s = p ? p : "";
    if (p) H5free_memory(p);
    return s;
  }
  const size_t n = H5Tget_size(type.get());
  if (n == 0) return std::nullopt;
  std::vector<char> buf(n + 1, '\0');
  Handle mem = datatype(H5Tcopy(type.get()));
  if (H5Aread(attr, mem.get(), buf.data()) < 0) return std::nullopt;
  std::string s(buf.data(), strnlen(buf.data(), n));
  while (!s.empty() && s.back() == ' ') s.pop_back();  // space-padded fixed strings
  return s;
}

std::optional<int64_t> readInteger(hid_t attr) {
  Handle type = datatype(H5Aget_type(attr));
  if (!type || elementCount(attr) != 1) return std::nullopt;
  switch (H5Tget_class(type.get())) {
    case H5T_INTEGER: {
      int64_t v = 0;
      if (H5Aread(attr, H5T_NATIVE_INT64, &v) < 0) return std::nullopt;
      return v;
    }
    case H5T_FLOAT: {
      double d = 0;
      if (H5Aread(attr, H5T_NATIVE_DOUBLE, &d) < 0 || !std::isfinite(d) || d != std::floor(d))
        return std::nullopt;
      return static_cast<int64_t>(d);
    }
    case H5T_ENUM: {
      // h5py stores bool as an int8 enum {FALSE, TRUE}; HDF5 will not convert enum to integer, so read
      // the raw base-type value and decode it ourselves.
      Handle base = datatype(H5Tget_super(type.get()));
      const size_t size = H5Tget_size(type.get());
      if (!base || size == 0 || size > 8) return std::nullopt;
      unsigned char raw[8] = {};
      if (H5Aread(attr, type.get(), raw) < 0) return std::nullopt;
      const bool bigEndian = H5Tget_order(base.get()) == H5T_ORDER_BE;
      uint64_t u = 0;
      for (size_t i = 0; i < size; ++i) {
        const unsigned char byte = raw[bigEndian ? i : size - 1 - i];
        u = (u << 8) | byte;
      }
      if (H5Tget_sign(base.get()) == H5T_SGN_2 && size < 8 && (u >> (8 * size - 1)) & 1u) {
        u |= ~uint64_t(0) << (8 * size);  // sign-extend
      }
      return static_cast<int64_t>(u);
    }
    default:
      return std::nullopt;
  }
}

std::optional<double> readNumber(hid_t attr) {
  Handle type = datatype(H5Aget_type(attr));
  if (!type || elementCount(attr) != 1) return std::nullopt;
  const H5T_class_t cls = H5Tget_class(type.get());
  if (cls != H5T_FLOAT && cls != H5T_INTEGER) return std::nullopt;
  double d = 0;
  if (H5Aread(attr, H5T_NATIVE_DOUBLE, &d) < 0) return std::nullopt;
  return d;
}

namespace {
bool writeAttr(hid_t obj, const std::string& name, hid_t fileType, hid_t memType, const void* data) {
  if (H5Aexists(obj, name.c_str()) > 0 && H5Adelete(obj, name.c_str()) < 0) return false;
  Handle space = dataspace(H5Screate(H5S_SCALAR));
  if (!space) return false;
  Handle attr = attribute(H5Acreate2(obj, name.c_str(), fileType, space.get(), H5P_DEFAULT, H5P_DEFAULT));
  return attr && H5Awrite(attr.get(), memType, data) >= 0;
}
}  // namespace

bool writeString(hid_t obj, const std::string& name, const std::string& value) {
  // Variable-length UTF-8: h5py returns it as `str` (fixed-length strings come back as bytes).
  Handle type = datatype(H5Tcopy(H5T_C_S1));
  if (!type || H5Tset_size(type.get(), H5T_VARIABLE) < 0 || H5Tset_cset(type.get(), H5T_CSET_UTF8) < 0)
    return false;
  const char* p = value.c_str();
  return writeAttr(obj, name, type.get(), type.get(), &p);
}

bool writeInteger(hid_t obj, const std::string& name, int64_t value) {
  return writeAttr(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value);
}

bool writeDouble(hid_t obj, const std::string& name, double value) {
  return writeAttr(obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value);
}

}  // namespace sparge::core::h5

// Private HDF5 helpers: the global lock, error-stack text, RAII handles, attribute reading/writing.
#include "hdf5_util.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <vector>

#include "sparge/core/types.h"

namespace sparge::core::h5 {

namespace {
// Attribute strings longer than this are not metadata we show (and a hostile size must not allocate).
constexpr size_t kMaxStringBytes = size_t(1) << 20;
}  // namespace

std::recursive_mutex& mutex() {
  static std::recursive_mutex m;
  return m;
}

void resetMutexAfterFork() {
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
  pthread_mutex_init(mutex().native_handle(), &attr);
  pthread_mutexattr_destroy(&attr);
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
  if (n == 0 || n > kMaxStringBytes) return std::nullopt;
  std::vector<char> buf(n + 1, '\0');
  Handle mem = datatype(H5Tcopy(type.get()));
  if (H5Aread(attr, mem.get(), buf.data()) < 0) return std::nullopt;
  std::string s(buf.data(), strnlen(buf.data(), n));
  while (!s.empty() && s.back() == ' ') s.pop_back();  // space-padded fixed strings
  return s;
}

std::optional<int64_t> readInteger(hid_t attr, std::optional<uint64_t>* beyond) {
  Handle type = datatype(H5Aget_type(attr));
  if (!type || elementCount(attr) != 1) return std::nullopt;
  switch (H5Tget_class(type.get())) {
    case H5T_INTEGER: {
      if (H5Tget_sign(type.get()) == H5T_SGN_NONE && H5Tget_size(type.get()) >= 8) {
        uint64_t u = 0;
        if (H5Aread(attr, H5T_NATIVE_UINT64, &u) < 0) return std::nullopt;
        if (u <= uint64_t(INT64_MAX)) return int64_t(u);
        if (beyond) *beyond = u;
        return std::nullopt;
      }
      int64_t v = 0;
      if (H5Aread(attr, H5T_NATIVE_INT64, &v) < 0) return std::nullopt;
      return v;
    }
    case H5T_FLOAT: {
      double d = 0;
      // Beyond ±2^63 the conversion to int64 is undefined: such a value is no integer we can use.
      if (H5Aread(attr, H5T_NATIVE_DOUBLE, &d) < 0 || !std::isfinite(d) || d != std::floor(d) ||
          std::fabs(d) >= 9.2233720368547758e18)
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
      } else if (H5Tget_sign(base.get()) != H5T_SGN_2 && u > uint64_t(INT64_MAX)) {
        if (beyond) *beyond = u;
        return std::nullopt;
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

// The shape limits of every entry (types.h).
constexpr hsize_t kMaxDimension = hsize_t(core::kMaxDimension);
constexpr hsize_t kMaxElements = hsize_t(core::kMaxTensorValues);

std::string filterName(H5Z_filter_t id, const char* stored) {
  switch (id) {
    case 307:
      return "bzip2";
    case 32000:
      return "lzf";
    case 32001:
      return "blosc";
    case 32004:
      return "lz4";
    case 32008:
      return "bitshuffle";
    case 32013:
      return "zfp";
    case 32015:
      return "zstd";
    default:
      return stored && stored[0] ? stored : "unknown";
  }
}

std::string filterProblem(hid_t dcpl) {
  const int count = H5Pget_nfilters(dcpl);
  if (count < 0) return "its compression filters are unreadable — the file is truncated or corrupt";
  for (int i = 0; i < count; ++i) {
    unsigned flags = 0, config = 0;
    size_t values = 0;
    char name[64] = {};
    const H5Z_filter_t id =
        H5Pget_filter2(dcpl, unsigned(i), &flags, &values, nullptr, sizeof name - 1, name, &config);
    if (id < 0) return "its compression filters are unreadable — the file is truncated or corrupt";
    if (H5Zfilter_avail(id) <= 0) {
      return "compressed with a filter this build's HDF5 lacks (" + filterName(id, name) + ", filter id " +
             std::to_string(id) +
             ") — re-save the capture with gzip or without compression (h5py: "
             "compression=\"gzip\")";
    }
  }
  return "";
}

std::string chunkProblem(hid_t dataset, hid_t dcpl, const hsize_t* dims, int rank) {
  hsize_t chunk[H5S_MAX_RANK] = {};
  if (H5Pget_chunk(dcpl, rank, chunk) != rank) return "its chunk shape is unreadable — the file is corrupt";
  hsize_t expected = 1;
  for (int i = 0; i < rank; ++i) {
    // A chunk larger than its dataset would make every read allocate (and inflate) far more than the data.
    if (chunk[i] == 0 || chunk[i] > dims[i])
      return "its chunk shape does not fit its shape — re-save the capture (h5py picks a valid chunk shape)";
    expected *= (dims[i] + chunk[i] - 1) / chunk[i];
  }
  hsize_t written = 0;
  Handle space = dataspace(H5Dget_space(dataset));
  if (!space || H5Dget_num_chunks(dataset, space.get(), &written) < 0)
    return "its chunk index is unreadable — the file is truncated or corrupt";
  if (written < expected) {
    return "only " + std::to_string(written) + " of its " + std::to_string(expected) +
           " chunks were ever written (the rest would read as zeros) — the capture is incomplete; "
           "re-create it";
  }
  return "";
}

}  // namespace

std::string shapeProblem(const hsize_t* dims, int rank) {
  hsize_t elements = 1;
  for (int i = 0; i < rank; ++i) {
    if (dims[i] > kMaxDimension) {
      return "dimension " + std::to_string(i) + " is " + std::to_string(dims[i]) + ", more than " +
             std::to_string(kMaxDimension) + " — the shape is corrupt or not a capture";
    }
    if (__builtin_mul_overflow(elements, dims[i], &elements) || elements > kMaxElements)
      return "the shape declares more values than any machine can hold — the shape is corrupt";
  }
  return "";
}

std::string storageProblem(hid_t dataset, const hsize_t* dims, int rank) {
  Handle dcpl = plist(H5Dget_create_plist(dataset));
  if (!dcpl) return "its storage properties are unreadable — the file is truncated or corrupt";
  const H5D_layout_t layout = H5Pget_layout(dcpl.get());
  if (layout == H5D_VIRTUAL || H5Pget_external_count(dcpl.get()) != 0) {
    return "its data is kept in other files (a virtual dataset or external storage) — a capture must hold "
           "its data itself; copy the data into the file";
  }
  if (std::string p = filterProblem(dcpl.get()); !p.empty()) return p;
  if (layout == H5D_CHUNKED) {
    if (std::string p = chunkProblem(dataset, dcpl.get(), dims, rank); !p.empty()) return p;
  } else if (layout == H5D_CONTIGUOUS && H5Dget_storage_size(dataset) == 0) {
    return "it holds no data: it was declared but never written — re-create the capture";
  }
  return "";
}

bool isExternalLink(hid_t loc, const char* name) {
  H5L_info_t info{};
  if (H5Lget_info(loc, name, &info, H5P_DEFAULT) < 0) return false;
  return info.type != H5L_TYPE_HARD && info.type != H5L_TYPE_SOFT;
}

Handle createInMemory() {
  static std::atomic<unsigned> serial{0};
  // The name only has to be unique among the files this process holds open.
  const std::string name = "sparge-in-memory-" + std::to_string(serial++);
  Handle fapl = plist(H5Pcreate(H5P_FILE_ACCESS));
  if (!fapl || H5Pset_fapl_core(fapl.get(), size_t(4) << 20, false) < 0) return Handle();
  return file(H5Fcreate(name.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()));
}

bool fileImage(hid_t f, std::string& bytes) {
  if (H5Fflush(f, H5F_SCOPE_GLOBAL) < 0) return false;
  const ssize_t size = H5Fget_file_image(f, nullptr, 0);
  if (size <= 0) return false;
  bytes.assign(size_t(size), '\0');
  return H5Fget_file_image(f, bytes.data(), size_t(size)) == size;
}

std::string writeAll(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::strerror(errno);
    if (n == 0) return "nothing could be written";
    done += size_t(n);
  }
  return "";
}

namespace {
herr_t refuseTraversal(const char*, const char*, const char*, const char*, unsigned*, hid_t, void*) {
  return -1;
}
}  // namespace

Handle refuseExternalLinks(hid_t cls) {
  Handle p = plist(H5Pcreate(cls));
  if (p && H5Pset_elink_cb(p.get(), refuseTraversal, nullptr) < 0) return Handle();
  return p;
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

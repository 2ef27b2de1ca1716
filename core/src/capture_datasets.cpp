// Inspection and validation of a capture entry's q, k, v datasets: shape, storage, dtype and agreement.
#include "capture_datasets.h"

#include <algorithm>
#include <optional>

#include "hdf5_util.h"
#include "sparge/core/error.h"

namespace sparge::core {
namespace {

constexpr const char* kAcceptedDtypes =
    "use float16, float32, or bfloat16 stored as uint16 with the dataset attribute dtype = \"bfloat16\"";

[[noreturn]] void fail(const std::string& filePath, const std::string& h5path, const std::string& problem) {
  throw Error(filePath + ":" + h5path, problem);
}

std::string shapeText(const hsize_t* dims, int rank) {
  std::string s = "[";
  for (int i = 0; i < rank; ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

std::string describeType(hid_t type) {
  const size_t bits = H5Tget_size(type) * 8;
  switch (H5Tget_class(type)) {
    case H5T_INTEGER:
      return std::string(H5Tget_sign(type) == H5T_SGN_NONE ? "uint" : "int") + std::to_string(bits);
    case H5T_FLOAT:
      return "float" + std::to_string(bits);
    case H5T_STRING:
      return "string";
    case H5T_COMPOUND:
      return "compound";
    case H5T_ENUM:
      return "enum (bool?)";
    case H5T_ARRAY:
      return "array";
    case H5T_VLEN:
      return "variable-length";
    default:
      return "an unsupported type";
  }
}

// How the values of dataset `ds` (at `dsPath`) of file type `type` are stored: float32, float16, a native
// bfloat16, or bfloat16 bits in 16-bit integers tagged with the attribute dtype = "bfloat16".
Storage storageOf(const std::string& filePath, const std::string& dsPath, hid_t ds, hid_t type) {
  const H5T_class_t cls = H5Tget_class(type);
  const size_t size = H5Tget_size(type);
  const std::string typeName = describeType(type);
  if (cls == H5T_FLOAT && size == 4) {
    return Storage::Float32;
  } else if (cls == H5T_FLOAT && size == 2) {
    size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
    H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize);
    if (esize == 5 && msize == 10) {
      return Storage::Half;
    } else if (esize == 8 && msize == 7) {
      return Storage::BFloat16;  // a native 16-bit float type with bfloat16's fields
    } else {
      fail(filePath, dsPath, "unsupported 16-bit float format — " + std::string(kAcceptedDtypes));
    }
  } else if (cls == H5T_INTEGER && size == 2) {
    // bfloat16 has no HDF5 type: its bits are stored as uint16 (int16 is accepted too: same bits).
    std::optional<std::string> tag;
    if (H5Aexists(ds, "dtype") > 0) {
      h5::Handle attr = h5::attribute(H5Aopen(ds, "dtype", H5P_DEFAULT));
      if (attr) tag = h5::readString(attr.get());
      if (!tag) fail(filePath, dsPath, "attribute dtype is not a string — set it to \"bfloat16\"");
    }
    if (!tag) {
      fail(filePath, dsPath,
           "unsupported dtype " + typeName + " without the dataset attribute dtype = \"bfloat16\" — " +
               kAcceptedDtypes);
    }
    if (*tag != "bfloat16") {
      fail(filePath, dsPath,
           "unsupported dtype " + typeName + " with attribute dtype = \"" + *tag + "\" — " + kAcceptedDtypes);
    }
    return Storage::BFloat16;
  } else {
    fail(filePath, dsPath, "unsupported dtype " + typeName + " — " + kAcceptedDtypes);
  }
}

}  // namespace

std::string withDetail(const std::string& problem) {
  const std::string detail = h5::lastErrorDetail();
  return detail.empty() ? problem : problem + " (HDF5: " + detail + ")";
}

DatasetMeta inspectDataset(const std::string& filePath, hid_t group, const std::string& groupPath,
                           const char* name, Layout layout, hid_t linkAccess) {
  const std::string dsPath = groupPath + "/" + name;
  const htri_t has = H5Lexists(group, name, linkAccess);
  if (has < 0) fail(filePath, dsPath, withDetail("file is truncated or corrupt") + " — " + kFixCorrupt);
  if (has == 0)
    fail(filePath, dsPath,
         std::string("missing dataset ") + name + " — every entry needs datasets q, k and v");
  if (h5::isExternalLink(group, name)) fail(filePath, dsPath, kExternalLink);
  h5::Handle dapl = h5::refuseExternalLinks(H5P_DATASET_ACCESS);
  h5::Handle ds = h5::dataset(H5Dopen2(group, name, dapl.get()));
  if (!ds) {
    fail(filePath, dsPath,
         withDetail("cannot open it as a dataset") +
             " — q, k and v must be datasets; if they are, the file is truncated or corrupt");
  }
  h5::Handle space = h5::dataspace(H5Dget_space(ds.get()));
  const int rank = space ? H5Sget_simple_extent_ndims(space.get()) : -1;
  if (rank < 0)
    fail(filePath, dsPath,
         withDetail("file is truncated or corrupt: shape unreadable") + " — " + kFixCorrupt);
  hsize_t dims[H5S_MAX_RANK] = {};
  H5Sget_simple_extent_dims(space.get(), dims, nullptr);
  const char* shapeHelp = layout == Layout::HND ? "[B, H, N, D] (layout HND)" : "[B, N, H, D] (layout NHD)";
  if (rank != 4) {
    fail(filePath, dsPath,
         "wrong rank " + std::to_string(rank) + " (shape " + shapeText(dims, rank) +
             ") — q, k and v must have rank 4: " + shapeHelp);
  }
  for (int i = 0; i < 4; ++i) {
    if (dims[i] == 0) {
      fail(filePath, dsPath,
           "zero-size dimension (shape " + shapeText(dims, 4) + ", " + shapeHelp +
               ") — every dimension must be at least 1");
    }
  }
  if (const std::string p = h5::shapeProblem(dims, 4); !p.empty())
    fail(filePath, dsPath, "shape " + shapeText(dims, 4) + ": " + p);
  if (const std::string p = h5::storageProblem(ds.get(), dims, 4); !p.empty())
    fail(filePath, dsPath, withDetail(p));

  DatasetMeta m;
  std::copy(dims, dims + 4, m.dims.begin());
  m.batch = static_cast<int64_t>(dims[0]);
  m.heads = static_cast<int64_t>(layout == Layout::HND ? dims[1] : dims[2]);
  m.tokens = static_cast<int64_t>(layout == Layout::HND ? dims[2] : dims[1]);
  m.dim = static_cast<int64_t>(dims[3]);

  h5::Handle type = h5::datatype(H5Dget_type(ds.get()));
  if (!type)
    fail(filePath, dsPath,
         withDetail("file is truncated or corrupt: dtype unreadable") + " — " + kFixCorrupt);
  m.bigEndian = H5Tget_order(type.get()) == H5T_ORDER_BE;
  m.storage = storageOf(filePath, dsPath, ds.get(), type.get());
  return m;
}

void checkEntryDatasets(const std::string& filePath, const std::string& groupPath, const DatasetMeta& q,
                        const DatasetMeta& k, const DatasetMeta& v, EntryInfo& info) {
  const std::string kPath = groupPath + "/k", vPath = groupPath + "/v";
  auto num = [](int64_t x) { return std::to_string(x); };

  if (k.storage != q.storage) fail(filePath, kPath, "dtype differs from q's — store q, k and v in one dtype");
  if (v.storage != q.storage) fail(filePath, vPath, "dtype differs from q's — store q, k and v in one dtype");
  if (k.batch != q.batch)
    fail(filePath, kPath,
         "mismatched batch: B = " + num(k.batch) + " but q has B = " + num(q.batch) +
             " — q, k and v must have the same B");
  if (v.batch != q.batch)
    fail(filePath, vPath,
         "mismatched batch: B = " + num(v.batch) + " but q has B = " + num(q.batch) +
             " — q, k and v must have the same B");
  if (k.dim != q.dim)
    fail(filePath, kPath,
         "mismatched head dim: D = " + num(k.dim) + " but q has D = " + num(q.dim) +
             " — q and k must have the same D");
  if (v.heads != k.heads)
    fail(filePath, vPath,
         "mismatched heads: v has " + num(v.heads) + " heads but k has " + num(k.heads) +
             " — k and v must have the same number of heads");
  if (v.tokens != k.tokens)
    fail(filePath, vPath,
         "mismatched tokens: v has N = " + num(v.tokens) + " but k has N = " + num(k.tokens) +
             " — k and v must have the same N");
  if (q.heads % k.heads != 0) {
    fail(filePath, kPath,
         "q has Hq = " + num(q.heads) + " heads, not a multiple of k's Hkv = " + num(k.heads) +
             " — GQA needs Hq to be a multiple of Hkv");
  }

  info.batch = q.batch;
  info.headsQ = q.heads;
  info.headsKV = k.heads;
  info.tokensQ = q.tokens;
  info.tokensKV = k.tokens;
  info.headDim = q.dim;
  info.headDimV = v.dim;
  info.dtype = q.storage == Storage::Half       ? DType::Float16
               : q.storage == Storage::BFloat16 ? DType::BFloat16
                                                : DType::Float32;
}

}  // namespace sparge::core
